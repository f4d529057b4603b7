/* poll_latency.cu — how late a worker sees an event while its own weight copies are in flight.
 *
 * issue 5, session 15 (docs/PERF.md): in a Qwen3-8B trace ~20 % of a GEMV layer's workers start
 * ~2 us after the first, although they were waiting, not busy; they had issued the next tile's
 * first 11 stages (176 KB of 16-byte cp.async copies) before the wait. The guess: the poll (and
 * the x vector's loads after it) queue behind those copies in the SM's load path. This measures
 * it without pk: every SM but one issues PRE KB of copies, then its thread 0 polls a flag that
 * block 0 sets D ns after the launch's start; the latency is the poll's success time minus the
 * flag's store time, then the time to load an 8 KB x vector (ld.global.cg, all threads).
 *
 *   nvcc -O3 -arch=sm_90a -o build/poll_latency bench/poll_latency.cu && build/poll_latency [half]
 *
 * `half` (session 25): cpasync only, and the odd blocks copy nothing — their poll and x stage are
 * reported apart from the copying blocks': whether an SM without copies of its own sees the event
 * late while the others stream (the premise of comm_handoff.cu's communicator CTAs). Measured
 * (session 25, medians, us after the flag): 176 KB on the copying half, D 0.5: poll 2.82 copying /
 * 2.05 idle, x 0.26 / 1.02 — together 3.08 / 3.07: it does; an L2 round trip waits behind the
 * DRAM traffic queued by any SM. 80 KB: 1.54 / 1.28 and 0.26 / 0.51; 48 KB: 1.02 / 0.77, 0.26.
 *
 * Copy methods: `cpasync` (per-thread 16-byte cp.async.cg with the evict-first policy, the
 * GEMV's async path: 8 warps x 4 rows x 512 B per stage), `bulk` (the same bytes as 512-byte
 * cp.async.bulk copies, lane 0 of each warp, one mbarrier per stage), `none`, and `paced`
 * (session 22): cp.async as `cpasync`, but only PACE stages issued before the poll and the rest
 * refilled while it waits — each poll iteration first waits (cp.async.wait_group) for its oldest
 * stages and issues as many new ones, so at most PACE stages are in flight ahead of the poll; the
 * stages left when the flag is seen go out at once; `pacedx`: the same, those stages issued after
 * the x loads (`pacedxh`: with pk's evict-first hint, its policy made at each copy). Question: does the worker then see the event (and x) sooner, with the same bytes
 * landed by then?
 */
#include "micro.cuh"
#include <string.h>

enum { THREADS = 256, WARPS = THREADS / 32, STAGE_BYTES = 16 << 10, MAX_STAGES = 12, ROW_BYTES = 8192 };
enum { M_NONE = 0, M_CPASYNC = 1, M_BULK = 2, M_PACED = 3, M_PACED_X = 4, M_PACED_XH = 5 };
enum { PACE = 3 }; /* paced: stages in flight ahead of the poll (48 KB) */

/* rec per block: [0] flag store time (block 0) / poll success (others), [1] x loaded, [2] copies
 * landed, [3] checksum */
