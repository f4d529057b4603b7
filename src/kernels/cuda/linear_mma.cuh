// SPDX-License-Identifier: Apache-2.0
/* linear_mma.cuh — the linear family's steps of more than one row on tensor cores (sm_80+
 * mma.sync m16n8k16, bf16 in, fp32 accumulate): out[t, j] = bf16(acc) or bf16(bf16(acc) +
 * residual), acc = Σ_k xn[t, k] · W[n0 + j, k], xn as linear.cuh builds it (x, the rmsnorm of x,
 * or silu(gate) · up, rounded to bf16 as the CPU does). sm_90a builds run the PLAIN and RMSNORM
 * blocks on wgmma instead (linear_wgmma.cuh: the same loads, transform, tiles and epilogue).
 *
 * A task's tile is n_tok rows × ncols columns, cut into blocks of PK_MMA_BM rows (outer loop: a
 * block's rmsnorm scales are computed once) × BN columns (64, or 128 for tiles wider than 64: x is
 * then streamed once per 128 columns). A block loops over K in slices of PK_MMA_BK through a ring
 * of STAGES shared-memory stages, STAGES - 1 slices in flight ahead of the math:
 *   As [BM][LD] bf16  x's raw slice (cp.async), then xn in place (the transform, one slice ahead
 *                     of the mma: rmsnorm with the row's scale and norm_w, or silu(gate) · up
 *                     with the up half from Us);
 *   Us [BM][LD] bf16  SILU_MUL only: the up half's raw slice;
 *   Bs [BN][LD] bf16  weight rows (cp.async);
 *   LD = BK + 8: rows 80 bytes apart, so the 8 rows an ldmatrix reads hit distinct banks.
 * Chunks that cp.async cannot take (a row not 16-byte aligned, the last K % 8 elements, a fused
 * MLP's accumulator, which x + acc needs in registers) are loaded into registers and stored; rows
 * past n_tok, columns past ncols and K past its end are zeros (xn of zeros is zero).
 * Per slice, in order: wait for slice s + 1's copies; barrier (slice s transformed, everyone done
 * with slice s - 1's stage); issue slice s + STAGES - 1 into that stage; the mma of slice s;
 * transform slice s + 1. The 8 warps are 4 (rows) × 2 (columns); a warp owns 32 × BN / 2.
 *
 * Batch invariance: a row's result depends only on its own x and the weights. Its rmsnorm scale
 * is summed by one warp in a fixed order (lane l takes chunks l, l + 32, ... elements in order,
 * then a fixed butterfly), every output's K sum runs over the same slices in the same order
 * whatever the row count or the row's place in the block, so a row gives the same bits in any
 * multi-row step. It differs from the one-row GEMV (linear.cuh) in the last bits only.
 * Shared memory: scale_s [BM] f32, then the stages (pk_mma_smem<XN, BN>() bytes, within the
 * kernels' area).
 */
#ifndef PK_CUDA_LINEAR_MMA_CUH
#define PK_CUDA_LINEAR_MMA_CUH

#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/wgmma.cuh"

#define PK_MMA_BM 128
#define PK_MMA_BK 32
#define PK_MMA_LD (PK_MMA_BK + 8)
#define PK_MMA_CPR (PK_MMA_BK / 8)                                /* 8-element chunks per slice row */
#define PK_MMA_A_CHUNKS (PK_MMA_BM * PK_MMA_CPR / PK_CUDA_THREADS) /* a thread's chunks of an A slice */
static_assert(PK_MMA_A_CHUNKS * PK_CUDA_THREADS == PK_MMA_BM * PK_MMA_CPR, "whole A chunks per thread");
static_assert(PK_DEV_WARPS == 8 && PK_MMA_BM == 4 * 32, "4 × 2 warps, 32 rows each");

