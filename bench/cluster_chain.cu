/* cluster_chain.cu — a Qwen3-0.6B decode layer in two schedules: pk's (five grid-wide hand-offs
 * per layer) against one built on thread-block clusters (two grid-wide hand-offs, three inside a
 * cluster through distributed shared memory).
 *
 * issue 5, session 23 (docs/PERF.md): the 0.6B's layer spans ~30 us where its bytes take 7.4; it
 * is a chain of five hand-offs (qkv -> attention -> o_proj -> gate_up -> down -> qkv), and
 * handoff.cu measured one grid-wide hand-off at 1.3 us idle and 2.25 / 3.75 us when each SM has
 * 32 / 96 KB of its tile's copies in flight ahead of the poll: the poll and the x read queue
 * behind them. Fewer grid-wide hand-offs per layer, then. The cluster schedule, one cluster of CS
 * = 16 CTAs per KV head (8 clusters, 128 CTAs):
 *   1. every CTA holds the residual r [1024] fp32 in shared memory (each computes the same sums in
 *      the same order, so every copy has the same bits) and, at the layer's start, x = r + the 8
 *      clusters' down partials of the layer before (grid-wide hand-off 1), the rms scale;
 *   2. CTA rank i computes 32 of its head's 512 q|k|v rows and stores them in rank 0's shared
 *      memory (DSMEM); cluster barrier;
 *   3. rank 0 runs the attention (its KV rows staged at the layer's start; here a spin of ATT_NS);
 *      cluster barrier; every rank reads the 256 outputs from rank 0;
 *   4. rank i computes 64 rows of o_proj over the head's 256 columns (split over K by head) and
 *      stores the fp32 partial; the grid-wide event (hand-off 2); h = r + the 8 partials;
 *   5. rank i computes 24 gate and 24 up rows of its cluster's 384 features (the cluster owns
 *      features [384 c, 384 (c + 1))), silu · mul; cluster barrier; every rank reads the 384;
 *   6. rank i computes 64 rows of down over those 384 columns: the fp32 partial of step 1.
 * Every CTA moves the same bytes as in pk's schedule (qkv 64 KB, o_proj 32, gate_up 96, down 48:
 * 240 KB per layer), the attention reads 80 KB of KV, and the weights of every layer are its own
 * (882 MB: from DRAM). pk's schedule in the model (`global`): 132 CTAs, qkv 128 tiles, the
 * attention 8 tasks on CTAs 124-131, o_proj / gate_up / down 128 tiles; every task issues its
 * copies, waits on its event (thread 0 polls; ld.acquire + 32 ns sleeps), reads x through L2,
 * waits for its copies, runs the GEMV from shared memory, stores, signals (red.release).
 *
 *   nvcc -O3 -arch=sm_90a -o build/cluster_chain bench/cluster_chain.cu && build/cluster_chain [att_ns [launches [fast [bloat [hc_att_ns]]]]]
 *   (fast 1: the global schedule's GEMVs by gemv_fast; bloat: the instruction-fetch probe, args_t;
 *   hc_att_ns: each rank's share of the attention in the hc schedule, 1500 unless given)
 *
 * Prints us per layer (median of launches, each STEPS x 28 layers) for each schedule that fits,
 * the global schedule's `end+` spans (each kind's last signal after the kind before's, one layer)
 * and its GEMV tasks' mean phases. The values computed are not checked (the model's weights are
 * constant bytes); the schedules are.
 *
 * Measured on the H200 (session 23, docs/PERF.md "Session 23"): the global schedule 19.7 us per
 * layer with a 2.5 us attention, 21.2-21.6 with 4 us (pk: ~30.3 at the median positions) — qkv
 * 3.7-4.1, attention 5.1-5.3, o_proj 2.7-3.0, gate_up 5.6-5.7, down 3.4-3.6 (pk: 6.7 / 6.1 / 3.6 /
 * 8.7 / 5.1). The cluster schedules never ran: with 227 KB of shared memory per CTA the H200
 * holds 15 clusters of 8 CTAs at once, or 7 of 16 (cudaOccupancyMaxActiveClusters: its GPCs do
 * not all have 16 SMs), and both need 128 CTAs resident; their code is unverified.
 * The instruction-fetch probe (argv[4] 2, -DBLOAT_N=N: each GEMV task also runs N dependent FMAs
 * unrolled, a distinct copy per kind): N 512 (4 x 8.2 KB of code) 26.1 / 26.2 us per layer against
 * 22.3, about the FMAs' own latency; N 2048 (4 x 32.9 KB) 52.6 / 52.1, ~13 us more than theirs
 * (4 x N 512's cost would be +17.5 us; it is +30.6):
 * once a layer's code no longer fits the SM's instruction cache it is fetched again every layer,
 * ~100 ns per KB.
 * fused (session 26, run after `global` and before it again): the attention and o_proj as one layer
 * of 128 tasks — task b runs KV head b / 16's attention (its 80 KB KV stage and o_proj's 32 KB tile
 * [64 rows x the head's 256 columns] copied before the wait on qkv) and stores o_proj's fp32
 * partial of rows 64 (b % 16) ..; gate_up reads h = residual + the 8 partials. Measured: 20.85 ->
 * 20.07 us per layer (att 2.5 us), 21.90 -> 21.24 (4 us): one hand-off fewer saves ~0.7 us, the
 * rest goes to the hand-off into the fused layer (every SM's pre-wait copies queued) and gate_up's
 * partial reads (0.54 against 0.25 us).
 * mlp (session 29, run after `fused`): gate_up and down as one layer of 128 tasks — task b computes
 * gate_up's 48 rows (24 features), silu · mul, then down's 1024 rows over those 24 columns (a
 * [1024][24] tile, 48 KB, copied before the wait with gate_up's 96 KB) and adds them into a per-layer
 * accumulator acc [H] as 2^-32 fixed point with 64-bit integer atomics (exact: any order
 * gives the same bits); qkv reads x = h + acc (8 KB through L2) and stores its 8 elements of x for
 * o_proj's residual; o_proj zeroes the layer before's acc once qkv has read it. Measured (fast
 * GEMVs, same launch set): 20.97 / 20.96 -> 20.02 us per layer with a 4 us attention, 19.56 /
 * 19.58 -> 18.53 with 2.5 us (fused: 20.39, 18.93): one hand-off fewer saves ~1 us; the mlp layer's
 * end+ is 6.9-7.3 us against gate_up's and down's 8.2-8.8, its gate_up tasks wait 4.0 us (2.8:
 * their 144 KB of copies), qkv's x read 0.35 us (0.27).
 * hc (session 38; run in session 39: no faster, dropped): the cluster schedule on what the H200 holds — 15 clusters of 8, 120
 * CTAs: one cluster per KV head for qkv -> attention -> o_proj (the qkv rows and the attention's
 * partials through distributed shared memory, the attention split over the cluster's 8 ranks by
 * positions, o_proj split over K by head into fixed-point sums), the MLP on all 120 as the `mlp`
 * schedule's one layer; two grid-wide hand-offs per layer instead of four (hc_kernel's comment).
 * Run after the others with each rank's attention at hc_att_ns and at att_ns, then `mlp` again.
 * Measured (session 39, plain GEMVs): 19.89 us per layer at 1500 ns per rank against `mlp`'s 19.65
 * with a 2.5 us attention, 20.35 at 2000 against 21.31 with 4 us (20.86 / 22.31 at the whole
 * attention's time per rank); its phases qkv gathered 5.22, attention partials 2.40, o_proj 3.20,
 * MLP 8.86: the qkv and o_proj bytes fall on the 64 head CTAs (336 KB a layer each, more than their
 * shared memory, so those tiles stream on the chain) and give back the two hand-offs saved.
 * With gemv_fast (argv[3] 1: all of a warp's rows in one pass, x in registers) the model's layer
 * took 20.4 / 21.0 us against 22.3 / 22.3 (same call): qkv's GEMV 1.14 -> 0.71 us, gate_up's 1.65 ->
 * 0.91, o_proj's and down's (one row per warp, K 2048 / 3072) unchanged at 0.8 / 1.1.
 */
