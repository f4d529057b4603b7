// SPDX-License-Identifier: Apache-2.0
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

/* v = Σ_{j < ib} act_s[j] · w[j], j ascending with fmaf (16-byte vectors when vec). */
__device__ __forceinline__ float pk_dev_mlp_down_dot(const float *act_s, const pk_bf16 *w, int ib, bool vec) {
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
    return v;
}

/* act_s [ib] = silu · mul of gu's gate [ib] and up [ib] blocks (shared or global memory). */
__device__ __forceinline__ void pk_dev_mlp_act(const pk_bf16 *gu, bool gu_global, int ib, float *act_s) {
    for (int j = threadIdx.x; j < ib; j += PK_CUDA_THREADS) {
        const pk_bf16 gb = gu_global ? pk_dev_ldcg_bf16(gu + j) : gu[j], ub = gu_global ? pk_dev_ldcg_bf16(gu + j + ib) : gu[j + ib];
        act_s[j] = pk_dev_silu_mul1(pk_dev_bf16_to_f32(gb), pk_dev_bf16_to_f32(ub));
    }
}

__device__ inline void pk_dev_mlp_down_add(const pk_bf16 *gu, int64_t gu_stride, bool gu_global, int n_tok, int ib,
                                           const pk_bf16 *wd, int N, int64_t *acc, int64_t acc_stride,
                                           float *act_s) {
    const bool vec = ib % 8 == 0 && pk_dev_aligned16(wd);
    for (int t = 0; t < n_tok; t++) {
        pk_cta_sync(); /* gu written (the GEMV's stores), act_s free */
        pk_dev_mlp_act(gu + t * gu_stride, gu_global, ib, act_s);
        pk_cta_sync();
        for (int n = threadIdx.x; n < N; n += PK_CUDA_THREADS)
            pk_dev_fixed_add(acc + t * acc_stride + n, pk_dev_fixed_from_f32(pk_dev_mlp_down_dot(act_s, wd + (int64_t)n * ib, ib, vec)));
    }
}

/* A one-token step whose tile streamed instead of staging whole (the Qwen3-1.7B's 576 KB): the
 * column block wd [N][ib] (contiguous, in global memory) comes into shared memory in chunks of nc
 * outputs through two buffers, chunk c + 1's 16-byte cp.async copies in flight while chunk c's sums
 * run — instead of each thread's dependent global loads after the GEMV, which made the fused
 * task slower than gate_up and down apart. The same sums, in the same order, as
 * pk_dev_mlp_down_add. smem [0, smem_bytes): the kernels' area and the staging area
 * above it, both free once the GEMV is done: act_s [ib] fp32 at 0, the two buffers above it.
 * gu: the GEMV's gate / up sums in global memory. Returns false, having done nothing, when wd's
 * alignment or the area does not allow it (the caller then runs pk_dev_mlp_down_add). */
__device__ inline bool pk_dev_mlp_down_stream(const pk_bf16 *gu, int ib, const pk_bf16 *wd, int N, int64_t *acc,
                                              char *smem, uint32_t smem_bytes) {
    const uint32_t act_bytes = ((uint32_t)ib * 4u + 127u) & ~127u, row = (uint32_t)ib * 2u;
    if (!pk_dev_aligned16(wd) || ((uint64_t)N * row) % 16u || smem_bytes < act_bytes + 2u * PK_CUDA_THREADS * row)
        return false;
    int nc = (int)((smem_bytes - act_bytes) / 2u / row) / PK_CUDA_THREADS * PK_CUDA_THREADS; /* ≥ 256: 16-byte chunks */
    if (nc > N) nc = N;
    const uint32_t buf_bytes = ((uint32_t)nc * row + 127u) & ~127u;
    const int nchunks = (N + nc - 1) / nc;
    const bool vec = ib % 8 == 0;
    float *act_s = (float *)smem;
    asm volatile("cp.async.wait_all;" ::: "memory"); /* no copy of the GEMV's is left in flight */
    pk_cta_sync();                                   /* gu written, the GEMV's shared memory free */
    for (int c = 0; c <= nchunks; c++) {
        if (c < nchunks) { /* chunk c's copies into buffer c & 1 (free: chunk c - 2's sums are done) */
            const int n0 = c * nc, n = N - n0 < nc ? N - n0 : nc;
            pk_stage_copy((const char *)(wd + (int64_t)n0 * ib), (uint32_t)n * row, smem,
                          act_bytes + (uint32_t)(c & 1) * buf_bytes);
        }
        if (c == 0) { /* act_s while chunk 0 flies */
            pk_dev_mlp_act(gu, true, ib, act_s);
            continue;
        }
        const int cc = c - 1, n0 = cc * nc, n = N - n0 < nc ? N - n0 : nc; /* chunk c - 1's sums */
        if (c < nchunks)
            asm volatile("cp.async.wait_group 1;" ::: "memory");
        else
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        pk_cta_sync(); /* every thread's copies of chunk cc (and act_s) are in shared memory */
        const pk_bf16 *ws = (const pk_bf16 *)(smem + act_bytes + (uint32_t)(cc & 1) * buf_bytes);
        for (int i = threadIdx.x; i < n; i += PK_CUDA_THREADS)
            pk_dev_fixed_add(acc + n0 + i, pk_dev_fixed_from_f32(pk_dev_mlp_down_dot(act_s, ws + (int64_t)i * ib, ib, vec)));
        pk_cta_sync(); /* buffer cc & 1 read by every thread before chunk cc + 2's copies */
    }
    return true;
}

#endif /* PK_CUDA_MLP_FUSED_CUH */