template <int XN>
__device__ constexpr int pk_mma_stages() { return XN == PK_LIN_SILU_MUL ? 3 : 4; }
/* elements of one stage: As (+ Us) + Bs */
template <int XN, int BN>
__device__ constexpr int pk_mma_stage_elems() {
    return ((XN == PK_LIN_SILU_MUL ? 2 : 1) * PK_MMA_BM + BN) * PK_MMA_LD;
}
template <int XN, int BN>
__device__ constexpr int pk_mma_smem() {
    return PK_MMA_BM * 4 + pk_mma_stages<XN>() * pk_mma_stage_elems<XN, BN>() * 2;
}
static_assert(pk_mma_smem<PK_LIN_PLAIN, 128>() <= PK_CUDA_SMEM_BYTES &&
                  pk_mma_smem<PK_LIN_SILU_MUL, 128>() <= PK_CUDA_SMEM_BYTES,
              "the mma stages fit the kernels' shared memory");
/* wgmma's stages (linear_wgmma.cuh) start on a 1024-byte boundary after scale_s: up to this much
 * padding */
#define PK_WG_ALIGN 1024
static_assert(pk_mma_smem<PK_LIN_SILU_MUL, 128>() + PK_WG_ALIGN <= PK_CUDA_SMEM_BYTES,
              "mma.sync's stages fit after wgmma builds' alignment of them");

/* scale_s[r] for rows [t0, t0 + nt): warp w takes rows w, w + 8, ..., four at a time, so a lane has
 * 16 loads in flight (the 128 x 4096 block of the 8B is 1 MB from L2: a dependent load per chunk
 * made this prologue cost as much as the GEMM). Each row's sum keeps one order: lane l adds its
 * chunks l, l + 32, ... in order, then a fixed butterfly. With acc, x is x + acc (pk_dev_acc_x8).
 * No barrier. */
#define PK_MMA_RMS_ROWS 4
__device__ inline void pk_mma_rms_scales(const pk_lin_args &a, int t0, int nt, float *scale_s) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nfull = a.K / 8;
    for (int r0 = warp; r0 < nt; r0 += PK_MMA_RMS_ROWS * PK_DEV_WARPS) {
        const pk_bf16 *xr[PK_MMA_RMS_ROWS];
        float s[PK_MMA_RMS_ROWS];
#pragma unroll
        for (int q = 0; q < PK_MMA_RMS_ROWS; q++) {
            const int r = r0 + q * PK_DEV_WARPS;
            xr[q] = a.x + (t0 + (r < nt ? r : r0)) * a.x_stride; /* a row past nt: row r0 again, unused */
            s[q] = 0.0f;
        }
#pragma unroll 4
        for (int c = lane; c < nfull; c += 32) {
            uint4 xv[PK_MMA_RMS_ROWS];
#pragma unroll
            for (int q = 0; q < PK_MMA_RMS_ROWS; q++) xv[q] = pk_dev_load8_any<true>(xr[q] + 8 * c);
#pragma unroll
            for (int q = 0; q < PK_MMA_RMS_ROWS; q++) {
                const int r = r0 + q * PK_DEV_WARPS;
                float f[8];
                pk_dev_unpack8(a.acc ? pk_dev_acc_x8(xv[q], a.acc + (t0 + (r < nt ? r : r0)) * a.acc_stride + 8 * c)
                                     : xv[q], f);
#pragma unroll
                for (int i = 0; i < 8; i++) s[q] = fmaf(f[i], f[i], s[q]);
            }
        }
#pragma unroll
        for (int q = 0; q < PK_MMA_RMS_ROWS; q++) {
            if (nfull * 8 < a.K && lane == nfull % 32) /* the partial chunk: its lane's last */
                for (int k = 8 * nfull; k < a.K; k++) {
                    const float f = pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(xr[q] + k));
                    s[q] = fmaf(f, f, s[q]);
                }
            const float sum = pk_dev_warp_sum(s[q]);
            const int r = r0 + q * PK_DEV_WARPS;
            if (lane == 0 && r < nt) scale_s[r] = 1.0f / sqrtf(sum / (float)a.K + a.eps);
        }
    }
}

__device__ __forceinline__ void pk_mma_cp16(pk_bf16 *dst, const pk_bf16 *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}