#include "micro.cuh"
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <string.h>

namespace cg = cooperative_groups;

enum { THREADS = 256, WARPS = 8, LAYERS = 28, STEPS = 4, NEV = STEPS * LAYERS, REC_EV = NEV / 2 };
enum { H = 1024, QKV = 4096, QO = 2048, FF = 3072, HEADS_KV = 8, HD = 128 };
enum { NCTA = 128, GCTA = 132 };
#define FIX_ONE 4294967296.0f /* the mlp schedule's fixed point: acc holds sums x 2^32 */
/* tiles (bytes): pk's and the cluster schedule's are the same size per CTA */
enum { QKV_TILE = 32 * H * 2, O_TILE = 32 * 1024, GU_TILE = 48 * H * 2, D_TILE = 48 * 1024, KV_BYTES = 80 * 1024 };
enum { LAYER_BYTES = 128 * (QKV_TILE + O_TILE + GU_TILE + D_TILE) };
static_assert(LAYER_BYTES == (QKV * H + H * QO + 2 * FF * H + H * FF) * 2, "the tiles cover the layer's weights");

typedef struct {
    const char *w;          /* LAYERS x LAYER_BYTES: qkv tiles, o_proj, gate_up, down */
    const char *kv;         /* LAYERS x 8 x KV_BYTES */
    unsigned long long *ev; /* [6][NEV] event counters */
    __nv_bfloat16 *act[5];  /* global: resid [H], qkv [QKV], att [QO], h [H], mlp [FF] */
    float *part_o, *part_d; /* cluster: [NCL][H] partials */
    unsigned long long *t;  /* [2] */
    unsigned long long *rec; /* [6][GCTA]: global schedule, each CTA's signal time per kind at ev REC_EV, [5] down at REC_EV - 1 */
    long long att_ns;
    int fast; /* the global schedule's GEMV: 0 gemv (a warp per two rows), 1 gemv_fast */
    int fused; /* the global schedule with the attention and o_proj as one layer of 128 tasks (`fused`) */
    int mlp;   /* the global schedule with gate_up and down as one layer of 128 tasks (`mlp`) */
    long long *acc; /* mlp: [LAYERS][H] down's sums, fixed point (2^-32), added with integer atomics */
    int bloat; /* 0; 1: every GEMV task also runs BLOAT_N dependent FMAs as a loop (little code); 2: the
                  same FMAs unrolled, a distinct copy per kind (BLOAT_N x 16 B of code each) */
    unsigned long long *prof; /* [4 kinds][6]: global schedule's GEMV phases (count, then sums of ns) */
    long long hc_att_ns;      /* hc: each rank's share of its head's attention (a spin) */
    long long *acc_o, *acc_d; /* hc: [NEV][H] o_proj's and down's sums, fixed point, one row per layer and step */
} args_t;

/* Thread 0 polls (a stuck wait traps after 1 s: the model must not hang the device), then the
 * barrier. */
__device__ void wait_event(const unsigned long long *c, unsigned long long need) {
    if (threadIdx.x == 0) {
        const uint64_t t0 = now_ns();
        while (ld_acquire(c) < need) {
            __nanosleep(32);
            if (now_ns() - t0 > 1000000000ull) __trap();
        }
    }
    __syncthreads();
}
__device__ void signal(unsigned long long *c) {
    __syncthreads();
    if (threadIdx.x == 0) red_release(c, 1);
}
/* The global schedule's signal, its time recorded at ev REC_EV (kind k of CTA blockIdx.x). */
__device__ void signal_rec(unsigned long long *c, const args_t &a, int ev, int k) {
    __syncthreads();
    if (threadIdx.x == 0) {
        red_release(c, 1);
        if (ev == REC_EV) a.rec[k * GCTA + blockIdx.x] = now_ns();
        if (ev == REC_EV - 1 && k == (a.mlp ? 3 : 4)) a.rec[5 * GCTA + blockIdx.x] = now_ns(); /* the down before */
    }
}
__device__ void issue_copies(char *dst, const char *src, int bytes) {
    for (int c = threadIdx.x * 16; c < bytes; c += THREADS * 16) {
        const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst + c);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + c) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}
/* Every copy but the newest `n` groups landed, for the whole CTA. */
template <int N>
__device__ void wait_copies(void) {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
    __syncthreads();
}
__device__ float block_sum(float v, float *red) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; w++) s += red[w];
    return s;
}
/* y[i] = tile row i . xs for i < rows (tile [rows][K] bf16 in shared memory; a warp per row, two
 * rows at a time), then a barrier. */
__device__ void gemv(const char *tile, int rows, int K, const float *xs, float *y) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int i = warp; i < rows; i += 2 * WARPS) {
        const int i2 = i + WARPS < rows ? i + WARPS : i;
        const uint4 *r0 = (const uint4 *)(tile + (size_t)i * K * 2), *r1 = (const uint4 *)(tile + (size_t)i2 * K * 2);
        float a0 = 0.0f, a1 = 0.0f;
        for (int c = lane; c < K / 8; c += 32) {
            const uint4 u = r0[c], v = r1[c];
            const float *x = xs + 8 * c;
            const uint32_t uu[4] = {u.x, u.y, u.z, u.w}, vv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int q = 0; q < 4; q++) {
                a0 += __uint_as_float(uu[q] << 16) * x[2 * q] + __uint_as_float(uu[q] & 0xffff0000u) * x[2 * q + 1];
                a1 += __uint_as_float(vv[q] << 16) * x[2 * q] + __uint_as_float(vv[q] & 0xffff0000u) * x[2 * q + 1];
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            a0 += __shfl_xor_sync(0xffffffffu, a0, o);
            a1 += __shfl_xor_sync(0xffffffffu, a1, o);
        }
        if (lane == 0) {
            y[i] = a0;
            y[i2] = a1;
        }
    }
    __syncthreads();
}
/* The same y = tile . xs with the latencies overlapped: warp w takes rows [w R, w R + R) (rows = 8 R),
 * each lane holds its K / 256 chunks of x in registers and sums all R rows in one pass (two
 * partial sums per row, every load independent), then the R butterflies interleave. */
