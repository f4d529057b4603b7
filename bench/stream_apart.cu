/* stream_apart.cu — a chain of hand-offs while SMs of their own keep DRAM busy: does a poll or an
 * L2 read of the chain's SMs wait behind other SMs' copies, or only behind its own SM's?
 *
 * issue 5, session 48 (docs/PERF.md). pk's workers stream their weights and run the hand-offs on
 * the same SMs, and every experiment that kept DRAM busy through a hand-off (the deep L2 prefetch,
 * sessions 12 / 41; the next tile during the MLP, 39 / 41; the accumulator copies, 47) made the
 * chain slower: "a load waits for the SM's own copies in flight" (handoff.cu: 1.31 us a hand-off
 * idle, 2.25 with 32 KB of copies ahead of the wait). If it is the SM's own queue and not the
 * memory system's, a layout with a few streamer SMs that prefetch the weights into L2 ahead of the
 * chain, and chain SMs that read only L2 hits, keeps DRAM busy through the hand-offs without
 * slowing them: a step would then cost max(bytes, hand-offs) instead of about their sum.
 *
 * The chain (handoff.cu's event protocol): NCHAIN CTAs run STAGES hand-offs; at each, thread 0
 * polls the stage's counter (ld.acquire.gpu, 32 ns sleeps), every CTA reads x [V] bf16 through L2,
 * reduces its sum of squares and writes its share of V / 2 output pairs, then a barrier and one
 * red.release.gpu to the next counter. With W KB of weights per CTA and stage (its tile: stage s,
 * CTA b at tile (s * NCHAIN + b) mod tiles of a 2 GiB buffer, so no tile is in L2 from an earlier
 * stage), copied into shared memory with 16-byte cp.async before the wait ("pre", as pk stages a
 * tile) or after x ("post", the copies on the chain's path), and waited for before the sums.
 * The other CTAs (one per SM, SMs - NCHAIN of them) stream:
 *   foreign-bulk  thread 0 keeps 4 cp.async.bulk copies of 32 KB in flight from a 2 GiB buffer of
 *                 their own into shared memory (mbarriers); their GB/s is measured.
 *   foreign-pf    thread 0 issues cp.async.bulk.prefetch.L2 of 32 KB chunks of that buffer,
 *                 unpaced (the GB/s printed is what was issued, not what DRAM delivered).
 *   ahead         thread 0 prefetches the chain's own tiles into L2 (its share of each stage's
 *                 NCHAIN * W KB), stage s once the counter says stage s - AHEAD has begun.
 *
 *   nvcc -O3 -arch=sm_90a -o build/stream_apart bench/stream_apart.cu && build/stream_apart [launches [variant substring]]
 *
 * Prints per variant the median over launches (and min / max) of chain time / STAGES: one
 * hand-off with its tiny task and its W KB; and the streamers' GB/s. Every variant computes the
 * same output (the weights are read into a term that adds 0): the host checks it. The chain's
 * tile can also come by cp.async.bulk (16 KB pieces on one mbarrier): the "bulk" variants.
 *
 * Measured on three H100s (session 48, five runs, us per stage, p50): alone 1.59-1.63; with 36
 * other SMs bulk-copying 2.0-2.3 TB/s 1.90-3.29, prefetching into L2 2.20-2.72; own 64 KB tile
 * before the wait 3.15-3.29 (bulk 3.07-3.22), the same tiles prefetched into L2 by the others
 * 3.36-3.76 in three runs and 2.99-3.02 in two. A hand-off slows under other SMs' traffic too, and a
 * tile in L2 lands at most ~0.2 us faster than one from DRAM when every SM copies its own at once:
 * streamer SMs cannot pay (docs/PERF.md "Session 48").
 */
#include "micro.cuh"
#include <string.h>

enum { THREADS = 256, WARPS = THREADS / 32, V = 2048, STAGES = 256, RING = 4, RING_BYTES = 32 << 10, PF_CHUNK = 32 << 10 };
enum { S_NONE = 0, S_FOREIGN_BULK = 1, S_FOREIGN_PF = 2, S_AHEAD = 3 };
static_assert(V == THREADS * 8, "each thread reads 8 elements of x");

