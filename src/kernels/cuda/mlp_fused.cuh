/* mlp_fused.cuh — RMSNORM_SWIGLU_DOWN's second half on the device, after rmsnorm_linear wrote the
 * task's gate / up sums gu [T][2 · ib] (gate block, then up block): silu · mul of its ib features,
 * then down_proj's partial sums over them for every output, added to the layer's int64
 * fixed-point accumulator (fixed_point.cuh).
 *
 * act[j] = bf16(bf16(silu(gate_j)) · up_j) (silu_mul.cuh's rounding) goes to act_s [ib] fp32 in
 * shared memory; then thread i takes outputs n = i, i + THREADS, ...: v = Σ_{j < ib} act[j] ·
 * wd[n · ib + j] (wd: the task's column block of down_proj, [N][ib] row-major, pk_column_blocks:
 * one output's ib weights contiguous, read as 16-byte vectors when ib % 8 == 0), j ascending with
 * fmaf (the CPU sums without FMA: bf16 tolerance, the same bits on every run), and one 64-bit
 * reduction to acc[t, n]. Consecutive lanes add to consecutive outputs: a warp's reductions cover
 * two 128-byte lines, not sixteen (the 128 tasks of a layer all add to the same N outputs, and the
 * L2 serialises the reductions to a line).
 * gu and wd may be in shared memory (a one-token step whose tile was staged: dispatch.cuh's
 * pk_gen_mlp_gu) or in global memory (gu_global: read through L2).
 */
#ifndef PK_CUDA_MLP_FUSED_CUH
#define PK_CUDA_MLP_FUSED_CUH

#include "kernels/cuda/fixed_point.cuh"
#include "kernels/cuda/rows.cuh"
#include "kernels/cuda/silu_mul.cuh"

__device__ inline void pk_dev_mlp_down_add(const pk_bf16 *gu, int64_t gu_stride, bool gu_global, int n_tok, int ib,
                                           const pk_bf16 *wd, int N, int64_t *acc, int64_t acc_stride,
                                           float *act_s) {
    const bool vec = ib % 8 == 0 && pk_dev_aligned16(wd);
    for (int t = 0; t < n_tok; t++) {
        pk_cta_sync(); /* gu written (the GEMV's stores), act_s free */
        for (int j = threadIdx.x; j < ib; j += PK_CUDA_THREADS) {
            const pk_bf16 *g = gu + t * gu_stride + j;
            const pk_bf16 gb = gu_global ? pk_dev_ldcg_bf16(g) : g[0], ub = gu_global ? pk_dev_ldcg_bf16(g + ib) : g[ib];
            act_s[j] = pk_dev_silu_mul1(pk_dev_bf16_to_f32(gb), pk_dev_bf16_to_f32(ub));
        }
        pk_cta_sync();
        for (int n = threadIdx.x; n < N; n += PK_CUDA_THREADS) {
            const pk_bf16 *w = wd + (int64_t)n * ib;
            float v = 0.0f;
            if (vec) {
                for (int j0 = 0; j0 < ib; j0 += 8) {
                    float f[8];
                    pk_dev_unpack8(*(const uint4 *)(w + j0), f); /* generic: shared or global */
#pragma unroll
                    for (int e = 0; e < 8; e++) v = fmaf(act_s[j0 + e], f[e], v);
                }
            } else {
                for (int j = 0; j < ib; j++) v = fmaf(act_s[j], pk_dev_bf16_to_f32(w[j]), v);
            }
            pk_dev_fixed_add(acc + t * acc_stride + n, pk_dev_fixed_from_f32(v));
        }
    }
}

#endif /* PK_CUDA_MLP_FUSED_CUH */