template <int K, int R>
__device__ void gemv_fast(const char *tile, const float *xs, float *y) {
    constexpr int NC = K / 256; /* 16-byte chunks per lane and row */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float xr[NC][8];
#pragma unroll
    for (int c = 0; c < NC; c++)
#pragma unroll
        for (int e = 0; e < 8; e++) xr[c][e] = xs[8 * (lane + 32 * c) + e];
    float acc[R][2];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; c++)
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint4 u = ((const uint4 *)(tile + (size_t)(warp * R + r) * K * 2))[lane + 32 * c];
            const uint32_t uu[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int q = 0; q < 4; q++) {
                acc[r][q & 1] += __uint_as_float(uu[q] << 16) * xr[c][2 * q];
                acc[r][q & 1] += __uint_as_float(uu[q] & 0xffff0000u) * xr[c][2 * q + 1];
            }
        }
#pragma unroll
    for (int r = 0; r < R; r++) acc[r][0] += acc[r][1];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int r = 0; r < R; r++) acc[r][0] += __shfl_xor_sync(0xffffffffu, acc[r][0], o);
    if (lane < R) {
        float v = acc[0][0];
#pragma unroll
        for (int r = 1; r < R; r++)
            if (lane == r) v = acc[r][0];
        y[warp * R + lane] = v;
    }
    __syncthreads();
}

/* Instruction-fetch probe: BLOAT_N dependent FMAs per task, as a loop (a few instructions of code)
 * or unrolled into a distinct copy per layer kind (KIND) — the same work, code that the SM must
 * fetch again each layer if the kinds' copies do not stay in its instruction caches. The result
 * goes into the task's output as 0 (v is finite: the FMAs contract towards 0). */
#ifndef BLOAT_N
#define BLOAT_N 1024
#endif
template <int KIND>
__device__ __noinline__ float bloat_unrolled(float v) {
#pragma unroll
    for (int i = 0; i < BLOAT_N; i++) v = fmaf(v, 0.5f + (float)(i % 7) * 1e-3f, (float)(i + KIND) * 1e-9f);
    return v;
}
/* The small-code control, which is none: even cut to the FMA, an add and the count, the loop
 * costs ~28 cycles per iteration (session 23: 50.8 us per layer at BLOAT_N 512 against 26.1
 * unrolled and 21.8 without), so the probe reads the unrolled sizes against each other. */
__device__ __noinline__ float bloat_loop(float v) {
    float d = 0.0f;
#pragma unroll 1
    for (int i = 0; i < BLOAT_N; i++) {
        v = fmaf(v, 0.5f, d);
        d += 1e-9f;
    }
    return v;
}
template <int KIND>
__device__ __forceinline__ float bloat(const args_t &a, float v) {
    if (a.bloat == 1) return bloat_loop(v) * 0.0f;
    if (a.bloat == 2) return bloat_unrolled<KIND>(v) * 0.0f;
    return 0.0f;
}

/* xs[0 .. n) = the bf16 vector v through L2 (8 per thread and round) */
__device__ void load_x(const __nv_bfloat16 *v, int n, float *xs) {
    for (int c = threadIdx.x; c < n / 8; c += THREADS) {
        const uint4 u = __ldcg((const uint4 *)v + c);
        const uint32_t uu[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int q = 0; q < 4; q++) {
            xs[8 * c + 2 * q] = __uint_as_float(uu[q] << 16);
            xs[8 * c + 2 * q + 1] = __uint_as_float(uu[q] & 0xffff0000u);
        }
    }
    __syncthreads();
}
/* xs[0 .. n) = the bf16 vector v plus the HEADS_KV fp32 partials part [HEADS_KV][H] (through L2,
 * added in head order): the fused schedule's h = residual + o_proj, read by gate_up. */
__device__ void load_x_parts(const __nv_bfloat16 *v, const float *part, int n, float *xs) {
    for (int k = threadIdx.x; k < n; k += THREADS) {
        float x = __bfloat162float(v[k]);
        for (int h = 0; h < HEADS_KV; h++) x += __ldcg(part + h * H + k);
        xs[k] = x;
    }
    __syncthreads();
}
/* xs[0 .. n) = the bf16 vector v plus acc [n] (fixed point, 2^-32; through L2): the mlp schedule's
 * x = h + down, read by qkv. */
__device__ void load_x_acc(const __nv_bfloat16 *v, const long long *acc, int n, float *xs) {
    for (int k = threadIdx.x; k < n; k += THREADS)
        xs[k] = __bfloat162float(v[k]) + (float)__ldcg(acc + k) / FIX_ONE;
    __syncthreads();
}
/* Thread 0: kind k's phase times of this task (start = task start, after the poll, x loaded, rms
 * scale, copies landed, GEMV done) summed into prof[k]. */
__device__ void prof_add(const args_t &a, int k, const uint64_t *t) {
    if (threadIdx.x != 0) return;
    unsigned long long *p = a.prof + 6 * k;
    atomicAdd(p, 1ull);
    for (int i = 1; i < 6; i++) atomicAdd(p + i, t[i] - t[i - 1]);
}
__device__ void spin_ns(long long ns) {
    const uint64_t t0 = now_ns();
    while ((long long)(now_ns() - t0) < ns) { }
}
__device__ float rms_scale(const float *xs, int n, float *red) {
    float ss = 0.0f;
    for (int k = threadIdx.x; k < n; k += THREADS) ss += xs[k] * xs[k];
    return rsqrtf(block_sum(ss, red) / n + 1e-6f);
}
__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

/* One GEMV task of the global schedule up to its sums: its tile's copies, the wait (none when ctr
 * is null), x [K] through L2, with RMS the row scale, the copies landed, y = tile . x (8 R rows);
 * the phases into prof[kind]. Returns the scale (1 without RMS). */
template <int K, int R, bool RMS>
__device__ float gemv_task(const args_t &a, int kind, char *tile, const char *src, int bytes,
                           const unsigned long long *ctr, unsigned long long need, const __nv_bfloat16 *x, float *xs,
                           float *y, float *red, const float *part = nullptr, const long long *acc = nullptr) {
    uint64_t tp[6];
    tp[0] = now_ns();
    issue_copies(tile, src, bytes);
    if (ctr) wait_event(ctr, need);
    tp[1] = now_ns();
    if (part)
        load_x_parts(x, part, K, xs);
    else if (acc)
        load_x_acc(x, acc, K, xs);
    else
        load_x(x, K, xs);
    tp[2] = now_ns();
    const float s = RMS ? rms_scale(xs, K, red) : 1.0f;
    tp[3] = RMS ? now_ns() : tp[2];
    wait_copies<0>();
    tp[4] = now_ns();
    if (a.fast)
        gemv_fast<K, R>(tile, xs, y);
    else
        gemv(tile, 8 * R, K, xs, y);
    tp[5] = now_ns();
    prof_add(a, kind, tp);
    return s;
}

