/* fallback_kernels.cuh — placeholder CUDA task kernels, used by generated code only while
 * src/kernels/cuda/ (the real, fast kernels) is incomplete, or when PK_CUDA_FALLBACK_KERNELS=1.
 *
 * Same signatures as src/kernels/cuda/cuda_kernels.cuh, and the CPU kernels' arithmetic in the
 * CPU's order: every fp32 sum is one thread's sequential loop over k ascending, with no FMA
 * contraction (__fmul_rn / __fadd_rn), so results equal the CPU backend's bits except where
 * CUDA's expf / cosf / sinf / powf round differently from glibc's (rare, and then by one bf16
 * ulp). Parallelism is only across independent outputs, so these are simple and slow: a thread
 * per output column (linear), a warp per (row, head) (attention). Correctness only.
 * Activations are read with ld.global.cg (__ldcg): another SM may have written them.
 */
#ifndef PK_CUDA_FALLBACK_KERNELS_CUH
#define PK_CUDA_FALLBACK_KERNELS_CUH

#include <math.h>
#include <stdint.h>

#include "common/bf16.h"
#include "kernels/cpu/cpu_kernels.h" /* pk_rows, pk_attn_step: plain structs shared with the host */
#include "kernels/cuda/fixed_point.cuh"
#include "pk_abi.h"

#ifndef PK_CUDA_THREADS
#define PK_CUDA_THREADS 256
#endif
#ifndef PK_CUDA_SMEM_BYTES
#define PK_CUDA_SMEM_BYTES (96 * 1024)
#endif

#define PK_FB_KC 4096 /* k chunk of the linear kernels' xn row in shared memory (16 KiB) */

__device__ __forceinline__ float pk_fb_f32(pk_bf16 h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ pk_bf16 pk_fb_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (pk_bf16)((u >> 16) | 0x40u); /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (pk_bf16)(u >> 16);
}

__device__ __forceinline__ float pk_fb_round(float f) { return pk_fb_f32(pk_fb_bf16(f)); }

/* An activation element (maybe written by another SM): through L2. */
__device__ __forceinline__ float pk_fb_act(const pk_bf16 *p) { return pk_fb_f32(__ldcg((const unsigned short *)p)); }
/* A weight element: any path. */
__device__ __forceinline__ float pk_fb_wt(const pk_bf16 *p) { return pk_fb_f32(__ldg((const unsigned short *)p)); }

/* Row r of a (possibly fused) weight, as pk_rows_get. */
__device__ __forceinline__ const pk_bf16 *pk_fb_row(const pk_rows *w, uint32_t r) {
    uint32_t group_rows = 0;
    for (uint32_t i = 0; i < w->nseg; i++) group_rows += w->seg_rows[i];
    uint32_t g = r / group_rows, o = r % group_rows, i = 0;
    while (o >= w->seg_rows[i]) o -= w->seg_rows[i++];
    return w->seg[i] + ((uint64_t)g * w->seg_rows[i] + o) * w->row_stride;
}

/* x[k], or with a fused MLP's accumulator x[k] + acc[k] as pk_cpu_acc_sum. */
__device__ __forceinline__ float pk_fb_x(const pk_bf16 *x, const int64_t *acc, int k) {
    if (!acc) return pk_fb_act(x + k);
    return pk_fb_round(__fadd_rn(pk_fb_round(pk_dev_fixed_to_f32(__ldcg((const long long *)acc + k))), pk_fb_act(x + k)));
}

/* pk_cpu_rms_scale, one thread (of x + acc when acc is not NULL). */
__device__ __forceinline__ float pk_fb_rms_scale(const pk_bf16 *x, int n, float eps, const int64_t *acc = nullptr) {
    float s = 0.0f;
    for (int k = 0; k < n; k++) {
        float v = pk_fb_x(x, acc, k);
        s = __fadd_rn(s, __fmul_rn(v, v));
    }
    return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(s, (float)n), eps)));
}

