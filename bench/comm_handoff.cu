/* comm_handoff.cu — can a hand-off keep its idle latency while DRAM streams the next tiles?
 *
 * issue 5, session 25 (docs/PERF.md): pk's small models are chains of hand-offs (five per layer),
 * and their DRAM idles for most of each: a worker issues its tile's copies only when its task
 * starts, because copies issued earlier delay the latency-critical loads of the same SM — its
 * poll, its x read, its residual load, its stores and release all return behind them (session
 * 15's poll_latency, session 21's next tile during this task: slower every way). This measures a
 * layout in which the SMs that stream never issue a latency-critical global access:
 *
 *   comm: thread-block clusters of CS CTAs. Rank 0 (the communicator) copies no weights: it polls
 *   the grid-wide event, reads x [V] bf16 through L2 and pushes it into its workers' shared memory
 *   (distributed shared memory stores, then one st.release.cluster flag per worker). Ranks 1 ..
 *   CS-1 (the workers) keep two tiles in flight — each stage issues the copies of the stage after
 *   it first — wait for x on a flag in their own shared memory, compute their outputs and store
 *   them into rank 0's shared memory (red.release.cluster count); rank 0 writes the cluster's
 *   outputs to global memory and signals the event (red.release.gpu).
 *
 * against pk's protocol on 128 CTAs, every CTA a worker:
 *   event: the stage's copies issued before the poll, waited on after x (pk's staged tiles);
 *   ahead: two tiles in flight, the next stage's copies issued right after this stage's x read
 *          (session 21's "after this task's x reads").
 *
 * The chain (handoff.cu's): STAGES hand-offs; at each, every worker reads x [V] (the previous
 * stage's output), reduces its sum of squares across the CTA (an rmsnorm GEMV's row scale) and
 * writes its slice of the outputs y = x · rsqrt(mean x²) · c. Every stage moves the same bytes in
 * every layout: 128 · PRE KB, from DRAM (a 1 GB buffer), split evenly over the copying CTAs. All
 * layouts compute the same bits; the host checks the final vectors agree.
 *
 *   nvcc -O3 -arch=sm_90a -o build/comm_handoff bench/comm_handoff.cu && build/comm_handoff [launches]
 *
 * Prints the clusters the H200 holds at once per cluster size (227 KB of shared memory per CTA),
 * then per layout and PRE the median over launches of chain time / STAGES (µs per hand-off with
 * its tiny task), and the bytes' own time at the copy rate: 128 · PRE KB / 4.66 TB/s (the all-SM
 * read rate of sm_bandwidth.cu).
 *
 * Measured on the H200 (session 25, two runs within 0.01 us; us per hand-off at PRE 0 / 32 / 64 KB):
 * event 1.41 / 2.34 / 3.20, ahead 1.41 / 2.25 / 3.19, comm with flags, clusters of 4 (120 CTAs)
 * 2.74 / 3.34 / 3.97, of 8 3.79 / 4.25 / 4.56; bytes alone 0 / 0.90 / 1.80. The H200 holds 66
 * clusters of 2, 30 of 4, 15 of 8, 7 of 16 at 227 KB per CTA. comm-tx (st.async), clusters of 4
 * 1.87 / 2.51 / 3.22, of 8 2.24 / 2.76 / 3.46: a DSMEM hop ~0.23 us, the bytes overlap in part,
 * from a higher base (docs/PERF.md "Session 25").
 *
 * stream (L_STREAM, session 25): pk's protocol with a producer warp per CTA that streams the
 * weights as 16 KB bulk copies through a ring, paced to at most `inflight` slots landing at once
 * (printed after the table above, per pace). Measured (session 25): 32 KB per stage 2.19-2.26 us
 * (pk's 2.33), 64 KB 2.57 at 32 KB in flight (pk's 3.19); seq, a 0.6B layer's tiles 64 / 32 / 96 /
 * 48 KB in turn: pk's 12.42 us per layer's four GEMV hand-offs, the stream 10.15-10.18.
 */
