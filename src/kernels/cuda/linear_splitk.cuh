/* linear_splitk.cuh — PK_TASK_LINEAR_SPLITK_RESIDUAL on the device (cpu_kernels.h,
 * pk_cpu_linear_splitk_add / _finish): one task's partial sums over its K block,
 *   acc[t, n] += Σ_{k < kc} x[t, k] · W[n, k]   (fp32; x, W at the block's first column),
 * added to the layer's fp32 accumulator in L2 with red.global.add; then the layer's last task to
 * finish (a completion counter, as the split attention's fold) writes
 *   out[t, n] = bf16(bf16(acc[t, n]) + residual[t, n]) and clears acc for the next step.
 *
 * Why: the MLP's down projection split over K (its input features) needs only the columns of
 * the activation that one gate / up task makes, so task i runs right after that task on the same
 * worker (the static schedule puts it there) instead of waiting for the whole layer and the
 * hand-off between workers. The price: its N outputs go to L2 as fp32 adds from every task, and
 * the last task's fold reads them back (one round trip after the counter's).
 *
 * Mapping. A weight row's block is C = kc / 8 chunks of 16 bytes. L lanes take one row (L the
 * largest power of two <= 32 that divides C: each lane C / L chunks), a lane group takes 4
 * consecutive rows at a time, so its 4 sums go to acc as one 16-byte red (sm_90: red.v4.f32).
 * The x block is staged in shared memory as fp32 (NT rows of a token block at a time, k chunks
 * of at most PK_SPLITK_KC); a row's partial is one fp32 sum per lane, reduced over the L lanes by
 * a butterfly. Rows whose block is not 16-byte aligned, or kc not a multiple of 8, take 2-byte
 * loads. The order of the adds to acc is the order the tasks get there: not fixed.
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

/* Up to PK_SPLITK_CPL chunks per lane of a row: a lane's loads of its 4 rows are all issued
 * before any is used (4 · CPL 16-byte loads in flight; the decode block of Qwen3 shapes is 3
 * chunks per lane: 0.6B kc 24, L 1; 1.7B 48, L 2; 8B 96, L 4). */
#define PK_SPLITK_CPL 4

/* sum[r][t] += Σ over this lane's chunks c = g_lane + L · j of row n0 + r: x[t, 8c ..] · W[.., 8c ..]. */
template <int NT>
__device__ __forceinline__ void pk_splitk_rows16(const pk_bf16 *w, int64_t w_stride, int n0, int N, const float *xs,
                                                 int C, int L, int g_lane, float (*sum)[NT]) {
    for (int c0 = g_lane; c0 < C; c0 += PK_SPLITK_CPL * L) {
        uint4 wv[4][PK_SPLITK_CPL];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int j = 0; j < PK_SPLITK_CPL; j++) {
                const int c = c0 + j * L;
                wv[r][j] = n0 + r < N && c < C ? pk_dev_ldw16(w + (int64_t)(n0 + r) * w_stride + 8 * c)
                                               : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
        for (int j = 0; j < PK_SPLITK_CPL; j++) {
            const int c = c0 + j * L;
            if (c >= C) break;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const float4 x0 = *(const float4 *)(xs + t * PK_SPLITK_KC + 8 * c);
                const float4 x1 = *(const float4 *)(xs + t * PK_SPLITK_KC + 8 * c + 4);
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    float wf[8];
                    pk_dev_unpack8(wv[r][j], wf);
                    sum[r][t] += x0.x * wf[0] + x0.y * wf[1] + x0.z * wf[2] + x0.w * wf[3] + x1.x * wf[4] +
                                 x1.y * wf[5] + x1.z * wf[6] + x1.w * wf[7];
                }
            }
        }
    }
}

/* The same with 2-byte loads: any alignment, any kc (lane g_lane takes k = g_lane + L · j). */
template <int NT>
__device__ __forceinline__ void pk_splitk_rows2(const pk_bf16 *w, int64_t w_stride, int n0, int N, const float *xs,
                                                int kc, int L, int g_lane, float (*sum)[NT]) {
    for (int r = 0; r < 4 && n0 + r < N; r++)
        for (int k = g_lane; k < kc; k += L) {
            const float wk = pk_dev_bf16_to_f32(pk_dev_ldw_bf16(w + (int64_t)(n0 + r) * w_stride + k));
#pragma unroll
            for (int t = 0; t < NT; t++) sum[r][t] += xs[t * PK_SPLITK_KC + k] * wk;
        }
}

