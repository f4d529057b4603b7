// SPDX-License-Identifier: Apache-2.0
/* linear_mma.cuh — the linear family's steps of more than one row on tensor cores (sm_80+
 * mma.sync m16n8k16, bf16 in, fp32 accumulate): out[t, j] = bf16(acc) or bf16(bf16(acc) +
 * residual), acc = Σ_k xn[t, k] · W[n0 + j, k], xn as linear.cuh builds it (x, the rmsnorm of x,
 * or silu(gate) · up, rounded to bf16 as the CPU does).
 *
 * A task's tile is n_tok rows × ncols columns. It is cut into blocks of PK_MMA_BM rows (outer
 * loop: a block's rmsnorm scales are computed once) × PK_MMA_BN columns; each block loops over K
 * in PK_MMA_BK slices, double-buffered in shared memory:
 *   As [2][BM][LD] bf16: xn, built by all threads from x (16-byte loads issued before the slice's
 *                        mma and stored after them, so their L2 latency overlaps the math);
 *   Bs [2][BN][LD] bf16: weight rows, copied with cp.async (16-byte aligned chunks) or plain loads;
 *   LD = BK + 8: consecutive rows 16 bytes apart in bank terms, so ldmatrix is conflict-free.
 * Rows past n_tok, columns past ncols and K past its end are zeros. The 8 warps are 4 (rows) × 2
 * (columns); a warp owns 32 × 32 of the block: 2 × 4 mma tiles, 32 fp32 accumulators a thread.
 *
 * Batch invariance: a row's result depends only on its own x and the weights. Its rmsnorm scale
 * is summed by one warp in a fixed order (lane l takes chunks l, l + 32, ... elements in order,
 * then a fixed butterfly), every output's K sum runs over the same slices in the same order
 * whatever the row count or the row's place in the block, so a row gives the same bits in any
 * multi-row step. It differs from the one-row GEMV (linear.cuh) in the last bits only.
 * Shared memory: scale_s [BM] f32, then As and Bs (PK_MMA_SMEM bytes, within the kernels' area).
 */
#ifndef PK_CUDA_LINEAR_MMA_CUH
#define PK_CUDA_LINEAR_MMA_CUH

#include "kernels/cuda/mma.cuh"

#define PK_MMA_BM 128
#define PK_MMA_BN 64
#define PK_MMA_BK 64
#define PK_MMA_LD (PK_MMA_BK + 8)
#define PK_MMA_A_BYTES (PK_MMA_BM * PK_MMA_LD * 2)
#define PK_MMA_B_BYTES (PK_MMA_BN * PK_MMA_LD * 2)
#define PK_MMA_SMEM (PK_MMA_BM * 4 + 2 * (PK_MMA_A_BYTES + PK_MMA_B_BYTES))
/* xn chunks (8 elements) per thread and slice */
#define PK_MMA_A_CHUNKS (PK_MMA_BM * PK_MMA_BK / 8 / PK_CUDA_THREADS)
#define PK_MMA_B_CHUNKS (PK_MMA_BN * PK_MMA_BK / 8 / PK_CUDA_THREADS)
static_assert(PK_MMA_SMEM <= PK_CUDA_SMEM_BYTES, "the mma tiles fit the kernels' shared memory");
static_assert(PK_MMA_A_CHUNKS * PK_CUDA_THREADS * 8 == PK_MMA_BM * PK_MMA_BK &&
                  PK_MMA_B_CHUNKS * PK_CUDA_THREADS * 8 == PK_MMA_BN * PK_MMA_BK,
              "whole chunks per thread");
static_assert(PK_DEV_WARPS == 8 && PK_MMA_BM == 4 * 32 && PK_MMA_BN == 2 * 32, "4 × 2 warps of 32 × 32");

/* scale_s[r] for rows [t0, t0 + nt): row r's warp is r % 8. With acc, x is x + acc (pk_dev_acc_x8).
 * No barrier. */
