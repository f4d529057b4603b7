/* mlp_fused.cuh — RMSNORM_SWIGLU_DOWN's last part on the device: down_proj's partial sums over the
 * task's ib features, for every output, added to the layer's int64 fixed-point accumulator
 * (fixed_point.cuh). The GEMV into gate / up and silu · mul before it are rmsnorm_linear's and
 * swiglu's (dispatch.cuh calls the three in a row).
 *
 * acc[t, n] += fixed(Σ_{j < ib} act[t, j] · wt[j][n]), wt: the task's ib rows of down_proj's
 * transpose [ib][N] (row stride N), staged in shared memory or in global memory. A thread takes
 * 8 consecutive outputs of one token (16-byte loads of each wt row), j ascending with fmaf (the
 * CPU sums without FMA: bf16 tolerance, the same bits on every run), then 8 64-bit reductions.
 * act's row goes to shared memory first (act_s [ib] fp32 at smem, below any tile staged low:
 * runtime.cuh's pk_stage_lo keeps PK_LIN_HDR + 2K bytes free, and ib · 4 <= that is checked by
 * the caller). Needs N % 8 == 0 and wt 16-byte aligned (codegen.c's checks).
 */
#ifndef PK_CUDA_MLP_FUSED_CUH
#define PK_CUDA_MLP_FUSED_CUH

#include "kernels/cuda/fixed_point.cuh"
#include "kernels/cuda/rows.cuh"

__device__ inline void pk_dev_mlp_down_add(const pk_bf16 *act, int64_t act_stride, int n_tok, int ib,
                                           const pk_bf16 *wt, int N, int64_t *acc, int64_t acc_stride,
                                           char *smem) {
    float *act_s = (float *)smem;
    const int nch = N / 8;
    for (int t = 0; t < n_tok; t++) {
        pk_cta_sync(); /* act's columns written (swiglu), act_s free */
        for (int j = threadIdx.x; j < ib; j += PK_CUDA_THREADS)
            act_s[j] = pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(act + t * act_stride + j));
        pk_cta_sync();
        for (int c = threadIdx.x; c < nch; c += PK_CUDA_THREADS) {
            float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            const pk_bf16 *wc = wt + 8 * c;
#pragma unroll 4
            for (int j = 0; j < ib; j++) {
                float w[8];
                pk_dev_unpack8(*(const uint4 *)(wc + (int64_t)j * N), w); /* generic: shared or global */
                const float aj = act_s[j];
#pragma unroll
                for (int i = 0; i < 8; i++) s[i] = fmaf(aj, w[i], s[i]);
            }
            int64_t *dst = acc + t * acc_stride + 8 * c;
#pragma unroll
            for (int i = 0; i < 8; i++) pk_dev_fixed_add(dst + i, pk_dev_fixed_from_f32(s[i]));
        }
    }
}

#endif /* PK_CUDA_MLP_FUSED_CUH */
