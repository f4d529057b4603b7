// SPDX-License-Identifier: Apache-2.0
/* linear_splitk.cuh — PK_TASK_LINEAR_SPLITK_RESIDUAL on the device (cpu_kernels.h,
 * pk_cpu_linear_splitk_add / _finish): one task's partial sums over its K block,
 *   acc[t, n] += Σ_{k < kc} x[t, k] · W[n, k]   (fp32; x at the block's first column),
 * added to the layer's fp32 accumulator in L2 with red.global.add; then the layer's last task to
 * finish (the runtime's completion counter, as for the split attention's fold) writes
 *   out[t, n] = bf16(bf16(acc[t, n]) + residual[t, n]) and clears acc for the next step.
 *
 * Why: the MLP's down projection split over K (its input features) needs only the columns of
 * the activation that one gate / up task makes, so task i runs right after that task on the same
 * worker (the static schedule puts it there) instead of waiting for the whole layer and the
 * hand-off between workers. The price: its N outputs go to L2 as fp32 adds from every task, and
 * the last task's fold reads them back (one round trip after the counter's).
 *
 * The weight is stored transposed on the GPU (cuda_backend.c uploads W^T [K, N] for a split-K
 * layer's weight): task i's block is rows [i · kc, (i + 1) · kc) of W^T, one contiguous range,
 * read in 16-byte chunks of 8 columns with consecutive lanes on consecutive chunks (a column block
 * of the row-major W, 2 · kc bytes of every row, streams at half the rate). The x block is staged in shared memory as fp32 (NT rows of a token block at a
 * time, k chunks of at most PK_SPLITK_KC). The order of the adds to acc is the order the tasks
 * get there: not fixed.
 * Shared memory: xs [NT][PK_SPLITK_KC] f32, 16 KB at most.
 */
#ifndef PK_CUDA_LINEAR_SPLITK_CUH
#define PK_CUDA_LINEAR_SPLITK_CUH

#include "kernels/cuda/rows.cuh"

#define PK_SPLITK_NT 4    /* token rows per block of a multi-row step */
#define PK_SPLITK_KC 1024 /* k columns of x staged at a time */

/* Adds v to acc[0 .. 3] (16-byte aligned) in L2. */
__device__ __forceinline__ void pk_dev_red_add4(float *acc, float a, float b, float c, float d) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(acc), "f"(a), "f"(b), "f"(c), "f"(d)
                 : "memory");
#else
    atomicAdd(acc, a), atomicAdd(acc + 1, b), atomicAdd(acc + 2, c), atomicAdd(acc + 3, d);
#endif
}

/* Weight chunks per lane issued before any is used: 12 x 16 bytes (Qwen3-0.6B: a lane's whole
 * share, kc 24 over 2 lanes; 1.7B / 8B: kc 48 / 96 in 4 / 8 batches). */
#define PK_SPLITK_U 12

/* One 16-byte chunk of the block: from shared memory (staged) or global memory (SMEM false). */
template <bool SMEM>
__device__ __forceinline__ uint4 pk_splitk_ld16(const pk_bf16 *p) {
    return SMEM ? *(const uint4 *)p : pk_dev_ldw16(p);
}
template <bool SMEM>
__device__ __forceinline__ pk_bf16 pk_splitk_ld2(const pk_bf16 *p) {
    return SMEM ? *p : pk_dev_ldw_bf16(p);
}

/* Partial sums of token rows [t0, t0 + nt) (nt <= NT) over the block's k in [k0, k0 + kc) into
 * acc; wt: W^T's rows of the block ([kc][N], row stride N), in shared memory when SMEM. */
