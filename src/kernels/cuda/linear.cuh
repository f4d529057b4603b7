/* linear.cuh — PK_TASK_LINEAR, LINEAR_RESIDUAL, RMSNORM_LINEAR, SILU_MUL_LINEAR_RESIDUAL on the
 * device: out[t, j] = bf16(acc) or bf16(bf16(acc) + residual), acc = Σ_k xn[t, k] · W[n0 + j, k]
 * in fp32, xn = x, bf16(rmsnorm(x) · norm_w) or bf16(bf16(silu(gate)) · up) (cpu_kernels.h).
 *
 * Rows are taken in blocks of up to 8 (NT = 1, 2, 4 or 8 rows, a template: the accumulators live
 * in registers). Per block:
 *  1. rmsnorm_linear only: the block's row scales (pk_dev_rms_scales: CTA-wide, 2 barriers);
 *  2. staging: xn of the block's rows is built once, by all threads, into shared memory as bf16
 *     (exactly the CPU's bf16 values), rows padded with zeros to a multiple of 8 columns;
 *     barrier. When NT · K does not fit, K is cut into chunks and each chunk is staged again for
 *     every column round (barrier before and after each staging);
 *  3. columns: a column group is CW consecutive weight rows. The 8 warps split into G groups of
 *     S warps (G = the largest power of two <= min(8, column groups); S = 8 / G): in round i,
 *     group g takes column group g + i·G; its S·32 lanes ("virtual lanes" vl) take 8-element
 *     chunks vl, vl + 32·S, ... of K (split-K across warps when a tile has few columns). Per chunk
 *     a lane loads one 16-byte vector of each of its CW weight rows (U chunks ahead: U·CW = 16
 *     or 8 loads in flight, predicated off past the end), reads the NT xn vectors from shared
 *     memory (consecutive lanes, consecutive 16 bytes: no bank conflict) and does NT·CW·8 FMAs.
 *     A weight row whose start is not 16-byte aligned (odd K stride, fused offsets) is read with
 *     4- or 2-byte loads; the last partial chunk (K % 8) with 2-byte loads, zeros beyond K;
 *  4. each accumulator is summed over the warp by a fixed butterfly; with S > 1 lane c·NT + r of
 *     each warp writes its sum to part_s[round & 1][warp] (double-buffered), barrier, and the
 *     group's first warp adds the S partials in warp order; lane c·NT + r writes out[r, col c].
 * Every order is fixed by the shapes alone, so the result is the same bits on every run; it
 * differs from the CPU's sequential k sum by rounding only (bf16 tolerance).
 * Shared memory: [0, PK_LIN_HDR) scale_s [8] f32, red_s [8][WARPS] f32, part_s [2][WARPS][32] f32;
 * then xs [NT][ldx] bf16.
 * Reads: x and residual through L2 (activations), weights and norm_w through the read-only path.
 * A one-token step takes the paged GEMV below instead (pk_lin_paged_ok): the weight ring's order.
 */
#ifndef PK_CUDA_LINEAR_CUH
#define PK_CUDA_LINEAR_CUH

#include "kernels/cuda/rmsnorm.cuh"
#include "kernels/cuda/rows.cuh"
#include "kernels/cuda/silu_mul.cuh"
#include "kernels/cuda/weight_ring.cuh"

#define PK_LIN_MAXROWS 8
#define PK_LIN_HDR 2560 /* bytes: scale_s 32 + red_s 8·WARPS·4 + part_s 2·WARPS·32·4, 16-aligned */
static_assert(4 * (PK_LIN_MAXROWS + PK_LIN_MAXROWS * PK_DEV_WARPS + 2 * PK_DEV_WARPS * 32) <=
                  PK_LIN_HDR,
              "linear's shared-memory header");
static_assert(PK_CUDA_SMEM_BYTES >= PK_LIN_HDR + 16 * PK_LIN_MAXROWS,
              "linear needs room for one chunk of 8 rows");

enum { PK_LIN_PLAIN = 0, PK_LIN_RMSNORM = 1, PK_LIN_SILU_MUL = 2 };

/* Decode rows of any K take 4 columns per warp group (4 loads ahead), not only K <= 1024: half the
 * column rounds, so half the drains of the loads in flight at a round's end. Measured on the H200
 * (docs/PERF.md, session 4): harness gate_up 3529 -> 3687 GB/s, down 3150 -> 3284, lm_head 4084
 * -> 4268, qkv 2606 -> 2522; Qwen3-8B 6.381 -> 6.276 ms/token, 0.6B unchanged (its K is 1024
 * but o_proj / down). 0: K > 1024 takes 2 columns, 8 loads ahead (PK_NVCC_DEFINES, to compare). */
#define PK_LIN_WIDE 1

typedef struct pk_lin_args {
    const pk_bf16 *x; /* [n_tok, K] ([n_tok, 2K] gate then up for silu_mul), row stride x_stride */
    int64_t x_stride;
    int n_tok, K;
    const pk_bf16 *norm_w; /* [K], rmsnorm only */
    float eps;
    const pk_rows *w; /* rows n0 .. n0 + ncols - 1, each [K] */
    int n0, ncols;
    const pk_bf16 *residual; /* [n_tok, ncols] or NULL */
    int64_t res_stride;
    pk_bf16 *out; /* [n_tok, ncols] */
    int64_t out_stride;
    const pk_bf16 *wst; /* rows n0 .. n0 + wst_rows - 1 staged in shared memory (the runtime's
                         * copy, made before the task's dependency was met), row stride as w's;
                         * wst_rows < 0: wst is the weight ring's state (weight_ring.cuh) */
    int wst_rows;
    /* RMSNORM with a fused MLP's accumulator (RMSNORM_LINEAR's PK_V_NL_ACC; K % 8 == 0): x is
     * x + acc (pk_dev_acc_x8), and the task stores its columns [sum0, sum1) of it into sum */
    const int64_t *acc; /* [n_tok, K], row stride acc_stride, or NULL */
    int64_t acc_stride;
    pk_bf16 *sum; /* [n_tok, K], row stride sum_stride */
    int64_t sum_stride;
    int sum0, sum1;
} pk_lin_args;

/* The 8 elements of x at row t, columns [k, k + 8) (16-byte load where aligned), plus acc when the
 * layer has one: then the task's columns of the sum are stored as well (a row is staged by one
 * thread per chunk; a chunk staged twice stores the same values). */
__device__ __forceinline__ uint4 pk_lin_x8(const pk_lin_args &a, int t, int k) {
    const uint4 xv = pk_dev_load8_any<true>(a.x + t * a.x_stride + k);
    if (!a.acc) return xv;
    const uint4 s = pk_dev_acc_x8(xv, a.acc + t * a.acc_stride + k);
    if (k + 8 > a.sum0 && k < a.sum1) {
        const pk_bf16 *e = (const pk_bf16 *)&s;
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (k + i >= a.sum0 && k + i < a.sum1) a.sum[t * a.sum_stride + k + i] = e[i];
    }
    return s;
}

/* Stages xn[t0 + r, k0 + c] for r < nt, c < kc into xs[r · ldx + c] (bf16); zeros for c in
 * [kc, ldx) and for rows nt .. nrows - 1. ldx is a multiple of 8. Whole CTA; no barrier.
 * A thread takes its chunks PK_LIN_STAGE_BATCH at a time and issues the batch's loads before it
 * converts and stores any of them, so that the loads of a later chunk need not wait behind the
 * shared-memory store of an earlier one (a down_proj task's 12 KB of gate / up, K 3072, are 1.5
 * chunks per thread). 1 (one chunk at a time, as before) is the default: 2 measured slower on the
 * H200 (session 10, same call: Qwen3-0.6B 1.1488 -> 1.1814 ms/token, 8B 5.0279 -> 5.1001). */
#define PK_LIN_STAGE_BATCH 1 /* 2: two chunks' loads at once (PK_NVCC_DEFINES, to compare) */
template <int XN>
__device__ inline void pk_lin_stage(const pk_lin_args &a, int t0, int nt, int nrows, int k0, int kc,
                                    int ldx, const float *scale_s, pk_bf16 *xs) {
    const int nch = ldx / 8, total = nrows * nch;
    for (int e0 = threadIdx.x; e0 < total; e0 += PK_LIN_STAGE_BATCH * PK_CUDA_THREADS) {
        uint4 fv[PK_LIN_STAGE_BATCH], gv[PK_LIN_STAGE_BATCH]; /* whole chunks' raw loads */
#pragma unroll
        for (int b = 0; b < PK_LIN_STAGE_BATCH; b++) {
            const int e = e0 + b * PK_CUDA_THREADS, r = e / nch, c = 8 * (e - r * nch), k = k0 + c;
            fv[b] = gv[b] = make_uint4(0, 0, 0, 0);
            if (e < total && r < nt && kc - c >= 8) {
                const pk_bf16 *xr = a.x + (t0 + r) * a.x_stride; /* [K] or [2K] */
                fv[b] = XN == PK_LIN_RMSNORM ? pk_lin_x8(a, t0 + r, k) : pk_dev_load8_any<true>(xr + k);
                if (XN == PK_LIN_RMSNORM) gv[b] = pk_dev_load8_norm(a.norm_w + k);
                if (XN == PK_LIN_SILU_MUL) gv[b] = pk_dev_load8_any<true>(xr + a.K + k);
            }
        }
#pragma unroll
        for (int b = 0; b < PK_LIN_STAGE_BATCH; b++) {
            const int e = e0 + b * PK_CUDA_THREADS;
            if (e >= total) break;
            const int r = e / nch, c = 8 * (e - r * nch), k = k0 + c;
            const int n = kc - c < 8 ? kc - c : 8; /* valid elements of this chunk */
            uint4 v = make_uint4(0, 0, 0, 0);
            if (r < nt && n > 0) {
                const pk_bf16 *xr = a.x + (t0 + r) * a.x_stride;
                if (XN == PK_LIN_PLAIN && n == 8) {
                    v = fv[b];
                } else {
                    float f[8], g[8], h[8];
                    if (n == 8) {
                        pk_dev_unpack8(fv[b], f);
                        if (XN != PK_LIN_PLAIN) pk_dev_unpack8(gv[b], g);
                    } else {
#pragma unroll
                        for (int i = 0; i < 8; i++) {
                            f[i] = g[i] = 0.0f;
                            if (i < n) {
                                f[i] = pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(xr + k + i));
                                if (XN == PK_LIN_RMSNORM)
                                    g[i] = pk_dev_bf16_to_f32(pk_dev_ldw_bf16(a.norm_w + k + i));
                                if (XN == PK_LIN_SILU_MUL)
                                    g[i] = pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(xr + a.K + k + i));
                            }
                        }
                    }
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        if (XN == PK_LIN_PLAIN) h[i] = f[i];
                        if (XN == PK_LIN_RMSNORM) h[i] = pk_dev_rmsnorm1(f[i], scale_s[r], g[i]);
                        if (XN == PK_LIN_SILU_MUL) h[i] = pk_dev_silu_mul1(f[i], g[i]);
                        if (i >= n) h[i] = 0.0f;
                    }
                    v = pk_dev_pack8(h);
                }
            }
            *(uint4 *)(xs + r * ldx + c) = v;
        }
    }
}

