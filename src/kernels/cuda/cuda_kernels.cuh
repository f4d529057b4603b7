// SPDX-License-Identifier: Apache-2.0
/* cuda_kernels.cuh — the CUDA kernel of every task kind, as __device__ functions that one CTA
 * (a persistent worker, PK_CUDA_THREADS threads) calls to compute one task's tile.
 *
 * Same arguments and the same numeric semantics (rounding points, bf16 storage, fp32
 * accumulation) as the CPU kernels in src/kernels/cpu/cpu_kernels.h — read that header for the
 * definition of each function. Differences from the CPU versions:
 *   - every thread of the CTA calls the function with the same arguments; it returns after the
 *     CTA's writes are issued; the caller then does __syncthreads() and the release-add;
 *   - reductions may use a different (fixed, data-independent) order than the CPU's sequential
 *     sum, so results match the CPU to bf16 tolerance, and are bit-identical run to run;
 *   - activations written by other CTAs in this launch are read through L2 (ld.global.cg or
 *     __ldcg), never through L1, which may hold stale lines; weights may use any path;
 *   - shared memory: each function may use up to PK_CUDA_SMEM_BYTES of the dynamic shared
 *     memory block `smem` the caller passes (16-byte aligned).
 * Each function is self-contained in its own file src/kernels/cuda/<kind>.cuh, included here.
 */
#ifndef PK_CUDA_KERNELS_CUH
#define PK_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/cuda/rows.cuh" /* pk_rows / pk_rows_get for device code, as in cpu_kernels.h; PK_CUDA_THREADS */

#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/rmsnorm.cuh"
#include "kernels/cuda/linear.cuh"
#include "kernels/cuda/linear_splitk.cuh"
#include "kernels/cuda/mlp_fused.cuh"
#include "kernels/cuda/silu_mul.cuh"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/argmax.cuh"
#include "kernels/cuda/sample.cuh"

/* Signatures (pk_bf16 is uint16_t storage, as on the host; convert with the helpers in
 * rows.cuh):
 *
 * __device__ void pk_dev_embedding(const int32_t *tokens, int n_tok, const pk_rows *w, int col0,
 *                                  int ncols, pk_bf16 *out, int64_t out_stride, char *smem);
 * __device__ void pk_dev_rmsnorm(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *w, int n_tok,
 *                                int hidden, float eps, pk_bf16 *out, int64_t out_stride, char *smem);
 * __device__ void pk_dev_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K, const pk_rows *w,
 *                               int n0, int ncols, const pk_bf16 *residual, int64_t res_stride,
 *                               pk_bf16 *out, int64_t out_stride, char *smem);
 * __device__ void pk_dev_rmsnorm_linear(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *norm_w,
 *                                       float eps, int n_tok, int K, const pk_rows *w, int n0,
 *                                       int ncols, pk_bf16 *out, int64_t out_stride, char *smem);
 * __device__ void pk_dev_silu_mul_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K,
 *                                        const pk_rows *w, int n0, int ncols, const pk_bf16 *residual,
 *                                        int64_t res_stride, pk_bf16 *out, int64_t out_stride, char *smem);
 * __device__ void pk_dev_linear_splitk_add(const pk_bf16 *x, int64_t x_stride, int n_tok, int kc,
 *                                          const pk_bf16 *wt, int N, float *acc, int64_t acc_stride,
 *                                          char *smem);   (+ const pk_bf16 *wst, int wst_rows: staged)
 * __device__ void pk_dev_linear_splitk_finish(int n_tok, int N, float *acc, int64_t acc_stride,
 *                                             const pk_bf16 *residual, int64_t res_stride, pk_bf16 *out,
 *                                             int64_t out_stride);
 *   (cpu_kernels.h's pk_cpu_linear_splitk_add / _finish; wt is the block's rows of the weight's
 *   transpose [kc][N], which the CUDA backend uploads; the runtime runs _finish in the layer's last
 *   task)
 * __device__ void pk_dev_silu_mul(const pk_bf16 *x, int64_t x_stride, int n_tok, int I, int i0, int ncols,
 *                                 pk_bf16 *out, int64_t out_stride, char *smem);
 * __device__ void pk_dev_swiglu_blocks(const pk_bf16 *gu, int64_t gu_stride, int n_tok, int ncols, int block,
 *                                      pk_bf16 *out, int64_t out_stride);   (after a barrier over gu)
 * __device__ void pk_dev_attention(const pk_layer_params *p, const float *inv_freq (NULL: computed),
 *                                  const pk_attn_step *s, int kv0, int nkv,
 *                                  const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *k_cache,
 *                                  pk_bf16 *v_cache, const pk_bf16 *q_norm, const pk_bf16 *k_norm,
 *                                  pk_bf16 *out, int64_t out_stride, char *smem);
 * __device__ void pk_dev_attention_partial(const pk_layer_params *p, const float *inv_freq,
 *                                          const pk_attn_step *s, int kv0, int nkv, int split,
 *                                          int nsplit, const pk_bf16 *qkv, int64_t qkv_stride,
 *                                          pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm,
 *                                          const pk_bf16 *k_norm, float *part, int64_t part_stride,
 *                                          char *smem);
 * __device__ void pk_dev_attention_combine(int n_tok, int nheads, int D, int nsplit, const float *part,
 *                                          int64_t part_stride, pk_bf16 *out, int64_t out_stride,
 *                                          char *smem, int smem_bytes);
 * __device__ void pk_dev_argmax_partial(const pk_bf16 *logits, int64_t stride, int n_tok, int v0, int nv,
 *                                       float *val, int32_t *idx, int64_t part_stride, char *smem);
 * __device__ void pk_dev_argmax_reduce(const float *val, const int32_t *idx, int64_t part_stride,
 *                                      int n_tok, int nparts, int32_t *out, char *smem);
 *
 * pk_attn_step and pk_layer_params are the structs of cpu_kernels.h / pk_abi.h (plain C, shared).
 */

#endif /* PK_CUDA_KERNELS_CUH */