template <int NT, bool SMEM>
__device__ void pk_splitk_block(const pk_bf16 *x, int64_t x_stride, int t0, int nt, int k0, int kc,
                                const pk_bf16 *wt, int N, float *acc, int64_t acc_stride, float *xs) {
    pk_cta_sync(); /* the previous block's xs reads are done */
    for (int e = threadIdx.x; e < NT * kc; e += PK_CUDA_THREADS) {
        const int t = e / kc, k = e - t * kc;
        xs[t * PK_SPLITK_KC + k] = t < nt ? pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(x + (t0 + t) * x_stride + k0 + k)) : 0.0f;
    }
    pk_cta_sync();
    const pk_bf16 *w0 = wt + (int64_t)k0 * N;
    if (N % 8 != 0 || !pk_dev_aligned16(w0) || !pk_dev_aligned16(acc) || acc_stride % 4 != 0) {
        /* any shape: a thread per output column, 2-byte loads */
        for (int n = threadIdx.x; n < N; n += PK_CUDA_THREADS) {
            float sum[NT];
#pragma unroll
            for (int t = 0; t < NT; t++) sum[t] = 0.0f;
            for (int k = 0; k < kc; k++) {
                const float w = pk_dev_bf16_to_f32(pk_splitk_ld2<SMEM>(w0 + (int64_t)k * N + n));
#pragma unroll
                for (int t = 0; t < NT; t++) sum[t] += xs[t * PK_SPLITK_KC + k] * w;
            }
            for (int t = 0; t < nt; t++) atomicAdd(acc + (int64_t)(t0 + t) * acc_stride + n, sum[t]);
        }
        return;
    }
    /* Chunk q (8 columns) of every row k: P lanes per chunk (adjacent lanes, k = p, p + P, ...) so
     * that all threads load when a row has fewer chunks than threads; the P partial sums meet by a
     * butterfly and one lane adds them to acc. */
    const int nq = N / 8;
    int P = 1;
    while (P < 32 && nq * P * 2 <= PK_CUDA_THREADS) P *= 2;
    const int p = threadIdx.x & (P - 1), qstep = PK_CUDA_THREADS / P;
    for (int qb = 0; qb < nq; qb += qstep) { /* the same trip count for every lane: the shuffles */
        const int q = qb + (int)threadIdx.x / P;
        const bool active = q < nq;
        float sum[8][NT];
#pragma unroll
        for (int e = 0; e < 8; e++)
#pragma unroll
            for (int t = 0; t < NT; t++) sum[e][t] = 0.0f;
        for (int kb = p; kb < kc; kb += PK_SPLITK_U * P) {
            uint4 wv[PK_SPLITK_U];
#pragma unroll
            for (int u = 0; u < PK_SPLITK_U; u++) {
                const int k = kb + u * P;
                wv[u] = active && k < kc ? pk_splitk_ld16<SMEM>(w0 + (int64_t)k * N + 8 * q) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < PK_SPLITK_U; u++) {
                const int k = kb + u * P;
                if (k >= kc) break;
                float wf[8];
                pk_dev_unpack8(wv[u], wf);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    const float xk = xs[t * PK_SPLITK_KC + k];
#pragma unroll
                    for (int e = 0; e < 8; e++) sum[e][t] += xk * wf[e];
                }
            }
        }
        for (int o = P / 2; o > 0; o /= 2)
#pragma unroll
            for (int e = 0; e < 8; e++)
#pragma unroll
                for (int t = 0; t < NT; t++) sum[e][t] += __shfl_xor_sync(0xffffffffu, sum[e][t], o);
        if (!active || p != 0) continue;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) break;
            float *a = acc + (int64_t)(t0 + t) * acc_stride + 8 * q;
            pk_dev_red_add4(a, sum[0][t], sum[1][t], sum[2][t], sum[3][t]);
            pk_dev_red_add4(a + 4, sum[4][t], sum[5][t], sum[6][t], sum[7][t]);
        }
    }
}

/* out = bf16(bf16(acc) + residual) for rows t < n_tok, then acc = 0. Whole CTA, after every
 * task's adds are visible (the caller's acquire). acc is read through L2, where the adds went.
 * Four columns per thread and step, four steps' loads issued before any store (the stores could
 * alias the next loads, so nvcc would not move them up itself): one L2 round trip for up to
 * 16 · PK_CUDA_THREADS outputs (Qwen3-8B's 4096). */