__device__ inline void pk_mma_rms_scales(const pk_lin_args &a, int t0, int nt, float *scale_s) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nch = (a.K + 7) / 8;
    for (int r = warp; r < nt; r += PK_DEV_WARPS) {
        const int t = t0 + r;
        const pk_bf16 *xr = a.x + t * a.x_stride;
        float s = 0.0f;
        for (int c = lane; c < nch; c += 32) {
            const int k = 8 * c;
            float f[8];
            if (k + 8 <= a.K) {
                const uint4 xv = pk_dev_load8_any<true>(xr + k);
                pk_dev_unpack8(a.acc ? pk_dev_acc_x8(xv, a.acc + t * a.acc_stride + k) : xv, f);
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) f[i] = k + i < a.K ? pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(xr + k + i)) : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < 8; i++) s = fmaf(f[i], f[i], s);
        }
        s = pk_dev_warp_sum(s);
        if (lane == 0) scale_s[r] = 1.0f / sqrtf(s / (float)a.K + a.eps);
    }
}

/* The raw loads of one xn chunk: row t, columns [k, k + 8), n = valid elements (1..8). fv: x (or
 * the gate), gv: the norm weights or the up half. Partial chunks are loaded element by element. */
template <int XN>
__device__ __forceinline__ void pk_mma_x_load(const pk_lin_args &a, int t, int k, int n, uint4 &fv, uint4 &gv) {
    const pk_bf16 *xr = a.x + t * a.x_stride;
    if (n == 8) {
        fv = XN == PK_LIN_RMSNORM ? pk_lin_x8(a, t, k) : pk_dev_load8_any<true>(xr + k);
        if (XN == PK_LIN_RMSNORM) gv = pk_dev_load8_norm(a.norm_w + k);
        if (XN == PK_LIN_SILU_MUL) gv = pk_dev_load8_any<true>(xr + a.K + k);
        return;
    }
    pk_bf16 f[8], g[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        f[i] = g[i] = (pk_bf16)0;
        if (i < n) {
            f[i] = pk_dev_ldcg_bf16(xr + k + i);
            if (XN == PK_LIN_RMSNORM) g[i] = pk_dev_ldw_bf16(a.norm_w + k + i);
            if (XN == PK_LIN_SILU_MUL) g[i] = pk_dev_ldcg_bf16(xr + a.K + k + i);
        }
    }
    fv = make_uint4(pk_dev_pack2(f[0], f[1]), pk_dev_pack2(f[2], f[3]), pk_dev_pack2(f[4], f[5]), pk_dev_pack2(f[6], f[7]));
    gv = make_uint4(pk_dev_pack2(g[0], g[1]), pk_dev_pack2(g[2], g[3]), pk_dev_pack2(g[4], g[5]), pk_dev_pack2(g[6], g[7]));
}

/* xn of a loaded chunk (pk_lin_stage's arithmetic), zeros past its n valid elements. */
template <int XN>
__device__ __forceinline__ uint4 pk_mma_xn(uint4 fv, uint4 gv, int n, float scale) {
    if (XN == PK_LIN_PLAIN) return fv; /* partial chunks were loaded with zeros */
    float f[8], g[8], h[8];
    pk_dev_unpack8(fv, f);
    pk_dev_unpack8(gv, g);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        h[i] = XN == PK_LIN_RMSNORM ? pk_dev_rmsnorm1(f[i], scale, g[i]) : pk_dev_silu_mul1(f[i], g[i]);
        if (i >= n) h[i] = 0.0f;
    }
    return pk_dev_pack8(h);
}

/* One slice's xn chunks of this thread: loads (issued together), then the xn values into As. */
template <int XN>
struct pk_mma_a_slice {
    uint4 f[PK_MMA_A_CHUNKS], g[PK_MMA_A_CHUNKS];
    int n[PK_MMA_A_CHUNKS]; /* valid elements; 0: a zero chunk */

