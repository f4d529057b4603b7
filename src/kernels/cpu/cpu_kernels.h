// SPDX-License-Identifier: Apache-2.0
/* cpu_kernels.h — the CPU kernel of every task kind: bf16 storage, fp32 accumulation.
 *
 * Each function computes one task's tile from plain pointers (the runtime resolves a task's
 * views, src/pk_abi.h, into these arguments). Reductions run in a fixed order (k = 0, 1, ...
 * sequentially in fp32), so a result never depends on threads or timing: the same inputs give
 * the same bits on every run, worker count and scheduling mode.
 *
 * Rounding points follow PyTorch's bf16 modules (HF transformers), so pk agrees with them to
 * bf16 tolerance: products and sums in fp32, one rounding to bf16 where torch writes a bf16
 * tensor (noted per function). Activations are [rows, stride] with only the first n_tok rows
 * touched. Weights are read through pk_rows, which hides fused (pk_fuse_tensors) layouts.
 */
#ifndef PK_CPU_KERNELS_H
#define PK_CPU_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "common/bf16.h"
#include "pk_abi.h"

/* Products are rounded to fp32 before they are added: no a·b + c contracted into an FMA. GCC does
 * not contract in ISO mode (-std=c11); clang needs the pragma. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* The rows of a (possibly fused) weight: see pk_view in pk_abi.h. Row r of the tensor is
 * group g = r / Σseg_rows, offset o = r % Σseg_rows in segment i at row g·seg_rows[i] + o'. */
typedef struct pk_rows {
    const pk_bf16 *seg[PK_FUSE_MAX];
    uint32_t seg_rows[PK_FUSE_MAX];
    uint32_t nseg;
    uint64_t row_stride; /* elements */
} pk_rows;

/* Pointer to row r of w. */
static inline const pk_bf16 *pk_rows_get(const pk_rows *w, uint32_t r) {
    uint32_t group_rows = 0;
    for (uint32_t i = 0; i < w->nseg; i++) group_rows += w->seg_rows[i];
    uint32_t g = r / group_rows, o = r % group_rows, i = 0;
    while (o >= w->seg_rows[i]) o -= w->seg_rows[i++];
    return w->seg[i] + ((uint64_t)g * w->seg_rows[i] + o) * w->row_stride;
}

/* A plain (unfused) weight of row stride `stride`. */
static inline pk_rows pk_rows_plain(const pk_bf16 *base, uint32_t rows, uint64_t stride) {
    pk_rows w = {{base}, {rows}, 1, stride};
    return w;
}

/* out[t, j] = W[tokens[t], col0 + j] for j < ncols. out points at the tile's first column. */
void pk_cpu_embedding(const int32_t *tokens, int n_tok, const pk_rows *w, int col0, int ncols,
                      pk_bf16 *out, int64_t out_stride);

/* RMSNorm as HF: s = Σ x² in fp32 (k ascending); y = x · 1/sqrt(s/H + eps) in fp32, rounded to
 * bf16; out = bf16(y · w). Rows [0, n_tok) of x and out. */
void pk_cpu_rmsnorm(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *w, int n_tok, int hidden,
                    float eps, pk_bf16 *out, int64_t out_stride);

/* RMSNorm's scale of one row x[0 .. n): 1/sqrt(Σ x² / n + eps), the sum in fp32, k ascending.
 * Element k of the normalised row is then pk_cpu_rmsnorm1(x[k], scale, w[k]). */
float pk_cpu_rms_scale(const pk_bf16 *x, int n, float eps);
static inline float pk_cpu_rmsnorm1(pk_bf16 x, float scale, pk_bf16 w) {
    return pk_round_bf16(pk_round_bf16(pk_bf16_to_f32(x) * scale) * pk_bf16_to_f32(w));
}

/* acc[t, j] = Σ_k xn[t, k] · W[n0 + j, k], an fp32 sum over k ascending;
 *   without residual: out = bf16(acc);
 *   with residual (HF: o_proj output is a bf16 tensor, then added): out = bf16(bf16(acc) + r).
 * xn = x (pk_cpu_linear) or bf16(rmsnorm(x) · norm_w) as pk_cpu_rmsnorm (pk_cpu_rmsnorm_linear),
 * or bf16(bf16(silu(gate)) · up) with gate = x[t, k], up = x[t, K + k] (pk_cpu_silu_mul_linear).
 * residual may be NULL. out and residual point at the tile's first column (j = 0 ↔ row n0). */
void pk_cpu_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K, const pk_rows *w, int n0,
                   int ncols, const pk_bf16 *residual, int64_t res_stride, pk_bf16 *out,
                   int64_t out_stride);
void pk_cpu_rmsnorm_linear(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *norm_w, float eps,
                           int n_tok, int K, const pk_rows *w, int n0, int ncols, pk_bf16 *out,
                           int64_t out_stride);
void pk_cpu_silu_mul_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K,
                            const pk_rows *w, int n0, int ncols, const pk_bf16 *residual,
                            int64_t res_stride, pk_bf16 *out, int64_t out_stride);