/* Partial sums of token rows [t0, t0 + nt) (nt <= NT) over k block [k0, k0 + kc) into acc. */
template <int NT>
__device__ void pk_splitk_block(const pk_bf16 *x, int64_t x_stride, int t0, int nt, int k0, int kc,
                                const pk_bf16 *w, int64_t w_stride, int N, float *acc, int64_t acc_stride,
                                float *xs) {
    __syncthreads(); /* the previous block's xs reads are done */
    for (int e = threadIdx.x; e < NT * kc; e += PK_CUDA_THREADS) {
        const int t = e / kc, k = e - t * kc;
        xs[t * PK_SPLITK_KC + k] = t < nt ? pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(x + (t0 + t) * x_stride + k0 + k)) : 0.0f;
    }
    __syncthreads();
    const bool vec = kc % 8 == 0 && w_stride % 8 == 0 && pk_dev_aligned16(w + k0);
    const int C = vec ? kc / 8 : kc; /* a row's units: 16-byte chunks, or elements */
    int L = 1;
    while (L < 32 && C % (2 * L) == 0) L *= 2;
    const int g_lane = threadIdx.x & (L - 1), groups = PK_CUDA_THREADS / L, group = threadIdx.x / L;
    const int warp_group0 = (threadIdx.x & ~31) / L; /* the warp's first group: its loop is the warp's */
    const bool red4 = acc_stride % 4 == 0 && pk_dev_aligned16(acc);
    for (int nb = 4 * warp_group0; nb < N; nb += 4 * groups) {
        const int n0 = nb + 4 * (group - warp_group0); /* rows >= N: sums of 0, no add */
        float sum[4][NT];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int t = 0; t < NT; t++) sum[r][t] = 0.0f;
        if (vec)
            pk_splitk_rows16<NT>(w + k0, w_stride, n0, N, xs, C, L, g_lane, sum);
        else
            pk_splitk_rows2<NT>(w + k0, w_stride, n0, N, xs, kc, L, g_lane, sum);
        /* the group's L lanes (consecutive): a butterfly; every lane of the warp takes part */
        for (int o = L / 2; o > 0; o /= 2)
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int t = 0; t < NT; t++) sum[r][t] += __shfl_xor_sync(0xffffffffu, sum[r][t], o);
        if (g_lane != 0 || n0 >= N) continue;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) break;
            float *a = acc + (int64_t)(t0 + t) * acc_stride + n0;
            if (red4 && n0 + 3 < N)
                pk_dev_red_add4(a, sum[0][t], sum[1][t], sum[2][t], sum[3][t]);
            else
                for (int r = 0; r < 4 && n0 + r < N; r++) atomicAdd(a + r, sum[r][t]);
        }
    }
}

/* out = bf16(bf16(acc) + residual) for rows t < n_tok, then acc = 0. Whole CTA, after every
 * task's adds are visible (the caller's acquire). acc is read through L2, where the adds went.
 * Four columns per thread and step, four steps' loads issued before any store (the stores could
 * alias the next loads, so nvcc would not move them up itself): one L2 round trip for up to
 * 16 · PK_CUDA_THREADS outputs (Qwen3-8B's 4096). */
__device__ void pk_splitk_finish(int n_tok, int N, float *acc, int64_t acc_stride, const pk_bf16 *residual,
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

/* The task: its partial sums into acc, then, if its increment of `counter` completes the layer's
 * `grid` tasks of this step, the fold into out. Every thread calls it. */
__device__ void pk_dev_linear_splitk(const pk_bf16 *x, int64_t x_stride, int n_tok, int kc, const pk_bf16 *w,
                                     int64_t w_stride, int N, float *acc, int64_t acc_stride, const pk_bf16 *residual,
                                     int64_t res_stride, pk_bf16 *out, int64_t out_stride, int grid,
                                     unsigned long long *counter, char *smem) {
    float *xs = (float *)smem;
    for (int k0 = 0; k0 < kc; k0 += PK_SPLITK_KC) {
        const int kn = kc - k0 < PK_SPLITK_KC ? kc - k0 : PK_SPLITK_KC;
        if (n_tok == 1)
            pk_splitk_block<1>(x, x_stride, 0, 1, k0, kn, w, w_stride, N, acc, acc_stride, xs);
        else
            for (int t0 = 0; t0 < n_tok; t0 += PK_SPLITK_NT)
                pk_splitk_block<PK_SPLITK_NT>(x, x_stride, t0, n_tok - t0 < PK_SPLITK_NT ? n_tok - t0 : PK_SPLITK_NT,
                                              k0, kn, w, w_stride, N, acc, acc_stride, xs);
    }
    /* Ordering as the runtime's event signal: the CTA's adds, a barrier, thread 0's acq_rel
     * increment; the last task's thread 0 has acquired every other task's increment before the
     * barrier after it. */
    __shared__ int last;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long old;
        asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], 1;" : "=l"(old) : "l"(counter) : "memory");
        last = (old + 1) % (unsigned long long)grid == 0;
    }
    __syncthreads();
    if (last) pk_splitk_finish(n_tok, N, acc, acc_stride, residual, res_stride, out, out_stride);
}

#endif /* PK_CUDA_LINEAR_SPLITK_CUH */
