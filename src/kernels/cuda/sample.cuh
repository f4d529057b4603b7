// SPDX-License-Identifier: Apache-2.0
/* sample.cuh — the rows whose request samples, drawn on the device by the argmax layer's last
 * task: kernels/sample.h's rule, the same token as pk_cpu_sample_row bit for bit (the same passes,
 * with counts and fixed-point sums that are exact in any order, and sample.h's arithmetic).
 *
 * The whole CTA per row, rows one after another. Each pass is a strided scan of the row's V
 * logits (read through L2: they are this step's activations) and a block reduction: the largest
 * scaled logit and the finite count; top-k's threshold by binary search over the floats' order
 * (32 counting passes) and its index bound among ties (log2 V more); top-p's total weight, then
 * its threshold (32 weighted passes); then the draw, the largest Gumbel key among the kept.
 * That is ~70 passes over the row with top-k and top-p, 2 without: a sampling row of a 151,936
 * token vocabulary reads its 300 KB logits row from L2 each pass.
 * Shared memory: PK_DEV_WARPS 8-byte slots and one broadcast slot.
 */
#ifndef PK_CUDA_SAMPLE_CUH
#define PK_CUDA_SAMPLE_CUH

#include "kernels/cuda/rows.cuh"
#include "kernels/sample.h"

/* s_i, or NaN when token i is never drawn (sample.c's `scaled`). */
__device__ __forceinline__ float pk_ds_scaled(const pk_bf16 *row, int i, float inv_temp) {
    const float s = pk_sample_scale(pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(row + i)), inv_temp);
    return isfinite(s) ? s : __int_as_float(0x7fc00000);
}

/* Block sums and maxima of one value per thread; every thread gets the result. */
__device__ __forceinline__ unsigned long long pk_ds_sum(unsigned long long v, unsigned long long *sm) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(PK_DEV_FULL_MASK, v, o);
    if (threadIdx.x % 32 == 0) sm[threadIdx.x / 32] = v;
    pk_cta_sync();
    unsigned long long t = 0;
    for (int w = 0; w < PK_DEV_WARPS; w++) t += sm[w];
    pk_cta_sync(); /* sm is rewritten by the next reduction */
    return t;
}

__device__ __forceinline__ float pk_ds_max(float v, unsigned long long *sm) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(PK_DEV_FULL_MASK, v, o));
    if (threadIdx.x % 32 == 0) sm[threadIdx.x / 32] = __float_as_uint(v);
    pk_cta_sync();
    float t = -INFINITY;
    for (int w = 0; w < PK_DEV_WARPS; w++) t = fmaxf(t, __uint_as_float((unsigned)sm[w]));
    pk_cta_sync();
    return t;
}

/* The block's best (key, index): larger key, ties to the smaller index. */
__device__ __forceinline__ int pk_ds_best(float key, int idx, unsigned long long *sm) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ok = __shfl_xor_sync(PK_DEV_FULL_MASK, key, o);
        const int oi = __shfl_xor_sync(PK_DEV_FULL_MASK, idx, o);
        if (ok > key || (ok == key && oi < idx)) key = ok, idx = oi;
    }
    if (threadIdx.x % 32 == 0) sm[threadIdx.x / 32] = (unsigned long long)__float_as_uint(key) << 32 | (unsigned)idx;
    pk_cta_sync();
    float bk = -INFINITY;
    int bi = INT32_MAX;
    for (int w = 0; w < PK_DEV_WARPS; w++) {
        const float k = __uint_as_float((unsigned)(sm[w] >> 32));
        const int i = (int)(unsigned)sm[w];
        if (k > bk || (k == bk && i < bi)) bk = k, bi = i;
    }
    pk_cta_sync();
    return bi;
}

/* Tokens with order key above o, or equal to it at an index below imax (sample.c's count_above). */
__device__ inline long long pk_ds_count_above(const pk_bf16 *row, int V, float inv_temp, uint32_t o, int imax,
                                              unsigned long long *sm) {
    unsigned long long n = 0;
    for (int i = threadIdx.x; i < V; i += PK_CUDA_THREADS) {
        const float s = pk_ds_scaled(row, i, inv_temp);
        if (s != s) continue;
        const uint32_t so = pk_sample_order(s);
        n += so > o || (so == o && i < imax);
    }
    return (long long)pk_ds_sum(n, sm);
}