/* LINEAR_SPLITK_RESIDUAL (pk_linear_splitk_with_residual_layer), one task's K block of kc columns:
 * pk_cpu_linear_splitk_add: acc[t, n] += Σ_{k < kc} x[t, k] · w[n · w_stride + k] for t < n_tok,
 *   n < N; each partial an fp32 sum over k ascending (as pk_cpu_linear), added to acc atomically
 *   (the layer's tasks add concurrently). x and w point at the block's first column.
 * pk_cpu_linear_splitk_finish (the layer's last task): out[t, n] = bf16(bf16(acc[t, n]) +
 *   residual[t, n]), then acc[t, n] = 0 for the next step. */
void pk_cpu_linear_splitk_add(const pk_bf16 *x, int64_t x_stride, int n_tok, int kc, const pk_bf16 *w,
                              int64_t w_stride, int N, float *acc, int64_t acc_stride);
void pk_cpu_linear_splitk_finish(int n_tok, int N, float *acc, int64_t acc_stride, const pk_bf16 *residual,
                                 int64_t res_stride, pk_bf16 *out, int64_t out_stride);

/* The fused MLP's accumulator (RMSNORM_SWIGLU_DOWN): int64 fixed point, value · 2^32, so that the
 * tasks' adds are exact and their order does not change the sum. kernels/cuda/fixed_point.cuh
 * computes both conversions with the same roundings: the GPU's and the CPU's sums of the same
 * partials are the same bits. */
#define PK_FIXED_ONE 0x1p32
/* round(v · 2^32) to nearest even, v clamped to ±2^23 first (NaN to -2^23: fmaxf's rule) so that
 * 2^9 tasks' adds cannot overflow 63 bits. */
static inline int64_t pk_fixed_from_f32(float v) {
    v = fminf(fmaxf(v, -0x1p23f), 0x1p23f);
    return (int64_t)llrint((double)v * PK_FIXED_ONE);
}
/* bf16(acc · 2^-32) as an fp32: through double (exact scaling), then fp32, then bf16. */
static inline float pk_fixed_to_bf16(int64_t a) {
    return pk_round_bf16((float)((double)a / PK_FIXED_ONE));
}

/* pk_cpu_mlp_down_add: acc[t, n] += fixed(Σ_{j < ib} act[t, j] · wd[n · ib + j]) for t < n_tok,
 * n < N (each partial an fp32 sum over j ascending); wd: the task's column block of down_proj
 * ([N][ib], pk_column_blocks); the adds are atomic (the layer's tasks add concurrently).
 * pk_cpu_acc_sum: out[t, k] = bf16(bf16(acc[t, k] · 2^-32) + x[t, k]) for t < n_tok, k < K. */
void pk_cpu_mlp_down_add(const pk_bf16 *act, int64_t act_stride, int n_tok, int ib, const pk_bf16 *wd, int N,
                         int64_t *acc, int64_t acc_stride);
void pk_cpu_acc_sum(const pk_bf16 *x, int64_t x_stride, const int64_t *acc, int64_t acc_stride, int n_tok, int K,
                    pk_bf16 *out, int64_t out_stride);

/* out[t, j] = bf16(bf16(silu(g)) · u) with g = x[t, i0 + j], u = x[t, I + i0 + j], silu in fp32
 * (g / (1 + exp(-g))). out points at the tile's first column. */
void pk_cpu_silu_mul(const pk_bf16 *x, int64_t x_stride, int n_tok, int I, int i0, int ncols,
                     pk_bf16 *out, int64_t out_stride);
/* The SwiGLU of a projection whose columns come in blocks (pk_rmsnorm_linear_swiglu_layer):
 * gu [n_tok, 2 · ncols] (row stride gu_stride) holds `block` gate columns, then the `block` matching
 * up columns, then the next block's; out[t, b · block + j] = bf16(bf16(silu(g)) · u) with
 * g = gu[t, 2b · block + j], u = gu[t, (2b + 1) · block + j]. ncols is a multiple of block. */
void pk_cpu_swiglu_blocks(const pk_bf16 *gu, int64_t gu_stride, int n_tok, int ncols, int block, pk_bf16 *out,
                          int64_t out_stride);
/* One element of silu_mul: bf16(bf16(silu(g)) · u), as an fp32 holding a bf16 value. */
float pk_cpu_silu_mul1(float g, float u);

/* The step's decode metadata attention needs. */
typedef struct pk_attn_step {
    int n_tok;                /* rows of this step */
    const int32_t *token_pos; /* [n_tok] position of row t in its request (0-based) */
    const int32_t *token_req; /* [n_tok] request slot of row t */
    const int32_t *page_table; /* [max_requests, pages_per_req]: KV page of each page index */
    int pages_per_req;
    int page_size;
} pk_attn_step;