/* 8 elements at src into dst (shared): cp.async when vec (a whole, 16-byte aligned chunk), else
 * register loads of the n valid elements (any alignment; zeros past them); n <= 0: zeros. CG:
 * through L2 (activations), else the read-only path (weights). */
template <bool CG>
__device__ __forceinline__ void pk_mma_chunk(pk_bf16 *dst, const pk_bf16 *src, int n, bool vec) {
    if (n >= 8 && vec) {
        pk_mma_cp16(dst, src);
        return;
    }
    uint4 v = make_uint4(0, 0, 0, 0);
    if (n >= 8) {
        v = pk_dev_load8_any<CG>(src);
    } else if (n > 0) {
        pk_bf16 e[8];
#pragma unroll
        for (int i = 0; i < 8; i++) e[i] = i < n ? (CG ? pk_dev_ldcg_bf16(src + i) : pk_dev_ldw_bf16(src + i)) : (pk_bf16)0;
        v = make_uint4(pk_dev_pack2(e[0], e[1]), pk_dev_pack2(e[2], e[3]), pk_dev_pack2(e[4], e[5]), pk_dev_pack2(e[6], e[7]));
    }
    *(uint4 *)dst = v;
}

/* Output (r, j) of a block starting at row t0 (nt rows): bf16(acc), or bf16(bf16(acc) + residual);
 * nothing past the block's rows or the tile's columns. Both block loops' epilogue. */
__device__ __forceinline__ void pk_mma_store(const pk_lin_args &a, int t0, int nt, int r, int j, float y) {
    if (r >= nt || j >= a.ncols) return;
    const int t = t0 + r;
    if (a.residual) y = pk_dev_round_bf16(y) + pk_dev_bf16_to_f32(pk_dev_ldcg_bf16(a.residual + t * a.res_stride + j));
    a.out[t * a.out_stride + j] = pk_dev_f32_to_bf16(y);
}

/* A block's pipeline: the thread's rows of the A and B slices, resolved once per block. A stage
 * holds As [BM] rows, Us [BM] (SILU_MUL) and Bs [BN], each row one K slice: SW false, rows LD
 * elements apart (mma.sync's ldmatrix layout); SW true, rows 32 elements (64 bytes) apart in
 * wgmma's 64-byte swizzle (wgmma.cuh pk_sw64_off; the stage on a 512-byte boundary). */
template <int XN, int BN, bool SW>
struct pk_mma_block {
    static constexpr int B_CHUNKS = BN * PK_MMA_CPR / PK_CUDA_THREADS;
    static_assert(B_CHUNKS * PK_CUDA_THREADS == BN * PK_MMA_CPR, "whole B chunks per thread");
    static constexpr int NA = XN == PK_LIN_SILU_MUL ? 2 : 1; /* A-side buffers: As (and Us) */
    static constexpr int RE = SW ? PK_MMA_BK : PK_MMA_LD;    /* elements a stage row takes */
    static constexpr int BOFF = NA * PK_MMA_BM * RE;         /* Bs's offset in the stage */
    static constexpr int STAGE = BOFF + BN * RE;             /* elements of one stage */
    const pk_bf16 *xa[PK_MMA_A_CHUNKS]; /* the chunk's x row (nullptr: a row past n_tok) */
    const pk_bf16 *wb[B_CHUNKS];        /* the chunk's weight row (nullptr: past ncols) */
    bool a_vec, b_vec[B_CHUNKS];

    __device__ __forceinline__ static int row_of(int i) { return (threadIdx.x + i * PK_CUDA_THREADS) / PK_MMA_CPR; }
    __device__ __forceinline__ static int col_of() { return 8 * (threadIdx.x % PK_MMA_CPR); }
    /* element offset of column c (a multiple of 8) of stage row r */
    __device__ __forceinline__ static int off(int r, int c) {
        return SW ? (int)(pk_sw64_off(r, c / 8) / 2) : r * PK_MMA_LD + c;
    }