typedef struct {
    int nchain, smode, w_kb, post, ahead, bulk;
    const char *w;                /* the chain's tiles: 2 GiB, W KB each */
    uint64_t ntiles;
    const char *fbuf;             /* the streamers' own 2 GiB */
    uint64_t fbytes;
    unsigned long long *ctr;      /* [STAGES + 1] event counters */
    uint32_t *x[2];               /* [V / 2] bf16 pairs */
    volatile int *stop;           /* set by CTA 0 after its last stage: the streamers return */
    unsigned long long *t;        /* [2]: CTA 0's start and end */
    unsigned long long *sbytes;   /* [1]: bytes the streamers moved (bulk) or issued (prefetch) */
    unsigned long long *sns;      /* [1]: the streamers' summed ns */
    uint32_t *result;             /* [V / 2]: the last stage's output */
} args_t;


/* A wait that has spun 2 s is a bug of this file: trap (the launch then fails) instead of hanging. */
__device__ __forceinline__ void spin_guard(uint64_t since) {
    if (now_ns() - since > 2000000000ull) __trap();
}

/* mbarrier and bulk-copy primitives (shared addresses as 32-bit), one thread each */
__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint32_t bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
/* The phase's one arrival, and the bytes its copies will complete. */
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar) : "memory");
}
/* Until the phase of parity `parity` has completed (spin_guard: 2 s at most). */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    const uint64_t since = now_ns();
    for (uint32_t done = 0; !done; spin_guard(since))
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

__device__ __forceinline__ void prefetch_l2(const char *p, uint32_t n) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(n) : "memory");
}

/* The chain's tile of CTA b at stage s. */
__device__ __forceinline__ const char *tile(const args_t &a, int s, int b) {
    return a.w + (((uint64_t)s * a.nchain + b) % a.ntiles) * (uint64_t)a.w_kb * 1024;
}

__shared__ __align__(8) unsigned long long tile_bar; /* the bulk tile's mbarrier (chain CTAs) */