/* -DPK_LIN_PROFILE: when x was staged (%globaltimer, thread 0), for pk_lin_rows_staged1's profile. */
#define PK_LIN_STAMP_X() do { } while (0)
/* One row (a decode step): the row scale (RMSNORM) and xs[0 .. K) as pk_dev_rms_scales then
 * pk_lin_stage build them, the same bits, from one read of x: each thread keeps its chunks (and
 * the norm weights', loaded alongside) in registers across the scale's barriers instead of
 * reading x from L2 a second time after them — one dependent L2 round trip less per task.
 * Needs K % 8 == 0 and K <= 8 · THREADS · PK_LIN_RMS_CHUNKS (else the two passes). Ends with a
 * barrier: xs is then visible to every thread. */
/* 16-byte chunks per thread: K <= 8192 at 256 threads with 4. 1 (K <= 2048) where tiles stage
 * whole (codegen's PK_LIN_WST_LDS: the 0.6B, 1.7B): with 4 the staged fast path's one read
 * (PK_LIN_SF_ONE_READ) made the inlined persistent kernel spill (bench/ptxas_report.sh: 184 ->
 * 528 bytes of stack, 120 B of spills; docs/PERF.md session 28), with 1 it does not. */
#ifndef PK_LIN_RMS_CHUNKS
#if defined(PK_LIN_WST_LDS) && PK_LIN_WST_LDS
#define PK_LIN_RMS_CHUNKS 1
#else
#define PK_LIN_RMS_CHUNKS 4
#endif
#endif
#define PK_LIN_ONE_READ 1 /* 0: always the two passes (PK_NVCC_DEFINES, to compare) */
template <int XN>
__device__ inline void pk_lin_stage1(const pk_lin_args &a, float *scale_s, float *red_s, pk_bf16 *xs) {
    const int K = a.K;
    if (!PK_LIN_ONE_READ || XN != PK_LIN_RMSNORM || K % 8 != 0 || K > 8 * PK_CUDA_THREADS * PK_LIN_RMS_CHUNKS) {
        if (XN == PK_LIN_RMSNORM) pk_dev_rms_scales(a.x, a.x_stride, 1, K, a.eps, scale_s, red_s, a.acc, a.acc_stride);
        pk_lin_stage<XN>(a, 0, 1, 1, 0, K, (K + 7) / 8 * 8, scale_s, xs);
        pk_cta_sync();
        PK_LIN_STAMP_X();
        return;
    }
    const int nch = K / 8, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint4 xv[PK_LIN_RMS_CHUNKS], nv[PK_LIN_RMS_CHUNKS];
#pragma unroll
    for (int m = 0; m < PK_LIN_RMS_CHUNKS; m++) {
        const int c = threadIdx.x + m * PK_CUDA_THREADS;
        if (c < nch) {
            xv[m] = pk_lin_x8(a, 0, 8 * c);
            nv[m] = pk_dev_load8_norm(a.norm_w + 8 * c);
        }
    }
    float ss = 0.0f; /* pk_dev_rms_scales's order: chunks in order, elements in order */
#pragma unroll
    for (int m = 0; m < PK_LIN_RMS_CHUNKS; m++)
        if (threadIdx.x + m * PK_CUDA_THREADS < nch) {
            float f[8];
            pk_dev_unpack8(xv[m], f);
#pragma unroll
            for (int i = 0; i < 8; i++) ss = fmaf(f[i], f[i], ss);
        }
    ss = pk_dev_warp_sum(ss);
    if (lane == 0) red_s[warp] = ss;
    pk_cta_sync();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int i = 0; i < PK_DEV_WARPS; i++) t += red_s[i];
        scale_s[0] = 1.0f / sqrtf(t / (float)K + a.eps);
    }
    pk_cta_sync();
    PK_LIN_STAMP_X();
    const float scale = scale_s[0];
#pragma unroll
    for (int m = 0; m < PK_LIN_RMS_CHUNKS; m++) {
        const int c = threadIdx.x + m * PK_CUDA_THREADS;
        if (c < nch) {
            float f[8], g[8], h[8];
            pk_dev_unpack8(xv[m], f);
            pk_dev_unpack8(nv[m], g);
#pragma unroll
            for (int i = 0; i < 8; i++) h[i] = pk_dev_rmsnorm1(f[i], scale, g[i]);
            *(uint4 *)(xs + 8 * c) = pk_dev_pack8(h);
        }
    }
    pk_cta_sync();
}

/* acc[c][r] += Σ_e xc[r · ldx + e] · w[c][e], e < 8: one chunk, elements in order. */
template <int NT, int CW>
__device__ __forceinline__ void pk_lin_fma(const pk_bf16 *xc, int ldx, const uint4 *wv,
                                           float (&acc)[CW][NT]) {
    float wf[CW][8];
#pragma unroll
    for (int c = 0; c < CW; c++) pk_dev_unpack8(wv[c], wf[c]);
#pragma unroll
    for (int r = 0; r < NT; r++) {
        float xf[8];
        pk_dev_unpack8(*(const uint4 *)(xc + r * ldx), xf);
#pragma unroll
        for (int e = 0; e < 8; e++)
#pragma unroll
            for (int c = 0; c < CW; c++) acc[c][r] = fmaf(xf[e], wf[c][e], acc[c][r]);
    }
}

/* 1: a staged tile's rows are read with ld.shared (the generic address converted once per load),
 * 0: through the generic pointer as before. a.wst reaches the GEMV through pk_lin_args, which
 * lives in local memory, so the compiler cannot see that it points into shared memory and emits
 * generic loads (session 16's PTX). Measured: docs/PERF.md "Session 16". */
#ifndef PK_LIN_WST_LDS
#define PK_LIN_WST_LDS 0
#endif
__device__ __forceinline__ uint4 pk_lin_ld_staged(const pk_bf16 *p) {
#if PK_LIN_WST_LDS
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"((uint32_t)__cvta_generic_to_shared(p)));
    return v;
#else
    return *(const uint4 *)p;
#endif
}

/* The chunks vl, vl + nvl, ... of staged columns [k0, k0 + kc) against weight rows wr[c]
 * (each [K], pointing at k = 0). VEC: every wr[c] + k0 is 16-byte aligned. */
template <int NT, int CW, int U, bool VEC, bool SM = false>
__device__ __forceinline__ void pk_lin_accum(const pk_bf16 *xs, int ldx, const pk_bf16 *const *wr,
                                             int k0, int kc, int vl, int nvl,
                                             float (&acc)[CW][NT]) {
    const int nfull = kc / 8;
    for (int c = vl; c < nfull; c += U * nvl) {
        uint4 wv[U][CW]; /* all U·CW loads issued before the first FMA (predicated at the end) */
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int i = 0; i < CW; i++) {
                const pk_bf16 *p = wr[i] + k0 + 8 * (c + u * nvl);
                wv[u][i] = c + u * nvl >= nfull ? make_uint4(0, 0, 0, 0)
                           : SM                 ? pk_lin_ld_staged(p) /* staged rows: shared memory */
                           : VEC                ? pk_dev_ldw16(p)
                                                : pk_dev_load8_any<false>(p);
            }
#pragma unroll
        for (int u = 0; u < U; u++)
            if (c + u * nvl < nfull) pk_lin_fma<NT, CW>(xs + 8 * (c + u * nvl), ldx, wv[u], acc);
    }
    const int tail = kc - 8 * nfull;
    if (tail > 0 && vl == nfull % nvl) { /* this lane owns the partial last chunk, its last */
        uint4 wv[CW];
#pragma unroll
        for (int i = 0; i < CW; i++) {
            const pk_bf16 *p = wr[i] + k0 + 8 * nfull;
            uint32_t u[4];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                pk_bf16 lo = 2 * q < tail ? pk_dev_ldw_bf16(p + 2 * q) : (pk_bf16)0;
                pk_bf16 hi = 2 * q + 1 < tail ? pk_dev_ldw_bf16(p + 2 * q + 1) : (pk_bf16)0;
                u[q] = pk_dev_pack2(lo, hi);
            }
            wv[i] = make_uint4(u[0], u[1], u[2], u[3]);
        }
        pk_lin_fma<NT, CW>(xs + 8 * nfull, ldx, wv, acc);
    }
}