    __device__ __forceinline__ void init(const pk_lin_args &a, int t0, int nt, int j0) {
        /* x + acc is made in registers (the transform), so with acc the raw x may take cp.async */
        a_vec = pk_dev_aligned16(a.x) && a.x_stride % 8 == 0 && a.K % 8 == 0;
#pragma unroll
        for (int i = 0; i < PK_MMA_A_CHUNKS; i++) xa[i] = row_of(i) < nt ? a.x + (t0 + row_of(i)) * a.x_stride : nullptr;
#pragma unroll
        for (int i = 0; i < B_CHUNKS; i++) {
            const int j = j0 + row_of(i);
            wb[i] = j < a.ncols ? pk_dev_rows_get(a.w, (uint32_t)(a.n0 + j)) : nullptr;
            b_vec[i] = wb[i] && pk_dev_aligned16(wb[i]);
        }
    }

    /* Slice k0's copies into stage st (As, Us, Bs of that stage). Call cp.async.commit after. */
    __device__ __forceinline__ void issue(const pk_lin_args &a, int k0, pk_bf16 *stage) const {
        const int c = col_of(), left = a.K - (k0 + c);
        pk_bf16 *As = stage, *Us = stage + PK_MMA_BM * RE, *Bs = stage + BOFF;
#pragma unroll
        for (int i = 0; i < PK_MMA_A_CHUNKS; i++) {
            const int r = row_of(i), n = xa[i] ? left : 0;
            pk_mma_chunk<true>(As + off(r, c), xa[i] + k0 + c, n, a_vec);
            if (XN == PK_LIN_SILU_MUL) pk_mma_chunk<true>(Us + off(r, c), xa[i] + a.K + k0 + c, n, a_vec);
        }
#pragma unroll
        for (int i = 0; i < B_CHUNKS; i++)
            pk_mma_chunk<false>(Bs + off(row_of(i), c), wb[i] + k0 + c, wb[i] ? left : 0, b_vec[i]);
    }

    /* RMSNORM: norm_w's 8 elements at the thread's column of slice k0 (zeros past K), one per
     * thread (its chunks share the column). Loaded a slice ahead of its transform, so the load's
     * latency hides behind a product instead of sitting between two barriers. */
    __device__ __forceinline__ static uint4 norm_chunk(const pk_lin_args &a, int k0) {
        if (XN != PK_LIN_RMSNORM) return make_uint4(0, 0, 0, 0);
        const int k = k0 + col_of(), left = a.K - k;
        if (left >= 8) return pk_dev_load8_norm(a.norm_w + k);
        pk_bf16 e[8];
#pragma unroll
        for (int q = 0; q < 8; q++) e[q] = q < left ? pk_dev_ldw_bf16(a.norm_w + k + q) : (pk_bf16)0;
        return make_uint4(pk_dev_pack2(e[0], e[1]), pk_dev_pack2(e[2], e[3]), pk_dev_pack2(e[4], e[5]),
                          pk_dev_pack2(e[6], e[7]));
    }