/* acc [1024] += tile [1024][F] . mlp [F] as fixed point (integer atomics: any order, the same bits):
 * the down half of the mlp and hc schedules' MLP layer */
template <int F>
__device__ void mlp_down(const char *tile, const float *mlp, long long *acc) {
    for (int row = threadIdx.x; row < H; row += THREADS) {
        const uint4 *w = (const uint4 *)(tile + (size_t)row * F * 2);
        float v = 0.0f;
#pragma unroll
        for (int c = 0; c < F / 8; c++) {
            const uint4 u = w[c];
            const uint32_t uu[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int q = 0; q < 4; q++)
                v += __uint_as_float(uu[q] << 16) * mlp[8 * c + 2 * q] + __uint_as_float(uu[q] & 0xffff0000u) * mlp[8 * c + 2 * q + 1];
        }
        atomicAdd((unsigned long long *)(acc + row), (unsigned long long)__float2ll_rn(v * FIX_ONE));
    }
}

/* ---- pk's schedule: five grid-wide hand-offs per layer ---------------------------------------- */
__global__ void __launch_bounds__(THREADS, 1) global_kernel(args_t a) {
    extern __shared__ __align__(128) char sm[];
    char *tile = sm, *kvs = sm + 96 * 1024;         /* the task's tile; the attention's KV stage */
    float *xs = (float *)(sm + 176 * 1024), *y = xs + FF, *red = y + 64;
    const int b = blockIdx.x;
    unsigned long long *E = a.ev; /* [kind][ev]: 0 qkv, 1 attention, 2 o_proj, 3 gate_up, 4 down */
    if (b == 0 && threadIdx.x == 0) a.t[0] = now_ns();
    for (int ev = 0; ev < NEV; ev++) {
        const int l = ev % LAYERS;
        const char *W = a.w + (size_t)l * LAYER_BYTES * 3 / 2;
        long long *acc_prev = a.acc + (size_t)((l + LAYERS - 1) % LAYERS) * H; /* mlp: the layer before's sums */
        if (b < 128) { /* qkv: rmsnorm(resid) . W [32 rows]; mlp: resid = h + the down sums, its 8 elements stored */
            const unsigned long long *prev = ev == 0 ? nullptr : E + (a.mlp ? 3 : 4) * NEV + ev - 1;
            const float s = gemv_task<H, 4, true>(a, 0, tile, W + (size_t)b * QKV_TILE, QKV_TILE, prev, 128,
                                                  a.mlp ? a.act[3] : a.act[0], xs, y, red, nullptr,
                                                  a.mlp ? acc_prev : nullptr);
            if (a.mlp && threadIdx.x < 8) a.act[0][b * 8 + threadIdx.x] = __float2bfloat16(xs[b * 8 + threadIdx.x]);
            const float z = bloat<0>(a, y[0]);
            if (threadIdx.x < 32) a.act[1][b * 32 + threadIdx.x] = __float2bfloat16(y[threadIdx.x] * s + z);
            signal_rec(E + ev, a, ev, 0);
        }
        const char *Wo = W + 128 * QKV_TILE, *Wgu = Wo + 128 * O_TILE, *Wd = Wgu + 128 * GU_TILE;
        if (a.fused && b < 128) { /* task (head b / 16, rows 64 (b % 16) ..): its head's attention, then o_proj's
                                   * 64 rows over the head's 256 columns, an fp32 partial per head */
            const int hk = b / 16, c = b % 16;
            float *att = xs + 512;
            issue_copies(tile, Wo + (size_t)b * O_TILE, O_TILE);
            issue_copies(kvs, a.kv + ((size_t)l * HEADS_KV + hk) * KV_BYTES, KV_BYTES);
            wait_event(E + ev, 128);
            load_x(a.act[1] + hk * 512, 512, xs);
            wait_copies<0>();
            spin_ns(a.att_ns);
            if (threadIdx.x < 256) att[threadIdx.x] = xs[threadIdx.x] + (float)kvs[threadIdx.x];
            __syncthreads();
            gemv(tile, 64, 256, att, y);
            if (threadIdx.x < 64) a.part_o[hk * H + c * 64 + threadIdx.x] = y[threadIdx.x];
            signal_rec(E + 2 * NEV + ev, a, ev, 2);
        }
        if (!a.fused && b >= 124) { /* the attention of KV head b - 124: its KV rows, q|k|v, then ATT_NS */
            const int hk = b - 124;
            issue_copies(kvs, a.kv + ((size_t)l * HEADS_KV + hk) * KV_BYTES, KV_BYTES);
            wait_event(E + ev, 128);
            load_x(a.act[1] + hk * 512, 512, xs);
            wait_copies<0>();
            spin_ns(a.att_ns);
            if (threadIdx.x < 256) a.act[2][hk * 256 + threadIdx.x] = __float2bfloat16(xs[threadIdx.x] + kvs[threadIdx.x]);
            signal_rec(E + NEV + ev, a, ev, 1);
        }
        if (!a.fused && b < 128) { /* o_proj: resid + W [8 rows of 2048] . att */
            gemv_task<QO, 1, false>(a, 1, tile, Wo + (size_t)b * O_TILE, O_TILE, E + NEV + ev, HEADS_KV, a.act[2], xs, y,
                                    red);
            const float z = bloat<1>(a, y[0]);
            if (threadIdx.x < 8) a.act[3][b * 8 + threadIdx.x] = __float2bfloat16(y[threadIdx.x] + z);
            /* mlp: the layer before's down sums are read (every qkv task of this layer signalled before
             * the attention): zero this task's 8 for their next use, a step later */
            if (a.mlp && threadIdx.x < 8) acc_prev[b * 8 + threadIdx.x] = 0;
            signal_rec(E + 2 * NEV + ev, a, ev, 2);
        }
        if (a.mlp && b < 128) {
            /* gate_up and down as one task: rmsnorm(h) . Wgu [48 rows], its 24 features silu(g) · u, then
             * down's 1024 rows over those 24 columns (a [1024][24] tile copied before the wait, 48 KB)
             * added into acc [l] as fixed point with integer atomics: any order gives the same bits */
            char *dt = sm + 96 * 1024;
            float *mlp = red + 16; /* past y [48] and red [8] */
            issue_copies(dt, Wd + (size_t)b * D_TILE, D_TILE);
            const float s = gemv_task<H, 6, true>(a, 2, tile, Wgu + (size_t)b * GU_TILE, GU_TILE, E + 2 * NEV + ev, 128,
                                                  a.act[3], xs, y, red);
            if (threadIdx.x < 24) mlp[threadIdx.x] = silu(y[threadIdx.x] * s) * y[24 + threadIdx.x] * s;
            __syncthreads();
            long long *acc = a.acc + (size_t)l * H;
            mlp_down<24>(dt, mlp, acc);
            signal_rec(E + 3 * NEV + ev, a, ev, 3);
        }
        if (!a.mlp && b < 128) {
            /* gate_up: rmsnorm(h) . W [48 rows], silu(g) · u; fused: h = residual + the 8 heads' partials,
             * this task's 8 elements of it stored for down */
            const float s = gemv_task<H, 6, true>(a, 2, tile, Wgu + (size_t)b * GU_TILE, GU_TILE, E + 2 * NEV + ev, 128,
                                                  a.fused ? a.act[0] : a.act[3], xs, y, red, a.fused ? a.part_o : nullptr);
            if (a.fused && threadIdx.x < 8) a.act[3][b * 8 + threadIdx.x] = __float2bfloat16(xs[b * 8 + threadIdx.x]);
            const float z2 = bloat<2>(a, y[0]);
            if (threadIdx.x < 24)
                a.act[4][b * 24 + threadIdx.x] = __float2bfloat16(silu(y[threadIdx.x] * s) * y[24 + threadIdx.x] * s + z2);
            signal_rec(E + 3 * NEV + ev, a, ev, 3);
            /* down: h + W [8 rows of 3072] . mlp */
            gemv_task<FF, 1, false>(a, 3, tile, Wd + (size_t)b * D_TILE, D_TILE, E + 3 * NEV + ev, 128, a.act[4], xs, y,
                                    red);
            const float z3 = bloat<3>(a, y[0]);
            if (threadIdx.x < 8) a.act[0][b * 8 + threadIdx.x] = __float2bfloat16(y[threadIdx.x] + z3);
            signal_rec(E + 4 * NEV + ev, a, ev, 4);
        }
    }
    if (b == 0 && threadIdx.x == 0) a.t[1] = now_ns();
}