/* Diagnostics (PK_NVCC_DEFINES=-DPK_LIN_PROFILE): thread 0 of every CTA running pk_lin_rows for
 * one token adds its phase times (%globaltimer, ns) to pk_lin_prof[path][XN]: [0] calls, [1] the
 * runtime's dependency seen -> run (copy wait; pk_lin_prof_tw), [2] -> pk_lin_rows entry
 * (dispatch; pk_lin_prof_t0), [3] row scale, [4] x staged, [5] the rounds, [6] the last barrier;
 * the call that makes the count PK_LIN_PROFILE_N prints the means. path: 0 pk_lin_rows from
 * global memory, 1 pk_lin_rows from a staged tile, 2 pk_lin_rows_async (scale and x staged
 * together under "stage": pk_lin_stage1). With -DPK_LIN_TWICE as well, pk_lin_rows runs its rounds
 * twice (the same stores again) and [7] times the first pass: cold code and data against warm. */
#define PK_LIN_STAMP(i) do { } while (0)

/* One block of nt <= NT rows starting at row t0: steps 1-4 of the header. Whole CTA. */
template <int XN, int NT, int CW, int U>
__device__ inline void pk_lin_rows(const pk_lin_args &a, int t0, int nt, char *smem) {
    PK_LIN_STAMP(0);
    static_assert(CW * NT <= 32, "one partial per lane");
    float *scale_s = (float *)smem;                         /* [8] */
    float *red_s = scale_s + PK_LIN_MAXROWS;                /* [8][WARPS] */
    float *part_s = red_s + PK_LIN_MAXROWS * PK_DEV_WARPS;  /* [2][WARPS][32] */
    pk_bf16 *xs = (pk_bf16 *)(smem + PK_LIN_HDR);           /* [NT][ldx] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int K = a.K, Kp = (K + 7) / 8 * 8;
    const int avail = PK_CUDA_SMEM_BYTES - PK_LIN_HDR;
    const bool full = (int64_t)NT * Kp * 2 <= avail;
    const int kcmax = full ? Kp : avail / (NT * 2) / 8 * 8;

    if (XN == PK_LIN_RMSNORM)
        pk_dev_rms_scales(a.x + t0 * a.x_stride, a.x_stride, nt, K, a.eps, scale_s, red_s,
                          a.acc ? a.acc + t0 * a.acc_stride : nullptr, a.acc_stride);
    PK_LIN_STAMP(1);

    const int ngroups = (a.ncols + CW - 1) / CW; /* column groups */
    int G = PK_DEV_WARPS;
    while (G > ngroups) G >>= 1;
    const int S = PK_DEV_WARPS / G, grp = warp / S, sub = warp % S;
    const int vl = sub * 32 + lane, nvl = 32 * S;
    const int rounds = (ngroups + G - 1) / G;
    /* read once: the rounds' output stores may alias *a.w for the compiler, which then reloaded it
     * every round (ncu, session 20: 1.9 % of the 0.6B kernel's stall samples) */
    const int64_t row_stride = (int64_t)a.w->row_stride;

    if (full) {
        pk_lin_stage<XN>(a, t0, nt, NT, 0, K, Kp, scale_s, xs);
        pk_cta_sync();
    }
    PK_LIN_STAMP(2);
    for (int round = 0; round < rounds; round++) {
        const int cg = round * G + grp, j0 = cg * CW;
        const bool active = cg < ngroups;
        const pk_bf16 *wr[CW];
        bool vec = true;
        /* the group reads shared memory when all its rows are staged (whole rows, 16-byte rows) */
        const bool sm = a.wst && j0 + CW <= a.wst_rows;
#pragma unroll
        for (int i = 0; i < CW; i++) {
            int j = j0 + i < a.ncols ? j0 + i : a.ncols - 1; /* a spare column repeats the last */
            wr[i] = !active ? a.w->seg[0]
                    : sm    ? a.wst + (int64_t)j * row_stride
                            : pk_dev_rows_get(a.w, (uint32_t)(a.n0 + j));
            vec = vec && pk_dev_aligned16(wr[i]);
        }
        float acc[CW][NT];
#pragma unroll
        for (int i = 0; i < CW; i++)
#pragma unroll
            for (int r = 0; r < NT; r++) acc[i][r] = 0.0f;
        /* the lane that writes output (j, r) reads its residual now, not after the sums: its L2
         * round trip overlaps the rounds instead of ending the task (as pk_lin_rows_async) */
        const int jw = j0 + lane / NT, rw = lane % NT;
        const bool writes = active && sub == 0 && lane < CW * NT && jw < a.ncols && rw < nt;
        const float res = a.residual && writes
                              ? pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(a.residual + (t0 + rw) * a.res_stride + jw))
                              : 0.0f;

        for (int k0 = 0; k0 < K; k0 += kcmax) {
            const int kc = K - k0 < kcmax ? K - k0 : kcmax, ldx = full ? Kp : (kc + 7) / 8 * 8;
            if (!full) {
                pk_cta_sync(); /* everyone is done with the previous chunk */
                pk_lin_stage<XN>(a, t0, nt, NT, k0, kc, ldx, scale_s, xs);
                pk_cta_sync();
            }
            if (active) {
                if (sm && vec && kc % 8 == 0)
                    pk_lin_accum<NT, CW, U, true, true>(xs, ldx, wr, k0, kc, vl, nvl, acc);
                else if (vec && !sm)
                    pk_lin_accum<NT, CW, U, true>(xs, ldx, wr, k0, kc, vl, nvl, acc);
                else if (sm) /* not reached: the runtime stages only 16-byte rows (codegen.c) */
                    __trap();
                else
                    pk_lin_accum<NT, CW, U, false>(xs, ldx, wr, k0, kc, vl, nvl, acc);
            }
        }

        float mine = 0.0f; /* lane c·NT + r: the warp's sum of acc[c][r] */
#pragma unroll
        for (int i = 0; i < CW; i++)
#pragma unroll
            for (int r = 0; r < NT; r++) {
                float v = pk_dev_warp_sum(acc[i][r]);
                if (lane == i * NT + r) mine = v;
            }
        if (S > 1) {
            float *pb = part_s + (round & 1) * PK_DEV_WARPS * 32; /* [WARPS][32] */
            pb[warp * 32 + lane] = mine;
            pk_cta_sync();
            if (sub == 0)
                for (int s = 1; s < S; s++) mine += pb[(warp + s) * 32 + lane];
        }
        if (writes) {
            float y = mine;
            if (a.residual) y = pk_dev_round_bf16(y) + res;
            a.out[(t0 + rw) * a.out_stride + jw] = pk_dev_f32_to_bf16(y);
        }
    }
    PK_LIN_STAMP(3);
    pk_cta_sync(); /* xs and scale_s are free for the next block */
}


/* ---- one decode row against a tile staged whole, all of a warp's rows in one pass -------------
 * (PK_LIN_STAGED_FAST, docs/PERF.md session 27: on by default where tiles stage whole.)
 * pk_lin_rows takes such a tile in column groups of CW consecutive rows, U chunks ahead, and splits
 * K over warps when the groups are fewer than the warps (8-row tiles: 4 groups of 2, partial sums
 * through shared memory and a barrier); a 48-row tile takes two rounds, the second with half the
 * warps idle. Here warp w takes rows w, w + 8, ... (R of them at most), every lane the chunks
 * lane, lane + 32, ... of K for all its rows at once, U chunks ahead: per chunk one xs load and
 * one load per row, two partial sums per row (even / odd element pairs), then the rows'
 * butterflies interleaved, and lane i writes row w + 8 i. The x stage and the epilogue are
 * pk_lin_rows's. bench/cluster_chain.cu's gemv_fast measured qkv 1.14 -> 0.71 us and gate_up
 * 1.65 -> 0.91 in the model; in pk the 0.6B went 0.950 -> 0.865 ms/token. The sums' order is
 * fixed by the shapes: the same bits every run (not pk_lin_rows's bits). Needs K % 8 == 0 and
 * 16-byte rows. Few rows per warp need many chunks ahead: one row with 2 ahead (a chain of
 * shared-memory latencies) made the 0.6B's 8-row tiles 0.8-1.5 us slower than pk_lin_rows, 8
 * ahead makes them 0.3-0.6 us faster (4 ahead a little more: PK_LIN_SF_U1). Ends with a barrier
 * (xs is free). */
/* 0: pk_lin_rows for every staged tile (PK_NVCC_DEFINES, to compare) */
#define PK_LIN_STAGED_FAST (PK_LIN_WST_LDS ? 2 : 0) /* where codegen.c's stages_whole holds */
#define PK_LIN_SF_R 6
#define PK_LIN_SF_U 2 /* chunks ahead for tiles of > 16 rows */
/* chunks ahead for tiles of <= 8 rows (1 row per warp). Session 28, same call, Qwen3-0.6B (o_proj and
 * down): 8 0.8432 / 0.8461 / 0.8415 ms/token, 16 0.8411 / 0.8416 / 0.8441, 4 0.8369 / 0.8374 / 0.8349;
 * the unroll does not change the sums' order (docs/PERF.md, session 29). */
#define PK_LIN_SF_U1 4
#define PK_LIN_SF_U2 8 /* chunks ahead for tiles of 9-16 rows (2 rows per warp: the 1.7B's o_proj) */
#define PK_LIN_SF_R4 0 /* 1: tiles of 17-32 rows take 4 rows per warp (an instance of their own) */
/* 1: x read once (pk_lin_stage1, PK_LIN_RMS_CHUNKS 1 here). Session 28, same call, on the build that
 * does not spill: Qwen3-0.6B 0.8527 / 0.8584 / 0.8532 -> 0.8481 / 0.8397 / 0.8392 ms/token, 1.7B
 * 1.4729 / 1.4828 / 1.4736 -> 1.4604 / 1.4531 / 1.4590. 0: the two passes (PK_NVCC_DEFINES). */
#define PK_LIN_SF_ONE_READ 1
/* Which staged fast path a tile takes, by the rows per warp: PK_LIN_SF_R (2 chunks ahead: > 16 rows,
 * the 0.6B's qkv and gate_up), 2 (9-16 rows, 8 chunks ahead: the 1.7B's o_proj, K 2048, lost 0.5 us
 * per layer with 6 rows and 2 chunks ahead, call 2), 1 (<= 8 rows, PK_LIN_SF_U1 ahead, with
 * PK_LIN_STAGED_FAST 2 only), or 0: pk_lin_rows. */