/* pk_cpu_sample_row on the device: every thread returns the token. */
__device__ inline int32_t pk_dev_sample_row(const pk_bf16 *row, int V, const int32_t *params, int32_t pos, int32_t greedy,
                                            unsigned long long *sm) {
    const float inv_temp = pk_sample_f32_of(params[PK_SAMPLE_INV_TEMP]);
    const int top_k = params[PK_SAMPLE_TOP_K];
    const float top_p = pk_sample_f32_of(params[PK_SAMPLE_TOP_P]), min_p = pk_sample_f32_of(params[PK_SAMPLE_MIN_P]);
    const uint64_t seed = (uint64_t)(uint32_t)params[PK_SAMPLE_SEED_LO] | (uint64_t)(uint32_t)params[PK_SAMPLE_SEED_HI] << 32;
    unsigned long long nf = 0;
    float smax = -INFINITY;
    for (int i = threadIdx.x; i < V; i += PK_CUDA_THREADS) {
        const float s = pk_ds_scaled(row, i, inv_temp);
        if (s != s) continue;
        nf++;
        smax = fmaxf(smax, s);
    }
    const long long nfinite = (long long)pk_ds_sum(nf, sm);
    smax = pk_ds_max(smax, sm);
    if (nfinite == 0) return greedy;

    uint32_t ok = 0;
    int ik = V;
    if (top_k > 0 && top_k < nfinite) {
        uint32_t lo = 0, hi = 0xffffffffu;
        while (lo < hi) {
            const uint32_t mid = (uint32_t)(((uint64_t)lo + hi + 1) / 2);
            if (pk_ds_count_above(row, V, inv_temp, mid, V, sm) >= top_k) lo = mid;
            else hi = mid - 1;
        }
        ok = lo;
        int ilo = 0, ihi = V;
        while (ilo < ihi) {
            const int mid = ilo + (ihi - ilo) / 2;
            if (pk_ds_count_above(row, V, inv_temp, ok, mid, sm) >= top_k) ihi = mid;
            else ilo = mid + 1;
        }
        ik = ilo;
    }

    uint32_t op = 0;
    if (top_p > 0.0f && top_p < 1.0f) {
        unsigned long long tw = 0;
        for (int i = threadIdx.x; i < V; i += PK_CUDA_THREADS) {
            const float s = pk_ds_scaled(row, i, inv_temp);
            if (s != s) continue;
            const uint32_t so = pk_sample_order(s);
            if (so > ok || (so == ok && i < ik)) tw += pk_sample_fixed(pk_sample_exp(s - smax));
        }
        const unsigned long long total = pk_ds_sum(tw, sm);
        const unsigned long long target = (unsigned long long)ceil((double)total * (double)top_p);
        uint32_t lo = 0, hi = pk_sample_order(smax);
        while (lo < hi) {
            const uint32_t mid = (uint32_t)(((uint64_t)lo + hi + 1) / 2);
            unsigned long long w = 0;
            for (int i = threadIdx.x; i < V; i += PK_CUDA_THREADS) {
                const float s = pk_ds_scaled(row, i, inv_temp);
                if (s != s) continue;
                const uint32_t so = pk_sample_order(s);
                if (so >= mid && (so > ok || (so == ok && i < ik))) w += pk_sample_fixed(pk_sample_exp(s - smax));
            }
            if (pk_ds_sum(w, sm) >= target) lo = mid;
            else hi = mid - 1;
        }
        op = lo;
    }

    float best_key = -INFINITY;
    int best = INT32_MAX;
    for (int i = threadIdx.x; i < V; i += PK_CUDA_THREADS) {
        const float s = pk_ds_scaled(row, i, inv_temp);
        if (s != s) continue;
        const uint32_t so = pk_sample_order(s);
        if (!(so > ok || (so == ok && i < ik)) || so < op) continue;
        if (min_p > 0.0f && pk_sample_exp(s - smax) < min_p) continue;
        const float key = pk_sample_key(s, seed, pos, i);
        if (best == INT32_MAX || key > best_key) best_key = key, best = i; /* i rises: ties keep the first */
    }
    const int b = pk_ds_best(best_key, best, sm);
    return b == INT32_MAX ? greedy : b;
}

/* The step's sampling rows (sample_slot[r] = 1 + slot) after the argmax wrote out: their tokens
 * drawn from their whole logits row (logits: the tensor's first column, row stride `stride`, V
 * columns). The calling CTA alone; out is rewritten by thread 0. */
__device__ inline void pk_dev_sample_rows(const pk_bf16 *logits, int64_t stride, int V, int n_tok,
                                          const int32_t *sample_slot, const int32_t *sample_params,
                                          const int32_t *token_pos, int32_t *out, char *smem) {
    unsigned long long *sm = (unsigned long long *)smem; /* [PK_DEV_WARPS] */
    for (int r = 0; r < n_tok; r++) {
        const int slot = pk_dev_ldcg_i32(sample_slot + r) - 1; /* the same for every thread */
        if (slot < 0) continue;
        int32_t params[PK_SAMPLE_PARAMS];
        for (int j = 0; j < PK_SAMPLE_PARAMS; j++) params[j] = pk_dev_ldcg_i32(sample_params + slot * PK_SAMPLE_PARAMS + j);
        const int32_t greedy = pk_dev_ldcg_i32(out + r);
        pk_cta_sync(); /* every thread read out[r] before thread 0 writes it */
        const int32_t t = pk_dev_sample_row(logits + r * stride, V, params, pk_dev_ldcg_i32(token_pos + r) + 1, greedy, sm);
        if (threadIdx.x == 0) out[r] = t;
    }
}

#endif /* PK_CUDA_SAMPLE_CUH */
