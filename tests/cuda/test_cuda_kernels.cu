// SPDX-License-Identifier: Apache-2.0
/* test_cuda_kernels.cu — every CUDA task kernel (src/kernels/cuda) against its CPU kernel.
 *
 * Each device function runs in a one-CTA wrapper kernel (PK_CUDA_THREADS threads, dynamic shared
 * memory PK_CUDA_SMEM_BYTES) over a sweep of shapes with odd sizes, fused weights, misaligned rows
 * and tiles with n0 > 0; the CPU kernel (src/kernels/cpu, linked as C objects) computes the
 * reference. Fresh random inputs per case; outputs poisoned (0xFFFF) on both sides, so every tile
 * element must be written and everything else (other columns, rows >= n_tok, unused cache slots)
 * left alone. bf16 results must agree within abs 2e-2 + rel 2e-2 · |ref|; embedding, argmax and
 * the V cache bit for bit. GEMV weights are drawn at a model's scale (±2/sqrt(K): outputs O(1)):
 * with O(1) weights an output near 0 is a difference of terms of size ~30, and one bf16 step of an
 * input element (which a different but valid fp32 sum order in the RMSNorm scale can cause) moves
 * it by more than abs 2e-2 — seen once at K 3072 before the weights were scaled. Each case runs
 * twice on the GPU: the two results must be the same bits.
 * Prints one line per case, a table per kind, then "cuda_kernels: N passed, N failed".
 * No GPU: says "skipped" and passes.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

/* The per-shape tuning the generated kernel.cu gives the task kernels (runtime/cuda/gen_api.h):
 * here the general case, the one the larger models' graphs get. */
struct pk_gen_tuning {
    static constexpr bool lin_wst_lds = false;
    static constexpr int lin_pace_kb = 48;
    static constexpr bool attd_bulk_rows = false;
    static constexpr unsigned debug_spin_limit_ms = 0u;
    static constexpr unsigned debug_stall_task = 0xffffffffu;
};
#include "kernels/cuda/cuda_kernels.cuh"

#include "../check.h"

#define POISON 0xFFFFu
#define ATOL 2e-2
#define RTOL 2e-2

#define CU(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                      \
                    cudaGetErrorString(e_));                                                  \
            exit(2);                                                                          \
        }                                                                                     \
    } while (0)

/* ---- one-CTA wrappers ------------------------------------------------------------------------ */

#define WRAP __global__ void __launch_bounds__(PK_CUDA_THREADS, 1)
#define SMEM extern __shared__ __align__(16) char smem_[]

WRAP k_embedding(const int32_t *tokens, int n_tok, pk_rows w, int col0, int ncols, pk_bf16 *out,
                 int64_t out_stride) {
    SMEM;
    pk_dev_embedding(tokens, n_tok, &w, col0, ncols, out, out_stride, smem_);
}
WRAP k_rmsnorm(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *w, int n_tok, int hidden,
               float eps, pk_bf16 *out, int64_t out_stride) {
    SMEM;
    pk_dev_rmsnorm(x, x_stride, w, n_tok, hidden, eps, out, out_stride, smem_);
}
/* stage != 0: the tile's rows are first copied into shared memory after the kernels'
 * PK_CUDA_SMEM_BYTES and the kernel reads them from there (wst, wst_rows = ncols), as static mode
 * runs a task whose tile pk_stage_weights staged before its wait (whole tiles of contiguous
 * 16-byte rows [K]: the caller checks). Returns wst (NULL when not staging). Whole CTA. */
__device__ const pk_bf16 *stage_tile(const pk_rows &w, int n0, int ncols, int K, int stage, char *smem) {
    if (!stage) return NULL;
    pk_bf16 *wst = (pk_bf16 *)(smem + PK_CUDA_SMEM_BYTES);
    const uint4 *src = (const uint4 *)pk_dev_rows_get(&w, (uint32_t)n0);
    for (int64_t e = threadIdx.x; e < (int64_t)ncols * K / 8; e += blockDim.x) ((uint4 *)wst)[e] = src[e];
    __syncthreads();
    return wst;
}
WRAP k_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K, pk_rows w, int n0, int ncols,
              const pk_bf16 *res, int64_t res_stride, pk_bf16 *out, int64_t out_stride, int stage) {
    SMEM;
    const pk_bf16 *wst = stage_tile(w, n0, ncols, K, stage, smem_);
    pk_dev_linear(x, x_stride, n_tok, K, &w, n0, ncols, res, res_stride, out, out_stride, smem_, wst,
                  wst ? ncols : 0);
}
WRAP k_rmsnorm_linear(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *norm_w, float eps,
                      int n_tok, int K, pk_rows w, int n0, int ncols, pk_bf16 *out,
                      int64_t out_stride, int stage) {
    SMEM;
    const pk_bf16 *wst = stage_tile(w, n0, ncols, K, stage, smem_);
    pk_dev_rmsnorm_linear(x, x_stride, norm_w, eps, n_tok, K, &w, n0, ncols, out, out_stride, smem_, wst,
                          wst ? ncols : 0);
}
WRAP k_silu_mul_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K, pk_rows w, int n0,
                       int ncols, const pk_bf16 *res, int64_t res_stride, pk_bf16 *out,
                       int64_t out_stride, int stage) {
    SMEM;
    const pk_bf16 *wst = stage_tile(w, n0, ncols, K, stage, smem_);
    pk_dev_silu_mul_linear(x, x_stride, n_tok, K, &w, n0, ncols, res, res_stride, out, out_stride, smem_, wst,
                           wst ? ncols : 0);
}
WRAP k_silu_mul(const pk_bf16 *x, int64_t x_stride, int n_tok, int I, int i0, int ncols,
                pk_bf16 *out, int64_t out_stride) {
    SMEM;
    pk_dev_silu_mul(x, x_stride, n_tok, I, i0, ncols, out, out_stride, smem_);
}
WRAP k_attention(pk_layer_params p, pk_attn_step s, int kv0, int nkv, const pk_bf16 *qkv,
                 int64_t qkv_stride, pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm,
                 const pk_bf16 *k_norm, pk_bf16 *out, int64_t out_stride) {
    SMEM;
    pk_dev_attention(&p, NULL, &s, kv0, nkv, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, out,
                     out_stride, smem_);
}
WRAP k_argmax_partial(const pk_bf16 *logits, int64_t stride, int n_tok, int v0, int nv,
                      float *val, int32_t *idx, int64_t part_stride) {
    SMEM;
    pk_dev_argmax_partial(logits, stride, n_tok, v0, nv, val, idx, part_stride, smem_);
}
WRAP k_argmax_reduce(const float *val, const int32_t *idx, int64_t part_stride, int n_tok,
                     int nparts, int32_t *out) {
    SMEM;
    pk_dev_argmax_reduce(val, idx, part_stride, n_tok, nparts, out, smem_);
}
WRAP k_sample_rows(const pk_bf16 *logits, int64_t stride, int V, int n_tok, const int32_t *slot,
                   const int32_t *params, const int32_t *pos, int32_t *out) {
    SMEM;
    pk_dev_sample_rows(logits, stride, V, n_tok, slot, params, pos, out, smem_);
}
__global__ void k_inv_freq(pk_layer_params p, float *out) {
    for (int i = threadIdx.x; i < p.head_dim / 2; i += blockDim.x)
        out[i] = pk_dev_rope_inv_freq1(&p, i);
}

/* Decode-shaped GEMV over the whole chip: CTA b computes output columns [b·tile, +tile). */
WRAP k_linear_grid(const pk_bf16 *x, int n_tok, int K, pk_rows w, int N, int tile, pk_bf16 *out) {
    SMEM;
    int n0 = blockIdx.x * tile, nc = N - n0 < tile ? N - n0 : tile;
    if (nc > 0) pk_dev_linear(x, K, n_tok, K, &w, n0, nc, NULL, 0, out + n0, N, smem_);
}

/* A multi-row step of a whole linear layer: CTA b takes columns [b · tile, +tile) of all n_tok rows,
 * as the persistent kernel's tasks do. xn: 0 x, 1 rmsnorm(x), 2 silu(gate) · up (x is [n_tok, 2K]). */
WRAP k_mma_grid(int xn, const pk_bf16 *x, const pk_bf16 *nw, int n_tok, int K, pk_rows w, int N, int tile,
                pk_bf16 *out) {
    SMEM;
    int n0 = blockIdx.x * tile, nc = N - n0 < tile ? N - n0 : tile;
    if (nc <= 0) return;
    if (xn == 1)
        pk_dev_rmsnorm_linear(x, K, nw, 1e-6f, n_tok, K, &w, n0, nc, out + n0, N, smem_);
    else if (xn == 2)
        pk_dev_silu_mul_linear(x, 2 * K, n_tok, K, &w, n0, nc, NULL, 0, out + n0, N, smem_);
    else
        pk_dev_linear(x, K, n_tok, K, &w, n0, nc, NULL, 0, out + n0, N, smem_);
}

/* A multi-row step of a whole linear layer as the persistent kernel's G tasks: CTA b is task b
 * (columns [b · N / G, (b + 1) · N / G)), with m > 1 sharing its chunk of m tasks as 2-D tiles
 * (pk_lin_chunk), else its own columns. xn as k_mma_grid's; res: a residual [n_tok, N] or NULL.
 * block > 0: the SwiGLU layer (xn 1 into gu [n_tok, N], then out [n_tok, N / 2] in pairs of
 * `block` gate and `block` up columns, a task's tile whole pairs). */
WRAP k_chunk_grid(int xn, const pk_bf16 *x, const pk_bf16 *nw, const pk_bf16 *res, int n_tok, int K, pk_rows w,
                  int N, int G, int m, int block, pk_bf16 *gu, pk_bf16 *out) {
    SMEM;
    const int b = blockIdx.x, n0 = (int)((int64_t)b * N / G), nc = (int)((int64_t)(b + 1) * N / G) - n0;
    const pk_lin_chunk ch = m > 1 ? pk_lin_chunk_of(b, N, G, m, 2 * block) : PK_LIN_OWN_TILE;
    if (block > 0) {
        pk_dev_rmsnorm_linear(x, K, nw, 1e-6f, n_tok, K, &w, n0, nc, gu + n0, N, smem_, nullptr, 0, nullptr, 0,
                              nullptr, 0, 0, 0, ch);
        __syncthreads();
        if (m > 1)
            pk_dev_swiglu_chunk(gu + n0, N, n_tok, block, out + n0 / 2, N / 2, ch);
        else
            pk_dev_swiglu_blocks(gu + n0, N, n_tok, nc / 2, block, out + n0 / 2, N / 2);
    } else if (xn == 1) {
        pk_dev_rmsnorm_linear(x, K, nw, 1e-6f, n_tok, K, &w, n0, nc, out + n0, N, smem_, nullptr, 0, nullptr, 0,
                              nullptr, 0, 0, 0, ch);
    } else if (xn == 2) {
        pk_dev_silu_mul_linear(x, 2 * K, n_tok, K, &w, n0, nc, res ? res + n0 : NULL, N, out + n0, N, smem_, nullptr,
                               0, ch);
    } else {
        pk_dev_linear(x, K, n_tok, K, &w, n0, nc, res ? res + n0 : NULL, N, out + n0, N, smem_, nullptr, 0, ch);
    }
}

/* Decode attention over the whole layer: CTA b takes KV head b. MINB = 2: the persistent
 * kernel's register budget (__launch_bounds__(256, 2): 128 registers); 1: unbounded. */
template <int MINB>
__global__ void __launch_bounds__(PK_CUDA_THREADS, MINB)
    k_attention_grid(pk_layer_params p, pk_attn_step s, const pk_bf16 *qkv, int64_t qkv_stride,
                     pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm, const pk_bf16 *k_norm,
                     pk_bf16 *out, int64_t out_stride) {
    SMEM;
    pk_dev_attention(&p, NULL, &s, blockIdx.x, 1, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, out,
                     out_stride, smem_);
}

/* The split over the KV length as the persistent kernel lays it out with one KV head per group:
 * CTA b is KV head b / nsplit, split b % nsplit; its (acc, m, l) tile is column block b of part
 * [T][Hkv · nsplit · G · (D + 2)]. The combine: CTA g folds group g's nsplit blocks into out's
 * heads of KV head g. */
WRAP k_attention_partial(pk_layer_params p, pk_attn_step s, int nsplit, const pk_bf16 *qkv, int64_t qkv_stride,
                         pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm, const pk_bf16 *k_norm,
                         float *part, int64_t part_stride) {
    SMEM;
    const int G = p.num_q_heads / p.num_kv_heads, b = blockIdx.x;
    pk_dev_attention_partial(&p, NULL, &s, b / nsplit, 1, b % nsplit, nsplit, qkv, qkv_stride, k_cache, v_cache,
                             q_norm, k_norm, part + (int64_t)b * G * (p.head_dim + 2), part_stride, smem_);
}
/* Steps of many rows as the persistent kernel runs a split layer (dispatch.cuh): CTA b is KV head
 * b / nsplit and takes Q blocks b % nsplit, b % nsplit + nsplit, ... over the whole KV length,
 * writing out directly (every CTA of a head writes all its rows' K / V, the same values).
 * fpart != NULL: the kv fold (dispatch.cuh, kv_fold 2): CTAs 2i, 2i + 1 of a head share Q blocks
 * i, i + nsplit / 2, ..., each half of the positions, partials in fpart [rows][Hkv][nsplit][G][D +
 * 2] (the split layer's layout) and fctrs [Hkv][rows] (zeroed before the first launch). */