__device__ __forceinline__ int pk_lin_staged_fast_rows(const pk_lin_args &a) {
    if (!PK_LIN_STAGED_FAST || a.n_tok != 1 || !a.wst || a.wst_rows < a.ncols || a.ncols <= 0 ||
        a.ncols > PK_DEV_WARPS * PK_LIN_SF_R || a.K % 8 != 0 || (a.w->row_stride * 2) % 16 != 0 ||
        !pk_dev_aligned16(a.wst) || (int64_t)a.K * 2 > PK_CUDA_SMEM_BYTES - PK_LIN_HDR)
        return 0;
    if (PK_LIN_SF_R4 && a.ncols > 2 * PK_DEV_WARPS && a.ncols <= 4 * PK_DEV_WARPS) return 4;
    if (a.ncols > 2 * PK_DEV_WARPS) return PK_LIN_SF_R;
    if (a.ncols > PK_DEV_WARPS) return 2;
    return PK_LIN_STAGED_FAST >= 2 ? 1 : 0;
}
template <int XN, int R, int U>
__device__ inline void pk_lin_rows_staged1(const pk_lin_args &a, char *smem) {
    float *scale_s = (float *)smem, *red_s = scale_s + PK_LIN_MAXROWS;
    pk_bf16 *xs = (pk_bf16 *)(smem + PK_LIN_HDR); /* [K] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, K = a.K, nch = K / 8;
    const int64_t row_stride = (int64_t)a.w->row_stride;
    PK_LIN_STAMP(0);
    /* the residual of the row this lane writes, read now: its round trip overlaps the sums */
    const int jw = warp + 8 * lane;
    const bool writes = lane < R && jw < a.ncols;
    const float res = a.residual && writes ? pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(a.residual + jw)) : 0.0f;
    if (PK_LIN_SF_ONE_READ) {
        pk_lin_stage1<XN>(a, scale_s, red_s, xs); /* ends with a barrier */
    } else { /* pk_lin_rows's two passes over x */
        if (XN == PK_LIN_RMSNORM) pk_dev_rms_scales(a.x, a.x_stride, 1, K, a.eps, scale_s, red_s, a.acc, a.acc_stride);
        pk_lin_stage<XN>(a, 0, 1, 1, 0, K, K, scale_s, xs);
        pk_cta_sync();
        PK_LIN_STAMP_X();
    }
    PK_LIN_STAMP(2);
    float acc[R][2];
#pragma unroll
    for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = 0.0f;
    const pk_bf16 *w0 = a.wst + (int64_t)warp * row_stride, *const w_end = a.wst + (int64_t)a.ncols * row_stride;
#pragma unroll U
    for (int c = lane; c < nch; c += 32) {
        const uint4 xv = pk_lin_ld_staged(xs + 8 * c);
        uint4 wv[R];
#pragma unroll
        for (int i = 0; i < R; i++) {
            const pk_bf16 *p = w0 + 8 * (int64_t)i * row_stride;
            wv[i] = p < w_end ? pk_lin_ld_staged(p + 8 * c) : make_uint4(0, 0, 0, 0);
        }
        float xf[8];
        pk_dev_unpack8(xv, xf);
#pragma unroll
        for (int i = 0; i < R; i++) {
            float wf[8];
            pk_dev_unpack8(wv[i], wf);
#pragma unroll
            for (int e = 0; e < 8; e++) acc[i][(e / 2) & 1] = fmaf(xf[e], wf[e], acc[i][(e / 2) & 1]);
        }
    }
    float mine = 0.0f;
#pragma unroll
    for (int i = 0; i < R; i++) acc[i][0] += acc[i][1];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int i = 0; i < R; i++) acc[i][0] += __shfl_xor_sync(PK_DEV_FULL_MASK, acc[i][0], o);
#pragma unroll
    for (int i = 0; i < R; i++)
        if (lane == i) mine = acc[i][0];
    if (writes) {
        float y = mine;
        if (a.residual) y = pk_dev_round_bf16(y) + res;
        a.out[jw] = pk_dev_f32_to_bf16(y);
    }
    PK_LIN_STAMP(3);
    pk_cta_sync(); /* xs and scale_s are free for the next task */
}

/* ---- decode rows from global memory with their loads kept in flight (PK_LIN_ASYNC) ------------
 * pk_lin_rows<XN, 1, CW, U> issues a batch of U·CW 16-byte loads per lane, waits for all of them,
 * does its FMAs and only then issues the next batch: the bytes in flight fall to zero once per
 * batch and once per column round (the Qwen3-8B GEMVs stream 18-26 GB/s per SM in the persistent
 * kernel where the copy bandwidth is 32; docs/PERF.md). This path gives each lane a ring of NS
 * stages in shared memory: a stage is one 16-byte chunk of each of the lane's CW weight rows,
 * copied by cp.async; once stage s has landed and the lane has read it, it issues stage s + NS - 1
 * (which may belong to the next column round), so up to NS - 1 stages stay in flight from the
 * first chunk to the last.
 * A lane reads back only the bytes it copied itself, which cp.async.wait_group makes visible to
 * it: no barrier. The sums are pk_lin_rows's (lane vl sums chunks vl, vl + nvl, ... in order, the
 * same butterfly and partial order), so the two paths give the same bits: which one runs depends
 * on the shapes and on the shared memory the launch gave (static mode 226 KB, dynamic 96 KB), and
 * both modes still agree bit for bit.
 * Shared memory: linear's header, xs [K] bf16, then the rings at pk_lin_async_off(K):
 * [WARPS][NS][CW][32 lanes] 16-byte entries. The first NS - 1 stages are issued before the row
 * scales and xs are built (the weights do not depend on x). */
#define PK_LIN_ASYNC 1 /* 0: decode rows always take pk_lin_rows (PK_NVCC_DEFINES, to compare) */
/* Stages per lane; 4-row groups: 2 KB per warp and stage, 192 KB per CTA at 12 (with xs [K]
 * bf16 it fits the static launch's 226 KB up to K 14336, Llama-3-8B's down_proj; a tile whose
 * rings do not fit takes pk_lin_rows). 12 against 8: Qwen3-8B 5.0389 -> 4.9959 ms/token with the
 * launch's shared memory raised to fit them (session 11; 10 at 192 KB: 5.0464). */
#define PK_LIN_ASYNC_STAGES 12
/* Tiles of 16-31 columns (the Qwen3-1.7B's down_proj: 16 rows [6144], 196 KB per task) have
 * fewer 4-row groups than warps: they take 2-row groups, with twice the stages so the rings keep
 * the same bytes in flight (192 KB at 24). Without it such tiles took pk_lin_rows from global
 * memory, nothing issued before the wait (1.7B down: 10.4 us per task, 19 GB/s per SM; session
 * 20). The sums are pk_lin_rows<1, 2, 8>'s, which takes those tiles otherwise: the same bits.
 * 0: off (PK_NVCC_DEFINES, to compare). */
#define PK_LIN_ASYNC_CW2 1
#define PK_LIN_ASYNC_STAGES2 (2 * PK_LIN_ASYNC_STAGES)
/* The group width the async path takes for a tile of ncols (4, or 2 below 32 columns). */
__device__ __forceinline__ int pk_lin_async_cw(int ncols) {
    return PK_LIN_ASYNC_CW2 && ncols < 4 * PK_DEV_WARPS ? 2 : 4;
}

/* The copy of one 16-byte chunk. PK_LIN_ASYNC_HINT 1 (default): with the weight loads' evict-first
 * L2 policy operand (pk_dev_cp_async_w16), so that the weights streamed through L2 (Qwen3-8B: 16 GB
 * per token) leave the code, the activations and the KV cache there: without it a task's code came
 * from DRAM after every layer (the first decode attention tasks of a layer ran their block loop in
 * 4.3 us the first time and 1.9 us the second). Session 13: Qwen3-8B 4.7334 -> 4.5704 ms/token.
 * 0: a plain cp.async.cg (PK_NVCC_DEFINES, to compare). In session 8 the policy raised "illegal
 * instruction" in these rings on the H200; since then the by-reference pk_lin_args fixed other
 * wrong results of that time (docs/PERF.md, "B"), and it runs. */
#define PK_LIN_ASYNC_HINT 1
__device__ __forceinline__ void pk_lin_cp_async(uint32_t dst, const void *src) {
    pk_dev_cp_async_w16(dst, src);
}

__device__ __forceinline__ int pk_lin_async_off(int K) { return (PK_LIN_HDR + 2 * K + 127) / 128 * 128; }

/* The dynamic shared memory of this launch (bytes): static mode gives the persistent kernel more
 * than the kernels' PK_CUDA_SMEM_BYTES; the area beyond is free while an unstaged linear task runs. */
__device__ __forceinline__ uint32_t pk_dev_dynamic_smem(void) {
    uint32_t n;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
    return n;
}

template <int CW>
__device__ __forceinline__ int pk_lin_async_bytes(int ns) { return PK_DEV_WARPS * ns * CW * 32 * 16; }

/* wst_rows codes besides staged row counts (> 0) and 0 (nothing): the tile's pages are in the
 * weight ring (a.wst is its state); the async path's first stages were issued before the task's
 * dependency wait (pk_lin_async_pre, static mode). */
#define PK_WST_RING (-1)
#define PK_WST_ASYNC (-2) /* -3: PK_WST_CLAIM, below */
/* PK_WST_ASYNC with the task's dependency wait left to the GEMV (PK_LIN_WAIT_LATE): the runtime
 * calls the task before the event fires, so the dispatch (the task switch, the call-through, this
 * file's checks and the rings' set-up: 1.4-2.2 us after the wait in session 11's profile, with
 * every SM's copies in flight) runs while the worker waits; pk_dev_dep_wait (rows.cuh) polls
 * right before the first read of x. Until then nothing the wait guards is read. */
