// SPDX-License-Identifier: Apache-2.0
/* rmsnorm.cuh — PK_TASK_RMSNORM on the device: out = bf16(bf16(x · scale) · w) per row, as
 * pk_cpu_rmsnorm; and pk_dev_rms_scales, the per-row scale that rmsnorm_linear shares.
 *
 * Scales (pk_dev_rms_scales, up to PK_DEV_RMS_ROWS rows at once, the whole CTA): thread i sums x²
 * of 8-element chunks i, i + THREADS, ... of each row in fp32 (elements in order), each warp
 * reduces by a fixed butterfly, warp w's sum goes to red_s[r][w]; barrier; thread r adds the
 * PK_DEV_WARPS sums of row r in warp order and writes scale_s[r] = 1/sqrt(Σ/n + eps); barrier.
 * The order is fixed, so the same bits on every run (not the CPU's sequential sum: bf16 tolerance).
 * Elementwise pass: (row, 8-column chunk) pairs spread over the threads like embedding.cuh, 16-byte
 * accesses where x, w and out are aligned. Shared memory: scale_s [8] f32, red_s [8][WARPS] f32.
 * Rows are taken 8 at a time; x is an activation, read through L2.
 */
#ifndef PK_CUDA_RMSNORM_CUH
#define PK_CUDA_RMSNORM_CUH

#include "kernels/cuda/fixed_point.cuh"
#include "kernels/cuda/rows.cuh"

#define PK_DEV_RMS_ROWS 8

/* One element of the normalised row: bf16(bf16(x · scale) · w), as pk_cpu_rmsnorm1. */
__device__ __forceinline__ float pk_dev_rmsnorm1(float x, float scale, float w) {
    return pk_dev_round_bf16(pk_dev_round_bf16(x * scale) * w);
}

/* 8 elements of x plus a fused MLP's accumulator (RMSNORM_LINEAR's PK_V_NL_ACC): bf16(bf16(acc ·
 * 2^-32) + x), as pk_cpu_acc_sum. acc: 8 int64 at a 64-byte boundary, read through L2 (other SMs'
 * reductions wrote them). */
__device__ __forceinline__ uint4 pk_dev_acc_x8(uint4 xv, const int64_t *acc) {
    float f[8];
    pk_dev_unpack8(xv, f);
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const longlong2 a = __ldcg((const longlong2 *)acc + q);
        f[2 * q] = pk_dev_round_bf16(pk_dev_round_bf16(pk_dev_fixed_to_f32(a.x)) + f[2 * q]);
        f[2 * q + 1] = pk_dev_round_bf16(pk_dev_round_bf16(pk_dev_fixed_to_f32(a.y)) + f[2 * q + 1]);
    }
    return pk_dev_pack8(f);
}

/* scale_s[r] = 1/sqrt(Σ_k x[r, k]² / n + eps) for r < nrows <= PK_DEV_RMS_ROWS. Called by the whole
 * CTA; scale_s and red_s ([PK_DEV_RMS_ROWS][PK_DEV_WARPS]) are shared memory. Ends with a barrier:
 * scale_s is then visible to every thread. */
/* With acc (n % 8 == 0, row stride acc_stride), x is x plus acc as pk_dev_acc_x8. */
__device__ inline void pk_dev_rms_scales(const pk_bf16 *x, int64_t x_stride, int nrows, int n,
                                         float eps, float *scale_s, float *red_s,
                                         const int64_t *acc = nullptr, int64_t acc_stride = 0) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int nch = (n + 7) / 8;
    for (int r = 0; r < nrows; r++) {
        const pk_bf16 *xr = x + r * x_stride; /* [n] */
        float s = 0.0f;
        for (int c = threadIdx.x; c < nch; c += PK_CUDA_THREADS) {
            int k = 8 * c;
            float f[8];
            if (k + 8 <= n) {
                const uint4 xv = pk_dev_load8_any<true>(xr + k);
                pk_dev_unpack8(acc ? pk_dev_acc_x8(xv, acc + r * acc_stride + k) : xv, f);
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++)
                    f[i] = k + i < n ? pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(xr + k + i)) : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < 8; i++) s = fmaf(f[i], f[i], s);
        }
        s = pk_dev_warp_sum(s);
        if (lane == 0) red_s[r * PK_DEV_WARPS + warp] = s;
    }
    pk_cta_sync();
    if ((int)threadIdx.x < nrows) {
        const float *red = red_s + threadIdx.x * PK_DEV_WARPS;
        float s = 0.0f;
        for (int i = 0; i < PK_DEV_WARPS; i++) s += red[i];
        scale_s[threadIdx.x] = 1.0f / sqrtf(s / (float)n + eps);
    }
    pk_cta_sync();
}

__device__ inline void pk_dev_rmsnorm(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *w,
                                      int n_tok, int hidden, float eps, pk_bf16 *out,
                                      int64_t out_stride, char *smem) {
    float *scale_s = (float *)smem;                /* [PK_DEV_RMS_ROWS] */
    float *red_s = scale_s + PK_DEV_RMS_ROWS;      /* [PK_DEV_RMS_ROWS][PK_DEV_WARPS] */
    const int nch = (hidden + 7) / 8;
    for (int t0 = 0; t0 < n_tok; t0 += PK_DEV_RMS_ROWS) {
        int nt = n_tok - t0 < PK_DEV_RMS_ROWS ? n_tok - t0 : PK_DEV_RMS_ROWS;
        pk_dev_rms_scales(x + t0 * x_stride, x_stride, nt, hidden, eps, scale_s, red_s);
        for (int e = threadIdx.x; e < nt * nch; e += PK_CUDA_THREADS) {
            int r = e / nch, k = 8 * (e - r * nch);
            const pk_bf16 *xr = x + (t0 + r) * x_stride + k;
            pk_bf16 *o = out + (t0 + r) * out_stride + k;
            float scale = scale_s[r];
            if (k + 8 <= hidden && pk_dev_aligned16(o)) {
                float xf[8], wf[8], y[8];
                pk_dev_unpack8(pk_dev_load8_any<true>(xr), xf);
                pk_dev_unpack8(pk_dev_load8_any<false>(w + k), wf);
#pragma unroll
                for (int i = 0; i < 8; i++) y[i] = pk_dev_rmsnorm1(xf[i], scale, wf[i]);
                *(uint4 *)o = pk_dev_pack8(y);
            } else {
                for (int i = 0; i < 8 && k + i < hidden; i++)
                    o[i] = pk_dev_f32_to_bf16(
                        pk_dev_rmsnorm1(pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(xr + i)), scale,
                                        pk_dev_bf16_to_f32(pk_dev_ldw_bf16(w + k + i))));
            }
        }
        /* the next block's pk_dev_rms_scales rewrites scale_s only after its first barrier */
    }
}

#endif /* PK_CUDA_RMSNORM_CUH */