    __device__ __forceinline__ void load(const pk_lin_args &a, int t0, int nt, int k0) {
#pragma unroll
        for (int i = 0; i < PK_MMA_A_CHUNKS; i++) {
            const int e = threadIdx.x + i * PK_CUDA_THREADS, r = e / (PK_MMA_BK / 8), c = 8 * (e % (PK_MMA_BK / 8));
            const int k = k0 + c, left = a.K - k;
            n[i] = r < nt && left > 0 ? (left < 8 ? left : 8) : 0;
            f[i] = g[i] = make_uint4(0, 0, 0, 0);
            if (n[i] > 0) pk_mma_x_load<XN>(a, t0 + r, k, n[i], f[i], g[i]);
        }
    }
    __device__ __forceinline__ void store(pk_bf16 *As, const float *scale_s) const {
#pragma unroll
        for (int i = 0; i < PK_MMA_A_CHUNKS; i++) {
            const int e = threadIdx.x + i * PK_CUDA_THREADS, r = e / (PK_MMA_BK / 8), c = 8 * (e % (PK_MMA_BK / 8));
            const uint4 v = n[i] > 0 ? pk_mma_xn<XN>(f[i], g[i], n[i], XN == PK_LIN_RMSNORM ? scale_s[r] : 0.0f)
                                     : make_uint4(0, 0, 0, 0);
            *(uint4 *)(As + r * PK_MMA_LD + c) = v;
        }
    }
};

/* One slice of weight rows [j0, j0 + BN) of the tile into Bs: cp.async for whole 16-byte aligned
 * chunks, else plain loads and stores (zeros past ncols and K). Call cp.async.commit after. */
__device__ __forceinline__ void pk_mma_b_slice(const pk_lin_args &a, int j0, int k0, pk_bf16 *Bs) {
#pragma unroll
    for (int i = 0; i < PK_MMA_B_CHUNKS; i++) {
        const int e = threadIdx.x + i * PK_CUDA_THREADS, r = e / (PK_MMA_BK / 8), c = 8 * (e % (PK_MMA_BK / 8));
        const int j = j0 + r, k = k0 + c, left = a.K - k;
        pk_bf16 *dst = Bs + r * PK_MMA_LD + c;
        if (j >= a.ncols || left <= 0) {
            *(uint4 *)dst = make_uint4(0, 0, 0, 0);
            continue;
        }
        const pk_bf16 *src = pk_dev_rows_get(a.w, (uint32_t)(a.n0 + j)) + k;
        if (left >= 8 && pk_dev_aligned16(src)) {
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)),
                         "l"(src)
                         : "memory");
        } else {
            pk_bf16 v[8];
#pragma unroll
            for (int q = 0; q < 8; q++) v[q] = q < left ? pk_dev_ldcg_bf16(src + q) : (pk_bf16)0;
            *(uint4 *)dst = make_uint4(pk_dev_pack2(v[0], v[1]), pk_dev_pack2(v[2], v[3]), pk_dev_pack2(v[4], v[5]),
                                       pk_dev_pack2(v[6], v[7]));
        }
    }
}

/* The warp's 32 × 32 of one slice: acc[mi][ni] is the m16n8 tile (rows wm + 16 mi, columns
 * wn + 8 ni). ldmatrix x4 addresses: A, lane l → row l % 16, column (l / 16) · 8 (a0..a3 of the
 * mma's A fragment); B (rows are output columns, K contiguous: the mma's "col" operand), lane l →
 * matrix q = l / 8: column n0 + l % 8 + (q / 2) · 8, k + (q % 2) · 8 (b0, b1 of two n8 tiles). */
__device__ __forceinline__ void pk_mma_slice(const pk_bf16 *As, const pk_bf16 *Bs, int wm, int wn,
                                             float (&acc)[2][4][4]) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < PK_MMA_BK; kk += 16) {
        uint32_t af[2][4], bf[2][4];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
            pk_ldsm4<false>(af[mi], As + (wm + 16 * mi + lane % 16) * PK_MMA_LD + kk + (lane / 16) * 8);
#pragma unroll
        for (int nj = 0; nj < 2; nj++) {
            const int q = lane / 8;
            pk_ldsm4<false>(bf[nj], Bs + (wn + 16 * nj + lane % 8 + (q / 2) * 8) * PK_MMA_LD + kk + (q % 2) * 8);
        }
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int ni = 0; ni < 4; ni++)
                pk_mma_16816(acc[mi][ni], af[mi], bf[ni / 2][(ni % 2) * 2], bf[ni / 2][(ni % 2) * 2 + 1]);
    }
}