__device__ __forceinline__ float pk_fb_rmsnorm1(float x, float scale, float w) {
    return pk_fb_round(__fmul_rn(pk_fb_round(__fmul_rn(x, scale)), w));
}

__device__ __forceinline__ float pk_fb_silu_mul1(float g, float u) {
    return pk_fb_round(__fmul_rn(pk_fb_round(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g)))), u));
}

/* ---- embedding, rmsnorm, silu_mul: elementwise over the CTA ---- */

__device__ void pk_dev_embedding(const int32_t *tokens, int n_tok, const pk_rows *w, int col0, int ncols,
                                 pk_bf16 *out, int64_t out_stride, char *smem) {
    (void)smem;
    int64_t n = (int64_t)n_tok * ncols;
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        int t = (int)(e / ncols), j = (int)(e % ncols);
        const pk_bf16 *row = pk_fb_row(w, (uint32_t)__ldcg(tokens + t)) + col0;
        out[t * out_stride + j] = __ldg((const unsigned short *)row + j);
    }
}

__device__ void pk_dev_rmsnorm(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *w, int n_tok, int hidden,
                               float eps, pk_bf16 *out, int64_t out_stride, char *smem) {
    float *scale = (float *)smem; /* [blockDim.x]: the rows of one chunk */
    for (int t0 = 0; t0 < n_tok; t0 += blockDim.x) {
        int nt = min((int)blockDim.x, n_tok - t0);
        if ((int)threadIdx.x < nt) scale[threadIdx.x] = pk_fb_rms_scale(x + (t0 + threadIdx.x) * x_stride, hidden, eps);
        pk_cta_sync();
        for (int64_t e = threadIdx.x; e < (int64_t)nt * hidden; e += blockDim.x) {
            int t = (int)(e / hidden), k = (int)(e % hidden);
            float v = pk_fb_rmsnorm1(pk_fb_act(x + (t0 + t) * x_stride + k), scale[t], pk_fb_wt(w + k));
            out[(t0 + t) * out_stride + k] = pk_fb_bf16(v);
        }
        pk_cta_sync();
    }
}

__device__ void pk_dev_silu_mul(const pk_bf16 *x, int64_t x_stride, int n_tok, int I, int i0, int ncols,
                                pk_bf16 *out, int64_t out_stride, char *smem) {
    (void)smem;
    for (int64_t e = threadIdx.x; e < (int64_t)n_tok * ncols; e += blockDim.x) {
        int t = (int)(e / ncols), j = (int)(e % ncols);
        const pk_bf16 *gate = x + t * x_stride + i0;
        float v = pk_fb_silu_mul1(pk_fb_act(gate + j), pk_fb_act(gate + I + j));
        out[t * out_stride + j] = pk_fb_bf16(v);
    }
}

__device__ void pk_dev_swiglu_blocks(const pk_bf16 *gu, int64_t gu_stride, int n_tok, int ncols, int block,
                                     pk_bf16 *out, int64_t out_stride) {
    for (int64_t e = threadIdx.x; e < (int64_t)n_tok * ncols; e += blockDim.x) {
        int t = (int)(e / ncols), j = (int)(e % ncols), b = j / block;
        const pk_bf16 *gate = gu + t * gu_stride + 2 * b * block + (j - b * block);
        out[t * out_stride + j] = pk_fb_bf16(pk_fb_silu_mul1(pk_fb_act(gate), pk_fb_act(gate + block)));
    }
}

/* ---- the linear family: a thread per output column, a sequential sum over k ---- */

enum { PK_FB_XN_PLAIN = 0, PK_FB_XN_RMSNORM = 1, PK_FB_XN_SILU_MUL = 2 };

