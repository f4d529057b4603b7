/* sm_bandwidth.cu — how fast each SM streams from DRAM when every SM streams at once. A question
 * of issue 5 (docs/PERF.md, session 15): the same few workers end every GEMV layer of a launch;
 * is that the SM they landed on rather than the work?
 *
 *   nvcc -O3 -arch=sm_90a -o build/sm_bandwidth bench/sm_bandwidth.cu
 *   build/sm_bandwidth [MB per SM, default 64] [reps, default 3] [blocks, default every SM]
 *   (blocks < SMs, session 25: how fast each SM streams when only some of them do — what a layout
 *   that keeps some SMs off the weights, comm_handoff.cu's communicators, costs in bandwidth).
 *   Measured (session 25): 132 blocks 4.56 TB/s, 120 4.30, 105 4.17, 90 3.57, 66 2.62 — one SM
 *   streams at most ~39.7 GB/s however few stream.
 *
 * Streaming: one block per SM (the shared memory asked for allows no second), 512 threads, a ring
 * of 12 stages of 16 KB filled with 16-byte cp.async.cg copies (as the decode GEMV's streamed path
 * does), each block reading its own region of a buffer larger than the L2. Each block records its
 * %smid and %globaltimer at start and end; GB/s per SM = bytes / (end - start), the mean over
 * the timed runs; then the SMs more than 5 % faster than the median. (Session 15's first version
 * also tried to group SMs into GPCs from cluster placements; the groups did not resolve into
 * GPCs, so it is gone.)
 */
#include "micro.cuh"

enum { THREADS = 512, STAGES = 12, STAGE_BYTES = 16 << 10, MAX_SM = 256 };

/* Block b streams `bytes` from region b (region_bytes each, wrapping) through the smem ring.
 * rec[b] = {smid, start ns, end ns, checksum} (the checksum keeps the reads from being dropped). */
__global__ void __launch_bounds__(THREADS) stream_kernel(const uint4 *buf, uint64_t region_bytes, uint64_t bytes,
                                                         unsigned long long *rec) {
    extern __shared__ __align__(128) uint4 ring[];
    const uint64_t per_stage = STAGE_BYTES / 16, nstage = bytes / STAGE_BYTES, region16 = region_bytes / 16;
    const uint4 *src = buf + (uint64_t)blockIdx.x * region16;
    __syncthreads();
    const uint64_t t0 = now_ns();
    uint32_t acc = 0;
    for (uint64_t s = 0; s < nstage + STAGES - 1; s++) {
        if (s < nstage) { /* issue stage s into slot s % STAGES */
            const uint64_t base = (s * per_stage) % region16;
            uint4 *slot = ring + (s % STAGES) * per_stage;
            for (uint32_t e = threadIdx.x; e < per_stage; e += THREADS) {
                const uint32_t d = (uint32_t)__cvta_generic_to_shared(slot + e);
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + base + e) : "memory");
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        if (s >= STAGES - 1) { /* consume stage s - (STAGES - 1): its group is the oldest pending */
            asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1) : "memory");
            const uint4 *slot = ring + ((s - (STAGES - 1)) % STAGES) * per_stage;
            acc ^= slot[threadIdx.x].x; /* one word per thread: the data arrived */
            __syncthreads(); /* every thread is done with the slot before it is refilled */
        }
    }
    const uint64_t t1 = now_ns();
    if (threadIdx.x == 0) {
        rec[4 * blockIdx.x + 0] = sm_id();
        rec[4 * blockIdx.x + 1] = t0;
        rec[4 * blockIdx.x + 2] = t1;
    }
    atomicXor((unsigned int *)&rec[4 * blockIdx.x + 3], acc);
}

int main(int argc, char **argv) {
    const uint64_t mb = argc > 1 ? strtoull(argv[1], NULL, 10) : 64, reps = argc > 2 ? strtoull(argv[2], NULL, 10) : 3;
    int nsm = 0;
    CHECK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    if (nsm > MAX_SM) nsm = MAX_SM;
    if (argc > 3 && atoi(argv[3]) > 0 && atoi(argv[3]) < nsm) nsm = atoi(argv[3]); /* blocks: one per SM */

    const uint64_t region = 16ull << 20, bytes = mb << 20; /* 16 MB per block: 132 of them > L2 */
    uint4 *buf;
    unsigned long long *rec;
    CHECK(cudaMalloc(&buf, region * nsm));
    CHECK(cudaMemset(buf, 1, region * nsm));
    CHECK(cudaMalloc(&rec, sizeof(unsigned long long) * 4 * nsm));
    const int smem = STAGES * STAGE_BYTES;
    CHECK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    unsigned long long *h = (unsigned long long *)malloc(sizeof(unsigned long long) * 4 * nsm);
    double sum_gbs[MAX_SM] = {0};
    int n_gbs[MAX_SM] = {0};
    for (uint64_t r = 0; r <= reps; r++) { /* rep 0 warms up */
        CHECK(cudaMemset(rec, 0, sizeof(unsigned long long) * 4 * nsm));
        stream_kernel<<<nsm, THREADS, smem>>>(buf, region, bytes, rec);
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(h, rec, sizeof(unsigned long long) * 4 * nsm, cudaMemcpyDeviceToHost));
        uint64_t tmin = ~0ull, tmax = 0;
        for (int b = 0; b < nsm; b++) {
            tmin = h[4 * b + 1] < tmin ? h[4 * b + 1] : tmin;
            tmax = h[4 * b + 2] > tmax ? h[4 * b + 2] : tmax;
            if (r) {
                sum_gbs[h[4 * b]] += (double)bytes / (double)(h[4 * b + 2] - h[4 * b + 1]);
                n_gbs[h[4 * b]]++;
            }
        }
        if (r) printf("rep %d: %.0f GB/s over all SMs (%d x %llu MB in %.1f us, first start to last end)\n", (int)r,
                      (double)bytes * nsm / (double)(tmax - tmin), nsm, (unsigned long long)mb, (tmax - tmin) / 1e3);
    }
    double gbs[MAX_SM], sorted[MAX_SM];
    int n = 0;
    printf("\nsmid  GB/s (mean of the timed runs)\n");
    for (int sm = 0; sm < MAX_SM; sm++)
        if (n_gbs[sm]) {
            gbs[sm] = sum_gbs[sm] / n_gbs[sm];
            sorted[n++] = gbs[sm];
            printf("%4d  %7.2f\n", sm, gbs[sm]);
        }
    qsort(sorted, n, sizeof(double), cmp_double);
    const double median = n ? sorted[n / 2] : 0.0;
    int nfast = 0;
    printf("\nper SM: min %.2f, median %.2f, max %.2f GB/s; more than 5 %% above the median:", n ? sorted[0] : 0.0,
           median, n ? sorted[n - 1] : 0.0);
    for (int sm = 0; sm < MAX_SM; sm++)
        if (n_gbs[sm] && gbs[sm] > 1.05 * median) printf(" %d", sm), nfast++;
    printf(" (%d SMs)\n", nfast);
    CHECK(cudaFree(buf));
    CHECK(cudaFree(rec));
    free(h);
    return 0;
}