#include "micro.cuh"
#include <cooperative_groups.h>
#include <string.h>

namespace cg = cooperative_groups;

enum { THREADS = 256, WARPS = THREADS / 32, V = 2048, NPAIR = V / 2, STAGES = 512, NCTA = 128 };
enum { L_EVENT = 0, L_AHEAD = 1, L_COMM = 2, L_COMM_TX = 3, L_STREAM = 4 };
static const char *layout_names[5] = {"event", "ahead", "comm", "comm-tx", "stream"};
enum { SLOT = 16 << 10, NSLOT = 12 }; /* stream: a ring of 12 slots of 16 KB */
/* seq: a Qwen3-0.6B layer's GEMV tiles per CTA in pk's order (qkv, o_proj, gate_up, down), KB;
 * stage s moves entry s % SEQ_N. Every other seq figure is derived from this one list. */
#define SEQ_KB_LIST 64, 32, 96, 48
enum { SEQ_N = 4 };
static_assert(STAGES % SEQ_N == 0, "whole turns of the list");
__constant__ int SEQ_KB[SEQ_N] = {SEQ_KB_LIST};
static const int seq_kb_host[SEQ_N] = {SEQ_KB_LIST};
/* The stream's first chunk of entry i within a turn of the list (i = SEQ_N: a turn's chunks). */
__host__ __device__ inline int seq_first_chunk(const int *kb, int i) {
    int c = 0;
    for (int j = 0; j < i; j++) c += kb[j] * 1024 / SLOT;
    return c;
}
/* The stage whose slots the stream's chunk k holds. */
__host__ __device__ inline long seq_stage_of(const int *kb, long k) {
    const int turn = seq_first_chunk(kb, SEQ_N);
    long r = k % turn;
    int i = 0;
    while (r >= kb[i] * 1024 / SLOT) r -= kb[i++] * 1024 / SLOT;
    return k / turn * SEQ_N + i;
}
static_assert(V == THREADS * 8, "each thread holds 8 elements of x");
static_assert(THREADS == 256, "consumer_sync's named barrier counts 256 threads");

typedef struct {
    int layout;
    int ncl;                   /* comm: clusters (each of gridDim.x / ncl CTAs) */
    uint32_t chunk;            /* bytes per copying CTA per stage (a multiple of 16) */
    const char *w;             /* 1 GB of weights; stage s, copier i reads region (s · ncopy + i) % nregion */
    uint64_t nregion;
    int ncopy;                 /* copying CTAs */
    int inflight;              /* stream: slots in flight at most (the pace) */
    int seq;                   /* 1: stage s moves SEQ_KB[s % SEQ_N] KB per CTA (a 0.6B layer's tiles), not chunk */
    unsigned long long *ctr;   /* [STAGES + 1] grid-wide event counters */
    uint32_t *plain[2];        /* [NPAIR] bf16 pairs: stage s reads plain[s & 1], writes the other */
    unsigned long long *t;     /* block 0's start and end */
    uint32_t *result;          /* [NPAIR]: the last stage's output */
} args_t;