#define PK_WST_ASYNC_LATE (-4)

/* Whether one token's tile of ncols rows [K], contiguous from base, takes the async path with NS
 * stages of CW-row groups: at least one group per warp (ncols >= CW · WARPS: one warp per group,
 * no split-K, as pk_lin_rows takes such tiles), every lane the same number of chunks per row
 * (K / 8 a multiple of 32), 16-byte aligned rows, and the rings fit this launch. With
 * -DPK_LIN_WIDE=0 rows longer than 1024 stay on pk_lin_rows (pk_lin_tile's branches), so neither
 * the stages before the wait nor the async path may take them. */
template <int CW, int NS>
__device__ __forceinline__ bool pk_lin_async_fits(const pk_bf16 *base, int K, int ncols, int n_tok) {
    return PK_LIN_ASYNC && (PK_LIN_WIDE || K <= 1024) && n_tok == 1 && ncols >= CW * PK_DEV_WARPS &&
           K % 256 == 0 && pk_dev_aligned16(base) &&
           (uint32_t)(pk_lin_async_off(K) + pk_lin_async_bytes<CW>(NS)) <= pk_dev_dynamic_smem();
}

/* The tile pk_lin_async_pre issued stages for (thread 0 writes them; the wait's barrier publishes) */
__shared__ const pk_bf16 *pk_lin_pre_base;
__shared__ int pk_lin_pre_K, pk_lin_pre_ncols;

/* A lane's issue side of the async path: step `is` copies elements 8 · lane + 256 · ij of its
 * group's CW rows in column round ir, into stage is % NS. */
template <int CW, int NS>
struct pk_lin_async_issuer {
    const pk_bf16 *base; /* row 0 of the tile, plus this lane's 8 elements */
    int K, ncols, ngroups, nj, nsteps, warp;
    uint32_t ring_sh; /* this lane's entry of stage 0, row 0 (shared address) */
    int is, ir, ij;

    __device__ __forceinline__ void init(const pk_bf16 *b, int k, int n, char *smem) {
        const int lane = threadIdx.x % 32;
        warp = threadIdx.x / 32;
        base = b + 8 * lane;
        K = k;
        ncols = n;
        ngroups = (ncols + CW - 1) / CW;
        nj = K / 256;
        nsteps = (ngroups + PK_DEV_WARPS - 1) / PK_DEV_WARPS * nj;
        ring_sh = (uint32_t)__cvta_generic_to_shared(smem + pk_lin_async_off(K) + warp * NS * CW * 512 + lane * 16);
        is = ir = ij = 0;
    }
    /* Issues the next step's copies (COPY) or only moves past it (they were issued before). */
    template <bool COPY>
    __device__ __forceinline__ void next() {
        if (COPY) {
            const int cg = ir * PK_DEV_WARPS + warp;
            if (is < nsteps && cg < ngroups) {
#pragma unroll
                for (int i = 0; i < CW; i++) {
                    const int j = cg * CW + i < ncols ? cg * CW + i : ncols - 1; /* a spare column repeats the last */
                    pk_lin_cp_async(ring_sh + (uint32_t)(((is % NS) * CW + i) * 512),
                                             base + (int64_t)j * K + 256 * ij);
                }
            }
            asm volatile("cp.async.commit_group;" ::: "memory"); /* empty past the end: the count stays */
        }
        is++;
        if (++ij == nj) {
            ij = 0;
            ir++;
        }
    }
};

/* Paced stages (session 22): a worker whose event fires while its pre-issued stages are still
 * landing sees it only when they have landed (its poll and x loads queue behind them:
 * bench/poll_latency.cu). With PK_LIN_PACE_KB = P, only P KB of stages go out before the wait,
 * and the deferred wait (pk_lin_wait_paced) refills them as they land, at most P KB ahead of each
 * poll; when the event is seen, x is read first and the rest of the NS - 1 stages go out after
 * it. Measured in poll_latency (176 KB, 48 KB paced, the event 0.5 / 2 / 4 us after the copies
 * start): x ready 5.89 / 4.35 / 2.31 -> 3.58 / 2.56 / 2.30 us, every byte landed 0.25-0.5 us
 * sooner. In pk (same call, two rounds, docs/PERF.md session 22): Qwen3-1.7B 1.5321 / 1.5323 ->
 * 32 KB 1.4908 / 1.4880, 48 KB 1.4858 / 1.4894, 96 KB 1.4778 / 1.4807 ms/token; 8B 4.2070 /
 * 4.2074 -> 4.2100 / 4.2027, 4.1691 / 4.1956, 4.1790 / 4.1825. 48 KB, not 96: with 96 the
 * Qwen3-0.6B (whose only streamed tiles are the LM head's) ran 0.3-0.8 % slower than before in six
 * rounds, with 48 within 0.3 % either way in three. 0: all NS - 1 stages before the wait, as
 * before (PK_NVCC_DEFINES=-DPK_LIN_PACE_KB=0, to compare). */
#ifndef PK_LIN_PACE_KB
#define PK_LIN_PACE_KB 48
#endif
/* Stages issued before the wait: NS - 1, or PK_LIN_PACE_KB's worth (at least 1; a stage is CW
 * rows x 512 B per warp: 16 KB per CTA at CW 4). */
template <int CW, int NS>
__device__ __forceinline__ constexpr int pk_lin_pre_stages() {
    constexpr int paced = PK_LIN_PACE_KB * 1024 / (CW * 512 * PK_DEV_WARPS);
    return PK_LIN_PACE_KB <= 0 || paced > NS - 1 ? NS - 1 : paced < 1 ? 1 : paced;
}

/* Static mode, before a linear task's dependency wait (runtime.cuh): when the task's tile (ncols
 * rows [K] from base) will take the async path, issues its first NS - 1 stages (pk_lin_pre_stages),
 * as pk_lin_rows_async would after the wait, and returns PK_WST_ASYNC (else 0). Every thread. */
template <int CW, int NS>
__device__ inline int pk_lin_async_pre_cw(const pk_bf16 *base, int K, int ncols, int n_tok, char *smem) {
    if (!pk_lin_async_fits<CW, NS>(base, K, ncols, n_tok)) return 0;
    pk_lin_async_issuer<CW, NS> q;
    q.init(base, K, ncols, smem);
#pragma unroll
    for (int s = 0; s < pk_lin_pre_stages<CW, NS>(); s++) q.template next<true>();
    if (threadIdx.x == 0) {
        pk_lin_pre_base = base;
        pk_lin_pre_K = K;
        pk_lin_pre_ncols = ncols;
    }
    return PK_WST_ASYNC;
}

/* Static mode, before a linear task's dependency wait (runtime.cuh): pk_lin_async_pre_cw with
 * the group width pk_lin_tile will take (pk_lin_async_cw; both widths' rings are the same bytes). */
__device__ inline int pk_lin_async_pre(const pk_bf16 *base, int K, int ncols, int n_tok, char *smem) {
    if (pk_lin_async_cw(ncols) == 2)
        return pk_lin_async_pre_cw<2, PK_LIN_ASYNC_STAGES2>(base, K, ncols, n_tok, smem);
    return pk_lin_async_pre_cw<4, PK_LIN_ASYNC_STAGES>(base, K, ncols, n_tok, smem);
}

/* Whether a decode block takes the async path: pk_lin_async_fits, rows contiguous (one segment,
 * stride K), not staged in shared memory. With PK_WST_ASYNC the stages issued before the wait
 * must be this tile's (else pk_lin_tile drains them and starts over). */
template <int CW, int NS>
__device__ inline bool pk_lin_async_ok(const pk_lin_args &a) {
    const bool pre = a.wst_rows == PK_WST_ASYNC || a.wst_rows == PK_WST_ASYNC_LATE;
    if ((a.wst_rows != 0 && !pre) || a.w->nseg != 1 || a.w->row_stride != (uint64_t)a.K)
        return false;
    const pk_bf16 *base = pk_dev_rows_get(a.w, (uint32_t)a.n0);
    if (pre && (base != pk_lin_pre_base || a.K != pk_lin_pre_K || a.ncols != pk_lin_pre_ncols))
        return false;
    return pk_lin_async_fits<CW, NS>(base, a.K, a.ncols, a.n_tok);
}

/* pk_lin_async_ok with the group width pk_lin_async_pre takes. */
__device__ inline bool pk_lin_async_take(const pk_lin_args &a) {
    if (pk_lin_async_cw(a.ncols) == 2) return pk_lin_async_ok<2, PK_LIN_ASYNC_STAGES2>(a);
    return pk_lin_async_ok<4, PK_LIN_ASYNC_STAGES>(a);
}

/* The deferred wait of a paced task (PK_LIN_PACE_KB): thread 0 polls the event as
 * pk_dev_dep_wait does; between polls every warp waits for its oldest stages to land and issues as
 * many more, keeping P stages (those before the wait) in flight, up to NS - 1. Every thread. */
template <int CW, int NS>
__device__ inline void pk_lin_wait_paced(pk_lin_async_issuer<CW, NS> &q) {
    constexpr int P = pk_lin_pre_stages<CW, NS>();
    __shared__ int seen_s;
    for (;;) {
        if (threadIdx.x == 0) {
            const bool seen = pk_dev_ld_acquire_u64(pk_dep_ctr) >= pk_dep_need;
            seen_s = seen;
            if (seen) pk_dev_dep_seen_now();
        }
        pk_cta_sync();
        const int seen = seen_s;
        pk_cta_sync(); /* everyone has read seen_s before thread 0 writes it again */
        if (seen) return;
        if (q.is >= NS - 1) {
            __nanosleep(PK_SPIN_SLEEP_NS);
            continue;
        }
        for (int k = 0; k < P && q.is < NS - 1; k++) {
            asm volatile("cp.async.wait_group %0;" ::"n"(P - 1) : "memory");
            q.template next<true>();
        }
    }
}