/* The cluster schedule's residual: r += the nparts fp32 partials part [nparts][H] (through L2), xs =
 * r; a barrier. Every CTA adds them in the same order, so every copy of r has the same bits. */
__device__ void add_partials(float *r, float *xs, const float *part, int nparts) {
    for (int k = threadIdx.x; k < H; k += THREADS) {
        float v = r[k];
        for (int j = 0; j < nparts; j++) v += __ldcg(part + j * H + k);
        r[k] = v;
        xs[k] = v;
    }
    __syncthreads();
}

/* ---- the cluster schedule: two grid-wide hand-offs, three cluster barriers per layer ---------- */
/* CS CTAs per cluster, NCL = 128 / CS clusters: CS 16, a cluster per KV head (both its q heads);
 * CS 8, two per KV head, each with one q head and the head's k and v rows (computed twice: 12 MB of
 * q|k|v weights per layer instead of 8). */
template <int CS>
__global__ void __launch_bounds__(THREADS, 1) cluster_kernel(args_t a) {
    enum { NCL = NCTA / CS, PAIR = NCL / HEADS_KV, QH = 2 / PAIR, QKV_ROWS = QH * HD + 2 * HD,
           ROWS_QKV = QKV_ROWS / CS, ROWS_OUT = H / CS, FEAT = FF / NCL };
    static_assert(ROWS_QKV * H * 2 <= 96 * 1024 && ROWS_OUT * QH * HD * 2 == O_TILE && FEAT / CS == 24 &&
                      ROWS_OUT * FEAT * 2 == D_TILE, "the tiles are pk's sizes");
    extern __shared__ __align__(128) char sm[];
    /* A: the qkv tile, then gate_up's; B: o_proj's; C: the KV stage (rank 0), down's */
    char *tA = sm, *tB = sm + 96 * 1024, *tC = sm + 128 * 1024;
    float *r = (float *)(sm + 208 * 1024), *xs = r + H, *qkv = xs + H, *att = qkv + 512, *mlp = att + 256,
          *y = mlp + 384, *red = y + 128; /* 4 + 4 + 2 + 1 + 1.5 + 0.5 KB */
    cg::cluster_group cl = cg::this_cluster();
    const int rank = (int)cl.block_rank(), c = blockIdx.x / CS, hk = c / PAIR;
    unsigned long long *Eo = a.ev + 5 * NEV, *Ed = a.ev + 6 * NEV;
    float *qkv0 = cl.map_shared_rank(qkv, 0), *att0 = cl.map_shared_rank(att, 0);
    for (int k = threadIdx.x; k < H; k += THREADS) r[k] = 1.0f + (float)(k % 7) / 8.0f;
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) a.t[0] = now_ns();
    for (int ev = 0; ev < NEV; ev++) {
        const int l = ev % LAYERS;
        const char *W = a.w + (size_t)l * LAYER_BYTES * 3 / 2; /* room for CS 8's 12 MB of q|k|v */
        const char *Wo = W + 128 * 96 * 1024, *Wgu = Wo + 128 * O_TILE, *Wd = Wgu + 128 * GU_TILE;
        const int t = blockIdx.x; /* this CTA's tile of each kind */
        issue_copies(tA, W + (size_t)t * ROWS_QKV * H * 2, ROWS_QKV * H * 2);
        issue_copies(tB, Wo + (size_t)t * O_TILE, O_TILE);
        if (rank == 0) issue_copies(tC, a.kv + ((size_t)l * HEADS_KV + hk) * KV_BYTES, KV_BYTES);
        /* 1. x = r + the down partials (grid-wide hand-off 1) */
        if (ev > 0) wait_event(Ed + ev - 1, NCTA);
        add_partials(r, xs, a.part_d, ev > 0 ? NCL : 0);
        float s = rms_scale(xs, H, red);
        /* 2. this CTA's q|k|v rows into rank 0 */
        if (rank == 0)
            wait_copies<2>(); /* the qkv tile (o_proj's and the KV stage may still land) */
        else
            wait_copies<1>();
        gemv(tA, ROWS_QKV, H, xs, y);
        if (threadIdx.x < ROWS_QKV) qkv0[rank * ROWS_QKV + threadIdx.x] = y[threadIdx.x] * s;
        __syncthreads(); /* tA is read */
        issue_copies(tA, Wgu + (size_t)t * GU_TILE, GU_TILE);
        if (rank != 0) issue_copies(tC, Wd + (size_t)t * D_TILE, D_TILE);
        cl.sync();
        /* 3. the attention on rank 0 */
        if (rank == 0) {
            wait_copies<1>(); /* the KV stage (the newest group, gate_up's tile, may still land) */
            spin_ns(a.att_ns);
            if (threadIdx.x < QH * HD) att[threadIdx.x] = qkv[threadIdx.x] + qkv[QH * HD + threadIdx.x % HD] + tC[threadIdx.x];
            __syncthreads();
            issue_copies(tC, Wd + (size_t)t * D_TILE, D_TILE);
        }
        cl.sync();
        for (int k = threadIdx.x; k < QH * HD; k += THREADS) xs[k] = att0[k];
        /* 4. o_proj: ROWS_OUT rows over the cluster's q columns, the partial (grid-wide hand-off 2) */
        wait_copies<2>(); /* the o_proj tile (gate_up's and down's may still land) */
        gemv(tB, ROWS_OUT, QH * HD, xs, y);
        if (threadIdx.x < ROWS_OUT) a.part_o[c * H + rank * ROWS_OUT + threadIdx.x] = y[threadIdx.x];
        signal(Eo + ev);
        wait_event(Eo + ev, NCTA);
        add_partials(r, xs, a.part_o, NCL);
        s = rms_scale(xs, H, red);
        /* 5. gate_up: 24 features of the cluster's FEAT */
        wait_copies<1>();
        gemv(tA, 48, H, xs, y);
        if (threadIdx.x < 24) mlp[rank * 24 + threadIdx.x] = silu(y[threadIdx.x] * s) * y[24 + threadIdx.x] * s;
        cl.sync();
        for (int k = threadIdx.x; k < FEAT; k += THREADS) xs[k] = cl.map_shared_rank(mlp, k / 24)[k];
        /* 6. down: ROWS_OUT rows over the cluster's FEAT columns, the partial */
        wait_copies<0>();
        gemv(tC, ROWS_OUT, FEAT, xs, y);
        if (threadIdx.x < ROWS_OUT) a.part_d[c * H + rank * ROWS_OUT + threadIdx.x] = y[threadIdx.x];
        signal(Ed + ev);
        cl.sync(); /* the peers have read this CTA's mlp before the next layer writes it */
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) a.t[1] = now_ns();
}