__global__ void __launch_bounds__(THREADS, 1) poll_kernel(const char *w, const uint4 *x, uint64_t region, int method,
                                                          int stages, uint64_t delay_ns, unsigned long long *flag,
                                                          unsigned long long *rec, int half) {
    extern __shared__ __align__(128) char smem[];
    __shared__ __align__(8) unsigned long long bars[MAX_STAGES];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (blockIdx.x == 0) { /* the signaller */
        if (threadIdx.x == 0) {
            const uint64_t t0 = now_ns();
            while (now_ns() - t0 < delay_ns) {
            }
            const uint64_t ts = now_ns();
            asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(flag), "l"(1ull) : "memory");
            rec[0] = ts;
        }
        return;
    }
    if (half && (blockIdx.x & 1)) stages = 0; /* `half`: the odd blocks copy nothing, only poll */
    /* this block's tile: 8 warps x 4 rows of ROW_BYTES, a stage is 512 B of each row */
    const char *tile = w + (uint64_t)blockIdx.x * region;
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    if (method == M_BULK && threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            const uint32_t b = (uint32_t)__cvta_generic_to_shared(&bars[s]);
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(b), "r"(1) : "memory");
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int s = 0; s < stages; s++) { /* each stage's one arrival, and the bytes it waits for */
            const uint32_t b = (uint32_t)__cvta_generic_to_shared(&bars[s]);
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(STAGE_BYTES)
                         : "memory");
        }
    }
    __syncthreads();
    const bool paced = method == M_PACED || method == M_PACED_X || method == M_PACED_XH;
    const int first = paced ? (stages < PACE ? stages : PACE) : stages;
    /* stage s, cp.async: 4 rows x 512 B of this warp, one group. Without the evict-first hint:
     * with it, this loop raised "illegal instruction" on the H200 (as session 8's rings and
     * layer_chain.cu's copies did; not understood) */
    auto issue_cp = [&](int s) {
        char *st = smem + s * STAGE_BYTES + warp * 2048;
        const char *src = tile + (uint64_t)(warp * 4) * ROW_BYTES + s * 512;
        for (int i = 0; i < 4; i++) {
            const uint32_t d = (uint32_t)__cvta_generic_to_shared(st + i * 512 + lane * 16);
            if (method == M_PACED_XH) { /* the hint with a policy made at the copy, as pk's rows.cuh does */
                uint64_t p;
                asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
                asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(d),
                             "l"(src + (uint64_t)i * ROW_BYTES + lane * 16), "l"(p)
                             : "memory");
            } else {
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d),
                             "l"(src + (uint64_t)i * ROW_BYTES + lane * 16)
                             : "memory");
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    if (paced)
        for (int s = 0; s < first; s++) issue_cp(s);
    for (int s = 0; s < stages && !paced; s++) {
        char *st = smem + s * STAGE_BYTES + warp * 2048;
        const char *src = tile + (uint64_t)(warp * 4) * ROW_BYTES + s * 512;
        if (method == M_CPASYNC) {
            for (int i = 0; i < 4; i++) {
                const uint32_t d = (uint32_t)__cvta_generic_to_shared(st + i * 512 + lane * 16);
                asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(d),
                             "l"(src + (uint64_t)i * ROW_BYTES + lane * 16), "l"(pol)
                             : "memory");
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
        } else if (method == M_BULK) {
            const uint32_t b = (uint32_t)__cvta_generic_to_shared(&bars[s]);
            if (lane < 4) {
                const uint32_t d = (uint32_t)__cvta_generic_to_shared(st + lane * 512);
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                             " [%0], [%1], 512, [%2], %3;" ::"r"(d),
                             "l"(src + (uint64_t)lane * ROW_BYTES), "r"(b), "l"(pol)
                             : "memory");
            }
        }
    }
    __shared__ uint64_t sh_det;
    int issued = first;
    if (paced) { /* the whole CTA: poll, then refill the stages that landed */
        __shared__ int sh_seen;
        for (;;) {
            if (threadIdx.x == 0) {
                unsigned long long c;
                asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(c) : "l"(flag) : "memory");
                sh_seen = c != 0;
                if (c) sh_det = now_ns();
            }
            __syncthreads();
            const int seen = sh_seen;
            __syncthreads(); /* sh_seen is read by all before thread 0 writes it again */
            if (seen) break;
            if (issued == stages) {
                __nanosleep(32);
                continue;
            }
            /* the oldest stage landed (PACE - 1 may stay pending), then one more, up to PACE per poll */
            for (int k = 0; k < PACE && issued < stages; k++) {
                asm volatile("cp.async.wait_group %0;" ::"n"(PACE - 1) : "memory");
                issue_cp(issued++);
            }
        }
        if (method == M_PACED)
            while (issued < stages) issue_cp(issued++); /* the rest at once, as the GEMV's rounds would */
    } else if (threadIdx.x == 0) {
        unsigned long long c;
        do {
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(c) : "l"(flag) : "memory");
            if (!c) __nanosleep(32);
        } while (!c);
        sh_det = now_ns();
    }
    __syncthreads();
    /* the x stage: 8 KB, 32 B per thread, as the GEMV's stage-1 loads x */
    uint4 a = __ldcg(x + 2 * threadIdx.x), b = __ldcg(x + 2 * threadIdx.x + 1);
    uint32_t acc = a.x ^ b.y;
    __shared__ uint32_t sh_acc;
    if (threadIdx.x == 0) sh_acc = 0;
    __syncthreads();
    atomicXor(&sh_acc, acc);
    __syncthreads();
    const uint64_t t_x = now_ns();
    while (issued < stages) issue_cp(issued++); /* pacedx: the rest after x */
    if (method == M_CPASYNC || paced) {
        asm volatile("cp.async.wait_all;" ::: "memory");
    } else if (method == M_BULK) {
        for (int s = 0; s < stages; s++) {
            const uint32_t bb = (uint32_t)__cvta_generic_to_shared(&bars[s]);
            uint32_t done = 0;
            while (!done)
                asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
                             "selp.u32 %0, 1, 0, p;\n\t}"
                             : "=r"(done)
                             : "r"(bb)
                             : "memory");
        }
    }
    __syncthreads();
    const uint64_t t_c = now_ns();
    if (threadIdx.x == 0) {
        uint32_t sum = sh_acc;
        for (int i = 0; i < stages * STAGE_BYTES; i += 4096) sum ^= *(const uint32_t *)(smem + i);
        rec[4 * blockIdx.x + 0] = sh_det;
        rec[4 * blockIdx.x + 1] = t_x;
        rec[4 * blockIdx.x + 2] = t_c;
        rec[4 * blockIdx.x + 3] = sum;
    }
}

