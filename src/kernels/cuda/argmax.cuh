// SPDX-License-Identifier: Apache-2.0
/* argmax.cuh — PK_TASK_ARGMAX_PARTIAL and PK_TASK_ARGMAX_REDUCE on the device (greedy sampling),
 * the same results as pk_cpu_argmax_partial / _reduce, bit for bit.
 *
 * The order: NaN above every number, then by value, ties to the smaller index (position). That is
 * a total order, so the winner does not depend on how the scan is split: exact, not approximate.
 * Partial: rows one after another, the whole CTA per row. Thread i scans 8-element chunks i,
 * i + THREADS, ... (16-byte loads when the row is aligned, element by element otherwise), keeping
 * its first best; the warp combines by butterfly; lane 0 of warp w writes (val, idx) to
 * red_s[row & 1][w] (double-buffered, so one barrier per row); after the barrier thread 0 combines
 * the warps and writes val / idx. A tile with nv = 0 writes (-inf, v0), as the CPU.
 * Reduce (the partial layer's last task): one warp per row, lanes over the partials, each lane's
 * value and index loaded together (one L2 round trip), ties to the smaller index: partial q's
 * index lies below partial q + 1's (tiles in order over V), so that is the smaller partial, as
 * the CPU's scan picks; lane 0 writes (-1 when there is no partial).
 * logits, val and idx are activations: read through L2.
 * Shared memory (partial): red_s [2][WARPS] {f32 val, i32 idx}.
 */
#ifndef PK_CUDA_ARGMAX_CUH
#define PK_CUDA_ARGMAX_CUH

#include "kernels/cuda/rows.cuh"

/* Whether (v, i) comes before (bv, bi): NaN beats any number; larger wins; ties: smaller index. */
__device__ __forceinline__ bool pk_am_better(float v, int i, float bv, int bi) {
    bool vn = v != v, bn = bv != bv;
    if (vn != bn) return vn;
    if (!vn && v != bv) return v > bv;
    return i < bi;
}

__device__ __forceinline__ void pk_am_warp(float &v, int &i) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(PK_DEV_FULL_MASK, v, o);
        int oi = __shfl_xor_sync(PK_DEV_FULL_MASK, i, o);
        if (pk_am_better(ov, oi, v, i)) {
            v = ov;
            i = oi;
        }
    }
}

__device__ inline void pk_dev_argmax_partial(const pk_bf16 *logits, int64_t stride, int n_tok,
                                             int v0, int nv, float *val, int32_t *idx,
                                             int64_t part_stride, char *smem) {
    float *red_v = (float *)smem;                   /* [2][WARPS] */
    int *red_i = (int *)(red_v + 2 * PK_DEV_WARPS); /* [2][WARPS] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int nch = (nv + 7) / 8;
    for (int t = 0; t < n_tok; t++) {
        const pk_bf16 *row = logits + t * stride; /* [nv] */
        float bv = -INFINITY;
        int bi = INT32_MAX; /* no element yet: loses every tie */
        for (int c = threadIdx.x; c < nch; c += PK_CUDA_THREADS) {
            int j = 8 * c;
            float f[8];
            if (j + 8 <= nv) {
                pk_dev_unpack8(pk_dev_load8_any<true>(row + j), f);
            } else {
#pragma unroll
                for (int e = 0; e < 8; e++)
                    f[e] = j + e < nv ? pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(row + j + e))
                                      : -INFINITY;
            }
#pragma unroll
            for (int e = 0; e < 8; e++)
                if (j + e < nv && pk_am_better(f[e], j + e, bv, bi)) {
                    bv = f[e];
                    bi = j + e;
                }
        }
        pk_am_warp(bv, bi);
        const int buf = (t & 1) * PK_DEV_WARPS;
        if (lane == 0) {
            red_v[buf + warp] = bv;
            red_i[buf + warp] = bi;
        }
        pk_cta_sync();
        if (threadIdx.x == 0) {
            for (int w = 0; w < PK_DEV_WARPS; w++)
                if (pk_am_better(red_v[buf + w], red_i[buf + w], bv, bi)) {
                    bv = red_v[buf + w];
                    bi = red_i[buf + w];
                }
            val[t * part_stride] = bv;
            idx[t * part_stride] = v0 + (bi == INT32_MAX ? 0 : bi);
        }
        /* red_s[buf] is rewritten two rows later, after the next row's barrier */
    }
}

__device__ inline void pk_dev_argmax_reduce(const float *val, const int32_t *idx,
                                            int64_t part_stride, int n_tok, int nparts,
                                            int32_t *out, char *smem) {
    (void)smem;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int t = warp; t < n_tok; t += PK_DEV_WARPS) {
        const float *v = val + t * part_stride;     /* [nparts] */
        const int32_t *ix = idx + t * part_stride; /* [nparts] */
        float bv = -INFINITY;
        int bi = INT32_MAX; /* no partial yet: loses every tie */
        for (int q0 = lane; q0 < nparts; q0 += 32 * 4) { /* 4 partials per lane in one round trip */
            float x[4];
            int i[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int q = q0 + 32 * u;
                x[u] = q < nparts ? pk_dev_ldcg_f32(v + q) : -INFINITY;
                i[u] = q < nparts ? pk_dev_ldcg_i32(ix + q) : INT32_MAX; /* (-inf, INT32_MAX) never wins */
            }
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (pk_am_better(x[u], i[u], bv, bi)) {
                    bv = x[u];
                    bi = i[u];
                }
        }
        pk_am_warp(bv, bi);
        if (lane == 0) out[t] = bi == INT32_MAX ? -1 : bi;
    }
}

#endif /* PK_CUDA_ARGMAX_CUH */