/* One token's row through the lane rings (header above): warp w takes column groups w, w + 8, ...
 * as pk_lin_rows does with 8 groups per round. PRE: the first NS - 1 stages were issued before
 * the wait (pk_lin_async_pre). Whole CTA. */
template <int XN, int CW, int NS, bool PRE>
__device__ inline void pk_lin_rows_async(const pk_lin_args &a, char *smem) {
    static_assert(NS >= 2, "the async path waits for NS - 2 pending stages");
    PK_LIN_STAMP(0);
    float *scale_s = (float *)smem;
    float *red_s = scale_s + PK_LIN_MAXROWS;
    pk_bf16 *xs = (pk_bf16 *)(smem + PK_LIN_HDR); /* [K] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int K = a.K, ncols = a.ncols, ngroups = (ncols + CW - 1) / CW;
    const int rounds = (ngroups + PK_DEV_WARPS - 1) / PK_DEV_WARPS, nj = K / 256;
    /* this lane's entry of stage s, row i: ring + (s · CW + i) · 512 */
    const char *ring = smem + pk_lin_async_off(K) + warp * NS * CW * 512 + lane * 16;
    pk_lin_async_issuer<CW, NS> q;
    q.init(pk_dev_rows_get(a.w, (uint32_t)a.n0), K, ncols, smem);
    constexpr int PS = PRE ? pk_lin_pre_stages<CW, NS>() : NS - 1; /* issued before the wait */
#pragma unroll
    for (int s = 0; s < PS; s++) q.template next<!PRE>();

    if (PRE && a.wst_rows == PK_WST_ASYNC_LATE) { /* x may be read from here on */
        if (PS < NS - 1)
            pk_lin_wait_paced<CW, NS>(q);
        else
            pk_dev_dep_wait();
    }
    PK_LIN_STAMP(1);
    pk_lin_stage1<XN>(a, scale_s, red_s, xs);
    while (q.is < NS - 1) q.template next<true>(); /* paced: the stages not yet issued, after x */
    PK_LIN_STAMP(2);

    int s = 0;
    for (int round = 0; round < rounds; round++) {
        const int cg = round * PK_DEV_WARPS + warp;
        if (cg >= ngroups) break; /* the warp's last round: only empty groups are left to issue */
        const int jc = cg * CW + lane; /* lane c < CW: column c of the group */
        /* the residual now, not after the sums: its L2 round trip overlaps the FMAs */
        const float res = a.residual && lane < CW && jc < ncols ? pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(a.residual + jc)) : 0.0f;
        float acc[CW][1];
#pragma unroll
        for (int i = 0; i < CW; i++) acc[i][0] = 0.0f;
        for (int j = 0; j < nj; j++, s++) {
            /* stage s landed (stages s + 1 .. s + NS - 2 may be in flight), then stage s + NS - 1
             * into the slot stage s - 1 left: at most NS - 1 groups pending, as CUTLASS's
             * multistage loops keep them (a choice, not a fix: the H200 fault of session 8 was
             * the copies' L2 policy operand, pk_lin_cp_async) */
            asm volatile("cp.async.wait_group %0;" ::"n"(NS - 2) : "memory");
            uint4 wv[CW];
#pragma unroll
            for (int i = 0; i < CW; i++) wv[i] = *(const uint4 *)(ring + ((s % NS) * CW + i) * 512);
            q.template next<true>();
            pk_lin_fma<1, CW>(xs + 8 * (lane + 32 * j), K, wv, acc);
        }
        float mine = 0.0f; /* lane c: the warp's sum of acc[c] */
#pragma unroll
        for (int i = 0; i < CW; i++) {
            float v = pk_dev_warp_sum(acc[i][0]);
            if (lane == i) mine = v;
        }
        if (lane < CW && jc < ncols) {
            float y = mine;
            if (a.residual) y = pk_dev_round_bf16(y) + res;
            a.out[jc] = pk_dev_f32_to_bf16(y);
        }
    }
    PK_LIN_STAMP(3);
    asm volatile("cp.async.wait_all;" ::: "memory");
    pk_cta_sync(); /* xs, scale_s and the rings are free for the next task */
}

/* ---- decode rows (n_tok == 1) in pages: the weight ring's order --------------------------------
 * A step of one token reads the tile in the pages of weight_ring.cuh (pk_wring_page): from the
 * ring's slots in static mode (a.wst_rows < 0: a.wst is the ring's state), from the tile staged in
 * shared memory (a.wst_rows >= ncols) or from global memory (dynamic mode, the harness). The order
 * of every sum depends on K and ncols alone, so the three give the same bits: the GPU check wants
 * static == dynamic, bit for bit.
 * One warp per page (the ring's owner of its slot): rows of 2K <= slot bytes go rows-per-page
 * to a page, each row summed by the whole warp; a longer row is cut into pieces, one per page.
 * Lane l sums the 16-byte chunks l, l + 32, ... of its row or piece in order (8 products each,
 * in order), the warp's fixed butterfly gives one partial, lane 0 stores it in part[column][i]
 * (i: 0, or the piece). After the last page, column j's output is Σ_i part[j][i] in order (+ the
 * residual as pk_lin_rows: bf16(bf16(acc) + residual)). Which warp reads a page does not change
 * any sum. Shared memory: linear's header, xs [K] bf16 at PK_LIN_HDR, part [ncols][pieces per
 * row] f32 (pk_wring_geom_of). */

/* Whether a block takes the paged path: a one-token step, K a multiple of 8, the tile's rows
 * contiguous and 16-byte aligned, xs and the partials within the kernels' shared memory. Shapes
 * only: never the mode. */
__device__ inline bool pk_lin_paged_ok(const pk_lin_args &a) {
    if (!PK_WRING || a.n_tok != 1 || a.K % 8 != 0 || a.w->nseg != 1 || a.w->row_stride != (uint64_t)a.K ||
        !pk_dev_aligned16(pk_dev_rows_get(a.w, (uint32_t)a.n0)))
        return false;
    const pk_wring_geom g = pk_wring_geom_of(2u * (uint32_t)a.K);
    return (int64_t)PK_LIN_HDR + 2 * (int64_t)a.K + 4 * (int64_t)a.ncols * g.pieces_per_row <= PK_CUDA_SMEM_BYTES;
}

/* Σ over the 16-byte chunks c, c + step, ... < n of w's chunk · xs's chunk, in order. SM: w in
 * shared memory. */
template <bool SM>
__device__ __forceinline__ float pk_lin_page_dot(const char *w, const pk_bf16 *xs, int c, int n, int step) {
    float acc = 0.0f;
    for (; c < n; c += 4 * step) {
        uint4 wv[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int cu = c + u * step;
            wv[u] = cu >= n ? make_uint4(0, 0, 0, 0)
                    : SM    ? ((const uint4 *)w)[cu]
                            : pk_dev_ldw16(w + 16 * (int64_t)cu);
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int cu = c + u * step;
            if (cu < n) {
                float wf[8], xf[8];
                pk_dev_unpack8(wv[u], wf);
                pk_dev_unpack8(((const uint4 *)xs)[cu], xf);
#pragma unroll
                for (int e = 0; e < 8; e++) acc = fmaf(xf[e], wf[e], acc);
            }
        }
    }
    return acc;
}

/* The paged GEMV of one token (header above). RING: pages from the ring (rg); else from tile
 * (global memory, or shared memory when SM). Whole CTA. */
template <int XN, bool RING, bool SM>
__device__ inline void pk_lin_paged(const pk_lin_args &a, char *smem, const char *tile, pk_wring *rg) {
    float *scale_s = (float *)smem;
    float *red_s = scale_s + PK_LIN_MAXROWS;
    pk_bf16 *xs = (pk_bf16 *)(smem + PK_LIN_HDR);   /* [K] */
    float *part = (float *)(smem + PK_LIN_HDR + 2 * a.K); /* [ncols][npr] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int K = a.K, rb = 2 * K, nch = K / 8;
    const pk_wring_geom g = pk_wring_geom_of((uint32_t)rb);
    const int rpp = (int)g.rows_per_page, ppr = (int)g.pieces_per_row; /* rpp 0: rows in pieces */
    const uint32_t npages = pk_wring_npages((uint32_t)a.ncols * (uint32_t)rb, (uint32_t)rb);

    pk_lin_stage1<XN>(a, scale_s, red_s, xs);

    const uint32_t p0 = RING ? rg->pos : 0u;
    for (uint32_t q = (warp + PK_DEV_WARPS - p0 % PK_DEV_WARPS) % PK_DEV_WARPS; q < npages; q += PK_DEV_WARPS) {
        const char *pg;
        if (rpp) {
            const int row0 = (int)q * rpp, R = a.ncols - row0 < rpp ? a.ncols - row0 : rpp;
            pg = RING ? pk_wring_wait(rg, p0 + q) : tile + (int64_t)row0 * rb;
            for (int rr = 0; rr < R; rr++) {
                float v = pk_dev_warp_sum(pk_lin_page_dot<RING || SM>(pg + rr * rb, xs, lane, nch, 32));
                if (lane == 0) part[row0 + rr] = v;
            }
        } else {
            const int row = (int)q / ppr, piece = (int)q - row * ppr, c0 = piece * (PK_WRING_SLOT_BYTES / 16);
            const int len = rb - c0 * 16 < PK_WRING_SLOT_BYTES ? rb - c0 * 16 : PK_WRING_SLOT_BYTES;
            pg = RING ? pk_wring_wait(rg, p0 + q) : tile + (int64_t)row * rb + c0 * 16;
            float v = pk_dev_warp_sum(pk_lin_page_dot<RING || SM>(pg, xs + 8 * c0, lane, len / 16, 32));
            if (lane == 0) part[row * ppr + piece] = v;
        }
        if (RING) {
            __syncwarp();
            pk_wring_release(rg, p0 + q);
        }
    }
    pk_cta_sync();
    for (int j = threadIdx.x; j < a.ncols; j += PK_CUDA_THREADS) {
        float y = 0.0f;
        for (int i = 0; i < ppr; i++) y += part[j * ppr + i];
        if (a.residual) y = pk_dev_round_bf16(y) + pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(a.residual + j));
        a.out[j] = pk_dev_f32_to_bf16(y);
    }
    if (RING && threadIdx.x == 0) rg->consumed = p0 + npages;
    pk_cta_sync(); /* xs, part and scale_s are free for the next task */
}