WRAP k_attention_qsplit(pk_layer_params p, pk_attn_step s, int nsplit, const pk_bf16 *qkv, int64_t qkv_stride,
                        pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm, const pk_bf16 *k_norm, pk_bf16 *out,
                        int64_t out_stride, float *fpart = NULL, int64_t fstride = 0,
                        unsigned long long *fctrs = NULL, int frows = 0) {
    SMEM;
    const int b = blockIdx.x, g = b / nsplit, sp = b % nsplit, G = p.num_q_heads / p.num_kv_heads;
    const pk_att_fold f = {fpart + (int64_t)g * nsplit * G * (p.head_dim + 2), fstride, nsplit, fctrs + (int64_t)g * frows};
    const bool fold = fpart != NULL;
#define PK_T_QS(NP)                                                                                                  \
    pk_dev_attention_split<NP>(&p, NULL, &s, g, 1, fold ? sp % 2 : 0, fold ? 2 : 1, qkv, qkv_stride, k_cache, v_cache, \
                               q_norm, k_norm, out, out_stride, nullptr, 0, smem_, fold ? sp / 2 : sp,           \
                               fold ? nsplit / 2 : nsplit, fold ? &f : nullptr)
    switch (pk_att_pairs(p.head_dim)) {
    case 1: PK_T_QS(1); break;
    case 2: PK_T_QS(2); break;
    case 4: PK_T_QS(4); break;
    default: PK_T_QS(8); break;
    }
#undef PK_T_QS
}
WRAP k_attention_combine(int n_tok, int nheads, int D, int nsplit, const float *part, int64_t part_stride,
                         pk_bf16 *out, int64_t out_stride, int smem_bytes) {
    SMEM;
    const int g = blockIdx.x;
    pk_dev_attention_combine(n_tok, nheads, D, nsplit, part + (int64_t)g * nsplit * nheads * (D + 2), part_stride,
                             out + (int64_t)g * nheads * D, out_stride, smem_, smem_bytes);
}

/* The static worker's decode path (attention_decode.cuh): stage the KV cache (before the
 * dependency wait there), wait for the copies, run; the general kernel when the stage declines.
 * part == NULL: CTA b takes KV head b, normalised output into out. part != NULL: split layout of
 * k_attention_partial (CTA b: KV head b / nsplit, split b % nsplit). used[b] = 1 when the decode
 * path ran. */
template <int NP>
__global__ void __launch_bounds__(PK_CUDA_THREADS, 1)
    k_attention_decode(pk_layer_params p, const float *inv_freq, pk_attn_step s, const pk_bf16 *qkv,
                       int64_t qkv_stride, pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm,
                       const pk_bf16 *k_norm, pk_bf16 *out, int64_t out_stride, int nsplit, float *part,
                       int64_t part_stride, int smem_bytes, int *used) {
    SMEM;
    const int S = part ? nsplit : 1, kv0 = blockIdx.x / S, split = blockIdx.x % S;
    float *tile = part ? part + (int64_t)blockIdx.x * (p.num_q_heads / p.num_kv_heads) * (p.head_dim + 2) : nullptr;
    pk_bf16 *o = part ? nullptr : out;
    const int staged = pk_dev_attention_decode_stage<NP>(&p, inv_freq, &s, kv0, 1, split, S, k_cache, v_cache, q_norm,
                                                         k_norm, smem_, smem_bytes);
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
    if (staged > 0)
        pk_dev_attention_decode<NP>(&p, kv0, qkv, k_cache, v_cache, q_norm, k_norm, o, tile, smem_);
    else
        pk_dev_attention_split<NP>(&p, inv_freq, &s, kv0, 1, split, S, qkv, qkv_stride, k_cache, v_cache, q_norm,
                                   k_norm, o, out_stride, tile, part_stride, smem_);
    if (threadIdx.x == 0 && used) used[blockIdx.x] = staged > 0;
}
static int g_smem_optin; /* the device's shared memory per block (opt-in), for the decode path */

/* k_attention_decode over Hkv (· nsplit with part) CTAs with the instance for p.head_dim. */
static void launch_attention_decode(const pk_layer_params &p, const float *inv_freq, const pk_attn_step &s,
                                    const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *kc, pk_bf16 *vc,
                                    const pk_bf16 *qn, const pk_bf16 *kn, pk_bf16 *out, int64_t out_stride,
                                    int *used, int nsplit = 1, float *part = nullptr, int64_t part_stride = 0) {
    const int n = p.num_kv_heads * (part ? nsplit : 1), sm = g_smem_optin;
#define PK_T_DECODE(NP)                                                                                             \
    k_attention_decode<NP><<<n, PK_CUDA_THREADS, sm>>>(p, inv_freq, s, qkv, qkv_stride, kc, vc, qn, kn, out, out_stride, \
                                                       nsplit, part, part_stride, sm, used)
    switch (pk_att_pairs(p.head_dim)) {
    case 1: PK_T_DECODE(1); break;
    case 2: PK_T_DECODE(2); break;
    case 4: PK_T_DECODE(4); break;
    default: PK_T_DECODE(8); break;
    }
#undef PK_T_DECODE
    CU(cudaGetLastError());
}

/* Every kind behind one switch, as the persistent kernel will hold them: never launched, compiled
 * so that `-Xptxas -v` reports the registers of the union (the worker kernel's budget). */
struct all_args {
    pk_layer_params p;
    pk_attn_step s;
    pk_rows w;
    const pk_bf16 *x, *y;
    pk_bf16 *o, *kc, *vc;
    const int32_t *ti;
    int32_t *io;
    float *fo;
    int64_t st;
    int a, b, c, d;
};
WRAP k_all_kinds(int kind, all_args g) {
    SMEM;
    switch (kind) {
    case PK_TASK_EMBEDDING: pk_dev_embedding(g.ti, g.a, &g.w, g.b, g.c, g.o, g.st, smem_); break;
    case PK_TASK_RMSNORM: pk_dev_rmsnorm(g.x, g.st, g.y, g.a, g.b, 1e-6f, g.o, g.st, smem_); break;
    case PK_TASK_RMSNORM_LINEAR:
        pk_dev_rmsnorm_linear(g.x, g.st, g.y, 1e-6f, g.a, g.b, &g.w, g.c, g.d, g.o, g.st, smem_);
        break;
    case PK_TASK_LINEAR:
    case PK_TASK_LINEAR_RESIDUAL:
        pk_dev_linear(g.x, g.st, g.a, g.b, &g.w, g.c, g.d, g.y, g.st, g.o, g.st, smem_);
        break;
    case PK_TASK_SILU_MUL: pk_dev_silu_mul(g.x, g.st, g.a, g.b, g.c, g.d, g.o, g.st, smem_); break;
    case PK_TASK_SILU_MUL_LINEAR_RESIDUAL:
        pk_dev_silu_mul_linear(g.x, g.st, g.a, g.b, &g.w, g.c, g.d, g.y, g.st, g.o, g.st, smem_);
        break;
    case PK_TASK_ATTENTION:
        pk_dev_attention(&g.p, NULL, &g.s, g.a, g.b, g.x, g.st, g.kc, g.vc, g.y, g.y, g.o, g.st, smem_);
        break;
    case PK_TASK_ARGMAX_PARTIAL:
        pk_dev_argmax_partial(g.x, g.st, g.a, g.b, g.c, g.fo, g.io, g.st, smem_);
        break;
    case PK_TASK_ARGMAX_REDUCE:
        pk_dev_argmax_reduce(g.fo, g.ti, g.st, g.a, g.b, g.io, smem_);
        break;
    default: break;
    }
}

#define LAUNCH_SMEM(kern, smem, ...) LAUNCH_GRID(kern, 1, smem, __VA_ARGS__)
#define LAUNCH_GRID(kern, grid, smem, ...)                                                    \
    do {                                                                                      \
        kern<<<(grid), PK_CUDA_THREADS, (smem)>>>(__VA_ARGS__);                               \
        CU(cudaGetLastError());                                                               \
        CU(cudaDeviceSynchronize());                                                          \
    } while (0)
#define LAUNCH(kern, ...) LAUNCH_SMEM(kern, PK_CUDA_SMEM_BYTES, __VA_ARGS__)