    /* xn of slice k0 in stage st, in place: the thread's own chunks, once its copies of them
     * landed (cp.async.wait_group is per thread; no barrier needed). g: norm_chunk(a, k0). With
     * acc: x + acc, and the task's columns of that sum into sum (pk_lin_x8's rule). */
    __device__ __forceinline__ void transform(const pk_lin_args &a, int t0, int k0, pk_bf16 *stage,
                                              const float *scale_s, uint4 g) const {
        if (XN == PK_LIN_PLAIN) return;
        const int c = col_of(), k = k0 + c, left = a.K - k;
        if (left <= 0) return; /* zeros stay zeros */
        pk_bf16 *As = stage, *Us = stage + PK_MMA_BM * RE;
#pragma unroll
        for (int i = 0; i < PK_MMA_A_CHUNKS; i++) {
            if (!xa[i]) continue;
            const int r = row_of(i), n = left < 8 ? left : 8;
            uint4 *p = (uint4 *)(As + off(r, c));
            uint4 fv = *p, gv;
            if (XN == PK_LIN_RMSNORM) {
                if (a.acc) {
                    const int t = t0 + r;
                    fv = pk_dev_acc_x8(fv, a.acc + t * a.acc_stride + k);
                    if (k + 8 > a.sum0 && k < a.sum1) {
                        const pk_bf16 *e = (const pk_bf16 *)&fv;
#pragma unroll
                        for (int q = 0; q < 8; q++)
                            if (k + q >= a.sum0 && k + q < a.sum1) a.sum[t * a.sum_stride + k + q] = e[q];
                    }
                }
                gv = g;
            } else {
                gv = *(const uint4 *)(Us + off(r, c));
            }
            float f[8], g[8], h[8];
            pk_dev_unpack8(fv, f);
            pk_dev_unpack8(gv, g);
            const float scale = XN == PK_LIN_RMSNORM ? scale_s[r] : 0.0f;
#pragma unroll
            for (int q = 0; q < 8; q++) {
                h[q] = XN == PK_LIN_RMSNORM ? pk_dev_rmsnorm1(f[q], scale, g[q]) : pk_dev_silu_mul1(f[q], g[q]);
                if (q >= n) h[q] = 0.0f;
            }
            *p = pk_dev_pack8(h);
        }
    }
};

/* The warp's 32 × BN / 2 of one slice: acc[mi][ni] is the m16n8 tile (rows wm + 16 mi, columns
 * wn + 8 ni). ldmatrix x4 addresses: A, lane l → row l % 16, column (l / 16) · 8 (a0..a3 of the
 * mma's A fragment); B (rows are output columns, K contiguous: the mma's "col" operand), lane l →
 * matrix q = l / 8: column n0 + l % 8 + (q / 2) · 8, k + (q % 2) · 8 (b0, b1 of two n8 tiles). */
template <int BN>
__device__ __forceinline__ void pk_mma_slice(const pk_bf16 *As, const pk_bf16 *Bs, int wm, int wn,
                                             float (&acc)[2][BN / 16][4]) {
    constexpr int NI = BN / 16; /* n8 tiles of the warp */
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < PK_MMA_BK; kk += 16) {
        uint32_t af[2][4], bf[NI / 2][4];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
            pk_ldsm4<false>(af[mi], As + (wm + 16 * mi + lane % 16) * PK_MMA_LD + kk + (lane / 16) * 8);
#pragma unroll
        for (int nj = 0; nj < NI / 2; nj++) {
            const int q = lane / 8;
            pk_ldsm4<false>(bf[nj], Bs + (wn + 16 * nj + lane % 8 + (q / 2) * 8) * PK_MMA_LD + kk + (q % 2) * 8);
        }
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int ni = 0; ni < NI; ni++)
                pk_mma_16816(acc[mi][ni], af[mi], bf[ni / 2][(ni % 2) * 2], bf[ni / 2][(ni % 2) * 2 + 1]);
    }
}

/* One block: rows [t0, t0 + nt) × columns [j0, j0 + BN) of the tile. Whole CTA; starts and ends
 * with every stage free (the caller's barrier before, this block's last barrier after). */