/* Shared memory: xs [PK_FB_KC] floats (the chunk of row t's xn), then the row's scale. */
template <int XN>
__device__ void pk_fb_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K, const pk_rows *w, int n0,
                             int ncols, const pk_bf16 *norm_w, float eps, const pk_bf16 *residual,
                             int64_t res_stride, pk_bf16 *out, int64_t out_stride, char *smem,
                             const int64_t *acc = nullptr, int64_t acc_stride = 0, pk_bf16 *sum = nullptr,
                             int64_t sum_stride = 0, int sum0 = 0, int sum1 = 0) {
    float *xs = (float *)smem;
    float *scale_s = xs + PK_FB_KC;
    for (int t = 0; t < n_tok; t++) {
        const pk_bf16 *xr = x + t * x_stride; /* [K] (silu_mul: [2K]) */
        const int64_t *ar = acc ? acc + t * acc_stride : nullptr;
        if (XN == PK_FB_XN_RMSNORM) {
            if (threadIdx.x == 0) *scale_s = pk_fb_rms_scale(xr, K, eps, ar);
            for (int k = sum0 + (int)threadIdx.x; ar && k < sum1; k += blockDim.x) /* the task's share */
                sum[t * sum_stride + k] = pk_fb_bf16(pk_fb_x(xr, ar, k));
            pk_cta_sync();
        }
        float scale = XN == PK_FB_XN_RMSNORM ? *scale_s : 0.0f;
        for (int j0 = 0; j0 < ncols; j0 += blockDim.x) {
            int j = j0 + (int)threadIdx.x;
            const pk_bf16 *wr = j < ncols ? pk_fb_row(w, (uint32_t)(n0 + j)) : nullptr; /* [K] */
            float acc = 0.0f;
            for (int k0 = 0; k0 < K; k0 += PK_FB_KC) {
                int kc = min(PK_FB_KC, K - k0);
                pk_cta_sync(); /* the previous chunk is read */
                for (int k = threadIdx.x; k < kc; k += blockDim.x) {
                    float v;
                    if (XN == PK_FB_XN_PLAIN)
                        v = pk_fb_act(xr + k0 + k);
                    else if (XN == PK_FB_XN_RMSNORM)
                        v = pk_fb_rmsnorm1(pk_fb_x(xr, ar, k0 + k), scale, pk_fb_wt(norm_w + k0 + k));
                    else
                        v = pk_fb_silu_mul1(pk_fb_act(xr + k0 + k), pk_fb_act(xr + K + k0 + k));
                    xs[k] = v;
                }
                pk_cta_sync();
                if (wr)
                    for (int k = 0; k < kc; k++) acc = __fadd_rn(acc, __fmul_rn(xs[k], pk_fb_wt(wr + k0 + k)));
            }
            if (wr) {
                pk_bf16 *o = out + t * out_stride + j;
                if (residual)
                    *o = pk_fb_bf16(__fadd_rn(pk_fb_round(acc), pk_fb_act(residual + t * res_stride + j)));
                else
                    *o = pk_fb_bf16(acc);
            }
        }
        pk_cta_sync(); /* scale_s and xs are rewritten for the next row */
    }
}

__device__ void pk_dev_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K, const pk_rows *w, int n0,
                              int ncols, const pk_bf16 *residual, int64_t res_stride, pk_bf16 *out,
                              int64_t out_stride, char *smem) {
    pk_fb_linear<PK_FB_XN_PLAIN>(x, x_stride, n_tok, K, w, n0, ncols, nullptr, 0.0f, residual, res_stride, out,
                                 out_stride, smem);
}

__device__ void pk_dev_rmsnorm_linear(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *norm_w, float eps,
                                      int n_tok, int K, const pk_rows *w, int n0, int ncols, pk_bf16 *out,
                                      int64_t out_stride, char *smem, const int64_t *acc = nullptr,
                                      int64_t acc_stride = 0, pk_bf16 *sum = nullptr, int64_t sum_stride = 0,
                                      int sum0 = 0, int sum1 = 0) {
    pk_fb_linear<PK_FB_XN_RMSNORM>(x, x_stride, n_tok, K, w, n0, ncols, norm_w, eps, nullptr, 0, out, out_stride,
                                   smem, acc, acc_stride, sum, sum_stride, sum0, sum1);
}

