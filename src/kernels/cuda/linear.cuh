// SPDX-License-Identifier: Apache-2.0
/* linear.cuh — PK_TASK_LINEAR, LINEAR_RESIDUAL, RMSNORM_LINEAR, SILU_MUL_LINEAR_RESIDUAL on the
 * device: out[t, j] = bf16(acc) or bf16(bf16(acc) + residual), acc = Σ_k xn[t, k] · W[n0 + j, k]
 * in fp32, xn = x, bf16(rmsnorm(x) · norm_w) or bf16(bf16(silu(gate)) · up) (cpu_kernels.h).
 *
 * A step of more than one row takes the tensor cores (linear_mma.cuh). One row (a decode step)
 * takes the GEMVs here: pk_lin_rows (NT = 1 row, a template: the accumulators live in registers),
 * or the faster paths below where the shapes allow. pk_lin_rows, per block of NT rows:
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
 * The faster one-row paths (pk_lin_tile): the staged fast path for a tile staged whole, the
 * async rings for a streamed one.
 */
#ifndef PK_CUDA_LINEAR_CUH
#define PK_CUDA_LINEAR_CUH

#include "kernels/cuda/rmsnorm.cuh"
#include "kernels/cuda/rows.cuh"
#include "kernels/cuda/silu_mul.cuh"

#define PK_LIN_MAXROWS 8
#define PK_LIN_HDR 2560 /* bytes: scale_s 32 + red_s 8·WARPS·4 + part_s 2·WARPS·32·4, 16-aligned */
static_assert(4 * (PK_LIN_MAXROWS + PK_LIN_MAXROWS * PK_DEV_WARPS + 2 * PK_DEV_WARPS * 32) <=
                  PK_LIN_HDR,
              "linear's shared-memory header");
static_assert(PK_CUDA_SMEM_BYTES >= PK_LIN_HDR + 16 * PK_LIN_MAXROWS,
              "linear needs room for one chunk of 8 rows");

enum { PK_LIN_PLAIN = 0, PK_LIN_RMSNORM = 1, PK_LIN_SILU_MUL = 2 };

/* A step of more rows (linear_mma.cuh) as 2-D tiles of the task's event chunk: the m tasks of the
 * layer that signal one event (the chunk: columns [n0 + dc0, n0 + dc0 + cn) of the layer, dc0 <= 0)
 * share its n_tok x cn outputs as tiles of 128 rows x BN columns, task `rank` taking a contiguous
 * run of them, instead of each task taking its own columns of every row (a decode grid's tiles:
 * N / SMs columns, so every task streamed all of x for a few columns). The consumer waits for the
 * whole chunk either way. m <= 1: the task's own tile. codegen.c's chunk_arg decides where it
 * holds (one dependency event for the layer, no accumulator share). */
typedef struct pk_lin_chunk {
    int dc0, cn, rank, m;
    int unit; /* a tile's columns are a multiple of it (the SwiGLU's gate / up pair 2 · block; 0: any) */
} pk_lin_chunk;
#define PK_LIN_OWN_TILE (pk_lin_chunk{0, 0, 0, 1, 0}) /* m 1: the task's own tile */

/* Task idx's chunk in a layer of N columns over G tasks, m tasks a chunk (build.c's tiles:
 * [i · N / G, (i + 1) · N / G)). */