/* The whole tile (header). Whole CTA; ends with a barrier (shared memory is free again). */
template <int XN>
__device__ inline void pk_lin_mma(const pk_lin_args &a, char *smem) {
    float *scale_s = (float *)smem;                                        /* [BM] */
    pk_bf16 *As = (pk_bf16 *)(smem + PK_MMA_BM * 4);                      /* [2][BM][LD] */
    pk_bf16 *Bs = (pk_bf16 *)(smem + PK_MMA_BM * 4 + 2 * PK_MMA_A_BYTES); /* [2][BN][LD] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
    const int nslices = (a.K + PK_MMA_BK - 1) / PK_MMA_BK;
    for (int t0 = 0; t0 < a.n_tok; t0 += PK_MMA_BM) {
        const int nt = a.n_tok - t0 < PK_MMA_BM ? a.n_tok - t0 : PK_MMA_BM;
        if (XN == PK_LIN_RMSNORM) {
            pk_mma_rms_scales(a, t0, nt, scale_s);
            pk_cta_sync();
        }
        for (int j0 = 0; j0 < a.ncols; j0 += PK_MMA_BN) {
            float acc[2][4][4];
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
#pragma unroll
                    for (int q = 0; q < 4; q++) acc[mi][ni][q] = 0.0f;
            pk_mma_a_slice<XN> xa;
            xa.load(a, t0, nt, 0);
            pk_mma_b_slice(a, j0, 0, Bs);
            asm volatile("cp.async.commit_group;" ::: "memory");
            xa.store(As, scale_s);
            for (int s = 0; s < nslices; s++) {
                const int cur = s & 1, nxt = cur ^ 1;
                asm volatile("cp.async.wait_all;" ::: "memory");
                pk_cta_sync(); /* slice s in place; every warp is done with slice s - 1's buffers */
                const bool more = s + 1 < nslices;
                if (more) {
                    pk_mma_b_slice(a, j0, (s + 1) * PK_MMA_BK, Bs + nxt * (PK_MMA_B_BYTES / 2));
                    asm volatile("cp.async.commit_group;" ::: "memory");
                    xa.load(a, t0, nt, (s + 1) * PK_MMA_BK);
                }
                pk_mma_slice(As + cur * (PK_MMA_A_BYTES / 2), Bs + cur * (PK_MMA_B_BYTES / 2), wm, wn, acc);
                if (more) xa.store(As + nxt * (PK_MMA_A_BYTES / 2), scale_s);
            }
            /* epilogue: lane holds rows g, g + 8 (g = lane / 4) and columns 2 (lane % 4) + {0, 1} of
             * each m16n8 tile */
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        const int r = wm + 16 * mi + lane / 4 + (q / 2) * 8, j = j0 + wn + 8 * ni + 2 * (lane % 4) + q % 2;
                        if (r >= nt || j >= a.ncols) continue;
                        const int t = t0 + r;
                        float y = acc[mi][ni][q];
                        if (a.residual)
                            y = pk_dev_round_bf16(y) + pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(a.residual + t * a.res_stride + j));
                        a.out[t * a.out_stride + j] = pk_dev_f32_to_bf16(y);
                    }
            pk_cta_sync(); /* the buffers are free for the next column block */
        }
    }
}

/* Out of line: one copy per XN however many kinds and layers reach it, and the one-row paths
 * that pk_lin_tile inlines keep their own register allocation. */
template <int XN>
__device__ __noinline__ void pk_lin_mma_call(const pk_lin_args &a, char *smem) {
    pk_lin_mma<XN>(a, smem);
}

#endif /* PK_CUDA_LINEAR_MMA_CUH */