__device__ void pk_dev_silu_mul_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K, const pk_rows *w,
                                       int n0, int ncols, const pk_bf16 *residual, int64_t res_stride,
                                       pk_bf16 *out, int64_t out_stride, char *smem) {
    pk_fb_linear<PK_FB_XN_SILU_MUL>(x, x_stride, n_tok, K, w, n0, ncols, nullptr, 0.0f, residual, res_stride, out,
                                    out_stride, smem);
}

/* RMSNORM_SWIGLU_DOWN's second half: act = silu_mul(gate, up) of gu [T][2 · ib] into shared memory,
 * then a thread per output n, its partial over j ascending from the column block wd [N][ib] (the
 * CPU's order and roundings: the same fixed-point adds as the CPU backend). */
__device__ void pk_dev_mlp_down_add(const pk_bf16 *gu, int64_t gu_stride, int n_tok, int ib, const pk_bf16 *wd,
                                    int N, int64_t *acc, int64_t acc_stride, char *smem) {
    float *act = (float *)smem; /* [ib]; ib <= PK_CUDA_SMEM_BYTES / 4 (a tile's columns) */
    for (int t = 0; t < n_tok; t++) {
        pk_cta_sync(); /* gu written, act free */
        for (int j = threadIdx.x; j < ib; j += PK_CUDA_THREADS)
            act[j] = pk_fb_silu_mul1(pk_fb_act(gu + t * gu_stride + j), pk_fb_act(gu + t * gu_stride + ib + j));
        pk_cta_sync();
        for (int n = threadIdx.x; n < N; n += PK_CUDA_THREADS) {
            float s = 0.0f;
            for (int j = 0; j < ib; j++) s = __fadd_rn(s, __fmul_rn(act[j], pk_fb_wt(wd + (int64_t)n * ib + j)));
            pk_dev_fixed_add(acc + t * acc_stride + n, pk_dev_fixed_from_f32(s));
        }
    }
}

/* LINEAR_SPLITK_RESIDUAL: a thread per output column n, its sum over the block's k ascending (the
 * CPU's), added to acc with atomicAdd (wt: the block's rows of W^T [kc][N]; the weight is uploaded
 * transposed); the layer's last task (the caller's completion counter) writes out and clears acc. */
__device__ void pk_dev_linear_splitk_add(const pk_bf16 *x, int64_t x_stride, int n_tok, int kc, const pk_bf16 *wt,
                                         int N, float *acc, int64_t acc_stride, char *smem) {
    (void)smem;
    for (int e = threadIdx.x; e < n_tok * N; e += PK_CUDA_THREADS) {
        const int t = e / N, n = e - t * N;
        float s = 0.0f;
        for (int k = 0; k < kc; k++) s = __fadd_rn(s, __fmul_rn(pk_fb_act(x + t * x_stride + k), pk_fb_wt(wt + (int64_t)k * N + n)));
        atomicAdd(acc + t * acc_stride + n, s);
    }
}
__device__ void pk_dev_linear_splitk_finish(int n_tok, int N, float *acc, int64_t acc_stride, const pk_bf16 *residual,
                                            int64_t res_stride, pk_bf16 *out, int64_t out_stride) {
    for (int e = threadIdx.x; e < n_tok * N; e += PK_CUDA_THREADS) {
        const int t = e / N, n = e - t * N;
        float *a = acc + t * acc_stride + n;
        out[t * out_stride + n] = pk_fb_bf16(__fadd_rn(pk_fb_round(__ldcg(a)), pk_fb_act(residual + t * res_stride + n)));
        __stcg(a, 0.0f);
    }
}

/* ---- attention: a warp per (row, KV head) for the cache writes, per (row, query head) after ---- */