__device__ __forceinline__ pk_lin_chunk pk_lin_chunk_of(int64_t idx, int64_t N, int64_t G, int m, int unit) {
    const int64_t first = idx / m * m, n0 = idx * N / G, c0 = first * N / G, c1 = (first + m) * N / G;
    pk_lin_chunk c = {(int)(c0 - n0), (int)(c1 - c0), (int)(idx - first), m, unit};
    return c;
}

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
                         * wst_rows < 0: a code (PK_WST_ASYNC, PK_WST_ASYNC_LATE) */
    int wst_rows;
    /* RMSNORM with a fused MLP's accumulator (RMSNORM_LINEAR's PK_V_NL_ACC; K % 8 == 0): x is
     * x + acc (pk_dev_acc_x8), and the task stores its columns [sum0, sum1) of it into sum */
    const int64_t *acc; /* [n_tok, K], row stride acc_stride, or NULL */
    int64_t acc_stride;
    pk_bf16 *sum; /* [n_tok, K], row stride sum_stride */
    int64_t sum_stride;
    int sum0, sum1;
    pk_lin_chunk ch; /* steps of more rows: the task's event chunk (m <= 1: its own tile) */
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
 * A thread takes one chunk at a time (batching two chunks' loads measured slower). */
#define PK_LIN_STAGE_BATCH 1
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

/* One row (a decode step): the row scale (RMSNORM) and xs[0 .. K) as pk_dev_rms_scales then
 * pk_lin_stage build them, the same bits, from one read of x: each thread keeps its chunks (and
 * the norm weights', loaded alongside) in registers across the scale's barriers instead of
 * reading x from L2 a second time after them — one dependent L2 round trip less per task.
 * Needs K % 8 == 0 and K <= 8 · THREADS · pk_lin_rms_chunks (else the two passes). Ends with a
 * barrier: xs is then visible to every thread. */
/* 16-byte chunks per thread: K <= 8192 at 256 threads with 4. 1 (K <= 2048) where tiles stage
 * whole (pk_gen_tuning::lin_wst_lds: the small models): with 4 the staged fast path's one read
 * made the inlined persistent kernel spill (bench/ptxas_report.sh), with 1 it does not. */
constexpr int pk_lin_rms_chunks = pk_gen_tuning::lin_wst_lds ? 1 : 4;
template <int XN>
__device__ inline void pk_lin_stage1(const pk_lin_args &a, float *scale_s, float *red_s, pk_bf16 *xs) {
    const int K = a.K;
    if (XN != PK_LIN_RMSNORM || K % 8 != 0 || K > 8 * PK_CUDA_THREADS * pk_lin_rms_chunks) {
        if (XN == PK_LIN_RMSNORM) pk_dev_rms_scales(a.x, a.x_stride, 1, K, a.eps, scale_s, red_s, a.acc, a.acc_stride);
        pk_lin_stage<XN>(a, 0, 1, 1, 0, K, (K + 7) / 8 * 8, scale_s, xs);
        pk_cta_sync();
        return;
    }
    const int nch = K / 8, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint4 xv[pk_lin_rms_chunks], nv[pk_lin_rms_chunks];
#pragma unroll
    for (int m = 0; m < pk_lin_rms_chunks; m++) {
        const int c = threadIdx.x + m * PK_CUDA_THREADS;
        if (c < nch) {
            xv[m] = pk_lin_x8(a, 0, 8 * c);
            nv[m] = pk_dev_load8_norm(a.norm_w + 8 * c);
        }
    }
    float ss = 0.0f; /* pk_dev_rms_scales's order: chunks in order, elements in order */
#pragma unroll
    for (int m = 0; m < pk_lin_rms_chunks; m++)
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
    const float scale = scale_s[0];
#pragma unroll
    for (int m = 0; m < pk_lin_rms_chunks; m++) {
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

/* A staged tile's rows: with pk_gen_tuning::lin_wst_lds read with ld.shared (the generic address
 * converted once per load), else through the generic pointer. a.wst reaches the GEMV through
 * pk_lin_args, which lives in local memory, so the compiler cannot see that it points into shared
 * memory and emits generic loads. */
__device__ __forceinline__ uint4 pk_lin_ld_staged(const pk_bf16 *p) {
    if constexpr (pk_gen_tuning::lin_wst_lds) {
        uint4 v;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"((uint32_t)__cvta_generic_to_shared(p)));
        return v;
    } else {
        return *(const uint4 *)p;
    }
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

/* One block of nt <= NT rows starting at row t0: steps 1-4 of the header. Whole CTA. */
template <int XN, int NT, int CW, int U>
__device__ inline void pk_lin_rows(const pk_lin_args &a, int t0, int nt, char *smem) {
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

    const int ngroups = (a.ncols + CW - 1) / CW; /* column groups */
    int G = PK_DEV_WARPS;
    while (G > ngroups) G >>= 1;
    const int S = PK_DEV_WARPS / G, grp = warp / S, sub = warp % S;
    const int vl = sub * 32 + lane, nvl = 32 * S;
    const int rounds = (ngroups + G - 1) / G;
    /* read once: the rounds' output stores may alias *a.w for the compiler, which would reload it
     * every round */
    const int64_t row_stride = (int64_t)a.w->row_stride;

    if (full) {
        pk_lin_stage<XN>(a, t0, nt, NT, 0, K, Kp, scale_s, xs);
        pk_cta_sync();
    }
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
    pk_cta_sync(); /* xs and scale_s are free for the next block */
}


/* ---- one decode row against a tile staged whole, all of a warp's rows in one pass -------------
 * (where tiles stage whole: pk_gen_tuning::lin_wst_lds; elsewhere pk_lin_rows.)
 * pk_lin_rows takes such a tile in column groups of CW consecutive rows, U chunks ahead, and splits
 * K over warps when the groups are fewer than the warps (8-row tiles: 4 groups of 2, partial sums
 * through shared memory and a barrier); a 48-row tile takes two rounds, the second with half the
 * warps idle. Here warp w takes rows w, w + 8, ... (R of them at most), every lane the chunks
 * lane, lane + 32, ... of K for all its rows at once, U chunks ahead: per chunk one xs load and
 * one load per row, two partial sums per row (even / odd element pairs), then the rows'
 * butterflies interleaved, and lane i writes row w + 8 i. The x stage and the epilogue are
 * pk_lin_rows's; x is read once (pk_lin_stage1). The sums' order is fixed by the shapes: the same
 * bits every run (not pk_lin_rows's bits). Needs K % 8 == 0 and 16-byte rows. Few rows per warp
 * need many chunks ahead: one row with 2 ahead (a chain of shared-memory latencies) is slower
 * than pk_lin_rows, 4 ahead faster. The unroll does not change the sums' order. Ends with a
 * barrier (xs is free). */
#define PK_LIN_SF_R 6
#define PK_LIN_SF_U 2  /* chunks ahead for tiles of > 16 rows */
#define PK_LIN_SF_U1 4 /* chunks ahead for tiles of <= 8 rows (1 row per warp) */
#define PK_LIN_SF_U2 8 /* chunks ahead for tiles of 9-16 rows (2 rows per warp: the 1.7B's o_proj) */
/* Which staged fast path a tile takes, by the rows per warp: PK_LIN_SF_R (2 chunks ahead: > 16 rows,
 * the 0.6B's qkv and gate_up), 2 (9-16 rows, 8 chunks ahead: the 1.7B's o_proj, K 2048), 1 (<= 8
 * rows, PK_LIN_SF_U1 ahead), or 0: pk_lin_rows. */
__device__ __forceinline__ int pk_lin_staged_fast_rows(const pk_lin_args &a) {
    if (!pk_gen_tuning::lin_wst_lds || a.n_tok != 1 || !a.wst || a.wst_rows < a.ncols || a.ncols <= 0 ||
        a.ncols > PK_DEV_WARPS * PK_LIN_SF_R || a.K % 8 != 0 || (a.w->row_stride * 2) % 16 != 0 ||
        !pk_dev_aligned16(a.wst) || (int64_t)a.K * 2 > PK_CUDA_SMEM_BYTES - PK_LIN_HDR)
        return 0;
    if (a.ncols > 2 * PK_DEV_WARPS) return PK_LIN_SF_R;
    if (a.ncols > PK_DEV_WARPS) return 2;
    return 1;
}
template <int XN, int R, int U>
__device__ inline void pk_lin_rows_staged1(const pk_lin_args &a, char *smem) {
    float *scale_s = (float *)smem, *red_s = scale_s + PK_LIN_MAXROWS;
    pk_bf16 *xs = (pk_bf16 *)(smem + PK_LIN_HDR); /* [K] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, K = a.K, nch = K / 8;
    const int64_t row_stride = (int64_t)a.w->row_stride;
    /* the residual of the row this lane writes, read now: its round trip overlaps the sums */
    const int jw = warp + 8 * lane;
    const bool writes = lane < R && jw < a.ncols;
    const float res = a.residual && writes ? pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(a.residual + jw)) : 0.0f;
    pk_lin_stage1<XN>(a, scale_s, red_s, xs); /* ends with a barrier */
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
    pk_cta_sync(); /* xs and scale_s are free for the next task */
}

/* ---- decode rows from global memory with their loads kept in flight ---------------------------
 * pk_lin_rows<XN, 1, CW, U> issues a batch of U·CW 16-byte loads per lane, waits for all of them,
 * does its FMAs and only then issues the next batch: the bytes in flight fall to zero once per
 * batch and once per column round (the Qwen3-8B GEMVs stream 18-26 GB/s per SM in the persistent
 * kernel where the copy bandwidth is 32). This path gives each lane a ring of NS
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
/* Stages per lane; 4-row groups: 2 KB per warp and stage, 192 KB per CTA at 12 (with xs [K]
 * bf16 it fits the static launch's 226 KB up to K 14336, Llama-3-8B's down_proj; a tile whose
 * rings do not fit takes pk_lin_rows). 12 is faster than 8 or 10. */
#define PK_LIN_ASYNC_STAGES 12
/* Tiles of 16-31 columns (the Qwen3-1.7B's down_proj: 16 rows [6144], 196 KB per task) have
 * fewer 4-row groups than warps: they take 2-row groups, with twice the stages so the rings keep
 * the same bytes in flight (192 KB at 24). Without it such tiles took pk_lin_rows from global
 * memory, nothing issued before the wait. The sums are pk_lin_rows<1, 2, 8>'s, which takes those
 * tiles otherwise: the same bits. */
#define PK_LIN_ASYNC_STAGES2 (2 * PK_LIN_ASYNC_STAGES)
/* The group width the async path takes for a tile of ncols (4, or 2 below 32 columns). */
__device__ __forceinline__ int pk_lin_async_cw(int ncols) {
    return ncols < 4 * PK_DEV_WARPS ? 2 : 4;
}

/* The copy of one 16-byte chunk, with the weight loads' evict-first L2 policy operand
 * (pk_dev_cp_async_w16), so that the weights streamed through L2 (Qwen3-8B: 16 GB per token) leave
 * the code, the activations and the KV cache there: without it a task's code comes from DRAM
 * after every layer. */
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

/* wst_rows codes besides staged row counts (> 0) and 0 (nothing): the async path's first stages
 * were issued before the task's dependency wait (pk_lin_async_pre, static mode). */
#define PK_WST_ASYNC (-2)
/* PK_WST_ASYNC with the task's dependency wait left to the GEMV (runtime.cuh's pk_wait_late): the
 * runtime calls the task before the event fires, so the dispatch (the task switch, the
 * call-through, this file's checks and the rings' set-up, with every SM's copies in flight) runs
 * while the worker waits; pk_dev_dep_wait (rows.cuh) polls
 * right before the first read of x. Until then nothing the wait guards is read. */
#define PK_WST_ASYNC_LATE (-4)

/* Whether one token's tile of ncols rows [K], contiguous from base, takes the async path with NS
 * stages of CW-row groups: at least one group per warp (ncols >= CW · WARPS: one warp per group,
 * no split-K, as pk_lin_rows takes such tiles), every lane the same number of chunks per row
 * (K / 8 a multiple of 32), 16-byte aligned rows, and the rings fit this launch. */
template <int CW, int NS>
__device__ __forceinline__ bool pk_lin_async_fits(const pk_bf16 *base, int K, int ncols, int n_tok) {
    return n_tok == 1 && ncols >= CW * PK_DEV_WARPS &&
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

/* Paced stages: a worker whose event fires while its pre-issued stages are still landing sees it
 * only when they have landed (its poll and x loads queue behind them). So only P KB of stages
 * (pk_gen_tuning::lin_pace_kb: 48, or 64 for the shape whose layers both stage and stream) go out
 * before the wait, and the deferred wait (pk_lin_wait_paced) refills them as they land, at most
 * P KB ahead of each poll; when the event is seen, x is read first and the rest of the NS - 1
 * stages go out after it. More than 48 KB slows the small models, whose only streamed tiles are
 * the LM head's. */
/* Stages issued before the wait: P KB's worth (at least 1, at most NS - 1; a stage is CW rows x
 * 512 B per warp: 16 KB per CTA at CW 4). */
template <int CW, int NS>
__device__ __forceinline__ constexpr int pk_lin_pre_stages() {
    constexpr int paced = pk_gen_tuning::lin_pace_kb * 1024 / (CW * 512 * PK_DEV_WARPS);
    return pk_gen_tuning::lin_pace_kb <= 0 || paced > NS - 1 ? NS - 1 : paced < 1 ? 1 : paced;
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

/* The deferred wait of a paced task (pk_gen_tuning::lin_pace_kb): thread 0 polls the event as
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
    pk_lin_stage1<XN>(a, scale_s, red_s, xs);
    while (q.is < NS - 1) q.template next<true>(); /* paced: the stages not yet issued, after x */

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
             * multistage loops keep them */
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

#include "kernels/cuda/linear_mma.cuh"

/* Always inlined (into each kind's call-through): builds where ptxas kept pk_lin_tile a separate
 * function gave wrong GEMV results in the persistent kernel (while the kernel harness, which
 * inlines it, passed); the cause is not understood, so it stays inlined. */
template <int XN>
__device__ __forceinline__ void pk_lin_tile(const pk_lin_args &a_in, char *smem) {
    pk_lin_args a = a_in;
    if (a.wst_rows > 0 && (a.wst_rows & PK_STAGED_LATE)) { /* a staged tile: its waits were left to us */
        a.wst_rows &= ~PK_STAGED_LATE;
        pk_dev_dep_wait_staged();
    }
    if ((a.wst_rows == PK_WST_ASYNC || a.wst_rows == PK_WST_ASYNC_LATE) &&
        (a.ncols <= 0 || a.n_tok <= 0 || !pk_lin_async_take(a))) {
        if (a.wst_rows == PK_WST_ASYNC_LATE) pk_dev_dep_wait(); /* the runtime left the wait to this task */
        /* stages issued before the wait that this task will not read: let them land first */
        asm volatile("cp.async.wait_all;" ::: "memory");
        pk_cta_sync();
        a.wst_rows = 0;
    }
    if (a.ncols <= 0 || a.n_tok <= 0) return; /* n_tok 0: an LM head in a step where no row draws a token */
    if (a.n_tok > 1) { /* a step of more rows: tensor cores */
        pk_lin_mma_call<XN>(a, smem);
        return;
    }
    if (const int sf = pk_lin_staged_fast_rows(a)) {
        if (sf == 1)
            pk_lin_rows_staged1<XN, 1, PK_LIN_SF_U1>(a, smem);
        else if (sf == 2)
            pk_lin_rows_staged1<XN, 2, PK_LIN_SF_U2>(a, smem);
        else
            pk_lin_rows_staged1<XN, PK_LIN_SF_R, PK_LIN_SF_U>(a, smem);
        return;
    }
    /* one row (a decode step) */
    if (a.ncols >= 4 * PK_DEV_WARPS) {
        if (pk_lin_async_take(a))
            pk_lin_rows_async_any<XN, 4, PK_LIN_ASYNC_STAGES>(a, smem);
        else
            pk_lin_rows<XN, 1, 4, 4>(a, 0, 1, smem); /* short rows: 4 rows per warp keep 16 loads in flight */
    } else if (a.ncols >= 2 * PK_DEV_WARPS && pk_lin_async_take(a)) {
        pk_lin_rows_async_any<XN, 2, PK_LIN_ASYNC_STAGES2>(a, smem); /* 2-row groups: 16-31 columns */
    } else {
        pk_lin_rows<XN, 1, 2, 8>(a, 0, 1, smem);
    }
}

__device__ __forceinline__ void pk_dev_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K,
                                     const pk_rows *w, int n0, int ncols, const pk_bf16 *residual,
                                     int64_t res_stride, pk_bf16 *out, int64_t out_stride,
                                     char *smem, const pk_bf16 *wst = nullptr, int wst_rows = 0,
                                     pk_lin_chunk ch = PK_LIN_OWN_TILE) {
    pk_lin_args a = {x, x_stride, n_tok, K, NULL, 0.0f, w, n0, ncols,
                     residual, res_stride, out, out_stride, wst, wst_rows, NULL, 0, NULL, 0, 0, 0, ch};
    pk_lin_tile<PK_LIN_PLAIN>(a, smem);
}

__device__ __forceinline__ void pk_dev_rmsnorm_linear(const pk_bf16 *x, int64_t x_stride,
                                             const pk_bf16 *norm_w, float eps, int n_tok, int K,
                                             const pk_rows *w, int n0, int ncols, pk_bf16 *out,
                                             int64_t out_stride, char *smem,
                                             const pk_bf16 *wst = nullptr, int wst_rows = 0,
                                             const int64_t *acc = nullptr, int64_t acc_stride = 0,
                                             pk_bf16 *sum = nullptr, int64_t sum_stride = 0, int sum0 = 0,
                                             int sum1 = 0, pk_lin_chunk ch = PK_LIN_OWN_TILE) {
    pk_lin_args a = {x, x_stride, n_tok, K, norm_w, eps, w, n0, ncols,
                     NULL, 0, out, out_stride, wst, wst_rows, acc, acc_stride, sum, sum_stride, sum0, sum1, ch};
    pk_lin_tile<PK_LIN_RMSNORM>(a, smem);
}

__device__ __forceinline__ void pk_dev_silu_mul_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K,
                                              const pk_rows *w, int n0, int ncols,
                                              const pk_bf16 *residual, int64_t res_stride,
                                              pk_bf16 *out, int64_t out_stride, char *smem,
                                              const pk_bf16 *wst = nullptr, int wst_rows = 0,
                                              pk_lin_chunk ch = PK_LIN_OWN_TILE) {
    pk_lin_args a = {x, x_stride, n_tok, K, NULL, 0.0f, w, n0, ncols,
                     residual, res_stride, out, out_stride, wst, wst_rows, NULL, 0, NULL, 0, 0, 0, ch};
    pk_lin_tile<PK_LIN_SILU_MUL>(a, smem);
}

#endif /* PK_CUDA_LINEAR_CUH */