/* ---- hc: head clusters on the 120 CTAs the H200 holds in clusters of 8 ------------------------- */
/* 15 clusters of HC_CS = 8 CTAs (all that fit at once with 227 KB each). Clusters 0-7 are the KV
 * heads' (64 CTAs), 8-14 (56) run only the MLP. Per layer, two grid-wide hand-offs and two cluster
 * barriers:
 *   head CTA (cluster c = head, rank i): x = r + down's sums of the layer before (hand-off 1), the rms
 *     scale; 64 of the head's 512 q|k|v rows (a 128 KB tile) stored into every rank's shared memory;
 *     barrier; its eighth of the head's positions (a 10 KB KV slice, then a spin of hc_att_ns) and
 *     the partial [258] (m, l, acc) into every rank; barrier; the 8 partials combined in rank order
 *     (every rank the same bits); o_proj's 128 rows of rank i over the head's 256 columns (64 KB)
 *     added into acc_o as fixed point; the signal (hand-off 2, 64 producers);
 *   every CTA: h = r + acc_o, the rms scale, gate_up over its F features (24, or 32 on 24 of the MLP
 *     CTAs: 384 chunks of 8 over 120), silu . mul, down's 1024 rows over them into acc_d; the signal
 *     (120 producers).
 * Tiles: head CTAs read 128 + 64 + 144 KB per layer, MLP CTAs 144 or 192: the layer's 31.5 MB.
 * Shared memory: A [0, 128 K) qkv, then gate_up; B [128 K, 192 K) o_proj, then down; C the KV
 * slice and the vectors. Each CTA's tiles of the next layer go out as soon as their region is
 * read (qkv after gate_up's GEMV, o_proj and the KV slice after down's). */
enum { HC_CS = 8, HC_NCL = 15, HC_NCTA = HC_CS * HC_NCL, HC_HEADS = HEADS_KV * HC_CS, HC_PART = 258,
       HC_QKV_TILE = 64 * H * 2, HC_O_TILE = 128 * 256 * 2, HC_KV = KV_BYTES / HC_CS };
static_assert(HC_HEADS * HC_QKV_TILE == QKV * H * 2 && HC_HEADS * HC_O_TILE == H * QO * 2, "hc's tiles cover qkv and o_proj");

/* CTA b's features of the MLP: [f0, f0 + F) (head CTAs 24 each, MLP CTA j 32 for j < 24, else 24) */
__device__ void hc_features(int b, int *f0, int *F) {
    if (b < HC_HEADS) {
        *f0 = 24 * b;
        *F = 24;
        return;
    }
    const int j = b - HC_HEADS;
    *f0 = 24 * HC_HEADS + 32 * min(j, 24) + 24 * max(j - 24, 0);
    *F = j < 24 ? 32 : 24;
}
/* r += the fixed-point sums acc [H] (through L2), xs = r; a barrier */
__device__ void hc_add_acc(float *r, float *xs, const long long *acc) {
    for (int k = threadIdx.x; k < H; k += THREADS) {
        const float v = r[k] + (float)__ldcg(acc + k) / FIX_ONE;
        r[k] = v;
        xs[k] = v;
    }
    __syncthreads();
}
/* thread 0: phase k of this CTA at layer REC_EV (and k 5: its last phase at REC_EV - 1) */
__device__ void hc_rec(const args_t &a, int ev, int k) {
    if (threadIdx.x != 0) return;
    if (ev == REC_EV) a.rec[k * GCTA + blockIdx.x] = now_ns();
    if (ev == REC_EV - 1 && k == 3) a.rec[5 * GCTA + blockIdx.x] = now_ns();
}