/* inv_freq[i] of pk_rope_inv_freq (rope.c), element by element. */
__device__ float pk_fb_inv_freq(const pk_layer_params *p, int i) {
    float e = __fdiv_rn((float)(2 * i), (float)p->head_dim);
    float f = __fdiv_rn(1.0f, powf(p->rope_theta, e));
    if (p->rope_scaling != 1 /* PK_ROPE_SCALING_LLAMA3 */) return f;
    const double two_pi = 6.283185307179586476925286766559;
    float factor = p->rope_factor, low = p->rope_low_freq_factor, high = p->rope_high_freq_factor;
    float old_len = (float)p->rope_original_max_position;
    float low_freq_wavelen = (float)((double)p->rope_original_max_position / low);
    float high_freq_wavelen = (float)((double)p->rope_original_max_position / high);
    float band = (float)((double)high - (double)low);
    float wavelen = __fmul_rn(__fdiv_rn(1.0f, f), (float)two_pi);
    float scaled = wavelen > low_freq_wavelen ? __fdiv_rn(f, factor) : f;
    if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen)) {
        float smooth = __fdiv_rn(__fsub_rn(__fmul_rn(__fdiv_rn(1.0f, wavelen), old_len), low), band);
        scaled = __fadd_rn(__fdiv_rn(__fmul_rn(__fsub_rn(1.0f, smooth), scaled), factor), __fmul_rn(smooth, scaled));
    }
    return scaled;
}

/* One warp: y[0 .. D) = RoPE(rmsnorm(x) · norm_w) at pos (no norm when norm_w is NULL), as fp32
 * holding bf16 values (head_norm_rope of attention.c). y is this warp's shared buffer. */
__device__ void pk_fb_head(const pk_bf16 *x, const pk_bf16 *norm_w, float eps, const pk_layer_params *p, int pos,
                           int D, float *y) {
    int lane = threadIdx.x & 31, half = D / 2;
    float scale = 0.0f;
    if (norm_w && lane == 0) scale = pk_fb_rms_scale(x, D, eps);
    scale = __shfl_sync(0xffffffffu, scale, 0);
    for (int i = lane; i < half; i += 32) {
        float a = pk_fb_act(x + i), b = pk_fb_act(x + i + half);
        if (norm_w) {
            a = pk_fb_rmsnorm1(a, scale, pk_fb_wt(norm_w + i));
            b = pk_fb_rmsnorm1(b, scale, pk_fb_wt(norm_w + i + half));
        }
        float ang = __fmul_rn((float)pos, pk_fb_inv_freq(p, i));
        float c = pk_fb_round(cosf(ang)), s = pk_fb_round(sinf(ang));
        y[i] = pk_fb_round(__fsub_rn(pk_fb_round(__fmul_rn(a, c)), pk_fb_round(__fmul_rn(b, s))));
        y[i + half] = pk_fb_round(__fadd_rn(pk_fb_round(__fmul_rn(b, c)), pk_fb_round(__fmul_rn(a, s))));
    }
    __syncwarp();
}

__device__ int pk_fb_row_valid(const pk_attn_step *s, int t) {
    int req = __ldcg(s->token_req + t), pos = __ldcg(s->token_pos + t);
    if (req < 0 || pos < 0 || s->page_size <= 0 || pos / s->page_size >= s->pages_per_req) return 0;
    for (int i = 0; i <= pos / s->page_size; i++)
        if (__ldcg(s->page_table + (int64_t)req * s->pages_per_req + i) < 0) return 0;
    return 1;
}

__device__ __forceinline__ int64_t pk_fb_cache_offset(const pk_attn_step *s, int req, int pos, int Hkv, int g, int D) {
    int32_t page = __ldcg(s->page_table + (int64_t)req * s->pages_per_req + pos / s->page_size);
    return (((int64_t)page * s->page_size + pos % s->page_size) * Hkv + g) * D;
}

/* Score of position j: (q · k_j) · scale, the dot sequential over i (scores() of attention.c). */
__device__ __forceinline__ float pk_fb_score(const float *q, const pk_bf16 *k, int D, float scale) {
    float s = 0.0f;
    for (int i = 0; i < D; i++) s = __fadd_rn(s, __fmul_rn(q[i], pk_fb_act(k + i)));
    return __fmul_rn(s, scale);
}