__device__ void pk_dev_linear_splitk_finish(int n_tok, int N, float *acc, int64_t acc_stride, const pk_bf16 *residual,
                                            int64_t res_stride, pk_bf16 *out, int64_t out_stride) {
    const bool quad = N % 4 == 0 && acc_stride % 4 == 0 && res_stride % 4 == 0 && out_stride % 4 == 0 &&
                      pk_dev_aligned16(acc) && ((uintptr_t)residual & 7u) == 0 && ((uintptr_t)out & 7u) == 0;
    if (!quad) {
        for (int e = threadIdx.x; e < n_tok * N; e += PK_CUDA_THREADS) {
            const int t = e / N, n = e - t * N;
            float *a = acc + (int64_t)t * acc_stride + n;
            const float s = pk_dev_round_bf16(__ldcg(a)) + pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(residual + t * res_stride + n));
            out[t * out_stride + n] = pk_dev_f32_to_bf16(s);
            __stcg(a, 0.0f);
        }
        return;
    }
    const int nq = n_tok * (N / 4);
    for (int q0 = threadIdx.x; q0 < nq; q0 += 4 * PK_CUDA_THREADS) {
        float4 a[4];
        uint2 r[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int q = q0 + u * PK_CUDA_THREADS, t = q / (N / 4), n = 4 * (q - t * (N / 4));
            if (q >= nq) break;
            a[u] = __ldcg((const float4 *)(acc + (int64_t)t * acc_stride + n));
            r[u] = __ldcg((const uint2 *)(residual + (int64_t)t * res_stride + n));
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int q = q0 + u * PK_CUDA_THREADS, t = q / (N / 4), n = 4 * (q - t * (N / 4));
            if (q >= nq) break;
            const float s0 = pk_dev_round_bf16(a[u].x) + pk_dev_lo_f32(r[u].x);
            const float s1 = pk_dev_round_bf16(a[u].y) + pk_dev_hi_f32(r[u].x);
            const float s2 = pk_dev_round_bf16(a[u].z) + pk_dev_lo_f32(r[u].y);
            const float s3 = pk_dev_round_bf16(a[u].w) + pk_dev_hi_f32(r[u].y);
            uint2 o;
            o.x = pk_dev_pack2(pk_dev_f32_to_bf16(s0), pk_dev_f32_to_bf16(s1));
            o.y = pk_dev_pack2(pk_dev_f32_to_bf16(s2), pk_dev_f32_to_bf16(s3));
            *(uint2 *)(out + (int64_t)t * out_stride + n) = o;
            __stcg((float4 *)(acc + (int64_t)t * acc_stride + n), make_float4(0.0f, 0.0f, 0.0f, 0.0f));
        }
    }
}

template <bool SMEM>
__device__ void pk_splitk_blocks(const pk_bf16 *x, int64_t x_stride, int n_tok, int kc, const pk_bf16 *wt, int N,
                                 float *acc, int64_t acc_stride, float *xs) {
    for (int k0 = 0; k0 < kc; k0 += PK_SPLITK_KC) {
        const int kn = kc - k0 < PK_SPLITK_KC ? kc - k0 : PK_SPLITK_KC;
        if (n_tok == 1)
            pk_splitk_block<1, SMEM>(x, x_stride, 0, 1, k0, kn, wt, N, acc, acc_stride, xs);
        else
            for (int t0 = 0; t0 < n_tok; t0 += PK_SPLITK_NT)
                pk_splitk_block<PK_SPLITK_NT, SMEM>(x, x_stride, t0,
                                                    n_tok - t0 < PK_SPLITK_NT ? n_tok - t0 : PK_SPLITK_NT, k0, kn, wt,
                                                    N, acc, acc_stride, xs);
    }
}

/* The task's partial sums into acc. wst_rows > 0: the block's kc rows of W^T staged at wst (the
 * runtime's copy, made before the task's dependency wait); with PK_STAGED_LATE its dependency wait and the copies' are the task's own
 * (rows.cuh). Every thread calls it; the caller then learns from the layer's completion counter
 * whether this was the layer's last task, which runs pk_dev_linear_splitk_finish. */
__device__ void pk_dev_linear_splitk_add(const pk_bf16 *x, int64_t x_stride, int n_tok, int kc, const pk_bf16 *wt,
                                         int N, float *acc, int64_t acc_stride, char *smem, const pk_bf16 *wst,
                                         int wst_rows) {
    float *xs = (float *)smem; /* [0, 16 KB): below any staged tile (PK_STAGE_LO and up) */
    if (wst_rows > 0 && (wst_rows & PK_STAGED_LATE)) pk_dev_dep_wait_staged();
    if (wst_rows > 0 && (wst_rows & ~PK_STAGED_LATE) == kc)
        pk_splitk_blocks<true>(x, x_stride, n_tok, kc, wst, N, acc, acc_stride, xs);
    else
        pk_splitk_blocks<false>(x, x_stride, n_tok, kc, wt, N, acc, acc_stride, xs);
}

#endif /* PK_CUDA_LINEAR_SPLITK_CUH */