template <int XN, int BN>
__device__ inline void pk_mma_block_run(const pk_lin_args &a, int t0, int nt, int j0, const float *scale_s,
                                        pk_bf16 *stages) {
    using block = pk_mma_block<XN, BN, false>;
    constexpr int S = pk_mma_stages<XN>(), SE = block::STAGE, NI = BN / 16, BOFF = block::BOFF;
    static_assert(SE == pk_mma_stage_elems<XN, BN>(), "the stage pk_mma_smem counts");
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * (BN / 2);
    const int ns = (a.K + PK_MMA_BK - 1) / PK_MMA_BK;
    block blk;
    blk.init(a, t0, nt, j0);
    float acc[2][NI][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[mi][ni][q] = 0.0f;
#pragma unroll
    for (int s = 0; s < S - 1; s++) { /* the first S - 1 slices in flight (empty groups past K) */
        if (s < ns) blk.issue(a, s * PK_MMA_BK, stages + s * SE);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    uint4 g = block::norm_chunk(a, 0);
    asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory"); /* slice 0 */
    blk.transform(a, t0, 0, stages, scale_s, g);
    for (int s = 0; s < ns; s++) {
        pk_bf16 *cur = stages + (s % S) * SE;
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 3) : "memory"); /* slice s + 1 */
        pk_cta_sync(); /* slices s (transformed) and s + 1 in place; slice s - 1's stage is free */
        if (s + S - 1 < ns) blk.issue(a, (s + S - 1) * PK_MMA_BK, stages + ((s + S - 1) % S) * SE);
        asm volatile("cp.async.commit_group;" ::: "memory");
        if (s + 1 < ns) g = block::norm_chunk(a, (s + 1) * PK_MMA_BK);
        pk_mma_slice<BN>(cur, cur + BOFF, wm, wn, acc);
        if (s + 1 < ns) blk.transform(a, t0, (s + 1) * PK_MMA_BK, stages + ((s + 1) % S) * SE, scale_s, g);
    }
    /* epilogue: lane holds rows g, g + 8 (g = lane / 4) and columns 2 (lane % 4) + {0, 1} of
     * each m16n8 tile */
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int q = 0; q < 4; q++)
                pk_mma_store(a, t0, nt, wm + 16 * mi + lane / 4 + (q / 2) * 8,
                             j0 + wn + 8 * ni + 2 * (lane % 4) + q % 2, acc[mi][ni][q]);
    asm volatile("cp.async.wait_all;" ::: "memory"); /* only empty groups are left; no copy outlives us */
    pk_cta_sync(); /* every warp is done with the stages */
}

#include "kernels/cuda/linear_wgmma.cuh" /* the block on wgmma: needs pk_mma_block */

/* A chunk's tiles (pk_lin_chunk): ceil(n_tok / BM) row blocks x ceil(cn / cw) column blocks of cw
 * columns (the mma block's bn, or its largest multiple of ch.unit), row block major; task `rank`
 * takes tiles [rank · n / m, (rank + 1) · n / m), so it keeps one row block, and its rmsnorm
 * scales, over consecutive tiles. */
struct pk_chunk_tiles {
    int cw, cbs, lo, hi;
    __device__ __forceinline__ pk_chunk_tiles(const pk_lin_chunk &ch, int n_tok, int bn) {
        cw = ch.unit > 0 ? bn / ch.unit * ch.unit : bn;
        cbs = (ch.cn + cw - 1) / cw;
        const int64_t n = (int64_t)((n_tok + PK_MMA_BM - 1) / PK_MMA_BM) * cbs;
        lo = (int)(ch.rank * n / ch.m);
        hi = (int)((ch.rank + 1) * n / ch.m);
    }
    __device__ __forceinline__ int row0(int id) const { return id / cbs * PK_MMA_BM; }
    __device__ __forceinline__ int col0(int id) const { return id % cbs * cw; }
    /* the tile's columns end (chunk-relative) */
    __device__ __forceinline__ int col1(int id, int cn) const { return col0(id) + cw < cn ? col0(id) + cw : cn; }
};

/* The chunk's mma block width: 128 (x streamed half as often) when that still gives every task of
 * the chunk a tile, else 64. */
__device__ __forceinline__ int pk_chunk_bn(const pk_lin_chunk &ch, int n_tok) {
    const pk_chunk_tiles wide(ch, n_tok, 128);
    return (int64_t)((n_tok + PK_MMA_BM - 1) / PK_MMA_BM) * wide.cbs >= ch.m ? 128 : 64;
}

/* The task's tiles of its chunk (the task's own tile: a chunk of one task, pk_lin_mma_call): a as
 * the chunk's tile (columns from n0 + dc0), then each tile of the run, its columns cut to the
 * tile's. A row's scale and each output's K sum do not depend on the tile it falls in, so the
 * bits do not depend on the chunking. Whole CTA; ends with a barrier (shared memory is free). */