#define PK_FB_MAX_D 512

/* Whether position j is in split `split` of `nsplit` (attention.c's in_split). */
__device__ __forceinline__ bool pk_fb_in_split(int j, int split, int nsplit) {
    return (j / PK_ATTN_SPLIT_BLOCK) % nsplit == split;
}

/* Shared memory per warp: q [PK_FB_MAX_D] floats, then e [32]. inv_freq (the generated table) is
 * not used: this cross-check computes its own. Split `split` of `nsplit` (1: every position);
 * out != NULL: normalised bf16 output, else the split's (acc [D], m, l) per (row, task head) into
 * part (pk_cpu_attention_partial). */
__device__ void pk_fb_attention(const pk_layer_params *p, const pk_attn_step *s, int kv0, int nkv, int split,
                                int nsplit, const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *k_cache,
                                pk_bf16 *v_cache, const pk_bf16 *q_norm, const pk_bf16 *k_norm, pk_bf16 *out,
                                int64_t out_stride, float *part, int64_t part_stride, char *smem) {
    static_assert(PK_ATTN_SPLIT_BLOCK == 32, "a split block is one warp's block of positions");
    int D = p->head_dim, Hq = p->num_q_heads, Hkv = p->num_kv_heads;
    if (D <= 0 || D > PK_FB_MAX_D || D % 2 != 0 || Hkv <= 0 || Hq % Hkv != 0 || kv0 < 0 || nkv < 0 || kv0 + nkv > Hkv ||
        nsplit < 1 || split < 0 || split >= nsplit || (!out && !part))
        return;
    int G = Hq / Hkv, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    int64_t group_cols = (int64_t)(G + 2) * D;
    float *y = (float *)smem + warp * (PK_FB_MAX_D + 32); /* [D] */
    float *es = y + PK_FB_MAX_D;                          /* [32] */
    int n_tok = s->n_tok;

    /* phases 1 + 2: rotated K and raw V of every row into the cache */
    for (int u = warp; u < n_tok * nkv; u += nwarps) {
        int t = u / nkv, g = kv0 + u % nkv;
        if (!pk_fb_row_valid(s, t)) continue;
        int pos = __ldcg(s->token_pos + t), req = __ldcg(s->token_req + t);
        if (!pk_fb_in_split(pos, split, nsplit)) continue;
        const pk_bf16 *kv = qkv + t * qkv_stride + g * group_cols + (int64_t)G * D; /* K [D], then V [D] */
        pk_fb_head(kv, k_norm, p->qk_norm_eps, p, pos, D, y);
        int64_t off = pk_fb_cache_offset(s, req, pos, Hkv, g, D);
        for (int i = lane; i < D; i += 32) {
            k_cache[off + i] = pk_fb_bf16(y[i]);
            v_cache[off + i] = __ldcg((const unsigned short *)kv + D + i);
        }
        __syncwarp();
    }
    pk_cta_sync(); /* the cache rows of this step are written (and visible to the CTA) */

    /* phase 3: each query head against positions 0 .. pos of its request */
    float scale = __fdiv_rn(1.0f, __fsqrt_rn((float)D));
    for (int u = warp; u < n_tok * nkv * G; u += nwarps) {
        int t = u / (nkv * G), g = kv0 + (u / G) % nkv, hh = u % G;
        pk_bf16 *o = out ? out + t * out_stride + ((int64_t)g * G + hh) * D : nullptr;           /* [D] */
        float *pr = part ? part + t * part_stride + ((int64_t)(g - kv0) * G + hh) * (D + 2) : nullptr; /* [D + 2] */
        if (!pk_fb_row_valid(s, t)) {
            if (o)
                for (int i = lane; i < D; i += 32) o[i] = 0;
            else
                for (int i = lane; i < D + 2; i += 32) pr[i] = i == D ? -INFINITY : 0.0f;
            continue;
        }
        int pos = __ldcg(s->token_pos + t), req = __ldcg(s->token_req + t);
        pk_fb_head(qkv + t * qkv_stride + g * group_cols + (int64_t)hh * D, q_norm, p->qk_norm_eps, p, pos, D, y);
        /* pass 1: the max score (lanes over positions) */
        float m = -INFINITY;
        for (int j0 = 32 * split; j0 <= pos; j0 += 32 * nsplit) { /* the split's blocks */
            int j = j0 + lane;
            if (j > pos) break;
            float sc = pk_fb_score(y, k_cache + pk_fb_cache_offset(s, req, j, Hkv, g, D), D, scale);
            if (sc > m) m = sc;
        }
        for (int d = 16; d > 0; d >>= 1) {
            float other = __shfl_xor_sync(0xffffffffu, m, d);
            if (other > m) m = other;
        }
        /* pass 2: e_j per lane; the sums in j order (lane 0 for Σ e_j, lanes over i for Σ e_j v_j) */
        float acc[PK_FB_MAX_D / 32];
#pragma unroll
        for (int c = 0; c < PK_FB_MAX_D / 32; c++) acc[c] = 0.0f;
        float sum = 0.0f;
        for (int j0 = 32 * split; j0 <= pos; j0 += 32 * nsplit) {
            int nb = min(32, pos + 1 - j0);
            if (lane < nb)
                es[lane] = expf(__fsub_rn(
                    pk_fb_score(y, k_cache + pk_fb_cache_offset(s, req, j0 + lane, Hkv, g, D), D, scale), m));
            __syncwarp();
            if (lane == 0)
                for (int b = 0; b < nb; b++) sum = __fadd_rn(sum, es[b]);
            for (int b = 0; b < nb; b++) {
                const pk_bf16 *v = v_cache + pk_fb_cache_offset(s, req, j0 + b, Hkv, g, D); /* [D] */
                float e = es[b];
#pragma unroll
                for (int c = 0; c < PK_FB_MAX_D / 32; c++) {
                    int i = lane + 32 * c;
                    if (i < D) acc[c] = __fadd_rn(acc[c], __fmul_rn(e, pk_fb_act(v + i)));
                }
            }
            __syncwarp();
        }
        sum = __shfl_sync(0xffffffffu, sum, 0);
#pragma unroll
        for (int c = 0; c < PK_FB_MAX_D / 32; c++) {
            int i = lane + 32 * c;
            if (i < D && o) o[i] = pk_fb_bf16(__fdiv_rn(acc[c], sum));
            if (i < D && pr) pr[i] = acc[c];
        }
        if (pr && lane == 0) {
            pr[D] = m;
            pr[D + 1] = sum;
        }
        __syncwarp();
    }
}