__global__ void __launch_bounds__(THREADS, 1) hc_kernel(args_t a) {
    extern __shared__ __align__(128) char sm[];
    char *tA = sm, *tB = sm + 128 * 1024, *kvs = sm + 192 * 1024;
    float *r = (float *)(sm + 202 * 1024), *xs = r + H, *qkv = xs + H, *part = qkv + 512, *y = part + HC_CS * HC_PART,
          *mlp = y + 128, *red = mlp + 32; /* 4 + 4 + 2 + 8.1 + 0.5 + 0.1 KB */
    cg::cluster_group cl = cg::this_cluster();
    const int b = blockIdx.x, rank = (int)cl.block_rank(), hk = b / HC_CS, head = b < HC_HEADS;
    int f0, F;
    hc_features(b, &f0, &F);
    /* this CTA's tiles of layer l: head CTAs qkv's (A), o_proj's (B) and the KV slice; all, gate_up's
     * (A) and down's (B) */
    auto weights = [&](int l) { return a.w + (size_t)l * LAYER_BYTES * 3 / 2; };
    auto copy_qkv = [&](int l) { issue_copies(tA, weights(l) + (size_t)b * HC_QKV_TILE, HC_QKV_TILE); };
    auto copy_o_kv = [&](int l) {
        issue_copies(tB, weights(l) + QKV * H * 2 + (size_t)b * HC_O_TILE, HC_O_TILE);
        issue_copies(kvs, a.kv + ((size_t)l * HEADS_KV + hk) * KV_BYTES + rank * HC_KV, HC_KV);
    };
    auto copy_gate_up = [&](int l) {
        issue_copies(tA, weights(l) + QKV * H * 2 + H * QO * 2 + (size_t)f0 * 2 * H * 2, 2 * F * H * 2);
    };
    auto copy_down = [&](int l) {
        issue_copies(tB, weights(l) + QKV * H * 2 + H * QO * 2 + 2 * FF * H * 2 + (size_t)f0 * H * 2, F * H * 2);
    };
    unsigned long long *Eo = a.ev + 5 * NEV, *Ed = a.ev + 6 * NEV;
    for (int k = threadIdx.x; k < H; k += THREADS) r[k] = 1.0f + (float)(k % 7) / 8.0f;
    __syncthreads();
    cl.sync(); /* every CTA of the cluster has started before any writes its shared memory */
    if (b == 0 && threadIdx.x == 0) a.t[0] = now_ns();
    /* the first layer's tiles; later layers' go out inside the layer before */
    if (head) {
        copy_qkv(0);
        copy_o_kv(0);
    } else {
        copy_gate_up(0);
        copy_down(0);
    }
    for (int ev = 0; ev < NEV; ev++) {
        const int l = ev % LAYERS, ln = (ev + 1) % LAYERS;
        long long *acc_o = a.acc_o + (size_t)ev * H, *acc_d = a.acc_d + (size_t)ev * H;
        if (head) {
            /* 1. x = r + down's sums of the layer before (hand-off 1, 120 producers) */
            if (ev > 0) {
                wait_event(Ed + ev - 1, HC_NCTA);
                hc_add_acc(r, xs, acc_d - H);
            } else {
                for (int k = threadIdx.x; k < H; k += THREADS) xs[k] = r[k];
                __syncthreads();
            }
            const float s = rms_scale(xs, H, red);
            /* 2. this CTA's 64 q|k|v rows into every rank; gate_up's tile into A once read */
            wait_copies<2>(); /* qkv's tile (o_proj's and the KV slice may still land) */
            gemv(tA, 64, H, xs, y);
            copy_gate_up(l);
            for (int e = threadIdx.x; e < HC_CS * 64; e += THREADS)
                cl.map_shared_rank(qkv, e / 64)[rank * 64 + e % 64] = y[e % 64] * s;
            cl.sync();
            hc_rec(a, ev, 0);
            /* 3. this rank's eighth of the positions; its partial into every rank */
            wait_copies<1>(); /* the KV slice and o_proj's tile (gate_up's may still land) */
            spin_ns(a.hc_att_ns);
            for (int e = threadIdx.x; e < HC_CS * HC_PART; e += THREADS) {
                const int dst = e / HC_PART, i = e % HC_PART;
                cl.map_shared_rank(part, dst)[rank * HC_PART + i] = qkv[i % 512] + (float)kvs[i];
            }
            cl.sync();
            hc_rec(a, ev, 1);
            for (int i = threadIdx.x; i < 256; i += THREADS) {
                float v = 0.0f;
                for (int j = 0; j < HC_CS; j++) v += part[j * HC_PART + 2 + i] * part[j * HC_PART];
                xs[i] = v;
            }
            __syncthreads();
            /* 4. o_proj: 128 rows over the head's 256 columns, into acc_o (hand-off 2) */
            gemv(tB, 128, 256, xs, y);
            copy_down(l);
            if (threadIdx.x < 128)
                atomicAdd((unsigned long long *)(acc_o + rank * 128 + threadIdx.x),
                          (unsigned long long)__float2ll_rn(y[threadIdx.x] * FIX_ONE));
            signal(Eo + ev);
            hc_rec(a, ev, 2);
        }
        /* 5. the MLP: h = r + acc_o (MLP CTAs add down's sums of the layer before too) */
        wait_event(Eo + ev, HC_HEADS);
        if (!head && ev > 0) hc_add_acc(r, xs, acc_d - H);
        hc_add_acc(r, xs, acc_o);
        const float s = rms_scale(xs, H, red);
        wait_copies<1>(); /* gate_up's tile (down's may still land) */
        gemv(tA, 2 * F, H, xs, y);
        if (threadIdx.x < F) mlp[threadIdx.x] = silu(y[threadIdx.x] * s) * y[F + threadIdx.x] * s;
        __syncthreads();
        if (head) /* A is read: the next layer's qkv tile */
            copy_qkv(ln);
        else
            copy_gate_up(ln);
        wait_copies<1>(); /* down's tile */
        if (F == 32)
            mlp_down<32>(tB, mlp, acc_d);
        else
            mlp_down<24>(tB, mlp, acc_d);
        signal(Ed + ev);
        hc_rec(a, ev, 3);
        if (head) /* B and the KV slice are read: the next layer's o_proj tile and slice */
            copy_o_kv(ln);
        else
            copy_down(ln);
    }
    if (b == 0 && threadIdx.x == 0) a.t[1] = now_ns();
    wait_copies<0>(); /* the next step's first tiles, never read: landed before the CTA exits */
}

/* end[k] = the last of the ncta CTAs' records of kind / phase k (a.rec [6][GCTA], 0 where none) */
static void rec_ends(const args_t &a, int ncta, unsigned long long end[6]) {
    unsigned long long h[6 * GCTA];
    CHECK(cudaMemcpy(h, a.rec, sizeof h, cudaMemcpyDeviceToHost));
    for (int k = 0; k < 6; k++) {
        end[k] = 0;
        for (int b = 0; b < ncta; b++)
            if (h[k * GCTA + b] > end[k]) end[k] = h[k * GCTA + b];
    }
}

/* One schedule's launches: the median us per layer. */
static void run_sched(const char *name, args_t &a, int launches, const cudaLaunchConfig_t *cfg, void (*kernel)(args_t)) {
    double *per = (double *)malloc(sizeof(double) * launches);
    int n = 0;
    for (int l = 0; l < launches + 2; l++) {
        CHECK(cudaMemset(a.ev, 0, 8 * 7 * NEV));
        CHECK(cudaMemset(a.prof, 0, 8 * 24));
        CHECK(cudaMemset(a.part_o, 0, 16 * H * 4));
        CHECK(cudaMemset(a.acc, 0, (size_t)LAYERS * H * 8));
        CHECK(cudaMemset(a.part_d, 0, 16 * H * 4));
        CHECK(cudaMemset(a.rec, 0, 8 * 6 * GCTA));
        CHECK(cudaMemset(a.acc_o, 0, (size_t)NEV * H * 8));
        CHECK(cudaMemset(a.acc_d, 0, (size_t)NEV * H * 8));
        CHECK(cudaLaunchKernelEx(cfg, kernel, a));
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        unsigned long long ht[2];
        CHECK(cudaMemcpy(ht, a.t, 16, cudaMemcpyDeviceToHost));
        if (l >= 2) per[n++] = (double)(ht[1] - ht[0]) / 1e3 / NEV;
    }
    qsort(per, n, sizeof(double), cmp_double);
    if (kernel == global_kernel) {
        unsigned long long pr[24];
        CHECK(cudaMemcpy(pr, a.prof, sizeof pr, cudaMemcpyDeviceToHost));
        const char *kn[4] = {"qkv", "o_proj", "gate_up", "down"};
        for (int k = 0; k < 4; k++) {
            const double n = (double)pr[6 * k];
            if (n == 0) continue; /* fused: no o_proj task of its own */
            printf("%s: %-7s tasks' mean us: wait %.2f x load %.2f rms scale %.2f copies %.2f gemv %.2f\n", name, kn[k],
                   pr[6 * k + 1] / n / 1e3, pr[6 * k + 2] / n / 1e3, pr[6 * k + 3] / n / 1e3, pr[6 * k + 4] / n / 1e3,
                   pr[6 * k + 5] / n / 1e3);
        }
    }
    if (kernel == global_kernel) { /* the last launch's layer REC_EV: each kind's end after the kind before's */
        unsigned long long end[6];
        rec_ends(a, GCTA, end);
        if (a.fused) end[1] = end[0]; /* no attention layer of its own: o_proj's end+ is the fused layer's */
        if (a.mlp) end[4] = end[3];   /* no down layer of its own: gate_up's end+ is the mlp layer's */
        printf("%s: end+ (us, layer %d of the last launch): qkv %.2f attention %.2f o_proj %.2f gate_up %.2f down %.2f\n",
               name, REC_EV, (end[0] - end[5]) / 1e3, (end[1] - end[0]) / 1e3, (end[2] - end[1]) / 1e3, (end[3] - end[2]) / 1e3, (end[4] - end[3]) / 1e3);
    }
    if (kernel == hc_kernel) { /* the last launch's layer REC_EV: each phase's last CTA after the phase before's */
        unsigned long long end[6];
        rec_ends(a, HC_NCTA, end);
        printf("%s: end+ (us, layer %d of the last launch): qkv gathered %.2f attention partials %.2f o_proj signalled %.2f mlp "
               "signalled %.2f (each rank's attention %lld ns)\n",
               name, REC_EV, (end[0] - end[5]) / 1e3, (end[1] - end[0]) / 1e3, (end[2] - end[1]) / 1e3, (end[3] - end[2]) / 1e3,
               a.hc_att_ns);
    }
    printf("%-10s att %lld ns gemv %s bloat %d | us per layer: p50 %.2f min %.2f max %.2f (pk's bytes %.1f MB per layer: %.2f us at 4.66 TB/s)\n",
           name, kernel == hc_kernel ? a.hc_att_ns : a.att_ns, a.fast && kernel != hc_kernel ? "fast" : "plain", a.bloat, per[n / 2], per[0], per[n - 1], LAYER_BYTES / 1e6, LAYER_BYTES / 4.66e6);
    free(per);
}