/* Attention for KV heads [kv0, kv0 + nkv) of every row, in three phases:
 *  1. for each row t and each of its heads: q and k of row t (from qkv, grouped layout of
 *     pk_attention_layer), per-head RMSNorm with q_norm / k_norm when not NULL (as pk_cpu_rmsnorm,
 *     eps = p->qk_norm_eps), RoPE at position token_pos[t] (HF rotate-half; cos/sin computed in
 *     fp32 from inv_freq[i] = 1 / theta^(2i/D), llama3-scaled when p->rope_scaling says so, then
 *     rounded to bf16; q·cos and rotate(q)·sin each rounded to bf16, their sum rounded to bf16);
 *  2. row t's rotated K and its V are written to the cache at (page_table[req][pos / page_size],
 *     pos % page_size, head) — all rows first, so a prefill chunk sees its own earlier tokens;
 *  3. for each row t and query head h of the task's KV heads: scores s_j = (q · k_j) · (1/sqrt(D))
 *     in fp32 (q the rotated bf16 q, dot over i ascending) over positions j = 0 .. pos (causal,
 *     same request); softmax in fp32 with the max m subtracted, normalised once at the end:
 *     out = bf16((Σ_j e_j v_j) / Σ_j e_j), e_j = exp(s_j - m), both sums fp32, j ascending.
 * qkv points at column 0 of the full qkv row (task's groups found from kv0); k_cache and v_cache
 * point at the cache base [num_pages, page_size, Hkv, D]; out at column 0 of the full out row.
 * D must be even and <= PK_CPU_ATTN_MAX_HEAD_DIM (per-head vectors live on the stack; the layer
 * API rejects larger heads); otherwise nothing is written. A row whose request or position lies
 * outside the page table, or whose pages are unmapped (< 0), gets zeros in out and writes nothing
 * to the cache. */
#define PK_CPU_ATTN_MAX_HEAD_DIM 512
void pk_cpu_attention(const pk_layer_params *p, const pk_attn_step *s, int kv0, int nkv,
                      const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *k_cache, pk_bf16 *v_cache,
                      const pk_bf16 *q_norm, const pk_bf16 *k_norm, pk_bf16 *out,
                      int64_t out_stride);

/* Attention split over the KV length (flash-decoding): positions in blocks of
 * PK_ATTN_SPLIT_BLOCK go round-robin to nsplit splits (block b to split b mod nsplit), so every
 * cache row is written and read by one split's task, prefill chunks included.
 * pk_cpu_attention_partial: pk_cpu_attention restricted to split `split`: K / V written for the
 *   rows whose position is in the split; per (row t, head h of the task's nkv·G), the unnormalised
 *   sums over the split's positions <= pos: part[t · part_stride + h · (D + 2) + ...] = acc [D]
 *   (Σ e_j · v_j), m (max score), l (Σ e_j), e_j = exp(score_j - m); no position (or an invalid
 *   row): acc 0, m -inf, l 0.
 * pk_cpu_attention_combine: out [t][h · D + d] = bf16(Σ_s f_s · acc_s[d] / Σ_s f_s · l_s),
 *   f_s = exp(m_s - max_s m_s), splits in order; split s of head h at column s · nheads · (D + 2)
 *   + h · (D + 2) of row t; zeros where every split is empty. Same result as pk_cpu_attention to
 *   rounding (bf16 tolerance). */
#define PK_ATTN_SPLIT_BLOCK 32
void pk_cpu_attention_partial(const pk_layer_params *p, const pk_attn_step *s, int kv0, int nkv, int split,
                              int nsplit, const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *k_cache,
                              pk_bf16 *v_cache, const pk_bf16 *q_norm, const pk_bf16 *k_norm, float *part,
                              int64_t part_stride);
void pk_cpu_attention_combine(int n_tok, int nheads, int D, int nsplit, const float *part, int64_t part_stride,
                              pk_bf16 *out, int64_t out_stride);

/* The inverse RoPE frequencies inv_freq[0 .. D/2) of a layer (llama3 scaling applied). */
void pk_rope_inv_freq(const pk_layer_params *p, float *inv_freq);

/* For each row t: the largest logits[t, j], j < nv, and its index v0 + j (smallest on ties),
 * compared as fp32 values of the bf16 logits; written to val[t · part_stride], idx[...]. */
void pk_cpu_argmax_partial(const pk_bf16 *logits, int64_t stride, int n_tok, int v0, int nv,
                           float *val, int32_t *idx, int64_t part_stride);

/* out[t] = idx of the largest val[t, p] over p < nparts (the first one on ties). */
void pk_cpu_argmax_reduce(const float *val, const int32_t *idx, int64_t part_stride, int n_tok,
                          int nparts, int32_t *out);

/* A sampling row's token (kernels/sample.h's rule): logits [V] of the row, params the slot's
 * PK_SAMPLE_PARAMS words (inverse temperature > 0), pos the position of the token drawn; greedy
 * (the row's argmax) when no logit can be drawn (all NaN or infinite). */
int32_t pk_cpu_sample_row(const pk_bf16 *logits, int V, const int32_t *params, int32_t pos, int32_t greedy);

#endif /* PK_CPU_KERNELS_H */