/* cluster-scope flags in (possibly another CTA's) shared memory, by generic address */
__device__ __forceinline__ uint32_t ld_acquire_cluster(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.acquire.cluster.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_release_cluster(uint32_t *p, uint32_t v) {
    asm volatile("st.release.cluster.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void red_release_cluster(uint32_t *p, uint32_t v) {
    asm volatile("red.release.cluster.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* Hopper's asynchronous remote stores: st.async writes another CTA's shared memory and counts its
 * bytes on that CTA's mbarrier (complete_tx); the receiver waits on the barrier's phase — no fence,
 * no flag, no poll of a counter. */
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ uint32_t mapa(uint32_t a, int rank) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
__device__ __forceinline__ void mbar_init(uint64_t *b, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(b)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity) {
    asm volatile("{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra WAIT_%=;\n}" ::"r"(smem_u32(b)), "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void st_async4(uint32_t raddr, uint4 v, uint32_t rbar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(raddr),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(rbar)
                 : "memory");
}
__device__ __forceinline__ void st_async1(uint32_t raddr, uint32_t v, uint32_t rbar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(raddr), "r"(v),
                 "r"(rbar)
                 : "memory");
}

/* One tile's copies (16-byte cp.async, thread c copies chunks c, c + THREADS, ...), one group. */
__device__ void issue_tile(char *dst, const args_t &a, int stage, int copier) {
    const uint32_t bytes = a.seq ? (uint32_t)SEQ_KB[stage % SEQ_N] * 1024 : a.chunk;
    if (stage < STAGES && a.chunk) {
        const char *src = a.w + (((uint64_t)stage * a.ncopy + copier) % a.nregion) * a.chunk;
        for (uint32_t c = threadIdx.x; c < bytes / 16; c += THREADS) {
            const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst + 16 * c);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + 16 * c) : "memory");
        }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

/* The row scale from this thread's 8 elements (pairs pr), in one fixed order: the same bits in
 * every layout. Ends with a barrier; red is free again after the next one. */
/* The consumers' barrier: the whole CTA, or (stream layout: a producer warp beside them) the
 * THREADS consumer threads alone on named barrier 1. */
template <bool NAMED>
__device__ __forceinline__ void consumer_sync(void) {
    if (NAMED)
        asm volatile("bar.sync 1, 256;" ::: "memory"); /* THREADS */
    else
        __syncthreads();
}
template <bool NAMED = false>
__device__ float row_scale(const uint32_t pr[4], float *red) {
    float ss = 0.0f;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const float x0 = lo_f32(pr[q]), x1 = hi_f32(pr[q]);
        ss += x0 * x0 + x1 * x1;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
    consumer_sync<NAMED>();
    float tot = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; w++) tot += red[w];
    return rsqrtf(tot / V + 1e-6f);
}

/* Output pair p of a stage: x's pair scaled; touch (0 here) keeps the tile's copies from being dropped. */
__device__ __forceinline__ uint32_t out_pair(uint32_t xpair, float scale, float touch) {
    return bf16_bits(lo_f32(xpair) * scale * 1.01f + touch) | (bf16_bits(hi_f32(xpair) * scale * 0.99f) << 16);
}
__device__ __forceinline__ float touch_of(const char *tile, uint32_t chunk) {
    return chunk ? (float)(tile[(16 * threadIdx.x) % chunk] == 0x7f) : 0.0f; /* this thread's own copy */
}

/* A 128-CTA layout's outputs of stage s: CTA b's NPAIR / NCTA pairs, stored by the threads that
 * hold them (thread t holds pairs 4t .. 4t + 3) into the next stage's input, and the last stage's
 * into result. */
__device__ void store_slice(const args_t &a, int s, const uint32_t pr[4], float scale, float touch) {
    const int p0 = blockIdx.x * (NPAIR / NCTA);
    for (int q = 0; q < 4; q++) {
        const int p = 4 * threadIdx.x + q;
        if (p >= p0 && p < p0 + NPAIR / NCTA) {
            const uint32_t y = out_pair(pr[q], scale, touch);
            a.plain[(s & 1) ^ 1][p] = y;
            if (s == STAGES - 1) a.result[p] = y;
        }
    }
}

/* ---- pk's protocol on NCTA CTAs: event (L_EVENT) or two tiles in flight (L_AHEAD) ------------ */
__global__ void __launch_bounds__(THREADS, 1) grid_kernel(args_t a) {
    extern __shared__ __align__(128) char tiles[]; /* [2][chunk] */
    __shared__ float red[WARPS];
    const int tid = threadIdx.x, b = blockIdx.x;
    const bool ahead = a.layout == L_AHEAD;
    if (b == 0 && tid == 0) a.t[0] = now_ns();
    if (ahead) issue_tile(tiles, a, 0, b);
    for (int s = 0; s < STAGES; s++) {
        const int in = s & 1;
        char *tile = tiles + (ahead ? in * a.chunk : 0);
        if (!ahead) issue_tile(tile, a, s, b);
        if (tid == 0 && s > 0)
            while (ld_acquire(a.ctr + s) < NCTA) __nanosleep(32);
        __syncthreads();
        const uint4 v = __ldcg((const uint4 *)(a.plain[in] + 4 * tid));
        const uint32_t pr[4] = {v.x, v.y, v.z, v.w};
        if (ahead) {
            issue_tile(tiles + (in ^ 1) * a.chunk, a, s + 1, b);
            asm volatile("cp.async.wait_group 1;" ::: "memory");
        } else {
            asm volatile("cp.async.wait_all;" ::: "memory");
        }
        const float scale = row_scale(pr, red);
        const float touch = touch_of(tile, a.chunk);
        store_slice(a, s, pr, scale, touch);
        __syncthreads(); /* every store issued (and red read) before the release */
        if (tid == 0) red_release(a.ctr + s + 1, 1);
    }
    if (b == 0 && tid == 0) a.t[1] = now_ns();
}

/* ---- a paced stream beside pk's protocol (L_STREAM): warp 8 copies, warps 0-7 hand off ------
 * The weights flow through a ring of NSLOT 16 KB slots as one continuous stream of chunks (stage s
 * reads chunks [s C, (s + 1) C), C = chunk / SLOT; seq: its entry's chunks of the list's turn): one lane of the producer warp issues chunk k
 * (a cp.async.bulk onto slot k % NSLOT's mbarrier) once its slot's previous chunk was consumed and
 * fewer than `inflight` chunks are still landing — so the memory system never holds more than
 * 128 · inflight · 16 KB of this kernel's copies, and DRAM streams through the hand-offs instead
 * of in a burst at each stage's start. The consumers run event's chain, waiting on the stage's
 * slots instead of cp.async groups. */
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
}
__global__ void __launch_bounds__(THREADS + 32, 1) stream_kernel(args_t a) {
    extern __shared__ __align__(128) char ring[]; /* [NSLOT][SLOT] */
    __shared__ __align__(8) uint64_t full[NSLOT];
    __shared__ volatile int consumed; /* stages the consumers are done with */
    __shared__ float red[WARPS];
    const int tid = threadIdx.x, b = blockIdx.x, C = (int)(a.chunk / SLOT);
    if (tid == 0) {
        for (int i = 0; i < NSLOT; i++) mbar_init(&full[i], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        consumed = 0;
    }
    __syncthreads();
    if (b == 0 && tid == 0) a.t[0] = now_ns();
    if (tid >= THREADS) { /* the producer warp: lane 0 issues, paced */
        if (tid == THREADS && C > 0) {
            const long total = a.seq ? (long)STAGES / SEQ_N * seq_first_chunk(SEQ_KB, SEQ_N) : (long)STAGES * C;
            long landed = 0; /* chunks [0, landed) are known to have landed */
            for (long k = 0; k < total; k++) {
                if (k >= NSLOT) { /* the slot's last chunk consumed: its stage done */
                    const long stage = a.seq ? seq_stage_of(SEQ_KB, k - NSLOT) : (k - NSLOT) / C;
                    while (stage >= consumed) __nanosleep(20);
                }
                while (k - landed >= a.inflight) { /* the pace */
                    mbar_wait(&full[landed % NSLOT], (uint32_t)(landed / NSLOT) & 1);
                    landed++;
                }
                const int slot = (int)(k % NSLOT);
                mbar_expect(&full[slot], SLOT);
                bulk_copy(ring + (size_t)slot * SLOT, a.w + (((uint64_t)k * NCTA + b) % a.nregion) * SLOT, SLOT,
                          &full[slot]);
            }
        }
        return;
    }
    for (int s = 0; s < STAGES; s++) {
        const int in = s & 1;
        if (tid == 0 && s > 0)
            while (ld_acquire(a.ctr + s) < NCTA) __nanosleep(32);
        consumer_sync<true>();
        const uint4 v = __ldcg((const uint4 *)(a.plain[in] + 4 * tid));
        const uint32_t pr[4] = {v.x, v.y, v.z, v.w};
        float touch = 0.0f;
        const int cs = a.seq ? SEQ_KB[s % SEQ_N] * 1024 / SLOT : C;
        const long k0 = a.seq ? (long)s / SEQ_N * seq_first_chunk(SEQ_KB, SEQ_N) + seq_first_chunk(SEQ_KB, s % SEQ_N)
                              : (long)s * C;
        for (int j = 0; j < cs; j++) { /* the stage's slots */
            const long k = k0 + j;
            mbar_wait(&full[k % NSLOT], (uint32_t)(k / NSLOT) & 1);
            if (j == 0) touch = (float)(ring[(k % NSLOT) * SLOT + (16 * tid) % SLOT] == 0x7f);
        }
        const float scale = row_scale<true>(pr, red);
        store_slice(a, s, pr, scale, touch);
        consumer_sync<true>(); /* every store issued, red and the slots read */
        if (tid == 0) {
            consumed = s + 1;
            red_release(a.ctr + s + 1, 1);
        }
    }
    if (b == 0 && tid == 0) a.t[1] = now_ns();
}

/* ---- the communicator layout: clusters of CS, rank 0 talks to the grid, the others stream ---- */
template <bool TX>
__global__ void __launch_bounds__(THREADS, 1) comm_kernel(args_t a) {
    extern __shared__ __align__(128) char tiles[]; /* workers: [2][chunk] */
    __shared__ __align__(16) uint32_t xin[2][NPAIR]; /* workers: x of stage s in xin[s & 1] */
    __shared__ __align__(16) uint32_t ybuf[2][NPAIR]; /* rank 0: the workers' outputs */
    __shared__ uint32_t xflag, ycount;
    __shared__ __align__(8) uint64_t xbar, ybar; /* TX: x arrived (workers), outputs arrived (rank 0) */
    __shared__ float red[WARPS];
    cg::cluster_group cl = cg::this_cluster();
    const int tid = threadIdx.x, cs = (int)cl.num_blocks(), rank = (int)cl.block_rank();
    const int c = blockIdx.x / cs, nw = cs - 1;
    /* cluster c's pairs [lo, hi); worker k of it (rank k + 1) owns [lo + k (hi - lo) / nw, ...) */
    const int lo = c * NPAIR / a.ncl, hi = (c + 1) * NPAIR / a.ncl;
    if (tid == 0) {
        xflag = ycount = 0;
        mbar_init(&xbar, 1); /* one arrival per phase (thread 0's expect_tx) and the bytes */
        mbar_init(&ybar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cl.sync(); /* every flag zeroed and barrier made before any peer writes it */
    if (blockIdx.x == 0 && tid == 0) a.t[0] = now_ns();
    if (rank == 0) {
        for (int s = 0; s < STAGES; s++) {
            const int in = s & 1;
            if (TX && tid == 0) mbar_expect(&ybar, (uint32_t)(hi - lo) * 4);
            if (tid == 0 && s > 0)
                while (ld_acquire(a.ctr + s) < (unsigned long long)a.ncl) __nanosleep(32);
            __syncthreads();
            const uint4 v = __ldcg((const uint4 *)(a.plain[in] + 4 * tid));
            if (TX) {
                for (int r = 1; r < cs; r++) st_async4(mapa(smem_u32(&xin[in][4 * tid]), r), v, mapa(smem_u32(&xbar), r));
                mbar_wait(&ybar, (uint32_t)s & 1);
            } else {
                for (int r = 1; r < cs; r++) *(uint4 *)(cl.map_shared_rank(&xin[in][4 * tid], r)) = v;
                __syncthreads(); /* every push issued before the flags' release */
                if (tid == 0)
                    for (int r = 1; r < cs; r++) st_release_cluster(cl.map_shared_rank(&xflag, r), (uint32_t)s + 1);
                if (tid == 0)
                    while (ld_acquire_cluster(&ycount) < (uint32_t)(nw * (s + 1))) { }
                __syncthreads();
            }
            for (int p = lo + tid; p < hi; p += THREADS) {
                a.plain[in ^ 1][p] = ybuf[in][p];
                if (s == STAGES - 1) a.result[p] = ybuf[in][p];
            }
            __syncthreads();
            if (tid == 0) red_release(a.ctr + s + 1, 1);
        }
    } else {
        const int k = rank - 1, copier = c * nw + k;
        const int w0 = lo + k * (hi - lo) / nw, w1 = lo + (k + 1) * (hi - lo) / nw;
        uint32_t *yb0 = cl.map_shared_rank(&ybuf[0][0], 0), *ycount0 = cl.map_shared_rank(&ycount, 0);
        issue_tile(tiles, a, 0, copier);
        for (int s = 0; s < STAGES; s++) {
            const int in = s & 1;
            issue_tile(tiles + (in ^ 1) * a.chunk, a, s + 1, copier); /* two tiles in flight */
            if (TX) {
                if (tid == 0) mbar_expect(&xbar, NPAIR * 4);
                mbar_wait(&xbar, (uint32_t)s & 1);
            } else {
                if (tid == 0)
                    while (ld_acquire_cluster(&xflag) < (uint32_t)s + 1) { }
                __syncthreads();
            }
            const uint4 v = *(const uint4 *)&xin[in][4 * tid];
            const uint32_t pr[4] = {v.x, v.y, v.z, v.w};
            asm volatile("cp.async.wait_group 1;" ::: "memory"); /* this stage's tile */
            const float scale = row_scale(pr, red);
            const float touch = touch_of(tiles + in * a.chunk, a.chunk);
            for (int q = 0; q < 4; q++) {
                const int p = 4 * tid + q;
                if (p >= w0 && p < w1) {
                    if (TX)
                        st_async1(mapa(smem_u32(&ybuf[in][p]), 0), out_pair(pr[q], scale, touch), mapa(smem_u32(&ybar), 0));
                    else
                        yb0[in * NPAIR + p] = out_pair(pr[q], scale, touch);
                }
            }
            __syncthreads(); /* every push issued (and red read) before the count's release */
            if (!TX && tid == 0) red_release_cluster(ycount0, 1);
        }
        asm volatile("cp.async.wait_all;" ::: "memory");
    }
    if (blockIdx.x == 0 && tid == 0) a.t[1] = now_ns();
    cl.sync(); /* no CTA leaves while a peer may still write its shared memory */
}

static double run(args_t &a, int launches, const cudaLaunchConfig_t *cfg, void (*kernel)(args_t), const uint32_t *hx,
                  uint32_t *got) {
    double *per = (double *)malloc(sizeof(double) * launches);
    int n = 0;
    for (int l = 0; l < launches + 2; l++) {
        CHECK(cudaMemset(a.ctr, 0, 8 * (STAGES + 1)));
        CHECK(cudaMemcpy(a.plain[0], hx, NPAIR * 4, cudaMemcpyHostToDevice));
        CHECK(cudaLaunchKernelEx(cfg, kernel, a));
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        unsigned long long ht[2];
        CHECK(cudaMemcpy(ht, a.t, 16, cudaMemcpyDeviceToHost));
        if (l >= 2) per[n++] = (double)(ht[1] - ht[0]) / 1e3 / STAGES;
    }
    CHECK(cudaMemcpy(got, a.result, NPAIR * 4, cudaMemcpyDeviceToHost));
    qsort(per, n, sizeof(double), cmp_double);
    const double med = per[n / 2];
    free(per);
    return med;
}

int main(int argc, char **argv) {
    const int launches = argc > 1 ? atoi(argv[1]) : 10;
    const uint64_t wbytes = 1ull << 30;
    args_t a;
    memset(&a, 0, sizeof a);
    a.w = device_filled(wbytes, 1);
    CHECK(cudaMalloc(&a.ctr, 8 * (STAGES + 1)));
    for (int i = 0; i < 2; i++) CHECK(cudaMalloc(&a.plain[i], NPAIR * 4));
    CHECK(cudaMalloc(&a.t, 16));
    CHECK(cudaMalloc(&a.result, NPAIR * 4));
    uint32_t hx[NPAIR], ref[NPAIR], got[NPAIR];
    for (int i = 0; i < NPAIR; i++) {
        const float f0 = (float)((i * 37) % 101 - 50) / 25.0f, f1 = (float)((i * 53) % 97 - 48) / 24.0f;
        uint32_t u0, u1;
        memcpy(&u0, &f0, 4);
        memcpy(&u1, &f1, 4);
        hx[i] = (u0 >> 16) | (u1 & 0xffff0000u);
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    cudaFuncAttributes fa_grid, fa_comm;
    CHECK(cudaFuncGetAttributes(&fa_grid, grid_kernel));
    CHECK(cudaFuncGetAttributes(&fa_comm, comm_kernel<false>));
    const int dyn_grid = (int)(prop.sharedMemPerBlockOptin - fa_grid.sharedSizeBytes);
    const int dyn_comm = (int)(prop.sharedMemPerBlockOptin - fa_comm.sharedSizeBytes);
    CHECK(cudaFuncSetAttribute(grid_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn_grid));
    CHECK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, NSLOT * SLOT));
    void (*comm[2])(args_t) = {comm_kernel<false>, comm_kernel<true>};
    for (int i = 0; i < 2; i++) {
        CHECK(cudaFuncSetAttribute(comm[i], cudaFuncAttributeMaxDynamicSharedMemorySize, dyn_comm));
        CHECK(cudaFuncSetAttribute(comm[i], cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    }

    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr;
    memset(&cfg, 0, sizeof cfg);
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cfg.blockDim = dim3(THREADS);
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int fit[17] = {0};
    for (int cs = 2; cs <= 16; cs *= 2) {
        attr.val.clusterDim.x = cs;
        cfg.gridDim = dim3(cs * 32);
        cfg.dynamicSmemBytes = dyn_comm;
        CHECK(cudaOccupancyMaxActiveClusters(&fit[cs], comm[0], &cfg));
        printf("clusters of %2d CTAs (227 KB each) resident at once: %2d (%3d CTAs)\n", cs, fit[cs], fit[cs] * cs);
    }

    const int pres[] = {0, 32, 64};
    int have_ref = 0, bad = 0;
    printf("%-8s %3s %4s %6s %8s | us per hand-off p50 | bytes' time at 4.66 TB/s\n", "layout", "CS", "CTAs", "PRE KB",
           "tile KB");
    for (int pi = 0; pi < 3; pi++) {
        const uint64_t total = (uint64_t)NCTA * pres[pi] * 1024; /* bytes per stage, every layout */
        for (int lay = 0; lay < 6; lay++) {
            const int layout = lay < 2 ? lay : lay < 4 ? L_COMM : L_COMM_TX, cs = lay % 2 == 0 ? 4 : 8;
            const bool comm_layout = layout >= L_COMM;
            a.layout = layout;
            int grid;
            if (comm_layout) {
                a.ncl = fit[cs] < 132 / cs ? fit[cs] : 132 / cs;
                grid = a.ncl * cs;
                a.ncopy = a.ncl * (cs - 1);
                attr.val.clusterDim.x = cs;
                cfg.numAttrs = 1;
            } else {
                a.ncl = 0;
                grid = NCTA;
                a.ncopy = NCTA;
                cfg.numAttrs = 0;
            }
            a.chunk = (uint32_t)((total / a.ncopy + 15) / 16 * 16);
            const int dyn = (int)(2 * a.chunk) + 128;
            if (dyn > (comm_layout ? dyn_comm : dyn_grid)) {
                printf("%-8s %3d %4d %6d %8.1f | two tiles do not fit in shared memory\n", layout_names[layout],
                       comm_layout ? cs : 1, grid, pres[pi], a.chunk / 1024.0);
                continue;
            }
            a.nregion = a.chunk ? wbytes / a.chunk : 1;
            cfg.gridDim = dim3(grid);
            cfg.dynamicSmemBytes = dyn;
            const double us = run(a, launches, &cfg, comm_layout ? comm[layout == L_COMM_TX] : grid_kernel, hx, got);
            if (!have_ref) {
                memcpy(ref, got, sizeof ref);
                have_ref = 1;
            } else if (memcmp(ref, got, sizeof ref) != 0) {
                bad++;
            }
            printf("%-8s %3d %4d %6d %8.1f | %19.3f | %.3f\n", layout_names[layout], comm_layout ? cs : 1, grid,
                   pres[pi], a.chunk / 1024.0, us, total / 4.66e6);
        }
    }
    /* the paced stream: 16 KB slots, `inflight` of them landing at most per CTA */
    const int paces[] = {1, 2, 3, 4, NSLOT};
    for (int pi = 1; pi < 3; pi++)
        for (int qi = 0; qi < 5; qi++) {
            const uint64_t total = (uint64_t)NCTA * pres[pi] * 1024;
            a.layout = L_STREAM;
            a.ncl = 0;
            a.ncopy = NCTA;
            a.chunk = (uint32_t)(total / NCTA);
            a.inflight = paces[qi];
            a.nregion = wbytes / SLOT;
            cfg.numAttrs = 0;
            cfg.gridDim = dim3(NCTA);
            cfg.blockDim = dim3(THREADS + 32);
            cfg.dynamicSmemBytes = NSLOT * SLOT;
            const double us = run(a, launches, &cfg, stream_kernel, hx, got);
            if (memcmp(ref, got, sizeof ref) != 0) bad++;
            printf("%-8s %3d %4d %6d %8.1f | %19.3f | %.3f   (at most %d KB in flight per CTA)\n", "stream", 1, NCTA,
                   pres[pi], a.chunk / 1024.0, us, total / 4.66e6, paces[qi] * SLOT / 1024);
        }
    /* a 0.6B layer's four GEMV tiles in turn (SEQ_KB per CTA): pk's layout against the stream */
    const uint64_t seq_bytes = (uint64_t)NCTA * seq_first_chunk(seq_kb_host, SEQ_N) * SLOT / SEQ_N; /* per stage, mean */
    for (int qi = -1; qi < 5; qi++) {
        a.seq = 1;
        a.ncl = 0;
        a.ncopy = NCTA;
        a.chunk = 96 * 1024; /* the largest tile: the regions' size */
        a.nregion = wbytes / a.chunk;
        cfg.numAttrs = 0;
        cfg.gridDim = dim3(NCTA);
        if (qi < 0) {
            a.layout = L_EVENT;
            cfg.blockDim = dim3(THREADS);
            cfg.dynamicSmemBytes = 2 * a.chunk + 128;
        } else {
            a.layout = L_STREAM;
            a.inflight = paces[qi];
            a.nregion = wbytes / SLOT;
            cfg.blockDim = dim3(THREADS + 32);
            cfg.dynamicSmemBytes = NSLOT * SLOT;
        }
        const double us = run(a, launches, &cfg, qi < 0 ? grid_kernel : stream_kernel, hx, got);
        if (memcmp(ref, got, sizeof ref) != 0) bad++;
        printf("%-8s 0.6B layer's tiles", layout_names[a.layout]);
        for (int i = 0; i < SEQ_N; i++) printf("%c%d", i ? '/' : ' ', seq_kb_host[i]);
        printf(" KB | %6.3f us per hand-off (x%d: %.2f per layer's GEMVs) | bytes %.3f", us, SEQ_N, SEQ_N * us,
               seq_bytes / 4.66e6);
        if (qi >= 0) printf("   (at most %d KB in flight per CTA)", paces[qi] * SLOT / 1024);
        printf("\n");
    }
    a.seq = 0;
    cfg.blockDim = dim3(THREADS);
    printf("final vectors: %s\n", bad ? "MISMATCH between layouts" : "identical in every layout");
    return bad != 0;
}