__device__ void pk_dev_attention(const pk_layer_params *p, const float *inv_freq, const pk_attn_step *s, int kv0, int nkv,
                                 const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *k_cache, pk_bf16 *v_cache,
                                 const pk_bf16 *q_norm, const pk_bf16 *k_norm, pk_bf16 *out, int64_t out_stride,
                                 char *smem) {
    (void)inv_freq;
    pk_fb_attention(p, s, kv0, nkv, 0, 1, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, out, out_stride, nullptr,
                    0, smem);
}

__device__ void pk_dev_attention_partial(const pk_layer_params *p, const float *inv_freq, const pk_attn_step *s,
                                         int kv0, int nkv, int split, int nsplit, const pk_bf16 *qkv,
                                         int64_t qkv_stride, pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm,
                                         const pk_bf16 *k_norm, float *part, int64_t part_stride, char *smem) {
    (void)inv_freq;
    pk_fb_attention(p, s, kv0, nkv, split, nsplit, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, nullptr, 0, part,
                    part_stride, smem);
}

/* attention.c's pk_cpu_attention_combine, a thread per output element, splits in order. */
__device__ void pk_dev_attention_combine(int n_tok, int nheads, int D, int nsplit, const float *part,
                                         int64_t part_stride, pk_bf16 *out, int64_t out_stride) {
    if (D <= 0 || nheads <= 0 || nsplit < 1) return;
    const int64_t split_cols = (int64_t)nheads * (D + 2), per_row = (int64_t)nheads * D;
    for (int64_t e = threadIdx.x; e < n_tok * per_row; e += blockDim.x) {
        int t = (int)(e / per_row), h = (int)(e % per_row) / D, d = (int)(e % D);
        const float *row = part + t * part_stride + (int64_t)h * (D + 2);
        float M = -INFINITY;
        for (int sp = 0; sp < nsplit; sp++) M = fmaxf(M, __ldcg(row + sp * split_cols + D));
        pk_bf16 *o = out + t * out_stride + (int64_t)h * D + d;
        if (M == -INFINITY) {
            *o = 0;
            continue;
        }
        float num = 0.0f, den = 0.0f;
        for (int sp = 0; sp < nsplit; sp++) {
            const float *q = row + sp * split_cols;
            float f = expf(__fsub_rn(__ldcg(q + D), M));
            den = __fadd_rn(den, __fmul_rn(f, __ldcg(q + D + 1)));
            num = __fadd_rn(num, __fmul_rn(f, __ldcg(q + d)));
        }
        *o = pk_fb_bf16(__fdiv_rn(num, den));
    }
}