int main(int argc, char **argv) {
    /* `half`: only cpasync; the odd blocks copy nothing and are reported apart — does an SM
     * without copies of its own see the event late when the others copy? (session 25) */
    const int half = argc > 1 && strcmp(argv[1], "half") == 0;
    int nsm = 0;
    CHECK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    const uint64_t region = 32 * ROW_BYTES; /* a block's tile: 8 warps x 4 rows, 256 KB */
    const int nregions = 64;                 /* launches rotate through 64 x nsm tiles (> L2) */
    char *w = device_filled(region * nsm * nregions, 1);
    uint4 *x = (uint4 *)device_filled(8192, 2);
    unsigned long long *flag, *rec;
    CHECK(cudaMalloc(&flag, 8));
    CHECK(cudaMalloc(&rec, 32 * nsm));
    const int smem = MAX_STAGES * STAGE_BYTES;
    CHECK(cudaFuncSetAttribute(poll_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    unsigned long long *h = (unsigned long long *)malloc(32 * nsm);
    double *lat = (double *)malloc(sizeof(double) * nsm * 16), *xt = (double *)malloc(sizeof(double) * nsm * 16),
           *ct = (double *)malloc(sizeof(double) * nsm * 16);
    const char *mname[] = {"none", "cpasync", "bulk", "paced", "pacedx", "pacedxh"};
    const int stage_counts[] = {0, 3, 5, 11};
    const uint64_t delays[] = {500, 2000, 4000};
    int launch = 0;
    if (half) {
        printf("half the blocks copy (cpasync), half copy nothing | poll latency p50 (us): copying  idle | x stage p50: "
               "copying  idle\n");
        for (int si = 1; si < 4; si++)
            for (int di = 0; di < 3; di++) {
                int n[2] = {0, 0};
                for (int rep = 0; rep < 16; rep++, launch++) {
                    CHECK(cudaMemset(flag, 0, 8));
                    const char *wl = w + (uint64_t)(launch % nregions) * region * nsm;
                    poll_kernel<<<nsm, THREADS, smem>>>(wl, x, region, M_CPASYNC, stage_counts[si], delays[di], flag,
                                                        rec, 1);
                    CHECK(cudaDeviceSynchronize());
                    CHECK(cudaMemcpy(h, rec, 32 * nsm, cudaMemcpyDeviceToHost));
                    if (rep < 2) continue;
                    const double ts = (double)h[0];
                    for (int b = 1; b < nsm; b++) {
                        const int g = b & 1, i = g * nsm * 8 + n[g]++;
                        lat[i] = ((double)h[4 * b] - ts) / 1e3;
                        xt[i] = ((double)h[4 * b + 1] - (double)h[4 * b]) / 1e3;
                    }
                }
                double med[2][2];
                for (int g = 0; g < 2; g++) {
                    qsort(lat + g * nsm * 8, n[g], sizeof(double), cmp_double);
                    qsort(xt + g * nsm * 8, n[g], sizeof(double), cmp_double);
                    med[g][0] = lat[g * nsm * 8 + n[g] / 2];
                    med[g][1] = xt[g * nsm * 8 + n[g] / 2];
                }
                printf("PRE %3d KB on %d blocks, D %.1f us | %28.2f %5.2f | %19.2f %5.2f\n", stage_counts[si] * 16,
                       nsm / 2, delays[di] / 1e3, med[0][0], med[1][0], med[0][1], med[1][1]);
            }
        return 0;
    }
    printf("%-8s %6s %7s | poll latency (us): p50    p90    max | x stage p50  p90 | copies landed (after flag) p50  max\n",
           "method", "PRE KB", "D us");
    for (int m = 0; m < 6; m++)
        for (int si = 0; si < 4; si++) {
            if ((m == M_NONE) != (stage_counts[si] == 0)) continue;
            for (int di = 0; di < 3; di++) {
                int n = 0;
                for (int rep = 0; rep < 16; rep++, launch++) {
                    CHECK(cudaMemset(flag, 0, 8));
                    const char *wl = w + (uint64_t)(launch % nregions) * region * nsm;
                    poll_kernel<<<nsm, THREADS, smem>>>(wl, x, region, m, stage_counts[si], delays[di], flag, rec, 0);
                    CHECK(cudaDeviceSynchronize());
                    CHECK(cudaMemcpy(h, rec, 32 * nsm, cudaMemcpyDeviceToHost));
                    if (rep < 2) continue; /* warm-up */
                    const double ts = (double)h[0];
                    for (int b = 1; b < nsm; b++, n++) {
                        lat[n] = ((double)h[4 * b] - ts) / 1e3;
                        xt[n] = ((double)h[4 * b + 1] - (double)h[4 * b]) / 1e3;
                        ct[n] = ((double)h[4 * b + 2] - ts) / 1e3;
                    }
                }
                qsort(lat, n, sizeof(double), cmp_double);
                qsort(xt, n, sizeof(double), cmp_double);
                qsort(ct, n, sizeof(double), cmp_double);
                printf("%-8s %6d %7.1f | %22.2f %6.2f %6.2f | %11.2f %4.2f | %33.2f %4.2f\n", mname[m],
                       stage_counts[si] * 16, delays[di] / 1e3, lat[n / 2], lat[n * 9 / 10], lat[n - 1], xt[n / 2],
                       xt[n * 9 / 10], ct[n / 2], ct[n - 1]);
            }
        }
    return 0;
}