/* ---- claimed row groups: one token's GEMV balanced over the SMs at run time -------------------
 * A static tile per task gives every SM the same bytes, but SMs do not get the same share of
 * DRAM: in a Qwen3-8B gate_up layer the mean task took 48.6 us and the slowest 53.9 (session 9's
 * trace), and the layer waits for the slowest. In claim mode the warps of every task of a layer
 * take the layer's 4-row groups from one counter (pk_lin_claim.ctr, atomicAdd by lane 0) until
 * none is left: a warp on a fast SM takes more groups. Each group's rows are summed exactly as
 * pk_lin_rows_async sums them (the same lane rings, the same order: the same bits whichever warp
 * takes it), so outputs are as in tile mode. Every task of the layer still signals its event
 * once; a consumer waiting for the whole layer (the code generator's condition: every task of
 * the layer triggers the same event) sees every group written. The issue side claims the next
 * group when it starts a group (one claim in flight per warp, its latency hidden behind the
 * group's stages), and the group ordinals a warp has claimed but not yet summed wait in
 * pk_lin_cl_groups (the issue side runs at most NS - 1 steps, so at most NS groups, ahead).
 * Counters are zeroed before every step (runtime.cuh); a group index >= the layer's groups ends
 * a warp (exactly one such claim per warp and step). */
/* Off by default: slower where measured (H200, session 9, same call: Qwen3-8B 5.28 -> 6.04
 * ms/token, 0.6B 1.35 -> 1.73; o_proj and down, one group per warp, 12.2 -> 17.8 and 35.7 -> 45.2
 * us per layer, gate_up 55 -> 58; the LM head, which stays in tile mode, 292 -> 347, also with
 * claim mode in call-throughs of its own). The likely reason the unclaimed layers slow down
 * (session 14, docs/PERF.md): a __noinline__ function called from pk_lin_tile makes nvcc compile
 * every call-through around the call anew — with session 14's steal mode built that way the
 * Qwen3-0.6B kernel's code grew from 1.25 to 2.2 MB (pk_gen_call_linear 217 -> 492 KB) and every
 * layer slowed, and even inlined, the extra path in the same call-through slowed the untouched
 * LM head by ~20 %. Right where checked (cuda_e2e, pk-tiny's decode logits, Qwen3-8B teacher
 * forcing with one-row steps); docs/PERF.md "Session 9" and "Session 14" say what to try. */
#define PK_LIN_CLAIM 0 /* 1: claim mode where the code generator allows it (PK_NVCC_DEFINES) */
#define PK_WST_CLAIM (-3) /* wst_rows: claim mode's first stages were issued before the wait */
#define PK_LIN_CL_RING (PK_LIN_ASYNC_STAGES > 8 ? PK_LIN_ASYNC_STAGES : 8) /* claimed groups a warp holds */
static_assert(PK_LIN_ASYNC_STAGES <= PK_LIN_CL_RING, "a warp holds up to NS claimed groups");

/* A layer's claim: its counter, its first weight row and its rows (n_total 0: tile mode). */
struct pk_lin_claim {
    unsigned long long *ctr;
    int n_first, n_total;
};

__shared__ int pk_lin_cl_groups[PK_DEV_WARPS][PK_LIN_CL_RING]; /* a warp's claimed groups by ordinal; -1: none left */
__shared__ unsigned long long pk_lin_cl_saved[PK_DEV_WARPS][5]; /* the issue side's state across the wait */

/* The issue side of claim mode: step `is` copies chunk 256 · ij + 8 · lane of the 4 rows of the
 * group the warp claimed as its io-th (cur; -1 once none is left) into stage is % NS. */
template <int NS>
struct pk_lin_claim_issuer {
    const pk_bf16 *base; /* the layer's row 0, plus this lane's 8 elements */
    unsigned long long *ctr;
    int K, nrows, ngroups, nj, warp, lane;
    uint32_t ring_sh;
    int is, ij, io, cur;
    unsigned long long pend; /* lane 0: the claim of the next group, in flight */

    __device__ __forceinline__ void setup(const pk_bf16 *b, int k, int n, unsigned long long *c, char *smem) {
        lane = threadIdx.x % 32;
        warp = threadIdx.x / 32;
        base = b + 8 * lane;
        ctr = c;
        K = k;
        nrows = n;
        ngroups = (n + 3) / 4;
        nj = K / 256;
        ring_sh = (uint32_t)__cvta_generic_to_shared(smem + pk_lin_async_off(K) + warp * NS * 4 * 512 + lane * 16);
    }
    /* Takes the group claimed last as the io-th; claims the one after it. */
    __device__ __forceinline__ void take() {
        const unsigned long long v = __shfl_sync(0xffffffffu, pend, 0);
        cur = v < (unsigned long long)ngroups ? (int)v : -1;
        if (cur >= 0 && lane == 0) pend = atomicAdd(ctr, 1ull);
        if (lane == 0) pk_lin_cl_groups[warp][io % PK_LIN_CL_RING] = cur;
    }
    __device__ __forceinline__ void start() {
        is = ij = io = 0;
        pend = lane == 0 ? atomicAdd(ctr, 1ull) : 0ull;
        take();
    }
    __device__ __forceinline__ void next() {
        if (cur >= 0) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int j = 4 * cur + i < nrows ? 4 * cur + i : nrows - 1; /* a spare row repeats the last */
                pk_lin_cp_async(ring_sh + (uint32_t)(((is % NS) * 4 + i) * 512), base + (int64_t)j * K + 256 * ij);
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory"); /* empty past the end: the count stays */
        is++;
        if (cur >= 0 && ++ij == nj) {
            ij = 0;
            io++;
            take();
        }
    }
    __device__ __forceinline__ void save() {
        if (lane == 0) {
            unsigned long long *st = pk_lin_cl_saved[warp];
            st[0] = (unsigned)is, st[1] = (unsigned)ij, st[2] = (unsigned)io, st[3] = (unsigned long long)(long long)cur;
            st[4] = pend;
        }
    }
    __device__ __forceinline__ void restore() {
        __syncwarp();
        const unsigned long long *st = pk_lin_cl_saved[warp];
        is = (int)st[0], ij = (int)st[1], io = (int)st[2], cur = (int)(long long)st[3];
        pend = lane == 0 ? st[4] : 0ull;
    }
};

/* Whether one token's layer of n_total rows [K] from base takes claim mode (the async path's
 * shape conditions for the whole layer). */
__device__ __forceinline__ bool pk_lin_claim_fits(const pk_bf16 *base, int K, int n_total, int n_tok) {
    return PK_LIN_CLAIM && n_total > 0 && pk_lin_async_fits<4, PK_LIN_ASYNC_STAGES>(base, K, n_total, n_tok);
}

/* Static mode, before a claim-mode task's dependency wait (runtime.cuh): claims the warps' first
 * groups and issues their first NS - 1 stages; returns PK_WST_CLAIM, or 0 when the layer does not
 * take claim mode. Every thread. */
__device__ inline int pk_lin_claim_pre(const pk_bf16 *base, int K, int n_total, unsigned long long *ctr,
                                       int n_tok, char *smem) {
    if (!pk_lin_claim_fits(base, K, n_total, n_tok)) return 0;
    pk_lin_claim_issuer<PK_LIN_ASYNC_STAGES> q;
    q.setup(base, K, n_total, ctr, smem);
    q.start();
#pragma unroll
    for (int s = 0; s < PK_LIN_ASYNC_STAGES - 1; s++) q.next();
    q.save();
    return PK_WST_CLAIM;
}

/* Whether task a (a tile of the layer `c` describes) takes claim mode. */
__device__ inline bool pk_lin_claim_take(const pk_lin_args &a, const pk_lin_claim &c) {
    if (!PK_LIN_CLAIM || c.n_total <= 0 || (a.wst_rows != 0 && a.wst_rows != PK_WST_CLAIM) || a.w->nseg != 1 ||
        a.w->row_stride != (uint64_t)a.K)
        return false;
    return pk_lin_claim_fits(pk_dev_rows_get(a.w, (uint32_t)c.n_first), a.K, c.n_total, a.n_tok);
}

/* One token's GEMV in claim mode (header above): the warps sum the groups they claim until none
 * is left. PRE: the first stages were issued before the wait (pk_lin_claim_pre). Whole CTA.
 * Not inlined: its issue state stays out of pk_lin_tile's register allocation (inlined, the
 * Qwen3-8B kernel's rmsnorm_linear call-through spilled 748 bytes against 648 without it). */