/* ---- argmax ---- */

/* Whether (v, i) comes before (bv, bi) in the order the CPU's sequential scan picks from: NaN
 * above every number (the first NaN wins), larger values first, ties to the smaller index. */
__device__ __forceinline__ bool pk_fb_better(float v, int32_t i, float bv, int32_t bi) {
    bool vn = isnan(v), bn = isnan(bv);
    if (vn != bn) return vn;
    if (!vn && v != bv) return v > bv;
    return i < bi;
}

/* Shared memory: val [blockDim.x] floats, idx [blockDim.x]. */
__device__ void pk_dev_argmax_partial(const pk_bf16 *logits, int64_t stride, int n_tok, int v0, int nv, float *val,
                                      int32_t *idx, int64_t part_stride, char *smem) {
    float *sv = (float *)smem;
    int32_t *si = (int32_t *)(sv + blockDim.x);
    for (int t = 0; t < n_tok; t++) {
        const pk_bf16 *row = logits + t * stride; /* [nv] */
        float best = -INFINITY;
        int32_t bi = v0; /* the scan's start: an all -inf row gives (-inf, v0) */
        for (int j = threadIdx.x; j < nv; j += blockDim.x) {
            float v = pk_fb_act(row + j);
            if (pk_fb_better(v, v0 + j, best, bi)) {
                best = v;
                bi = v0 + j;
            }
        }
        sv[threadIdx.x] = best;
        si[threadIdx.x] = bi;
        pk_cta_sync();
        if (threadIdx.x == 0) {
            for (int k = 1; k < (int)blockDim.x; k++)
                if (pk_fb_better(sv[k], si[k], best, bi)) {
                    best = sv[k];
                    bi = si[k];
                }
            val[t * part_stride] = best;
            idx[t * part_stride] = bi;
        }
        pk_cta_sync();
    }
}

__device__ void pk_dev_argmax_reduce(const float *val, const int32_t *idx, int64_t part_stride, int n_tok,
                                     int nparts, int32_t *out, char *smem) {
    (void)smem;
    for (int t = threadIdx.x; t < n_tok; t += blockDim.x) {
        const float *v = val + t * part_stride;    /* [nparts] */
        const int32_t *ix = idx + t * part_stride; /* [nparts] */
        float best = -INFINITY;
        int32_t bi = -1;
        for (int q = 0; q < nparts; q++) {
            float x = __ldcg(v + q);
            if (q == 0 || x > best || (isnan(x) && !isnan(best))) {
                best = x;
                bi = __ldcg(ix + q);
            }
        }
        out[t] = bi;
    }
}

#endif /* PK_CUDA_FALLBACK_KERNELS_CUH */