template <int XN, int BN>
__device__ inline void pk_lin_mma_chunk(const pk_lin_args &a_in, char *smem) {
    float *scale_s = (float *)smem; /* [BM] */
    /* [S][stage]; wgmma's from a 1024-byte boundary of the shared address space */
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem) + PK_MMA_BM * 4;
    pk_bf16 *stages = (pk_bf16 *)(smem + PK_MMA_BM * 4 + (PK_HAVE_WGMMA ? (PK_WG_ALIGN - s0 % PK_WG_ALIGN) % PK_WG_ALIGN : 0));
    pk_lin_args a = a_in;
    a.n0 += a.ch.dc0;
    a.out += a.ch.dc0;
    if (a.residual) a.residual += a.ch.dc0;
    const pk_chunk_tiles tl(a.ch, a.n_tok, BN);
    int scaled = -1; /* the row block scale_s holds */
    for (int id = tl.lo; id < tl.hi; id++) {
        const int t0 = tl.row0(id), nt = a.n_tok - t0 < PK_MMA_BM ? a.n_tok - t0 : PK_MMA_BM;
        if (XN == PK_LIN_RMSNORM && t0 != scaled) { /* the last block's barrier freed scale_s */
            pk_mma_rms_scales(a, t0, nt, scale_s);
            pk_cta_sync();
            scaled = t0;
        }
        a.ncols = tl.col1(id, a.ch.cn); /* the block stops at the tile's last column */
        if constexpr (PK_HAVE_WGMMA && XN != PK_LIN_SILU_MUL)
            pk_wg_block_run<XN, BN>(a, t0, nt, tl.col0(id), scale_s, stages);
        else
            pk_mma_block_run<XN, BN>(a, t0, nt, tl.col0(id), scale_s, stages);
    }
}

/* RMSNORM_LINEAR_SWIGLU's epilogue over the same tiles as its chunk's GEMM wrote into gu (gu, out:
 * the task's own tiles' starts; gu's chunk starts dc0 columns before, out's dc0 / 2): each tile's
 * gate / up pairs to its out columns. The chunk starts at a multiple of 2 · block (whole tasks'
 * tiles) and its tiles' columns are multiples of ch.unit = 2 · block: whole pairs. */
__device__ inline void pk_dev_swiglu_chunk(const pk_bf16 *gu, int64_t gu_stride, int n_tok, int block,
                                           pk_bf16 *out, int64_t out_stride, const pk_lin_chunk &ch) {
    const pk_chunk_tiles tl(ch, n_tok, pk_chunk_bn(ch, n_tok));
    gu += ch.dc0;
    out += ch.dc0 / 2;
    for (int id = tl.lo; id < tl.hi; id++) {
        const int t0 = tl.row0(id), j0 = tl.col0(id), w = tl.col1(id, ch.cn) - j0;
        const int nt = n_tok - t0 < PK_MMA_BM ? n_tok - t0 : PK_MMA_BM;
        pk_dev_swiglu_blocks(gu + t0 * gu_stride + j0, gu_stride, nt, w / 2, block, out + t0 * out_stride + j0 / 2,
                             out_stride);
    }
}

/* Out of line: one copy per XN however many kinds and layers reach it, and the one-row paths
 * that pk_lin_tile inlines keep their own register allocation. A chunk's tiles (no accumulator:
 * its share of x + acc is written per task), else the task's own tile as a chunk of one task; the
 * mma block is 128 columns wide (x streamed half as often) where that leaves every task of the
 * chunk a tile, else 64 (no math on empty columns of narrow tiles). */
template <int XN>
__device__ __noinline__ void pk_lin_mma_call(const pk_lin_args &a_in, char *smem) {
    pk_lin_args a = a_in;
    if (a.ch.m <= 1 || a.acc) a.ch = pk_lin_chunk{0, a.ncols, 0, 1, 0};
    if (a.ch.m > 1 ? pk_chunk_bn(a.ch, a.n_tok) == 128 : a.ncols > 64)
        pk_lin_mma_chunk<XN, 128>(a, smem);
    else
        pk_lin_mma_chunk<XN, 64>(a, smem);
}

#endif /* PK_CUDA_LINEAR_MMA_CUH */
