// SPDX-License-Identifier: Apache-2.0
/* silu_mul.cuh — PK_TASK_SILU_MUL on the device: out[t, j] = bf16(bf16(silu(g)) · u),
 * g = x[t, i0 + j], u = x[t, I + i0 + j], silu(g) = g / (1 + exp(-g)) in fp32 (pk_cpu_silu_mul);
 * and pk_dev_silu_mul1, the element that silu_mul_linear shares.
 *
 * Elementwise: (row, 8-column chunk) pairs spread over the threads (thread i takes pairs i,
 * i + THREADS, ...), 16-byte loads of gate and up and a 16-byte store where all three are aligned,
 * element by element otherwise. x is an activation, read through L2. No shared memory, no barrier.
 * expf is CUDA's precise expf (<= 2 ulp; no --use_fast_math), so a result can differ from the CPU's
 * by one bf16 step where silu lands next to a rounding boundary.
 */
#ifndef PK_CUDA_SILU_MUL_CUH
#define PK_CUDA_SILU_MUL_CUH

#include "kernels/cuda/rows.cuh"

/* bf16(bf16(silu(g)) · u), as an fp32 holding a bf16 value (pk_cpu_silu_mul1). */
__device__ __forceinline__ float pk_dev_silu_mul1(float g, float u) {
    return pk_dev_round_bf16(pk_dev_round_bf16(__fdiv_rn(g, 1.0f + expf(-g))) * u);
}

__device__ inline void pk_dev_silu_mul(const pk_bf16 *x, int64_t x_stride, int n_tok, int I,
                                       int i0, int ncols, pk_bf16 *out, int64_t out_stride,
                                       char *smem) {
    (void)smem;
    if (ncols <= 0 || n_tok <= 0) return;
    const int nch = (ncols + 7) / 8;
    const int64_t total = (int64_t)n_tok * nch;
    for (int64_t e = threadIdx.x; e < total; e += PK_CUDA_THREADS) {
        int t = (int)(e / nch), j = 8 * (int)(e - (int64_t)t * nch);
        const pk_bf16 *gate = x + t * x_stride + i0 + j; /* [8] */
        const pk_bf16 *up = gate + I;                    /* [8] */
        pk_bf16 *o = out + t * out_stride + j;           /* [8] */
        if (j + 8 <= ncols && pk_dev_aligned16(o)) {
            float g[8], u[8], y[8];
            pk_dev_unpack8(pk_dev_load8_any<true>(gate), g);
            pk_dev_unpack8(pk_dev_load8_any<true>(up), u);
#pragma unroll
            for (int i = 0; i < 8; i++) y[i] = pk_dev_silu_mul1(g[i], u[i]);
            *(uint4 *)o = pk_dev_pack8(y);
        } else {
            for (int i = 0; i < 8 && j + i < ncols; i++)
                o[i] = pk_dev_f32_to_bf16(
                    pk_dev_silu_mul1(pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(gate + i)),
                                     pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(up + i))));
        }
    }
}

/* PK_TASK_RMSNORM_LINEAR_SWIGLU's epilogue (pk_cpu_swiglu_blocks): the task's projection gu
 * [n_tok, 2 · ncols] in blocks (`block` gate columns, then the `block` matching up columns) to
 * out [n_tok, ncols]. The caller synchronised the block after writing gu: it is read back through
 * L2 (ld.global.cg), one element pair per thread. */
__device__ inline void pk_dev_swiglu_blocks(const pk_bf16 *gu, int64_t gu_stride, int n_tok, int ncols, int block,
                                            pk_bf16 *out, int64_t out_stride) {
    const int64_t total = (int64_t)n_tok * ncols;
    for (int64_t e = threadIdx.x; e < total; e += PK_CUDA_THREADS) {
        const int t = (int)(e / ncols), j = (int)(e - (int64_t)t * ncols), b = j / block;
        const pk_bf16 *gate = gu + t * gu_stride + j + b * block; /* column 2b · block + j % block */
        out[t * out_stride + j] = pk_dev_f32_to_bf16(pk_dev_silu_mul1(pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(gate)),
                                                                      pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(gate + block))));
    }
}

#endif /* PK_CUDA_SILU_MUL_CUH */