static void setup_kernels(void) {
    const void *ks[] = {(const void *)k_embedding,       (const void *)k_rmsnorm,
                        (const void *)k_linear,          (const void *)k_rmsnorm_linear,
                        (const void *)k_silu_mul_linear, (const void *)k_silu_mul,
                        (const void *)k_attention,       (const void *)k_argmax_partial,
                        (const void *)k_argmax_reduce,   (const void *)k_all_kinds,
                        (const void *)k_linear_grid,     (const void *)k_mma_grid, (const void *)k_attention_grid<1>,
                        (const void *)k_attention_grid<2>, (const void *)k_attention_partial, (const void *)k_attention_qsplit,
                        (const void *)k_attention_combine, (const void *)k_sample_rows, (const void *)k_chunk_grid};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        CU(cudaFuncSetAttribute(ks[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                PK_CUDA_SMEM_BYTES));
    CU(cudaDeviceGetAttribute(&g_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    g_smem_optin -= 1024; /* linear.cuh's static __shared__ state, as the runtime leaves 1 KB for it */
    /* the linear kinds also run with all of it: the decode GEMV's async path (linear.cuh) needs
     * more than PK_CUDA_SMEM_BYTES, as the persistent kernel's static mode gives it */
    const void *kl[] = {(const void *)k_linear, (const void *)k_rmsnorm_linear, (const void *)k_silu_mul_linear,
                        (const void *)k_linear_grid};
    for (size_t i = 0; i < sizeof kl / sizeof *kl; i++)
        CU(cudaFuncSetAttribute(kl[i], cudaFuncAttributeMaxDynamicSharedMemorySize, g_smem_optin));
    const void *kd[] = {(const void *)k_attention_decode<1>, (const void *)k_attention_decode<2>,
                        (const void *)k_attention_decode<4>, (const void *)k_attention_decode<8>};
    for (size_t i = 0; i < sizeof kd / sizeof *kd; i++)
        CU(cudaFuncSetAttribute(kd[i], cudaFuncAttributeMaxDynamicSharedMemorySize, g_smem_optin));
}

/* ---- host helpers ---------------------------------------------------------------------------- */

static std::vector<void *> g_dev; /* this case's device buffers */

template <typename T> static T *dalloc(size_t n) {
    void *p = NULL;
    CU(cudaMalloc(&p, (n ? n : 1) * sizeof(T)));
    g_dev.push_back(p);
    return (T *)p;
}
template <typename T> static T *dup(const std::vector<T> &h) {
    T *d = dalloc<T>(h.size());
    CU(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
template <typename T> static void put(T *d, const std::vector<T> &h) {
    CU(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <typename T> static std::vector<T> get(const T *d, size_t n) {
    std::vector<T> h(n);
    CU(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}
static void dfree_all(void) {
    for (void *p : g_dev) CU(cudaFree(p));
    g_dev.clear();
}
static void dpoison(void *d, size_t bytes) { CU(cudaMemset(d, 0xff, bytes)); }

static float bf(pk_bf16 h) { return pk_bf16_to_f32(h); }

/* The layer's RoPE inverse frequencies on the device: the CPU's table, as the code generator
 * emits it for the persistent kernel. */
static float *dup_inv_freq(const pk_layer_params &p) {
    std::vector<float> inv(p.head_dim / 2);
    pk_rope_inv_freq(&p, inv.data());
    return dup(inv);
}

/* n random bf16 in [lo, hi). */
static std::vector<pk_bf16> rand_bf16(size_t n, float lo, float hi, uint64_t *seed) {
    std::vector<pk_bf16> v(n);
    for (size_t i = 0; i < n; i++)
        v[i] = pk_f32_to_bf16(lo + (hi - lo) * 0.5f * (check_rand_f32(seed) + 1.0f));
    return v;
}

/* ---- results: one line per case, a table per kind -------------------------------------------- */

typedef struct result {
    char kind[24], shape[112];
    long n, bad, unwritten, stray;
    double max_err, sum_err;
    int repro; /* 1: the two GPU runs gave the same bits */
} result;

typedef struct kind_sum {
    char kind[24];
    int cases, failed;
    long n, bad;
    double max_err, sum_err;
} kind_sum;

static kind_sum g_sum[32];
static int g_nsum;

static void res_init(result *r, const char *kind, const char *shape) {
    memset(r, 0, sizeof *r);
    snprintf(r->kind, sizeof r->kind, "%s", kind);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    r->repro = 1;
}

/* One value of the tile: tolerance (atol = rtol = 0: bits) against the CPU's. */
static void res_val(result *r, long t, long j, double got, double want, int bits_equal,
                    double atol, double rtol) {
    double err = fabs(got - want);
    r->n++;
    if (!isnan(err)) {
        if (err > r->max_err) r->max_err = err;
        r->sum_err += err;
    }
    int ok = (atol == 0.0 && rtol == 0.0) ? bits_equal : err <= atol + rtol * fabs(want);
    if (ok) return;
    if (r->bad++ < 5)
        fprintf(stderr, "  %s %s: [%ld, %ld] got %.6g want %.6g (err %.3g)\n", r->kind, r->shape,
                t, j, got, want, err);
}

/* gpu and cpu are the same poisoned [rows, stride] buffer after each side ran: the tile (rows
 * < n_tok, columns [c0, c0 + nc)) compared, everything else still poison on the GPU side. */
static void res_bf16(result *r, const std::vector<pk_bf16> &gpu, const std::vector<pk_bf16> &cpu,
                     int rows, int64_t stride, int n_tok, int64_t c0, int64_t nc, int exact) {
    for (int t = 0; t < rows; t++)
        for (int64_t c = 0; c < stride; c++) {
            size_t i = (size_t)t * stride + c;
            int in_tile = t < n_tok && c >= c0 && c < c0 + nc;
            if (!in_tile) {
                if (gpu[i] != POISON) r->stray++;
                continue;
            }
            if (gpu[i] == POISON) {
                r->unwritten++;
                continue;
            }
            res_val(r, t, c - c0, bf(gpu[i]), bf(cpu[i]), gpu[i] == cpu[i], exact ? 0.0 : ATOL,
                    exact ? 0.0 : RTOL);
        }
}

/* A whole KV cache: the CPU's written slots compared, its poison slots still poison. */
static void res_cache(result *r, const std::vector<pk_bf16> &gpu, const std::vector<pk_bf16> &cpu,
                      int exact) {
    for (size_t i = 0; i < cpu.size(); i++) {
        if (cpu[i] == POISON) {
            r->stray += gpu[i] != POISON;
            continue;
        }
        if (gpu[i] == POISON) {
            r->unwritten++;
            continue;
        }
        res_val(r, 0, (long)i, bf(gpu[i]), bf(cpu[i]), gpu[i] == cpu[i], exact ? 0.0 : ATOL,
                exact ? 0.0 : RTOL);
    }
}

static void res_end(result *r) {
    int ok = r->bad == 0 && r->unwritten == 0 && r->stray == 0 && r->repro && r->n > 0;
    printf("%-18s %-58s %9ld %9.3g %9.3g %5ld %s%s\n", r->kind, r->shape, r->n, r->max_err,
           r->n ? r->sum_err / (double)r->n : 0.0, r->bad, ok ? "ok" : "FAIL",
           r->repro ? "" : " (not reproducible)");
    CHECK(ok, "%s %s: %ld of %ld mismatch, %ld unwritten, %ld written outside, repro %d", r->kind,
          r->shape, r->bad, r->n, r->unwritten, r->stray, r->repro);
    kind_sum *k = NULL;
    for (int i = 0; i < g_nsum; i++)
        if (strcmp(g_sum[i].kind, r->kind) == 0) k = &g_sum[i];
    if (!k) {
        k = &g_sum[g_nsum++];
        memset(k, 0, sizeof *k);
        snprintf(k->kind, sizeof k->kind, "%s", r->kind);
    }
    k->cases++;
    k->failed += !ok;
    k->n += r->n;
    k->bad += r->bad;
    if (r->max_err > k->max_err) k->max_err = r->max_err;
    k->sum_err += r->sum_err;
    dfree_all();
}

/* ---- weights: plain, padded, fused (pk_rows) ------------------------------------------------- */

typedef struct weight {
    pk_rows h, d; /* host and device views of the same rows */
    int rows;
    std::vector<pk_bf16> seg[PK_FUSE_MAX];
} weight;

/* layout 0: plain, stride K; 1: plain, stride K + 3 (rows start at any 2-byte offset);
 * 2: fused {7, 4} x groups, stride K, segment 1 starts one element into its buffer;
 * 3: fused {3, 5, 2} x groups, stride K + 8. At least min_rows rows, values in [-scale, scale). */
static void weight_make(weight *w, int layout, int K, int min_rows, float scale,
                        uint64_t *seed) {
    static const uint32_t two[2] = {7, 4}, three[3] = {3, 5, 2};
    const uint32_t *segs = NULL;
    uint32_t nseg = 1, plain_rows = (uint32_t)min_rows;
    int64_t stride = K, offs[PK_FUSE_MAX] = {0, 0, 0, 0};
    if (layout == 0 || layout == 1) {
        segs = &plain_rows;
        stride = layout == 1 ? K + 3 : K;
    } else if (layout == 2) {
        segs = two;
        nseg = 2;
        offs[1] = 1;
    } else {
        segs = three;
        nseg = 3;
        stride = K + 8;
    }
    uint32_t group_rows = 0;
    for (uint32_t i = 0; i < nseg; i++) group_rows += segs[i];
    uint32_t groups = ((uint32_t)min_rows + group_rows - 1) / group_rows;
    w->rows = (int)(groups * group_rows);
    memset(&w->h, 0, sizeof w->h);
    w->h.nseg = nseg;
    w->h.row_stride = (uint64_t)stride;
    w->d = w->h;
    for (uint32_t i = 0; i < nseg; i++) {
        size_t n = (size_t)groups * segs[i] * stride + (size_t)offs[i];
        w->seg[i] = rand_bf16(n, -scale, scale, seed);
        w->h.seg[i] = w->seg[i].data() + offs[i];
        w->h.seg_rows[i] = w->d.seg_rows[i] = segs[i];
        w->d.seg[i] = dup(w->seg[i]) + offs[i];
    }
}

/* ---- embedding ------------------------------------------------------------------------------- */

static void test_embedding(uint64_t *seed) {
    static const int Hs[] = {7, 80, 1003, 4096};
    static const int ntoks[] = {1, 3, 8};
    int case_i = 0;
    for (int hi = 0; hi < 4; hi++)
        for (int ni = 0; ni < 3; ni++, case_i++) {
            int H = Hs[hi], n_tok = ntoks[ni], layout = case_i % 4, T = n_tok + 2;
            weight w;
            weight_make(&w, layout, H, 50, 1.0f, seed);
            /* tiles: all, an odd offset, the last column */
            int tiles[3][2] = {{0, H}, {H / 3 + 1, H - H / 3 - 1}, {H - 1, 1}};
            int c0 = tiles[case_i % 3][0], nc = tiles[case_i % 3][1];
            std::vector<int32_t> tok(n_tok);
            for (int t = 0; t < n_tok; t++)
                tok[t] = (int32_t)(check_rand_u64(seed) % (uint64_t)w.rows);
            tok[0] = w.rows - 1;
            int64_t stride = nc + 2 + (case_i & 1) * 6;
            size_t on = (size_t)T * stride;
            std::vector<pk_bf16> cpu(on, POISON);
            pk_cpu_embedding(tok.data(), n_tok, &w.h, c0, nc, cpu.data() + 1, stride);
            int32_t *dtok = dup(tok);
            pk_bf16 *dout = dalloc<pk_bf16>(on);
            std::vector<pk_bf16> g[2];
            for (int run = 0; run < 2; run++) {
                dpoison(dout, on * 2);
                LAUNCH(k_embedding, dtok, n_tok, w.d, c0, nc, dout + 1, stride);
                g[run] = get(dout, on);
            }
            char shape[112];
            snprintf(shape, sizeof shape, "H %d cols [%d, +%d) n_tok %d layout %d", H, c0, nc,
                     n_tok, layout);
            result r;
            res_init(&r, "embedding", shape);
            r.repro = g[0] == g[1];
            res_bf16(&r, g[0], cpu, T, stride, n_tok, 1, nc, 1);
            res_end(&r);
        }
}

/* ---- rmsnorm --------------------------------------------------------------------------------- */

static void test_rmsnorm(uint64_t *seed) {
    static const int Hs[] = {80, 200, 1003, 1024, 3072};
    static const int ntoks[] = {1, 3, 8, 11};
    int case_i = 0;
    for (int hi = 0; hi < 5; hi++)
        for (int ni = 0; ni < 4; ni++, case_i++) {
            int H = Hs[hi], n_tok = ntoks[ni], T = n_tok + 2;
            int64_t xs = H + (case_i % 2 ? 5 : 0), os = H + (case_i % 3 ? 0 : 3);
            std::vector<pk_bf16> x = rand_bf16((size_t)T * xs, -2.0f, 2.0f, seed);
            std::vector<pk_bf16> w = rand_bf16(H, 0.5f, 1.5f, seed);
            std::vector<pk_bf16> cpu((size_t)T * os, POISON);
            pk_cpu_rmsnorm(x.data(), xs, w.data(), n_tok, H, 1e-6f, cpu.data(), os);
            pk_bf16 *dx = dup(x), *dw = dup(w), *dout = dalloc<pk_bf16>(cpu.size());
            std::vector<pk_bf16> g[2];
            for (int run = 0; run < 2; run++) {
                dpoison(dout, cpu.size() * 2);
                LAUNCH(k_rmsnorm, dx, xs, dw, n_tok, H, 1e-6f, dout, os);
                g[run] = get(dout, cpu.size());
            }
            char shape[112];
            snprintf(shape, sizeof shape, "H %d n_tok %d x_stride %lld out_stride %lld", H, n_tok,
                     (long long)xs, (long long)os);
            result r;
            res_init(&r, "rmsnorm", shape);
            r.repro = g[0] == g[1];
            res_bf16(&r, g[0], cpu, T, os, n_tok, 0, H, 0);
            res_end(&r);
        }
}

/* ---- the linear family ----------------------------------------------------------------------- */

enum { LIN = 0, LIN_RES = 1, NORM_LIN = 2, SILU_LIN_RES = 3, SILU_LIN = 4 };
static const char *lin_names[] = {"linear", "linear_residual", "rmsnorm_linear",
                                  "silu_mul_linear_res", "silu_mul_linear"};

static void linear_case(int kind, int K, int n_tok, int layout, int n0, int ncols, int x_pad,
                        uint64_t *seed) {
    const int T = n_tok + 2;
    const int xcols = (kind >= SILU_LIN_RES) ? 2 * K : K;
    const int64_t x_stride = xcols + x_pad, out_stride = ncols + 3, res_stride = ncols + 1;
    weight w;
    weight_make(&w, layout, K, n0 + ncols, 2.0f / sqrtf((float)K), seed);
    std::vector<pk_bf16> x = rand_bf16((size_t)T * x_stride, kind >= SILU_LIN_RES ? -3.0f : -1.0f,
                                       kind >= SILU_LIN_RES ? 3.0f : 1.0f, seed);
    std::vector<pk_bf16> nw = rand_bf16(K, 0.5f, 1.5f, seed);
    std::vector<pk_bf16> res = rand_bf16((size_t)T * res_stride, -4.0f, 4.0f, seed);
    const bool has_res = kind == LIN_RES || kind == SILU_LIN_RES;
    size_t on = (size_t)T * out_stride;
    std::vector<pk_bf16> cpu(on, POISON);
    pk_bf16 *co = cpu.data() + 1; /* the tile starts at column 1 */
    switch (kind) {
    case LIN:
    case LIN_RES:
        pk_cpu_linear(x.data(), x_stride, n_tok, K, &w.h, n0, ncols, has_res ? res.data() : NULL,
                      res_stride, co, out_stride);
        break;
    case NORM_LIN:
        pk_cpu_rmsnorm_linear(x.data(), x_stride, nw.data(), 1e-6f, n_tok, K, &w.h, n0, ncols, co,
                              out_stride);
        break;
    default:
        pk_cpu_silu_mul_linear(x.data(), x_stride, n_tok, K, &w.h, n0, ncols,
                               has_res ? res.data() : NULL, res_stride, co, out_stride);
        break;
    }
    pk_bf16 *dx = dup(x), *dnw = dup(nw), *dres = has_res ? dup(res) : NULL;
    pk_bf16 *dout = dalloc<pk_bf16>(on);
    /* run 0 with the kernels' PK_CUDA_SMEM_BYTES, run 1 with all the shared memory a block may
     * have: decode tiles the async path takes (linear.cuh) run it in run 1 only; run 2, where the
     * tile can be staged as static mode stages it (contiguous 16-byte rows, whole tile beside the
     * kernels' area), reads the weights from shared memory. "repro" says that every run gave the
     * same bits. */
    const int64_t tile_bytes = (int64_t)ncols * K * 2;
    const bool stage_run = layout == 0 && K % 8 == 0 && tile_bytes <= g_smem_optin - PK_CUDA_SMEM_BYTES;
    std::vector<pk_bf16> g[3];
    for (int run = 0; run < 3; run++) {
        if (run == 2 && !stage_run) {
            g[run] = g[0];
            continue;
        }
        dpoison(dout, on * 2);
        pk_bf16 *o = dout + 1;
        const int sm = run == 0 ? PK_CUDA_SMEM_BYTES
                       : run == 2 ? PK_CUDA_SMEM_BYTES + (int)tile_bytes
                                  : g_smem_optin;
        const int st = run == 2, grid = 1;
        switch (kind) {
        case LIN:
        case LIN_RES:
            LAUNCH_GRID(k_linear, grid, sm, dx, x_stride, n_tok, K, w.d, n0, ncols, dres, res_stride, o,
                        out_stride, st);
            break;
        case NORM_LIN:
            LAUNCH_GRID(k_rmsnorm_linear, grid, sm, dx, x_stride, dnw, 1e-6f, n_tok, K, w.d, n0, ncols, o,
                        out_stride, st);
            break;
        default:
            LAUNCH_GRID(k_silu_mul_linear, grid, sm, dx, x_stride, n_tok, K, w.d, n0, ncols, dres, res_stride,
                        o, out_stride, st);
            break;
        }
        g[run] = get(dout, on);
    }
    char shape[112];
    snprintf(shape, sizeof shape, "K %d n_tok %d cols [%d, +%d) of %d layout %d x_pad %d", K,
             n_tok, n0, ncols, w.rows, layout, x_pad);
    result r;
    res_init(&r, lin_names[kind], shape);
    r.repro = g[0] == g[1] && g[0] == g[2];
    res_bf16(&r, g[0], cpu, T, out_stride, n_tok, 1, ncols, 0);
    res_end(&r);
}

/* A layer's event chunks as 2-D tiles (pk_lin_chunk): its G tasks with chunks of m give the bits of
 * the same tasks each on its own columns (the rows' scales and every output's K sum do not depend on
 * the tile), and the CPU's values. kind: LIN, LIN_RES, NORM_LIN, SILU_LIN_RES, or NORM_LIN with
 * block > 0 (the SwiGLU layer: out = silu(gate) · up of its gu). */
static void linear_chunk_case(int kind, int K, int n_tok, int N, int G, int m, int block, uint64_t *seed) {
    const int xn = kind == NORM_LIN ? 1 : kind == SILU_LIN_RES ? 2 : 0, xcols = xn == 2 ? 2 * K : K;
    const int ON = block > 0 ? N / 2 : N; /* out's columns */
    weight w;
    weight_make(&w, 0, K, N, 2.0f / sqrtf((float)K), seed);
    std::vector<pk_bf16> x = rand_bf16((size_t)n_tok * xcols, xn == 2 ? -3.0f : -1.0f, xn == 2 ? 3.0f : 1.0f, seed);
    std::vector<pk_bf16> nw = rand_bf16(K, 0.5f, 1.5f, seed);
    std::vector<pk_bf16> res = rand_bf16((size_t)n_tok * N, -4.0f, 4.0f, seed);
    const bool has_res = kind == LIN_RES || kind == SILU_LIN_RES;
    std::vector<pk_bf16> cpu((size_t)n_tok * ON, POISON), cgu((size_t)n_tok * N);
    switch (kind) {
    case LIN:
    case LIN_RES:
        pk_cpu_linear(x.data(), K, n_tok, K, &w.h, 0, N, has_res ? res.data() : NULL, N, cpu.data(), N);
        break;
    case NORM_LIN:
        pk_cpu_rmsnorm_linear(x.data(), K, nw.data(), 1e-6f, n_tok, K, &w.h, 0, N, block > 0 ? cgu.data() : cpu.data(),
                              N);
        if (block > 0) pk_cpu_swiglu_blocks(cgu.data(), N, n_tok, ON, block, cpu.data(), ON);
        break;
    default:
        pk_cpu_silu_mul_linear(x.data(), xcols, n_tok, K, &w.h, 0, N, res.data(), N, cpu.data(), N);
        break;
    }
    pk_bf16 *dx = dup(x), *dnw = dup(nw), *dres = has_res ? dup(res) : NULL;
    pk_bf16 *dgu = dalloc<pk_bf16>((size_t)n_tok * N), *dout = dalloc<pk_bf16>((size_t)n_tok * ON);
    std::vector<pk_bf16> g[2];
    for (int run = 0; run < 2; run++) {
        dpoison(dout, (size_t)n_tok * ON * 2);
        LAUNCH_GRID(k_chunk_grid, G, PK_CUDA_SMEM_BYTES, xn, dx, dnw, dres, n_tok, K, w.d, N, G, run ? m : 1, block,
                    dgu, dout);
        g[run] = get(dout, (size_t)n_tok * ON);
    }
    char shape[112];
    snprintf(shape, sizeof shape, "K %d n_tok %d N %d tasks %d chunks of %d%s", K, n_tok, N, G, m,
             block > 0 ? " swiglu" : "");
    result r;
    res_init(&r, "linear_chunk", shape);
    r.repro = g[0] == g[1]; /* the chunk's tiles: the own tiles' bits */
    res_bf16(&r, g[1], cpu, n_tok, ON, n_tok, 0, ON, 0);
    res_end(&r);
}

/* Batch invariance of the multi-row path (linear_mma.cuh): rows [off, off + n) of one launch over
 * N rows, and the same rows as a launch of their own (x, residual and out pointers moved to row
 * off), give the same bits. Rows sit elsewhere in the mma tiles and row blocks in the two. */
static void linear_invariance_case(int kind, int K, int N, int off, int n, int ncols, int layout, uint64_t *seed) {
    const int xcols = kind >= SILU_LIN_RES ? 2 * K : K;
    const int64_t x_stride = xcols, out_stride = ncols, res_stride = ncols;
    weight w;
    weight_make(&w, layout, K, ncols, 2.0f / sqrtf((float)K), seed);
    std::vector<pk_bf16> x = rand_bf16((size_t)N * x_stride, -1.0f, 1.0f, seed);
    std::vector<pk_bf16> nw = rand_bf16(K, 0.5f, 1.5f, seed);
    std::vector<pk_bf16> res = rand_bf16((size_t)N * res_stride, -4.0f, 4.0f, seed);
    const bool has_res = kind == LIN_RES || kind == SILU_LIN_RES;
    pk_bf16 *dx = dup(x), *dnw = dup(nw), *dres = has_res ? dup(res) : NULL;
    pk_bf16 *dout = dalloc<pk_bf16>((size_t)N * out_stride);
    std::vector<pk_bf16> g[2];
    for (int run = 0; run < 2; run++) {
        const int64_t r0 = run == 0 ? 0 : off;
        const int rows = run == 0 ? N : n;
        dpoison(dout, (size_t)N * out_stride * 2);
        const pk_bf16 *xx = dx + r0 * x_stride, *rr = dres ? dres + r0 * res_stride : NULL;
        pk_bf16 *o = dout + r0 * out_stride;
        switch (kind) {
        case LIN:
        case LIN_RES:
            LAUNCH_GRID(k_linear, 1, PK_CUDA_SMEM_BYTES, xx, x_stride, rows, K, w.d, 0, ncols, rr, res_stride, o,
                        out_stride, 0);
            break;
        case NORM_LIN:
            LAUNCH_GRID(k_rmsnorm_linear, 1, PK_CUDA_SMEM_BYTES, xx, x_stride, dnw, 1e-6f, rows, K, w.d, 0, ncols, o,
                        out_stride, 0);
            break;
        default:
            LAUNCH_GRID(k_silu_mul_linear, 1, PK_CUDA_SMEM_BYTES, xx, x_stride, rows, K, w.d, 0, ncols, rr,
                        res_stride, o, out_stride, 0);
            break;
        }
        g[run] = get(dout, (size_t)N * out_stride);
    }
    long differ = 0;
    for (int t = off; t < off + n; t++)
        for (int j = 0; j < ncols; j++) differ += g[0][(size_t)t * out_stride + j] != g[1][(size_t)t * out_stride + j];
    char shape[112];
    snprintf(shape, sizeof shape, "K %d rows [%d, +%d) alone and of %d, %d cols layout %d", K, off, n, N, ncols, layout);
    printf("%-18s %-58s %s\n", "invariance", shape, differ ? "FAIL" : "ok");
    CHECK(differ == 0, "%s %s: %ld values differ between the two launches", lin_names[kind], shape, differ);
}

static void test_linear(uint64_t *seed) {
    static const int Ks[] = {80, 200, 1003, 1024, 3072};
    static const int ntoks[] = {1, 3, 8};
    /* tiles (n0, ncols): many rounds, one warp per column group, split-K (S = 4, S = 8) */
    static const int tiles[4][2] = {{3, 297}, {17, 64}, {101, 5}, {250, 1}};
    int case_i = 0;
    for (int kind = 0; kind < 5; kind++)
        for (int ki = 0; ki < 5; ki++)
            for (int ni = 0; ni < 3; ni++, case_i++)
                linear_case(kind, Ks[ki], ntoks[ni], case_i % 4, tiles[(case_i / 4 + ni) % 4][0],
                            tiles[(case_i / 4 + ni) % 4][1], (case_i % 3 == 1) ? 5 : 0, seed);
    /* more row blocks than one (8 + 4), NT = 2, and K too large for NT rows of shared memory
     * (staged in K chunks: silu_mul's down projection at Llama-3-8B's 14336, Qwen3-32B's 25600) */
    linear_case(LIN_RES, 1024, 12, 3, 9, 40, 0, seed);
    linear_case(NORM_LIN, 3072, 2, 0, 1, 33, 0, seed);
    linear_case(NORM_LIN, 4096, 16, 1, 2, 24, 5, seed);
    linear_case(SILU_LIN_RES, 14336, 8, 0, 5, 40, 0, seed);
    linear_case(SILU_LIN_RES, 14336, 4, 2, 1, 7, 0, seed);
    linear_case(SILU_LIN_RES, 25600, 2, 3, 3, 20, 3, seed);
    linear_case(LIN, 25600, 1, 1, 0, 9, 0, seed);
    /* decode tiles of 48 and 144 columns: 4-column groups leave the 8 warps a ragged last round */
    linear_case(NORM_LIN, 4096, 1, 0, 48, 48, 0, seed);
    linear_case(LIN_RES, 1024, 1, 1, 0, 144, 0, seed);
    linear_case(SILU_LIN_RES, 3072, 1, 2, 6, 48, 3, seed);
    /* decode tiles the async path takes in run 1 (contiguous rows, K a multiple of 256, >= 32
     * columns in 4-row groups, 16-31 in 2-row groups): one round, ragged rounds, many rounds, the
     * 8B down projection's K */
    linear_case(LIN, 1024, 1, 0, 0, 32, 0, seed);
    linear_case(LIN_RES, 2048, 1, 0, 7, 297, 0, seed);
    linear_case(NORM_LIN, 4096, 1, 0, 3, 44, 0, seed);
    linear_case(SILU_LIN_RES, 12288, 1, 0, 5, 36, 3, seed);
    linear_case(SILU_LIN, 3072, 1, 0, 64, 64, 0, seed);
    /* 16-31 columns: 2-row groups (the Qwen3-1.7B's down_proj, 16 rows [6144]), a ragged last
     * round (12 groups), a spare column (21 columns) */
    linear_case(LIN_RES, 6144, 1, 0, 16, 16, 0, seed);
    linear_case(SILU_LIN_RES, 3072, 1, 0, 3, 24, 0, seed);
    linear_case(NORM_LIN, 2048, 1, 0, 1, 21, 0, seed);
    /* the one-token tiles of the small models, which static mode stages whole: the Qwen3-0.6B's
     * qkv (32 rows), gate / up (48), o_proj and down (8), the 1.7B's o_proj (16), pk-tiny's K 256
     * and 768, 90 rows of K 512, fused segments (layout 3), a single row */
    linear_case(NORM_LIN, 1024, 1, 0, 3, 32, 0, seed);
    linear_case(NORM_LIN, 1024, 1, 0, 0, 48, 0, seed);
    linear_case(LIN_RES, 2048, 1, 0, 5, 8, 0, seed);
    linear_case(SILU_LIN_RES, 3072, 1, 0, 2, 8, 0, seed);
    linear_case(LIN_RES, 2048, 1, 0, 0, 16, 0, seed);
    linear_case(NORM_LIN, 256, 1, 0, 1, 4, 0, seed);
    linear_case(LIN, 768, 1, 0, 0, 12, 0, seed);
    linear_case(NORM_LIN, 512, 1, 0, 7, 90, 0, seed);
    linear_case(LIN_RES, 1024, 1, 3, 2, 20, 0, seed);
    linear_case(SILU_LIN, 1024, 1, 0, 0, 1, 0, seed);
    /* many column groups, and a last group with spare rows (130 = 32 · 4 + 2) */
    linear_case(SILU_LIN_RES, 3072, 1, 0, 0, 1000, 0, seed);
    linear_case(NORM_LIN, 4096, 1, 0, 2, 130, 0, seed);
    /* steps of many rows (tensor cores, linear_mma.cuh): several row blocks (128 rows) and column
     * blocks (64), ragged last blocks, K not a multiple of the 64-element slice or of 8, fused
     * segments (layout 3), padded x rows, a single column */
    linear_case(NORM_LIN, 1024, 200, 0, 3, 130, 0, seed);
    linear_case(LIN_RES, 2048, 129, 1, 0, 64, 5, seed);
    linear_case(SILU_LIN_RES, 3072, 64, 0, 1, 48, 0, seed);
    linear_case(LIN, 1003, 77, 2, 5, 71, 3, seed);
    linear_case(NORM_LIN, 200, 300, 3, 2, 33, 0, seed);
    linear_case(SILU_LIN, 80, 17, 0, 0, 1, 0, seed);
    linear_case(LIN_RES, 4096, 256, 0, 7, 96, 0, seed);
    linear_case(SILU_LIN_RES, 12288, 40, 0, 3, 36, 0, seed);
    /* event chunks as 2-D tiles: a whole layer in one chunk (the 0.6B's qkv, o_proj, gate_up as
     * SwiGLU pairs of 24, down), several chunks, ragged tiles (uneven task tiles, n_tok not a
     * multiple of 128, more tasks than tiles), the 64-column blocks */
    linear_chunk_case(NORM_LIN, 1024, 512, 4096, 128, 128, 0, seed);
    linear_chunk_case(LIN_RES, 2048, 300, 1024, 128, 128, 0, seed);
    linear_chunk_case(NORM_LIN, 1024, 200, 6144, 128, 128, 24, seed);
    linear_chunk_case(LIN_RES, 3072, 129, 1024, 128, 128, 0, seed);
    linear_chunk_case(SILU_LIN_RES, 1536, 77, 1000, 132, 33, 0, seed);
    linear_chunk_case(LIN, 1003, 2, 517, 12, 4, 0, seed);
    linear_chunk_case(NORM_LIN, 512, 640, 768, 16, 8, 8, seed);
    linear_chunk_case(NORM_LIN, 256, 33, 96, 4, 4, 12, seed);
    /* a row's bits do not depend on the other rows of its step */
    linear_invariance_case(NORM_LIN, 1024, 140, 131, 5, 70, 0, seed);
    linear_invariance_case(LIN_RES, 1003, 70, 10, 3, 33, 2, seed);
    linear_invariance_case(SILU_LIN_RES, 3072, 300, 17, 150, 64, 0, seed);
    linear_invariance_case(LIN, 256, 40, 0, 2, 129, 3, seed);
}

/* ---- silu_mul -------------------------------------------------------------------------------- */

static void test_silu_mul(uint64_t *seed) {
    static const int Is[] = {80, 200, 1003, 3072};
    static const int ntoks[] = {1, 3, 8};
    int case_i = 0;
    for (int ii = 0; ii < 4; ii++)
        for (int ni = 0; ni < 3; ni++, case_i++) {
            int I = Is[ii], n_tok = ntoks[ni], T = n_tok + 2;
            int tiles[3][2] = {{0, I}, {I / 4 + 1, I / 2}, {I - 9, 9}};
            int i0 = tiles[case_i % 3][0], nc = tiles[case_i % 3][1];
            int64_t xs = 2 * I + (case_i % 2) * 3, os = nc + 1 + (case_i % 3 == 0) * 7;
            std::vector<pk_bf16> x = rand_bf16((size_t)T * xs, -6.0f, 6.0f, seed);
            std::vector<pk_bf16> cpu((size_t)T * os, POISON);
            pk_cpu_silu_mul(x.data(), xs, n_tok, I, i0, nc, cpu.data(), os);
            pk_bf16 *dx = dup(x), *dout = dalloc<pk_bf16>(cpu.size());
            std::vector<pk_bf16> g[2];
            for (int run = 0; run < 2; run++) {
                dpoison(dout, cpu.size() * 2);
                LAUNCH(k_silu_mul, dx, xs, n_tok, I, i0, nc, dout, os);
                g[run] = get(dout, cpu.size());
            }
            char shape[112];
            snprintf(shape, sizeof shape, "I %d cols [%d, +%d) n_tok %d x_stride %lld", I, i0, nc,
                     n_tok, (long long)xs);
            result r;
            res_init(&r, "silu_mul", shape);
            r.repro = g[0] == g[1];
            res_bf16(&r, g[0], cpu, T, os, n_tok, 0, nc, 0);
            res_end(&r);
        }
}

/* ---- attention ------------------------------------------------------------------------------- */

static pk_layer_params attn_params(int Hq, int Hkv, int D, float theta, int llama3, int qk_norm) {
    pk_layer_params p;
    memset(&p, 0, sizeof p);
    p.kind = PK_TASK_ATTENTION;
    p.grid = 1;
    p.num_q_heads = Hq;
    p.num_kv_heads = Hkv;
    p.head_dim = D;
    p.rope_theta = theta;
    p.rope_scaling = llama3 ? PK_ROPE_SCALING_LLAMA3 : PK_ROPE_SCALING_NONE;
    p.rope_factor = 8.0f;
    p.rope_low_freq_factor = 1.0f;
    p.rope_high_freq_factor = 4.0f;
    p.rope_original_max_position = 8192;
    p.qk_norm_eps = 1e-6f;
    p.has_qk_norm = qk_norm;
    return p;
}

/* inv_freq on the device against pk_rope_inv_freq (rel 1e-6; bit mismatches counted). */
static void test_inv_freq(void) {
    static const struct { float theta; int D, llama3; } cases[] = {
        {10000.0f, 64, 0}, {1000000.0f, 128, 0}, {500000.0f, 128, 1}, {500000.0f, 80, 1},
        {10000.0f, 256, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        pk_layer_params p = attn_params(1, 1, cases[c].D, cases[c].theta, cases[c].llama3, 0);
        int half = cases[c].D / 2;
        std::vector<float> cpu(half);
        pk_rope_inv_freq(&p, cpu.data());
        float *d = dalloc<float>(half);
        k_inv_freq<<<1, 128>>>(p, d);
        CU(cudaGetLastError());
        CU(cudaDeviceSynchronize());
        std::vector<float> g = get(d, half);
        char shape[112];
        long differ = 0;
        for (int i = 0; i < half; i++) differ += memcmp(&g[i], &cpu[i], 4) != 0;
        snprintf(shape, sizeof shape, "theta %g D %d llama3 %d (%ld of %d not bit-equal)",
                 cases[c].theta, cases[c].D, cases[c].llama3, differ, half);
        result r;
        res_init(&r, "rope_inv_freq", shape);
        for (int i = 0; i < half; i++) res_val(&r, 0, i, g[i], cpu[i], 0, 0.0, 1e-6);
        res_end(&r);
    }
}

typedef struct att_row {
    int req, pos;
} att_row;

/* Two requests (A in slot 2, B in slot 0; slot 1 unused) over NSTEP steps:
 *  0: A prefills 0 .. pa-1 beside B's 0 .. pb-1;  1: B decodes pb beside A's chunk pa .. pa+5;
 *  2: A and B decode;  3: A alone decodes (one row: the split over warps, SP = 8).
 * Tasks: KV heads {0} and {1 .. Hkv-1} (kv0 > 0). Pages of `page` slots, shuffled.
 * With `edges`, step 2 also has a row out of the page table and a row of the unmapped slot 1. */
/* nsplit > 1: the same steps also through the split over the KV length (attention_partial +
 * the combine, general and decode paths, on their own caches) against the unsplit CPU
 * output, and those caches against the CPU's at the end. */
static void attention_case(int D, int G, int Hkv, int qk_norm, int llama3, int pa, int pb, int page,
                           int edges, uint64_t *seed, int nsplit = 1) {
    const int NSTEP = 4, MAXREQ = 3;
    const int lenA = pa + 6 + 2, lenB = pb + 2;
    const int ppr = (lenA + page - 1) / page + 1;
    const int npages = MAXREQ * ppr + 3;
    const int Hq = G * Hkv;
    const int64_t cols = (int64_t)Hkv * (G + 2) * D, ocols = (int64_t)Hq * D;
    const int req_slot[2] = {2, 0}, req_len[2] = {lenA, lenB};
    pk_layer_params p = attn_params(Hq, Hkv, D, llama3 ? 500000.0f : 1000000.0f, llama3, qk_norm);

    std::vector<int32_t> pages(npages), page_table((size_t)MAXREQ * ppr);
    for (int i = 0; i < npages; i++) pages[i] = i;
    for (int i = npages - 1; i > 0; i--) {
        int j = (int)(check_rand_u64(seed) % (uint64_t)(i + 1));
        int32_t tmp = pages[i];
        pages[i] = pages[j];
        pages[j] = tmp;
    }
    for (int i = 0; i < MAXREQ * ppr; i++) page_table[i] = pages[i];
    if (edges)
        for (int i = 0; i < ppr; i++) page_table[1 * ppr + i] = -1; /* slot 1: unmapped */

    std::vector<pk_bf16> seq[2];
    for (int r = 0; r < 2; r++)
        seq[r] = rand_bf16((size_t)req_len[r] * cols, qk_norm ? -1.0f : -3.0f,
                           qk_norm ? 1.0f : 3.0f, seed);
    std::vector<pk_bf16> q_norm = rand_bf16(D, 0.5f, 1.5f, seed);
    std::vector<pk_bf16> k_norm = rand_bf16(D, 0.5f, 1.5f, seed);

    std::vector<att_row> steps[4];
    for (int i = 0; i < pa; i++) steps[0].push_back({0, i});
    for (int i = 0; i < pb; i++) steps[0].push_back({1, i});
    steps[1].push_back({1, pb});
    for (int i = pa; i < pa + 6; i++) steps[1].push_back({0, i});
    steps[2].push_back({0, pa + 6});
    steps[2].push_back({1, pb + 1});
    if (edges) {
        steps[2].push_back({2, 0});        /* request slot 1: no pages */
        steps[2].push_back({3, ppr * page}); /* past the page table */
    }
    steps[3].push_back({0, pa + 7});
    int T = 0;
    for (int st = 0; st < NSTEP; st++) T = (int)steps[st].size() > T ? (int)steps[st].size() : T;
    T += 1;

    size_t cache_n = (size_t)npages * page * Hkv * D;
    std::vector<pk_bf16> kc(cache_n, POISON), vc(cache_n, POISON);
    pk_bf16 *dkc = dalloc<pk_bf16>(cache_n), *dvc = dalloc<pk_bf16>(cache_n);
    dpoison(dkc, cache_n * 2);
    dpoison(dvc, cache_n * 2);
    int32_t *dpt = dup(page_table);
    pk_bf16 *dqn = qk_norm ? dup(q_norm) : NULL, *dkn = qk_norm ? dup(k_norm) : NULL;
    pk_bf16 *dqkv = dalloc<pk_bf16>((size_t)T * cols), *dout = dalloc<pk_bf16>((size_t)T * ocols);
    int32_t *dpos = dalloc<int32_t>(T), *dreq = dalloc<int32_t>(T);

    char shape[112];
    snprintf(shape, sizeof shape, "D %d G %d Hkv %d qk_norm %d llama3 %d A %d B %d page %d%s", D,
             G, Hkv, qk_norm, llama3, lenA, lenB, page, edges ? " edges" : "");
    result r, rd, rs, rsd, rq;
    res_init(&r, "attention", shape);
    res_init(&rd, "attention_decode", shape);
    char sshape[112];
    snprintf(sshape, sizeof sshape, "%.96s split %d", shape, nsplit);
    res_init(&rs, "attention_split", sshape);
    res_init(&rsd, "attn_split_decode", sshape);
    res_init(&rq, "attention_qsplit", sshape);
    result rf;
    res_init(&rf, "attention_kv_fold", sshape);
    bool ran_q = false, ran_f = false;
    const int S = nsplit;
    const int64_t pcols = (int64_t)Hkv * S * G * (D + 2); /* part [T][Hkv][S][G][D + 2] */
    pk_bf16 *dkc2 = NULL, *dvc2 = NULL, *dout2 = NULL;
    float *dpart = NULL;
    unsigned long long *dfctr = NULL; /* the kv fold's Q-block counters [Hkv][T] */
    int *dused2 = NULL, used2 = 0;
    if (S > 1) {
        dkc2 = dalloc<pk_bf16>(cache_n);
        dvc2 = dalloc<pk_bf16>(cache_n);
        dpoison(dkc2, cache_n * 2);
        dpoison(dvc2, cache_n * 2);
        dout2 = dalloc<pk_bf16>((size_t)T * ocols);
        dpart = dalloc<float>((size_t)T * pcols);
        dused2 = dalloc<int>(Hkv * S);
        dfctr = dalloc<unsigned long long>((size_t)Hkv * T);
        CU(cudaMemset(dfctr, 0, (size_t)Hkv * T * 8));
    }
    std::vector<pk_bf16> split_k, split_v;
    std::vector<pk_bf16> last_k, last_v;
    float *dinv = dup_inv_freq(p);
    int *dused = dalloc<int>(Hkv), used = 0;
    /* the decode path takes D 64 / 128 / 256 and G <= 8 (when the context fits shared memory: all here) */
    const int expect_used = pk_attd_shape_ok(D, G) ? Hkv : 0;
    for (int st = 0; st < NSTEP; st++) {
        const int n_tok = (int)steps[st].size();
        std::vector<int32_t> token_pos(T), token_req(T);
        std::vector<pk_bf16> qkv((size_t)T * cols);
        for (int t = 0; t < T; t++) {
            att_row row = steps[st][t < n_tok ? t : 0];
            int src = row.req < 2 ? row.req : 0;
            token_pos[t] = row.pos;
            token_req[t] = row.req == 2 ? 1 : row.req == 3 ? req_slot[0] : req_slot[row.req];
            int spos = row.pos < req_len[src] ? row.pos : 0;
            memcpy(qkv.data() + t * cols, seq[src].data() + spos * cols, (size_t)cols * 2);
        }
        pk_attn_step hs = {n_tok, token_pos.data(), token_req.data(), page_table.data(), ppr, page};
        std::vector<pk_bf16> cpu((size_t)T * ocols, POISON);
        const pk_bf16 *qn = qk_norm ? q_norm.data() : NULL, *kn = qk_norm ? k_norm.data() : NULL;
        pk_cpu_attention(&p, &hs, 0, 1, qkv.data(), cols, kc.data(), vc.data(), qn, kn, cpu.data(),
                         ocols);
        pk_cpu_attention(&p, &hs, 1, Hkv - 1, qkv.data(), cols, kc.data(), vc.data(), qn, kn,
                         cpu.data(), ocols);

        put(dqkv, qkv);
        put(dpos, token_pos);
        put(dreq, token_req);
        pk_attn_step ds = {n_tok, dpos, dreq, dpt, ppr, page};
        std::vector<pk_bf16> g[2], gk[2], gv[2];
        for (int run = 0; run < 2; run++) {
            dpoison(dout, (size_t)T * ocols * 2);
            LAUNCH(k_attention, p, ds, 0, 1, dqkv, cols, dkc, dvc, dqn, dkn, dout, ocols);
            LAUNCH(k_attention, p, ds, 1, Hkv - 1, dqkv, cols, dkc, dvc, dqn, dkn, dout, ocols);
            g[run] = get(dout, (size_t)T * ocols);
            gk[run] = get(dkc, cache_n);
            gv[run] = get(dvc, cache_n);
        }
        r.repro = r.repro && g[0] == g[1] && gk[0] == gk[1] && gv[0] == gv[1];
        res_bf16(&r, g[0], cpu, T, ocols, n_tok, 0, ocols, 0);
        if (n_tok == 1 && token_req[0] < MAXREQ && token_pos[0] / page < ppr) {
            /* the decode path on the same step: the row's K / V slot poisoned first, so the cache
             * comparison below checks the decode path's own writes */
            const int32_t slot = page_table[(size_t)token_req[0] * ppr + token_pos[0] / page] * page +
                                 token_pos[0] % page;
            std::vector<pk_bf16> gd[2];
            for (int run = 0; run < 2; run++) {
                dpoison(dkc + (size_t)slot * Hkv * D, (size_t)Hkv * D * 2);
                dpoison(dvc + (size_t)slot * Hkv * D, (size_t)Hkv * D * 2);
                dpoison(dout, (size_t)T * ocols * 2);
                CU(cudaMemset(dused, 0, Hkv * sizeof(int)));
                launch_attention_decode(p, dinv, ds, dqkv, cols, dkc, dvc, dqn, dkn, dout, ocols, dused);
                CU(cudaDeviceSynchronize());
                gd[run] = get(dout, (size_t)T * ocols);
                gk[run] = get(dkc, cache_n);
                gv[run] = get(dvc, cache_n);
            }
            rd.repro = rd.repro && gd[0] == gd[1] && gk[0] == gk[1] && gv[0] == gv[1];
            res_bf16(&rd, gd[0], cpu, T, ocols, n_tok, 0, ocols, 0);
            std::vector<int> u = get(dused, Hkv);
            used = 0;
            for (int i = 0; i < Hkv; i++) used += u[i];
            res_val(&rd, 0, 0, used, expect_used, used == expect_used, 0.0, 0.0);
        }
        if (st == NSTEP - 1) {
            last_k = gk[0];
            last_v = gv[0];
        }
        if (S > 1) { /* the split: partial (Hkv · S CTAs, concurrent) then combine (Hkv CTAs) */
            std::vector<pk_bf16> gs[2];
            for (int run = 0; run < 2; run++) {
                dpoison(dout2, (size_t)T * ocols * 2);
                CU(cudaMemset(dpart, 0xff, (size_t)T * pcols * 4)); /* NaN */
                k_attention_partial<<<Hkv * S, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(p, ds, S, dqkv, cols, dkc2, dvc2,
                                                                                      dqn, dkn, dpart, pcols);
                CU(cudaGetLastError());
                /* the combine from shared memory (and, below, the decode path's from L2) */
                k_attention_combine<<<Hkv, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(n_tok, G, D, S, dpart, pcols, dout2,
                                                                                  ocols, PK_CUDA_SMEM_BYTES);
                CU(cudaGetLastError());
                CU(cudaDeviceSynchronize());
                gs[run] = get(dout2, (size_t)T * ocols);
            }
            rs.repro = rs.repro && gs[0] == gs[1];
            res_bf16(&rs, gs[0], cpu, T, ocols, n_tok, 0, ocols, 0);
            /* steps of many rows, on the same caches (same K / V): the Q-block split, then (S even)
             * the kv fold, every Q block over two CTAs and folded by the second; its run 1 starts
             * from the counters as run 0 left them (even) */
            for (int fold = 0; n_tok > 1 && fold <= (S % 2 == 0); fold++) {
                result *rr = fold ? &rf : &rq;
                for (int run = 0; run < 2; run++) {
                    dpoison(dout2, (size_t)T * ocols * 2);
                    if (fold) CU(cudaMemset(dpart, 0xff, (size_t)T * pcols * 4)); /* NaN */
                    k_attention_qsplit<<<Hkv * S, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(
                        p, ds, S, dqkv, cols, dkc2, dvc2, dqn, dkn, dout2, ocols, fold ? dpart : NULL, pcols, dfctr, T);
                    CU(cudaGetLastError());
                    CU(cudaDeviceSynchronize());
                    gs[run] = get(dout2, (size_t)T * ocols);
                }
                rr->repro = rr->repro && gs[0] == gs[1];
                res_bf16(rr, gs[0], cpu, T, ocols, n_tok, 0, ocols, 0);
                (fold ? ran_f : ran_q) = true;
            }
            if (n_tok == 1 && token_req[0] < MAXREQ && token_pos[0] / page < ppr) {
                const int32_t slot = page_table[(size_t)token_req[0] * ppr + token_pos[0] / page] * page +
                                     token_pos[0] % page;
                for (int run = 0; run < 2; run++) {
                    dpoison(dkc2 + (size_t)slot * Hkv * D, (size_t)Hkv * D * 2);
                    dpoison(dvc2 + (size_t)slot * Hkv * D, (size_t)Hkv * D * 2);
                    dpoison(dout2, (size_t)T * ocols * 2);
                    CU(cudaMemset(dpart, 0xff, (size_t)T * pcols * 4));
                    CU(cudaMemset(dused2, 0, Hkv * S * sizeof(int)));
                    launch_attention_decode(p, dinv, ds, dqkv, cols, dkc2, dvc2, dqn, dkn, NULL, 0, dused2, S, dpart,
                                            pcols);
                    k_attention_combine<<<Hkv, PK_CUDA_THREADS>>>(n_tok, G, D, S, dpart, pcols, dout2, ocols, 0);
                    CU(cudaGetLastError());
                    CU(cudaDeviceSynchronize());
                    gs[run] = get(dout2, (size_t)T * ocols);
                }
                rsd.repro = rsd.repro && gs[0] == gs[1];
                res_bf16(&rsd, gs[0], cpu, T, ocols, n_tok, 0, ocols, 0);
                std::vector<int> u = get(dused2, Hkv * S);
                used2 = 0;
                for (int i = 0; i < Hkv * S; i++) used2 += u[i];
                res_val(&rsd, 0, 0, used2, expect_used * S, used2 == expect_used * S, 0.0, 0.0);
            }
            if (st == NSTEP - 1) {
                split_k = get(dkc2, cache_n);
                split_v = get(dvc2, cache_n);
            }
        }
    }
    snprintf(rd.shape, sizeof rd.shape, "%.90s, %d/%d decode", shape, used, Hkv);
    /* the caches after every step: K to tolerance, V bit for bit, poison where the CPU left it */
    result rk, rv;
    res_init(&rk, "attention_kcache", shape);
    res_init(&rv, "attention_vcache", shape);
    rk.repro = rv.repro = r.repro;
    res_cache(&rk, last_k, kc, 0);
    res_cache(&rv, last_v, vc, 1);
    if (S > 1) { /* the split's own caches: every row written by exactly the split that owns it */
        snprintf(rsd.shape, sizeof rsd.shape, "%.90s, %d/%d decode", sshape, used2, Hkv * S);
        res_cache(&rk, split_k, kc, 0);
        res_cache(&rv, split_v, vc, 1);
    }
    res_end(&r);
    res_end(&rd);
    if (S > 1) {
        res_end(&rs);
        res_end(&rsd);
        if (ran_q) res_end(&rq);
        if (ran_f) res_end(&rf);
    }
    res_end(&rk);
    res_end(&rv);
}

/* Batch invariance of the multi-row attention (attention_prefill.cuh): request A's prefill of n
 * rows as a step of its own, and the same rows after m rows of request B (so in other Q blocks and
 * other places in them), give the same bits; each run on a fresh cache (A's pages the same). */
static void attention_invariance_case(int D, int G, int Hkv, int n, int m, uint64_t *seed) {
    const int page = 16, ppr = (n + page - 1) / page + 1, Hq = G * Hkv;
    const int64_t cols = (int64_t)Hkv * (G + 2) * D, ocols = (int64_t)Hq * D;
    pk_layer_params p = attn_params(Hq, Hkv, D, 1000000.0f, 0, 1);
    std::vector<int32_t> page_table((size_t)2 * ppr);
    for (int i = 0; i < 2 * ppr; i++) page_table[i] = (i * 7 + 3) % (2 * ppr); /* A slot 0, B slot 1 */
    const size_t cache_n = (size_t)2 * ppr * page * Hkv * D;
    std::vector<pk_bf16> seqA = rand_bf16((size_t)n * cols, -1.0f, 1.0f, seed);
    std::vector<pk_bf16> seqB = rand_bf16((size_t)m * cols, -1.0f, 1.0f, seed);
    std::vector<pk_bf16> qn = rand_bf16(D, 0.5f, 1.5f, seed), kn = rand_bf16(D, 0.5f, 1.5f, seed);
    int32_t *dpt = dup(page_table);
    pk_bf16 *dqn = dup(qn), *dkn = dup(kn);
    std::vector<pk_bf16> a_out[2];
    for (int run = 0; run < 2; run++) {
        const int lead = run ? m : 0, T = lead + n; /* run 1: B's m rows first */
        std::vector<int32_t> pos(T), req(T);
        std::vector<pk_bf16> qkv((size_t)T * cols);
        for (int t = 0; t < T; t++) {
            const bool b = t < lead;
            pos[t] = b ? t : t - lead;
            req[t] = b ? 1 : 0;
            memcpy(qkv.data() + t * cols, (b ? seqB.data() : seqA.data()) + (size_t)pos[t] * cols, (size_t)cols * 2);
        }
        pk_bf16 *dkc = dalloc<pk_bf16>(cache_n), *dvc = dalloc<pk_bf16>(cache_n), *dqkv = dup(qkv);
        pk_bf16 *dout = dalloc<pk_bf16>((size_t)T * ocols);
        dpoison(dkc, cache_n * 2);
        dpoison(dvc, cache_n * 2);
        int32_t *dpos = dup(pos), *dreq = dup(req);
        pk_attn_step ds = {T, dpos, dreq, dpt, ppr, page};
        LAUNCH(k_attention, p, ds, 0, Hkv, dqkv, cols, dkc, dvc, dqn, dkn, dout, ocols);
        std::vector<pk_bf16> o = get(dout, (size_t)T * ocols);
        a_out[run].assign(o.begin() + (size_t)lead * ocols, o.end());
    }
    long differ = 0;
    for (size_t i = 0; i < a_out[0].size(); i++) differ += a_out[0][i] != a_out[1][i];
    char shape[112];
    snprintf(shape, sizeof shape, "D %d G %d Hkv %d: %d rows alone and after %d others", D, G, Hkv, n, m);
    printf("%-18s %-58s %s\n", "att_invariance", shape, differ ? "FAIL" : "ok");
    CHECK(differ == 0, "attention %s: %ld values differ between the two steps", shape, differ);
}

static void test_attention(uint64_t *seed) {
    static const int Ds[] = {64, 128, 80};
    for (int di = 0; di < 3; di++)
        for (int G = 2; G <= 3; G++)
            for (int qk_norm = 0; qk_norm <= 1; qk_norm++)
                for (int llama3 = 0; llama3 <= 1; llama3++)
                    attention_case(Ds[di], G, G == 2 ? 3 : 2, qk_norm, llama3, 30, 5, 8,
                                   (di + G + qk_norm + llama3) % 3 == 0, seed);
    /* long contexts (several 32-position blocks per warp, the split over warps and its combine),
     * Qwen3-8B's G 4 D 128, Llama-3-70B's G 8, G 16 (two head chunks), D 256 */
    attention_case(128, 4, 2, 1, 0, 200, 40, 16, 1, seed);
    attention_case(128, 8, 2, 0, 1, 300, 3, 16, 0, seed);
    attention_case(64, 16, 2, 1, 0, 70, 9, 16, 0, seed);
    attention_case(64, 4, 3, 0, 1, 70, 9, 16, 0, seed); /* the tensor-core decode path at D 64 */
    attention_case(256, 2, 2, 1, 0, 90, 33, 32, 0, seed);
    /* the split over the KV length: empty splits (contexts 30 and 5 against 3 and 5 splits), a
     * prefill chunk across block boundaries, many blocks per split, the general kernel's head
     * chunks (G 16), D 80 (no decode path) */
    attention_case(128, 2, 3, 1, 0, 30, 5, 8, 1, seed, 3);
    attention_case(64, 3, 2, 0, 1, 70, 9, 16, 0, seed, 5);
    attention_case(128, 4, 2, 1, 0, 200, 40, 16, 1, seed, 2);
    attention_case(128, 8, 2, 0, 1, 300, 3, 16, 0, seed, 4);
    attention_case(64, 16, 2, 1, 0, 70, 9, 16, 0, seed, 3);
    attention_case(64, 4, 2, 1, 0, 70, 9, 16, 0, seed, 3);
    attention_case(256, 2, 2, 1, 0, 90, 33, 32, 0, seed, 2);
    attention_case(80, 2, 3, 1, 1, 60, 5, 8, 1, seed, 2);
    /* a row's bits do not depend on the other rows of its step (Qwen3-0.6B's G 2, the 8B's G 4) */
    attention_invariance_case(128, 2, 2, 150, 37, seed);
    attention_invariance_case(128, 4, 2, 70, 5, seed);
    attention_invariance_case(64, 3, 1, 33, 64, seed);
}

/* ---- sampling --------------------------------------------------------------------------------- */

/* pk_dev_sample_rows against pk_cpu_sample_row, token for token: rows that sample under every
 * filter and their mix, rows that keep their argmax (slot 0), ties, NaN and -inf logits, widths
 * from 1 to Qwen3's vocabulary; the same seed and positions on both sides. */
static void test_sample(uint64_t *seed) {
    static const int Vs[] = {1, 7, 97, 4096, 151936};
    struct cfg { float temp, top_p, min_p; int top_k; } cfgs[] = {
        {1.0f, 1.0f, 0.0f, 0}, {0.7f, 0.9f, 0.0f, 0}, {1.3f, 1.0f, 0.0f, 40}, {0.8f, 1.0f, 0.1f, 0},
        {1.0f, 0.95f, 0.05f, 20}, {2.0f, 0.5f, 0.0f, 1}};
    const int R = 6, n_tok = 8;
    for (int vi = 0; vi < 5; vi++) {
        const int V = Vs[vi];
        const int64_t stride = V + (vi % 2) * 3;
        std::vector<pk_bf16> lg = rand_bf16((size_t)n_tok * stride, -6.0f, 6.0f, seed);
        if (V >= 7) { /* a tie at the top, a NaN and a -inf in row 1 */
            lg[stride + 3] = lg[stride + 5] = pk_f32_to_bf16(9.0f);
            lg[stride + 1] = 0x7fc1;
            lg[stride + 2] = 0xff80;
        }
        std::vector<int32_t> params((size_t)R * PK_SAMPLE_PARAMS, 0), slot(n_tok), pos(n_tok), greedy(n_tok);
        for (int r = 0; r < R; r++) {
            int32_t *w = &params[(size_t)r * PK_SAMPLE_PARAMS];
            w[PK_SAMPLE_INV_TEMP] = pk_sample_bits_of(1.0f / cfgs[r].temp);
            w[PK_SAMPLE_TOP_K] = cfgs[r].top_k;
            w[PK_SAMPLE_TOP_P] = pk_sample_bits_of(cfgs[r].top_p);
            w[PK_SAMPLE_MIN_P] = pk_sample_bits_of(cfgs[r].min_p);
            w[PK_SAMPLE_SEED_LO] = (int32_t)check_rand_u64(seed);
            w[PK_SAMPLE_SEED_HI] = (int32_t)check_rand_u64(seed);
        }
        for (int t = 0; t < n_tok; t++) {
            slot[t] = t == 4 ? 0 : 1 + t % R; /* row 4 keeps its argmax */
            pos[t] = (int32_t)(check_rand_u64(seed) % 4000);
            greedy[t] = 1000 + t; /* the argmax's output as the sampler finds it */
        }
        std::vector<int32_t> want(n_tok);
        for (int t = 0; t < n_tok; t++)
            want[t] = slot[t] ? pk_cpu_sample_row(lg.data() + t * stride, V, &params[(size_t)(slot[t] - 1) * PK_SAMPLE_PARAMS],
                                                  pos[t] + 1, greedy[t])
                              : greedy[t];
        pk_bf16 *dl = dup(lg);
        int32_t *ds = dup(slot), *dp = dup(params), *dq = dup(pos), *dout = dalloc<int32_t>(n_tok);
        std::vector<int32_t> got[2];
        for (int run = 0; run < 2; run++) {
            put(dout, greedy);
            LAUNCH(k_sample_rows, dl, stride, V, n_tok, ds, dp, dq, dout);
            got[run] = get(dout, n_tok);
        }
        char shape[112];
        snprintf(shape, sizeof shape, "V %d stride %lld, %d rows, 6 settings", V, (long long)stride, n_tok);
        result r;
        res_init(&r, "sample", shape);
        r.repro = got[0] == got[1];
        for (int t = 0; t < n_tok; t++) res_val(&r, t, 0, got[0][t], want[t], got[0][t] == want[t], 0.0, 0.0);
        res_end(&r); /* frees the case's buffers */
    }
}

/* ---- argmax ---------------------------------------------------------------------------------- */

static void test_argmax(uint64_t *seed) {
    static const int nvs[] = {1, 7, 1000, 1003, 4101};
    static const int ntoks[] = {1, 3, 8};
    int case_i = 0;
    for (int vi = 0; vi < 5; vi++)
        for (int ni = 0; ni < 3; ni++, case_i++) {
            int nv = nvs[vi], n_tok = ntoks[ni], T = n_tok + 2, v0 = 1000 * case_i + 3;
            int64_t stride = nv + (case_i % 2) * 5, ps = 3;
            std::vector<pk_bf16> lg = rand_bf16((size_t)T * stride, -8.0f, 8.0f, seed);
            for (int t = 0; t < n_tok; t++) { /* ties: the row's max again, later and earlier */
                pk_bf16 *row = lg.data() + t * stride;
                int best = 0;
                for (int j = 1; j < nv; j++)
                    if (bf(row[j]) > bf(row[best])) best = j;
                if (t % 3 == 1) row[nv - 1] = row[best];
                if (t % 3 == 2 && best > 0) row[best / 2] = row[best];
                if (t == 0 && case_i % 4 == 3) /* a row of -inf */
                    for (int j = 0; j < nv; j++) row[j] = 0xff80;
            }
            std::vector<float> cv((size_t)T * ps, -1.0f);
            std::vector<int32_t> ci((size_t)T * ps, -7);
            pk_cpu_argmax_partial(lg.data(), stride, n_tok, v0, nv, cv.data(), ci.data(), ps);
            pk_bf16 *dl = dup(lg);
            float *dv = dalloc<float>(cv.size());
            int32_t *di = dalloc<int32_t>(ci.size());
            std::vector<float> gv[2];
            std::vector<int32_t> gi[2];
            for (int run = 0; run < 2; run++) {
                put(dv, std::vector<float>(cv.size(), -1.0f));
                put(di, std::vector<int32_t>(ci.size(), -7));
                LAUNCH(k_argmax_partial, dl, stride, n_tok, v0, nv, dv, di, ps);
                gv[run] = get(dv, cv.size());
                gi[run] = get(di, ci.size());
            }
            char shape[112];
            snprintf(shape, sizeof shape, "nv %d v0 %d n_tok %d stride %lld", nv, v0, n_tok,
                     (long long)stride);
            result r;
            res_init(&r, "argmax_partial", shape);
            r.repro = gv[0] == gv[1] && gi[0] == gi[1];
            for (size_t i = 0; i < cv.size(); i++) {
                int in = i % ps == 0 && (int)(i / ps) < n_tok;
                if (!in) {
                    r.stray += gv[0][i] != -1.0f || gi[0][i] != -7;
                    continue;
                }
                res_val(&r, (long)(i / ps), 0, gi[0][i], ci[i], gi[0][i] == ci[i] &&
                        memcmp(&gv[0][i], &cv[i], 4) == 0, 0.0, 0.0);
            }
            res_end(&r);
        }
    static const int nps[] = {1, 5, 132, 300};
    for (int pi = 0; pi < 4; pi++)
        for (int ni = 0; ni < 3; ni++) {
            int np = nps[pi], n_tok = ntoks[ni] + (pi == 3 ? 8 : 0);
            int64_t ps = np + 2;
            std::vector<float> v((size_t)n_tok * ps);
            std::vector<int32_t> ix((size_t)n_tok * ps);
            for (size_t i = 0; i < v.size(); i++) {
                v[i] = bf(pk_f32_to_bf16(4.0f * check_rand_f32(seed))); /* bf16 values: ties */
                /* partial p's index in [500 p, 500 p + 500): increasing with p, as the argmax
                 * layer's vocabulary tiles are — the rule both sides rely on for ties (the CPU
                 * keeps the first partial, the GPU the smaller index); random indexes made them
                 * part whenever the best value was tied) */
                ix[i] = (int32_t)((i % ps) * 500 + check_rand_u64(seed) % 500);
            }
            std::vector<int32_t> cpu(n_tok + 2, -9);
            pk_cpu_argmax_reduce(v.data(), ix.data(), ps, n_tok, np, cpu.data());
            float *dv = dup(v);
            int32_t *di = dup(ix), *dout = dalloc<int32_t>(n_tok + 2);
            std::vector<int32_t> g[2];
            for (int run = 0; run < 2; run++) {
                put(dout, std::vector<int32_t>(n_tok + 2, -9));
                LAUNCH(k_argmax_reduce, dv, di, ps, n_tok, np, dout);
                g[run] = get(dout, n_tok + 2);
            }
            char shape[112];
            snprintf(shape, sizeof shape, "nparts %d n_tok %d", np, n_tok);
            result r;
            res_init(&r, "argmax_reduce", shape);
            r.repro = g[0] == g[1];
            for (int t = 0; t < n_tok + 2; t++) {
                if (t >= n_tok) {
                    r.stray += g[0][t] != -9;
                    continue;
                }
                res_val(&r, t, 0, g[0][t], cpu[t], g[0][t] == cpu[t], 0.0, 0.0);
            }
            res_end(&r);
        }
}

/* Mean µs per call of launch(it) over 20 launches after 3 warm-up ones (it = -3 .. 19), timed
 * with events on the default stream; launch checks nothing, this does. */
template <class F> static double time_launches_us(F launch) {
    const int REPS = 20;
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    for (int it = -3; it < REPS; it++) {
        if (it == 0) CU(cudaEventRecord(e0));
        launch(it);
        CU(cudaGetLastError());
    }
    CU(cudaEventRecord(e1));
    CU(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CU(cudaEventElapsedTime(&ms, e0, e1));
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    return 1e3 * ms / REPS;
}

/* ---- bench: GEMV bandwidth at decode shapes (a lead for the next person, not a test) --------- */

static void bench_linear(int sms) {
    static const struct { const char *name; int K, N; } shapes[] = {
        {"qkv 4096->6144", 4096, 6144},
        {"gate_up 4096->24576", 4096, 24576},
        {"down 12288->4096", 12288, 4096},
        {"lm_head 4096->151936", 4096, 151936},
        {"0.6B qkv 1024->4096", 1024, 4096},
        {"0.6B o 2048->1024", 2048, 1024},
        {"0.6B gate_up 1024->6144", 1024, 6144},
        {"0.6B down 3072->1024", 3072, 1024},
        {"0.6B lm_head 1024->151936", 1024, 151936}};
    static const int ntoks[] = {1, 4, 8};
    uint64_t seed = 99;
    printf("\n%-26s %5s %6s %6s %7s %10s %9s\n", "bench linear", "n_tok", "grid", "tile", "smem KB", "us", "GB/s");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int K = shapes[si].K, N = shapes[si].N;
        const int NCOPY = 2; /* alternate two weight copies so that L2 cannot hold them */
        std::vector<pk_bf16> hw((size_t)N * K), pat = rand_bf16(1 << 20, -1.0f, 1.0f, &seed);
        for (size_t i = 0; i < hw.size(); i++) hw[i] = pat[(i * 7) & ((1 << 20) - 1)];
        pk_bf16 *dw[NCOPY];
        for (int c = 0; c < NCOPY; c++) dw[c] = dup(hw);
        pk_bf16 *dx = dup(rand_bf16((size_t)8 * K, -1.0f, 1.0f, &seed));
        pk_bf16 *dout = dalloc<pk_bf16>((size_t)8 * N);
        /* one token also with all the shared memory (the async decode path, as in static mode) */
        for (int ni = 0; ni < 4; ni++) {
            int n_tok = ni < 3 ? ntoks[ni] : 1, sm = ni < 3 ? PK_CUDA_SMEM_BYTES : g_smem_optin;
            int tile = (N + sms - 1) / sms, grid = (N + tile - 1) / tile;
            const double us = time_launches_us([&](int it) {
                pk_rows w = pk_rows_plain(dw[(it + 3) % NCOPY], (uint32_t)N, (uint64_t)K);
                k_linear_grid<<<grid, PK_CUDA_THREADS, sm>>>(dx, n_tok, K, w, N, tile, dout);
            });
            const double gbs = (double)N * K * 2 / (us * 1e-6) / 1e9;
            printf("%-26s %5d %6d %6d %7d %10.1f %9.0f\n", shapes[si].name, n_tok, grid, tile, sm / 1024, us, gbs);
        }
        dfree_all();
    }
}

/* ---- bench: multi-row steps on tensor cores (linear_mma.cuh), a whole layer per launch ------- */

/* The layers of a Qwen3 decoder layer at n_tok rows: tiles of N / SMs columns (the persistent
 * kernel's one-token grid) and of 128 (a prompt graph's), TFLOP/s = 2 · n_tok · N · K / time. */
static void bench_mma(int sms) {
    static const struct { const char *name; int xn, K, N; } shapes[] = {
        {"8B qkv", 1, 4096, 6144},         {"8B o", 0, 4096, 4096},         {"8B gate_up", 1, 4096, 24576},
        {"8B down", 2, 12288, 4096},       {"0.6B qkv", 1, 1024, 4096},     {"0.6B o", 0, 2048, 1024},
        {"0.6B gate_up", 1, 1024, 6144},   {"0.6B down", 2, 3072, 1024}};
    static const int ntoks[] = {512, 2048};
    /* PK_BENCH_MMA_SHAPE=i: shape i only (one profiler target, e.g. ncu -k regex:k_chunk_grid) */
    const char *only = getenv("PK_BENCH_MMA_SHAPE");
    uint64_t seed = 77;
    printf("\n%-16s %5s %6s %6s %10s %9s\n", "bench mma", "n_tok", "grid", "tile", "us", "TFLOP/s");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        if (only && (size_t)atoi(only) != si) continue;
        const int K = shapes[si].K, N = shapes[si].N, xn = shapes[si].xn, xcols = xn == 2 ? 2 * K : K;
        std::vector<pk_bf16> hw((size_t)N * K), pat = rand_bf16(1 << 20, -1.0f, 1.0f, &seed);
        for (size_t i = 0; i < hw.size(); i++) hw[i] = pat[(i * 7) & ((1 << 20) - 1)];
        pk_bf16 *dw = dup(hw);
        pk_bf16 *dx = dup(rand_bf16((size_t)2048 * xcols, -1.0f, 1.0f, &seed));
        pk_bf16 *dnw = dup(rand_bf16(K, 0.5f, 1.5f, &seed));
        pk_bf16 *dout = dalloc<pk_bf16>((size_t)2048 * N);
        for (int ni = 0; ni < 2; ni++)
            for (int ti = 0; ti < 2; ti++) {
                const int n_tok = ntoks[ni], tile = ti == 0 ? (N + sms - 1) / sms : 128, grid = (N + tile - 1) / tile;
                const pk_rows w = pk_rows_plain(dw, (uint32_t)N, (uint64_t)K);
                const double us = time_launches_us([&](int) {
                    k_mma_grid<<<grid, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(xn, dx, dnw, n_tok, K, w, N, tile, dout);
                });
                printf("%-16s %5d %6d %6d %10.1f %9.1f\n", shapes[si].name, n_tok, grid, tile, us,
                       2.0 * n_tok * N * K / (us * 1e-6) / 1e12);
            }
        for (int ni = 0; ni < 2; ni++) { /* the layer as one event chunk of SMs tasks (pk_lin_chunk) */
            const int n_tok = ntoks[ni];
            const pk_rows w = pk_rows_plain(dw, (uint32_t)N, (uint64_t)K);
            const double us = time_launches_us([&](int) {
                k_chunk_grid<<<sms, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(xn, dx, dnw, NULL, n_tok, K, w, N, sms, sms, 0,
                                                                         NULL, dout);
            });
            printf("%-16s %5d %6d %6s %10.1f %9.1f\n", shapes[si].name, n_tok, sms, "chunk", us,
                   2.0 * n_tok * N * K / (us * 1e-6) / 1e12);
        }
        dfree_all();
    }
}

/* Decode attention (one row, Qwen3 shapes: D 128, Hkv 8, G 2 and 4) at a given context, one CTA
 * per KV head as the persistent kernel runs it; the cache is filled with random values first. */
static void bench_attention(void) {
    static const int Gs[] = {2, 4}, ctxs[] = {0, 200, 4096};
    const int D = 128, Hkv = 8, page = 64, maxpos = 4096;
    const int ppr = (maxpos + page) / page + 1;
    uint64_t seed = 7;
    const int S = 16; /* the split the model builder picks on the H200: 132 workers / 8 KV heads */
    printf("\n%-22s %5s %6s %10s %10s %10s %12s %9s\n", "bench attention", "G", "ctx", "us (128r)", "us (255r)",
           "us decode", "us split 16", "KV GB/s");
    for (int gi = 0; gi < 2; gi++) {
        const int G = Gs[gi], Hq = G * Hkv;
        const int64_t cols = (int64_t)Hkv * (G + 2) * D, ocols = (int64_t)Hq * D;
        pk_layer_params p = attn_params(Hq, Hkv, D, 1000000.0f, 0, 1);
        std::vector<int32_t> pt(ppr);
        for (int i = 0; i < ppr; i++) pt[i] = i;
        size_t cache_n = (size_t)ppr * page * Hkv * D;
        pk_bf16 *dkc = dup(rand_bf16(cache_n, -1.0f, 1.0f, &seed));
        pk_bf16 *dvc = dup(rand_bf16(cache_n, -1.0f, 1.0f, &seed));
        pk_bf16 *dqkv = dup(rand_bf16((size_t)cols, -1.0f, 1.0f, &seed));
        pk_bf16 *dn = dup(rand_bf16(D, 0.5f, 1.5f, &seed));
        pk_bf16 *dout = dalloc<pk_bf16>((size_t)ocols);
        int32_t *dpt = dup(pt), *dreq = dalloc<int32_t>(1), *dpos = dalloc<int32_t>(1);
        CU(cudaMemset(dreq, 0, 4));
        float *dinv = dup_inv_freq(p);
        const int64_t pcols = (int64_t)Hkv * S * G * (D + 2);
        float *dpart = dalloc<float>((size_t)pcols);
        for (int ci = 0; ci < 3; ci++) {
            int32_t pos = ctxs[ci];
            CU(cudaMemcpy(dpos, &pos, 4, cudaMemcpyHostToDevice));
            pk_attn_step ds = {1, dpos, dreq, dpt, ppr, page};
            double us[4];
            for (int v = 0; v < 4; v++)
                us[v] = time_launches_us([&](int) {
                    if (v == 0) {
                        k_attention_grid<2><<<Hkv, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(p, ds, dqkv, cols, dkc, dvc, dn, dn, dout, ocols);
                    } else if (v == 1) {
                        k_attention_grid<1><<<Hkv, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(p, ds, dqkv, cols, dkc, dvc, dn, dn, dout, ocols);
                    } else if (v == 2) {
                        launch_attention_decode(p, dinv, ds, dqkv, cols, dkc, dvc, dn, dn, dout, ocols, NULL);
                    } else { /* partial tasks on Hkv · S SMs, then the combine (two launches) */
                        launch_attention_decode(p, dinv, ds, dqkv, cols, dkc, dvc, dn, dn, NULL, 0, NULL, S, dpart, pcols);
                        k_attention_combine<<<Hkv, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(1, G, D, S, dpart, pcols, dout,
                                                                                          ocols, PK_CUDA_SMEM_BYTES);
                    }
                });
            double kv = (double)(pos + 1) * Hkv * D * 2 * 2;
            printf("%-22s %5d %6d %10.1f %10.1f %10.1f %12.1f %9.0f\n", "attention decode", G, pos, us[0], us[1], us[2],
                   us[3], kv / (us[0] * 1e-6) / 1e9);
        }
        dfree_all();
    }
}

/* The attention of a prompt chunk as the persistent kernel runs it in a step of many rows
 * (k_attention_qsplit: Hkv · 16 CTAs, a KV group's 16 share its Q blocks): T rows of one request
 * at positions [ctx - T, ctx), K / V of the earlier positions already in the cache. µs per layer
 * and TFLOP/s of the causal attention's 4 · Hq · D · Σ_rows (pos + 1) FLOPs. A lead, not a test. */
static void bench_attention_prefill(void) {
    static const int Gs[] = {2, 4}, Ts[] = {512, 2048}, ctxs[] = {512, 2048, 4096};
    const int D = 128, Hkv = 8, page = 16, S = 16, maxpos = 4096;
    const int ppr = maxpos / page;
    uint64_t seed = 11;
    printf("\n%-22s %5s %6s %6s %10s %9s\n", "bench attention", "G", "rows", "ctx", "us", "TFLOP/s");
    for (int gi = 0; gi < 2; gi++) {
        const int G = Gs[gi], Hq = G * Hkv;
        const int64_t cols = (int64_t)Hkv * (G + 2) * D, ocols = (int64_t)Hq * D;
        pk_layer_params p = attn_params(Hq, Hkv, D, 1000000.0f, 0, 1);
        std::vector<int32_t> pt(ppr);
        for (int i = 0; i < ppr; i++) pt[i] = i;
        const size_t cache_n = (size_t)ppr * page * Hkv * D;
        pk_bf16 *dkc = dup(rand_bf16(cache_n, -1.0f, 1.0f, &seed));
        pk_bf16 *dvc = dup(rand_bf16(cache_n, -1.0f, 1.0f, &seed));
        pk_bf16 *dqkv = dup(rand_bf16((size_t)2048 * cols, -1.0f, 1.0f, &seed));
        pk_bf16 *dn = dup(rand_bf16(D, 0.5f, 1.5f, &seed));
        pk_bf16 *dout = dalloc<pk_bf16>((size_t)2048 * ocols);
        int32_t *dpt = dup(pt), *dreq = dup(std::vector<int32_t>(2048, 0)), *dpos = dalloc<int32_t>(2048);
        const int64_t fcols = (int64_t)Hkv * S * G * (D + 2); /* the kv fold's partials [2048][fcols] */
        float *dfp = dalloc<float>((size_t)2048 * fcols);
        unsigned long long *dfc = dalloc<unsigned long long>((size_t)Hkv * 2048);
        CU(cudaMemset(dfc, 0, (size_t)Hkv * 2048 * 8));
        for (int T : Ts)
            for (int ctx : ctxs) {
                if (ctx < T) continue;
                std::vector<int32_t> pos(T);
                double flops = 0.0;
                for (int t = 0; t < T; t++) {
                    pos[t] = ctx - T + t;
                    flops += 4.0 * Hq * D * (pos[t] + 1);
                }
                put(dpos, pos);
                pk_attn_step ds = {T, dpos, dreq, dpt, ppr, page};
                const double us = time_launches_us([&](int) {
                    k_attention_qsplit<<<Hkv * S, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(p, ds, S, dqkv, cols, dkc, dvc,
                                                                                         dn, dn, dout, ocols);
                });
                printf("%-22s %5d %6d %6d %10.1f %9.1f\n", "attention prefill", G, T, ctx, us, flops / us * 1e-6);
                const double usf = time_launches_us([&](int) {
                    k_attention_qsplit<<<Hkv * S, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES>>>(
                        p, ds, S, dqkv, cols, dkc, dvc, dn, dn, dout, ocols, dfp, fcols, dfc, 2048);
                });
                printf("%-22s %5d %6d %6d %10.1f %9.1f\n", "attention prefill fold", G, T, ctx, usf, flops / usf * 1e-6);
            }
        dfree_all();
    }
}

/* Which groups to run: every group, or those named on the command line (embedding, rmsnorm,
 * silu_mul, linear, attention, argmax, bench, bench_mma, bench_attention). */
static int g_argc;
static char **g_argv;
static int want(const char *group) {
    if (g_argc <= 1) return 1;
    for (int i = 1; i < g_argc; i++)
        if (strcmp(g_argv[i], group) == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    g_argc = argc;
    g_argv = argv;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("cuda_kernels: no CUDA device, skipped\n");
        return check_report("cuda_kernels");
    }
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, sm_%d%d, %d SMs; PK_CUDA_THREADS %d, PK_CUDA_SMEM_BYTES %d\n", prop.name,
           prop.major, prop.minor, prop.multiProcessorCount, PK_CUDA_THREADS, PK_CUDA_SMEM_BYTES);
    setup_kernels();
    uint64_t seed = 0x5eed1234abcdULL;
    printf("%-18s %-58s %9s %9s %9s %5s\n", "kind", "shape", "n", "max_err", "mean_err", "bad");
    if (want("embedding")) test_embedding(&seed);
    if (want("rmsnorm")) test_rmsnorm(&seed);
    if (want("silu_mul")) test_silu_mul(&seed);
    if (want("linear")) test_linear(&seed);
    if (want("attention")) {
        test_inv_freq();
        test_attention(&seed);
    }
    if (want("argmax")) test_argmax(&seed);
    if (want("sample")) test_sample(&seed);
    if (want("bench")) bench_linear(prop.multiProcessorCount);
    if (want("bench") || want("bench_mma")) bench_mma(prop.multiProcessorCount);
    if (want("bench") || want("bench_attention")) bench_attention();
    if (want("bench") || want("bench_attention")) bench_attention_prefill();

    printf("\n%-20s %6s %7s %11s %10s %10s %6s\n", "kind", "cases", "failed", "values",
           "max_err", "mean_err", "bad");
    for (int i = 0; i < g_nsum; i++) {
        kind_sum *k = &g_sum[i];
        printf("%-20s %6d %7d %11ld %10.3g %10.3g %6ld\n", k->kind, k->cases, k->failed, k->n,
               k->max_err, k->n ? k->sum_err / (double)k->n : 0.0, k->bad);
    }
    return check_report("cuda_kernels");
}