__device__ void issue_tile(const args_t &a, char *wsm, int s, int b) {
    const char *src = tile(a, s, b);
    if (a.bulk) { /* thread 0: the tile as bulk copies of 16 KB on one mbarrier (its phase s & 1) */
        if (threadIdx.x == 0) {
            const uint32_t bar = smem_addr(&tile_bar), bytes = (uint32_t)a.w_kb * 1024;
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* last stage's reads before the copies' writes */
            mbar_expect(bar, bytes);
            for (uint32_t o = 0; o < bytes; o += 16384) bulk_copy(smem_addr(wsm + o), src + o, bytes - o < 16384 ? bytes - o : 16384u, bar);
        }
        return;
    }
    for (int c = threadIdx.x; c < a.w_kb * 64; c += THREADS) {
        const uint32_t dst = (uint32_t)__cvta_generic_to_shared(wsm + 16 * c);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + 16 * c) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

__device__ void chain(const args_t &a, char *wsm) {
    __shared__ float red[WARPS];
    const int tid = threadIdx.x, b = blockIdx.x;
    if (tid == 0 && a.bulk) {
        mbar_init(smem_addr(&tile_bar));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (b == 0 && tid == 0) a.t[0] = now_ns();
    float touch = 0.0f;
    for (int s = 0; s < STAGES; s++) {
        const int in = s & 1, out = in ^ 1;
        if (a.w_kb && !a.post) issue_tile(a, wsm, s, b);
        if (tid == 0 && s > 0) {
            const uint64_t since = now_ns();
            while (ld_acquire(a.ctr + s) < (unsigned long long)a.nchain) {
                __nanosleep(32);
                spin_guard(since);
            }
        }
        __syncthreads();
        const uint4 v = __ldcg((const uint4 *)(a.x[in] + 4 * tid));
        if (a.w_kb && a.post) issue_tile(a, wsm, s, b);
        const uint32_t pr[4] = {v.x, v.y, v.z, v.w};
        float ss = 0.0f;
#pragma unroll
        for (int q = 0; q < 4; q++) ss += lo_f32(pr[q]) * lo_f32(pr[q]) + hi_f32(pr[q]) * hi_f32(pr[q]);
        if (a.bulk && a.w_kb) mbar_wait(smem_addr(&tile_bar), (uint32_t)(s & 1)); /* the tile's bytes landed */
        asm volatile("cp.async.wait_all;" ::: "memory");
        const float scale = cta_rms_scale<WARPS>(ss, red, V);
        /* this CTA's output pairs: p = b, b + NCHAIN, ...; the pair's inputs are x's own */
        for (int p = b + tid * a.nchain; p < V / 2; p += THREADS * a.nchain) {
            const uint32_t u = __ldcg(a.x[in] + p);
            if (a.w_kb) touch += (float)(wsm[(16 * tid) % (a.w_kb * 1024)] == 0x7f); /* bytes are 1: adds 0 */
            const uint32_t pair = bf16_bits(lo_f32(u) * scale * 1.01f + touch) | (bf16_bits(hi_f32(u) * scale * 0.99f) << 16);
            a.x[out][p] = pair;
            if (s == STAGES - 1) a.result[p] = pair;
        }
        __syncthreads(); /* every store issued (and red read) before the release */
        if (tid == 0) red_release(a.ctr + s + 1, 1);
    }
    if (b == 0 && tid == 0) {
        a.t[1] = now_ns();
        *a.stop = 1;
    }
}

/* One streamer CTA (index k of n); thread 0 does all of it. */
__device__ void stream(const args_t &a, char *ring, int k, int n) {
    if (threadIdx.x != 0 || a.smode == S_NONE) return;
    const uint64_t t0 = now_ns();
    unsigned long long bytes = 0;
    if (a.smode == S_FOREIGN_BULK) {
        __shared__ __align__(8) unsigned long long bars[RING];
        for (int i = 0; i < RING; i++) mbar_init(smem_addr(bars + i));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        const uint64_t nchunk = a.fbytes / RING_BYTES;
        uint64_t next = k;
        uint32_t phase[RING] = {0};
        /* slot i's next chunk of the buffer (chunk `next`, then n further) */
        auto refill = [&](int i) {
            const uint32_t bar = smem_addr(bars + i);
            mbar_expect(bar, RING_BYTES);
            bulk_copy(smem_addr(ring + i * RING_BYTES), a.fbuf + (next % nchunk) * RING_BYTES, RING_BYTES, bar);
            next += n;
        };
        for (int i = 0; i < RING; i++) refill(i); /* fill the ring */
        int last = 0;
        for (int i = 0;; i = (i + 1) % RING) {
            mbar_wait(smem_addr(bars + i), phase[i]);
            phase[i] ^= 1;
            bytes += RING_BYTES;
            if (*a.stop) { /* the other slots' copies still land before the CTA exits */
                last = i;
                break;
            }
            refill(i);
        }
        for (int i = 0; i < RING; i++)
            if (i != last) mbar_wait(smem_addr(bars + i), phase[i]); /* slot `last` landed; nothing was issued after it */
    } else if (a.smode == S_FOREIGN_PF) {
        const uint64_t nchunk = a.fbytes / PF_CHUNK;
        for (uint64_t c = k; !*a.stop;) /* the stop flag read once per 16 chunks (512 KB) */
            for (int j = 0; j < 16; j++, c += n) {
                prefetch_l2(a.fbuf + (c % nchunk) * PF_CHUNK, PF_CHUNK);
                bytes += PF_CHUNK;
            }
    } else { /* S_AHEAD: this streamer's share of each stage's tiles, AHEAD stages before it runs */
        const uint64_t stage_bytes = (uint64_t)a.nchain * a.w_kb * 1024;
        const uint64_t share = (stage_bytes / n + 4095) & ~4095ull;
        for (int s = 0; s < STAGES && !*a.stop; s++) {
            const uint64_t since = now_ns();
            if (s > a.ahead)
                while (ld_acquire(a.ctr + s - a.ahead) < (unsigned long long)a.nchain && !*a.stop) {
                    __nanosleep(64);
                    spin_guard(since);
                }
            /* stage s's tiles are consecutive unless the buffer wraps inside the stage */
            const uint64_t lo = (uint64_t)k * share, hi = lo + share < stage_bytes ? lo + share : stage_bytes;
            for (uint64_t o = lo; o < hi; o += PF_CHUNK) {
                const uint64_t tile_b = o / ((uint64_t)a.w_kb * 1024), in_tile = o % ((uint64_t)a.w_kb * 1024);
                const uint64_t left = (uint64_t)a.w_kb * 1024 - in_tile;
                const uint32_t c = (uint32_t)(hi - o < PF_CHUNK ? hi - o : PF_CHUNK);
                prefetch_l2(tile(a, s, (int)tile_b) + in_tile, c < left ? c : (uint32_t)left);
                if (c > left) prefetch_l2(tile(a, s, (int)tile_b + 1), c - (uint32_t)left);
                bytes += c;
            }
        }
    }
    atomicAdd(a.sbytes, bytes);
    atomicAdd(a.sns, now_ns() - t0);
}

__global__ void __launch_bounds__(THREADS, 1) stream_apart_kernel(args_t a) {
    extern __shared__ __align__(128) char smem[];
    if ((int)blockIdx.x < a.nchain)
        chain(a, smem);
    else
        stream(a, smem, blockIdx.x - a.nchain, gridDim.x - a.nchain);
}

typedef struct {
    const char *name;
    int nchain, smode, w_kb, post, ahead, bulk;
} variant_t;

int main(int argc, char **argv) {
    const int launches = argc > 1 ? atoi(argv[1]) : 10;
    setvbuf(stdout, NULL, _IOLBF, 0); /* each variant's line as it is measured */
    const int sms = sm_count_at_most(1024);
    const variant_t vars[] = {
        {"alone", 96, S_NONE, 0, 0, 0},
        {"alone 128", 128, S_NONE, 0, 0, 0},
        {"foreign-bulk", 96, S_FOREIGN_BULK, 0, 0, 0},
        {"foreign-pf", 96, S_FOREIGN_PF, 0, 0, 0},
        {"foreign-pf 112", 112, S_FOREIGN_PF, 0, 0, 0},
        {"own pre 32", 96, S_NONE, 32, 0, 0},
        {"own pre 64", 96, S_NONE, 64, 0, 0},
        {"own post 32", 96, S_NONE, 32, 1, 0},
        {"own post 64", 96, S_NONE, 64, 1, 0},
        {"ahead 1 pre 32", 96, S_AHEAD, 32, 0, 1},
        {"ahead 2 pre 32", 96, S_AHEAD, 32, 0, 2},
        {"ahead 2 post 32", 96, S_AHEAD, 32, 1, 2},
        {"ahead 1 pre 64", 96, S_AHEAD, 64, 0, 1},
        {"ahead 2 pre 64", 96, S_AHEAD, 64, 0, 2},
        {"ahead 4 pre 64", 96, S_AHEAD, 64, 0, 4},
        {"ahead 2 post 64", 96, S_AHEAD, 64, 1, 2},
        {"own pre 64 128", 128, S_NONE, 64, 0, 0},
        {"ahead 2 pre 64 112", 112, S_AHEAD, 64, 0, 2},
        {"bulk own pre 32", 96, S_NONE, 32, 0, 0, 1},
        {"bulk own pre 64", 96, S_NONE, 64, 0, 0, 1},
        {"bulk own post 64", 96, S_NONE, 64, 1, 0, 1},
        {"bulk ahead 2 pre 32", 96, S_AHEAD, 32, 0, 2, 1},
        {"bulk ahead 2 pre 64", 96, S_AHEAD, 64, 0, 2, 1},
        {"bulk ahead 2 post 64", 96, S_AHEAD, 64, 1, 2, 1},
        {"bulk own pre 64 128", 128, S_NONE, 64, 0, 0, 1},
        {"bulk own pre 128 128", 128, S_NONE, 128, 0, 0, 1},
    };
    const int nvar = (int)(sizeof vars / sizeof vars[0]);
    const uint64_t big = 2ull << 30; /* > L2 */
    args_t a;
    memset(&a, 0, sizeof a);
    a.w = device_filled(big, 1);
    a.fbuf = device_filled(big, 1);
    a.fbytes = big;
    CHECK(cudaMalloc(&a.ctr, 8 * (STAGES + 1)));
    for (int i = 0; i < 2; i++) CHECK(cudaMalloc(&a.x[i], V * 2));
    int *stop;
    CHECK(cudaMalloc(&stop, sizeof(int)));
    a.stop = stop;
    CHECK(cudaMalloc(&a.t, 16));
    CHECK(cudaMalloc(&a.sbytes, 8));
    CHECK(cudaMalloc(&a.sns, 8));
    CHECK(cudaMalloc(&a.result, V * 2));
    uint32_t hx[V / 2], ref[V / 2], got[V / 2];
    for (int i = 0; i < V / 2; i++) {
        const float f0 = (float)((i * 37) % 101 - 50) / 25.0f, f1 = (float)((i * 53) % 97 - 48) / 24.0f;
        uint32_t u0, u1;
        memcpy(&u0, &f0, 4);
        memcpy(&u1, &f1, 4);
        hx[i] = (u0 >> 16) | (u1 & 0xffff0000u);
    }
    /* one CTA per SM: more dynamic shared memory than two CTAs could share, less than the opt-in
     * maximum by the static arrays */
    const int dyn = 160 << 10;
    static_assert(RING * RING_BYTES <= (160 << 10), "the streamers' ring fits");
    CHECK(cudaFuncSetAttribute(stream_apart_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
    double *per = (double *)malloc(sizeof(double) * launches);
    int bad = 0, have_ref = 0;
    printf("%d SMs; chain: x [%d] bf16, %d stages; us per stage (p50 min max) | streamers' GB/s (bulk: moved; prefetch: issued)\n",
           sms, V, STAGES);
    for (int vi = 0; vi < nvar; vi++) {
        const variant_t *v = &vars[vi];
        if (argc > 2 && !strstr(v->name, argv[2])) continue;
        a.nchain = v->nchain, a.smode = v->smode, a.w_kb = v->w_kb, a.post = v->post, a.ahead = v->ahead, a.bulk = v->bulk;
        a.ntiles = v->w_kb ? big / ((uint64_t)v->w_kb * 1024) : 1;
        int n = 0;
        double gbs = 0.0;
        for (int l = 0; l < launches + 2; l++) {
            CHECK(cudaMemset(a.ctr, 0, 8 * (STAGES + 1)));
            CHECK(cudaMemset(stop, 0, sizeof(int)));
            CHECK(cudaMemset(a.sbytes, 0, 8));
            CHECK(cudaMemset(a.sns, 0, 8));
            CHECK(cudaMemcpy(a.x[0], hx, sizeof hx, cudaMemcpyHostToDevice));
            void *args[] = {&a};
            CHECK(cudaLaunchCooperativeKernel((const void *)stream_apart_kernel, dim3(sms), dim3(THREADS), args, dyn, 0));
            CHECK(cudaDeviceSynchronize());
            unsigned long long ht[2], sb, sn;
            CHECK(cudaMemcpy(ht, a.t, 16, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(&sb, a.sbytes, 8, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(&sn, a.sns, 8, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(got, a.result, sizeof got, cudaMemcpyDeviceToHost));
            if (!have_ref) {
                memcpy(ref, got, sizeof ref);
                have_ref = 1;
            } else if (memcmp(ref, got, sizeof ref) != 0) {
                bad++;
            }
            if (l < 2) continue; /* warm-up */
            per[n++] = (double)(ht[1] - ht[0]) / 1e3 / STAGES;
            /* streamers' bytes over their mean time */
            if (sn) gbs += (double)sb / ((double)sn / (sms - v->nchain)) / launches;
        }
        qsort(per, n, sizeof(double), cmp_double);
        printf("%-20s chain %3d W %2d KB | %6.3f %6.3f %6.3f | %7.1f\n", v->name, v->nchain, v->w_kb, per[n / 2], per[0], per[n - 1], gbs);
    }
    printf("final vectors: %s\n", bad ? "MISMATCH between launches or variants" : "identical in every launch");
    return bad != 0;
}