template <int XN, int NS, bool PRE>
__device__ __noinline__ void pk_lin_rows_claim(const pk_lin_args &a, const pk_lin_claim &c, char *smem) {
    float *scale_s = (float *)smem;
    float *red_s = scale_s + PK_LIN_MAXROWS;
    pk_bf16 *xs = (pk_bf16 *)(smem + PK_LIN_HDR); /* [K] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, K = a.K, n = c.n_total;
    const int64_t delta = (int64_t)a.n0 - c.n_first; /* the task's out / residual point at its tile */
    pk_bf16 *out = a.out - delta;
    const pk_bf16 *residual = a.residual ? a.residual - delta : nullptr;
    const char *ring = smem + pk_lin_async_off(K) + warp * NS * 4 * 512 + lane * 16;
    pk_lin_claim_issuer<NS> q;
    q.setup(pk_dev_rows_get(a.w, (uint32_t)c.n_first), K, n, c.ctr, smem);
    if (PRE) {
        q.restore();
    } else {
        q.start();
#pragma unroll
        for (int s = 0; s < NS - 1; s++) q.next();
    }

    pk_lin_stage1<XN>(a, scale_s, red_s, xs);

    int s = 0;
    for (int co = 0;; co++) {
        __syncwarp(); /* lane 0's entries of pk_lin_cl_groups */
        const int g = pk_lin_cl_groups[warp][co % PK_LIN_CL_RING];
        if (g < 0) break;
        const int jc = 4 * g + lane; /* lane c < 4: row c of the group */
        const float res = residual && lane < 4 && jc < n ? pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(residual + jc)) : 0.0f;
        float acc[4][1];
#pragma unroll
        for (int i = 0; i < 4; i++) acc[i][0] = 0.0f;
        for (int j = 0; j < q.nj; j++, s++) {
            asm volatile("cp.async.wait_group %0;" ::"n"(NS - 2) : "memory"); /* as pk_lin_rows_async */
            uint4 wv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) wv[i] = *(const uint4 *)(ring + ((s % NS) * 4 + i) * 512);
            q.next();
            pk_lin_fma<1, 4>(xs + 8 * (lane + 32 * j), K, wv, acc);
        }
        float mine = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float v = pk_dev_warp_sum(acc[i][0]);
            if (lane == i) mine = v;
        }
        if (lane < 4 && jc < n) {
            float y = mine;
            if (residual) y = pk_dev_round_bf16(y) + res;
            out[jc] = pk_dev_f32_to_bf16(y);
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    pk_cta_sync(); /* xs, scale_s and the rings are free for the next task */
}

/* pk_lin_rows_async with its first stages issued before the wait (pk_lin_async_pre: the runtime's
 * PK_WST_ASYNC / PK_WST_ASYNC_LATE) or not. */
template <int XN, int CW, int NS>
__device__ __forceinline__ void pk_lin_rows_async_any(const pk_lin_args &a, char *smem) {
    if (a.wst_rows == PK_WST_ASYNC || a.wst_rows == PK_WST_ASYNC_LATE)
        pk_lin_rows_async<XN, CW, NS, true>(a, smem);
    else
        pk_lin_rows_async<XN, CW, NS, false>(a, smem);
}

/* Always inlined (into each kind's call-through): builds where ptxas kept pk_lin_tile a separate
 * function gave wrong GEMV results in the persistent kernel — every pk-tiny decode step (relative
 * L2 1.21) in session 8's failing combination and in session 10's first build of this version,
 * cuda_e2e's W4 runs in session 9 — with a_in passed by value and (session 10) by reference,
 * while the kernel harness, which inlines it, passed. Not understood: docs/PERF.md "Session 9"
 * and "Session 10". */
template <int XN>
__device__ __forceinline__ void pk_lin_tile(const pk_lin_args &a_in, char *smem, const pk_lin_claim &claim) {
    pk_lin_args a = a_in;
    if (a.wst_rows > 0 && (a.wst_rows & PK_STAGED_LATE)) { /* a staged tile: its waits were left to us */
        a.wst_rows &= ~PK_STAGED_LATE;
        pk_dev_dep_wait_staged();
    }
    if (pk_lin_claim_take(a, claim)) {
        if (a.wst_rows == PK_WST_CLAIM)
            pk_lin_rows_claim<XN, PK_LIN_ASYNC_STAGES, true>(a, claim, smem);
        else
            pk_lin_rows_claim<XN, PK_LIN_ASYNC_STAGES, false>(a, claim, smem);
        return;
    }
    if (a.wst_rows == PK_WST_CLAIM) __trap(); /* groups claimed before the wait would be lost: a bug */
    if ((a.wst_rows == PK_WST_ASYNC || a.wst_rows == PK_WST_ASYNC_LATE) && (a.ncols <= 0 || !pk_lin_async_take(a))) {
        if (a.wst_rows == PK_WST_ASYNC_LATE) pk_dev_dep_wait(); /* the runtime left the wait to this task */
        /* stages issued before the wait that this task will not read: let them land first */
        asm volatile("cp.async.wait_all;" ::: "memory");
        pk_cta_sync();
        a.wst_rows = 0;
    }
    if (a.ncols <= 0) return;
    if (pk_lin_paged_ok(a)) {
        const char *tile = (const char *)pk_dev_rows_get(a.w, (uint32_t)a.n0);
        pk_wring *rg = a.wst && a.wst_rows == PK_WST_RING ? (pk_wring *)a.wst : nullptr;
        if (rg) { /* the ring's segment must be this tile (else the runtime drains its pages) */
            const pk_wring_ent e = rg->segs[rg->seg];
            if (pk_wring_ent_src(e) != tile || pk_wring_ent_row_bytes(e) != 2u * (uint32_t)a.K ||
                e.rows != (uint32_t)a.ncols) {
                rg = nullptr;
            }
        }
        if (rg)
            pk_lin_paged<XN, true, false>(a, smem, nullptr, rg);
        else if (a.wst && a.wst_rows >= a.ncols)
            pk_lin_paged<XN, false, true>(a, smem, (const char *)a.wst, nullptr);
        else
            pk_lin_paged<XN, false, false>(a, smem, tile, nullptr);
        return;
    }
    if (const int sf = pk_lin_staged_fast_rows(a)) {
        if (sf == 1)
            pk_lin_rows_staged1<XN, 1, PK_LIN_SF_U1>(a, smem);
        else if (sf == 2)
            pk_lin_rows_staged1<XN, 2, PK_LIN_SF_U2>(a, smem);
        else if (PK_LIN_SF_R4 && sf == 4)
            pk_lin_rows_staged1<XN, 4, PK_LIN_SF_U>(a, smem);
        else
            pk_lin_rows_staged1<XN, PK_LIN_SF_R, PK_LIN_SF_U>(a, smem);
        return;
    }
    for (int t0 = 0; t0 < a.n_tok; t0 += PK_LIN_MAXROWS) {
        int nt = a.n_tok - t0 < PK_LIN_MAXROWS ? a.n_tok - t0 : PK_LIN_MAXROWS;
        if (nt == 1 && (a.K <= 1024 || PK_LIN_WIDE) && a.ncols >= 4 * PK_DEV_WARPS) {
            if (pk_lin_async_take(a))
                pk_lin_rows_async_any<XN, 4, PK_LIN_ASYNC_STAGES>(a, smem);
            else
                pk_lin_rows<XN, 1, 4, 4>(a, t0, nt, smem); /* short rows: 4 rows per warp keep 16 loads in flight */
        } else if (PK_LIN_ASYNC_CW2 && nt == 1 && a.ncols >= 2 * PK_DEV_WARPS && pk_lin_async_take(a)) {
            pk_lin_rows_async_any<XN, 2, PK_LIN_ASYNC_STAGES2>(a, smem); /* 2-row groups: 16-31 columns */
        } else if (nt == 1)
            pk_lin_rows<XN, 1, 2, 8>(a, t0, nt, smem);
        else if (nt == 2)
            pk_lin_rows<XN, 2, 2, 8>(a, t0, nt, smem);
        else if (nt <= 4)
            pk_lin_rows<XN, 4, 4, 2>(a, t0, nt, smem);
        else
            pk_lin_rows<XN, 8, 4, 2>(a, t0, nt, smem);
    }
}

__device__ __forceinline__ void pk_dev_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K,
                                     const pk_rows *w, int n0, int ncols, const pk_bf16 *residual,
                                     int64_t res_stride, pk_bf16 *out, int64_t out_stride,
                                     char *smem, const pk_bf16 *wst = nullptr, int wst_rows = 0,
                                     const pk_lin_claim &claim = pk_lin_claim{nullptr, 0, 0}) {
    pk_lin_args a = {x, x_stride, n_tok, K, NULL, 0.0f, w, n0, ncols,
                     residual, res_stride, out, out_stride, wst, wst_rows};
    pk_lin_tile<PK_LIN_PLAIN>(a, smem, claim);
}

__device__ __forceinline__ void pk_dev_rmsnorm_linear(const pk_bf16 *x, int64_t x_stride,
                                             const pk_bf16 *norm_w, float eps, int n_tok, int K,
                                             const pk_rows *w, int n0, int ncols, pk_bf16 *out,
                                             int64_t out_stride, char *smem,
                                             const pk_bf16 *wst = nullptr, int wst_rows = 0,
                                             const pk_lin_claim &claim = pk_lin_claim{nullptr, 0, 0},
                                             const int64_t *acc = nullptr, int64_t acc_stride = 0,
                                             pk_bf16 *sum = nullptr, int64_t sum_stride = 0, int sum0 = 0,
                                             int sum1 = 0) {
    pk_lin_args a = {x, x_stride, n_tok, K, norm_w, eps, w, n0, ncols,
                     NULL, 0, out, out_stride, wst, wst_rows, acc, acc_stride, sum, sum_stride, sum0, sum1};
    pk_lin_tile<PK_LIN_RMSNORM>(a, smem, claim);
}

__device__ __forceinline__ void pk_dev_silu_mul_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K,
                                              const pk_rows *w, int n0, int ncols,
                                              const pk_bf16 *residual, int64_t res_stride,
                                              pk_bf16 *out, int64_t out_stride, char *smem,
                                              const pk_bf16 *wst = nullptr, int wst_rows = 0,
                                              const pk_lin_claim &claim = pk_lin_claim{nullptr, 0, 0}) {
    pk_lin_args a = {x, x_stride, n_tok, K, NULL, 0.0f, w, n0, ncols,
                     residual, res_stride, out, out_stride, wst, wst_rows};
    pk_lin_tile<PK_LIN_SILU_MUL>(a, smem, claim);
}

#endif /* PK_CUDA_LINEAR_CUH */