int main(int argc, char **argv) {
    args_t a;
    memset(&a, 0, sizeof a);
    a.att_ns = argc > 1 ? atoll(argv[1]) : 2500;
    const int launches = argc > 2 ? atoi(argv[2]) : 10;
    a.fast = argc > 3 ? atoi(argv[3]) : 0;
    a.bloat = argc > 4 ? atoi(argv[4]) : 0;
    a.hc_att_ns = argc > 5 ? atoll(argv[5]) : 1500;
    char *w, *kv;
    CHECK(cudaMalloc(&w, (size_t)LAYERS * LAYER_BYTES * 3 / 2));
    CHECK(cudaMemset(w, 0x3c, (size_t)LAYERS * LAYER_BYTES * 3 / 2));
    CHECK(cudaMalloc(&kv, (size_t)LAYERS * HEADS_KV * KV_BYTES));
    CHECK(cudaMemset(kv, 0x3c, (size_t)LAYERS * HEADS_KV * KV_BYTES));
    a.w = w;
    a.kv = kv;
    CHECK(cudaMalloc(&a.ev, 8 * 7 * NEV));
    const int sizes[5] = {H, QKV, QO, H, FF};
    for (int i = 0; i < 5; i++) {
        CHECK(cudaMalloc(&a.act[i], sizes[i] * 2));
        CHECK(cudaMemset(a.act[i], 0x3c, sizes[i] * 2));
    }
    CHECK(cudaMalloc(&a.acc, (size_t)LAYERS * H * 8));
    CHECK(cudaMalloc(&a.part_o, 16 * H * 4));
    CHECK(cudaMalloc(&a.part_d, 16 * H * 4));
    CHECK(cudaMalloc(&a.acc_o, (size_t)NEV * H * 8));
    CHECK(cudaMalloc(&a.acc_d, (size_t)NEV * H * 8));
    CHECK(cudaMalloc(&a.t, 16));
    CHECK(cudaMalloc(&a.rec, 8 * 6 * GCTA));
    CHECK(cudaMalloc(&a.prof, 8 * 24));
    CHECK(cudaMemset(a.rec, 0, 8 * 6 * GCTA));
    const int smem = 227 * 1024;
    CHECK(cudaFuncSetAttribute(global_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    void (*ck[2])(args_t) = {cluster_kernel<8>, cluster_kernel<16>};
    for (int i = 0; i < 2; i++) {
        CHECK(cudaFuncSetAttribute(ck[i], cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CHECK(cudaFuncSetAttribute(ck[i], cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    }
    CHECK(cudaFuncSetAttribute(hc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(GCTA);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    run_sched("global", a, launches, &cfg, global_kernel);
    a.fused = 1; /* the same schedule with the attention and o_proj as one layer; then global again */
    run_sched("fused", a, launches, &cfg, global_kernel);
    a.fused = 0;
    a.mlp = 1; /* gate_up and down as one layer */
    run_sched("mlp", a, launches, &cfg, global_kernel);
    a.mlp = 0;
    run_sched("global", a, launches, &cfg, global_kernel);
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(NCTA);
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    for (int i = 0; i < 2; i++) {
        const int cs = i ? 16 : 8;
        attr.val.clusterDim.x = cs;
        int nclusters = 0;
        CHECK(cudaOccupancyMaxActiveClusters(&nclusters, ck[i], &cfg));
        printf("clusters of %d CTAs (227 KB each) resident at once: %d (the schedule needs %d)\n", cs, nclusters, NCTA / cs);
        if (nclusters < NCTA / cs) continue;
        char name[32];
        snprintf(name, sizeof name, "cluster%d", cs);
        run_sched(name, a, launches, &cfg, ck[i]);
    }
    /* hc: the 120 CTAs of 15 clusters of 8 that fit; then pk's schedule (mlp, the fused MLP as pk runs
     * it today) again, so that the two are compared in one call */
    attr.val.clusterDim.x = HC_CS;
    cfg.gridDim = dim3(HC_NCTA);
    int nclusters = 0;
    CHECK(cudaOccupancyMaxActiveClusters(&nclusters, hc_kernel, &cfg));
    printf("clusters of %d CTAs (227 KB each) resident at once: %d (hc needs %d)\n", HC_CS, nclusters, HC_NCL);
    if (nclusters >= HC_NCL) {
        char name[32];
        snprintf(name, sizeof name, "hc/%lld", a.hc_att_ns);
        run_sched(name, a, launches, &cfg, hc_kernel);
        const long long att = a.hc_att_ns;
        a.hc_att_ns = a.att_ns; /* each rank's share as long as the global schedule's whole attention */
        snprintf(name, sizeof name, "hc/%lld", a.hc_att_ns);
        run_sched(name, a, launches, &cfg, hc_kernel);
        a.hc_att_ns = att;
    }
    cfg.gridDim = dim3(GCTA);
    cfg.attrs = nullptr;
    cfg.numAttrs = 0;
    a.mlp = 1;
    run_sched("mlp", a, launches, &cfg, global_kernel);
    a.mlp = 0;
    return 0;
}
