// SPDX-License-Identifier: Apache-2.0
/* linear_wgmma.cuh — one block of the multi-row GEMM (linear_mma.cuh's pk_mma_block_run) on
 * Hopper's wgmma (sm_90a builds): rows [t0, t0 + nt) × columns [j0, j0 + BN), out as
 * linear_mma.cuh says, the same loads, transform and epilogue rule, so the same bits per row in
 * any step (the K sums run over the same 16-wide steps in the same order in every block).
 *
 * The two warpgroups take rows 0-63 and 64-127 of the block, each all BN columns (m64nBNk16, two
 * per 32-wide K slice; BN / 2 fp32 accumulators a thread). Slices go through a ring of S stages
 * (pk_wg_stages, 64-byte-swizzled rows, wgmma.cuh), S - 2 of them in flight ahead of the math.
 * Per slice s, in order:
 *   wait for the thread's copies of slice s; transform its own chunks (the rmsnorm or silu · up,
 *   norm_w loaded a slice ahead); fence.proxy.async (generic writes → wgmma's reads); barrier
 *   (slice s complete; every warpgroup's product of slice s - 2 is done: it waited for it at the
 *   end of slice s - 1); issue slice s + S - 2 into slice s - 2's stage; the two wgmma of slice s;
 *   wait until only slice s's product is in flight.
 * So a slice's transform overlaps the product of the slice before. No branch depends on the
 * thread around the wgmma (they are warpgroup-collective).
 * Shared memory: stages from a 1024-byte boundary (pk_lin_mma_chunk places them).
 */
#ifndef PK_CUDA_LINEAR_WGMMA_CUH
#define PK_CUDA_LINEAR_WGMMA_CUH

/* wgmma's ring: as many stages as fit, at most 6. PLAIN and RMSNORM blocks only: SILU_MUL's keep
 * mma.sync (with Us beside As a 128-wide block's ring holds 3 stages, one slice in flight, and
 * its 64-wide blocks read x twice as often). */
template <int XN, int BN>
__device__ constexpr int pk_wg_stages() {
    constexpr int fit = (PK_CUDA_SMEM_BYTES - PK_MMA_BM * 4 - PK_WG_ALIGN) / (pk_mma_block<XN, BN, true>::STAGE * 2);
    return fit > 6 ? 6 : fit;
}
static_assert(pk_wg_stages<PK_LIN_PLAIN, 128>() >= 4, "two slices in flight for the blocks wgmma runs");

template <int BN>
__device__ __forceinline__ void pk_wg_product(float (&acc)[BN / 2], uint32_t a_addr, uint32_t b_addr) {
    pk_wgmma_fence();
    if constexpr (BN == 128) {
        pk_wgmma_m64n128k16(acc, pk_wgmma_desc_sw64(a_addr), pk_wgmma_desc_sw64(b_addr), 1);
        pk_wgmma_m64n128k16(acc, pk_wgmma_desc_sw64(a_addr + 32), pk_wgmma_desc_sw64(b_addr + 32), 1);
    } else {
        pk_wgmma_m64n64k16(acc, pk_wgmma_desc_sw64(a_addr), pk_wgmma_desc_sw64(b_addr), 1);
        pk_wgmma_m64n64k16(acc, pk_wgmma_desc_sw64(a_addr + 32), pk_wgmma_desc_sw64(b_addr + 32), 1);
    }
    pk_wgmma_commit();
}

template <int XN, int BN>
__device__ inline void pk_wg_block_run(const pk_lin_args &a, int t0, int nt, int j0, const float *scale_s,
                                       pk_bf16 *stages) {
    static_assert(BN == 64 || BN == 128, "wgmma's n of a block");
    static_assert(XN != PK_LIN_SILU_MUL, "SILU_MUL blocks run on mma.sync (pk_wg_stages)");
    using block = pk_mma_block<XN, BN, true>;
    constexpr int S = pk_wg_stages<XN, BN>(), SE = block::STAGE;
    static_assert(S >= 3 && (SE * 2) % 1024 == 0, "stages on 1024-byte boundaries, one slice in flight");
    const int wg = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
    const int ns = (a.K + PK_MMA_BK - 1) / PK_MMA_BK;
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(stages);
    block blk;
    blk.init(a, t0, nt, j0);
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
#pragma unroll
    for (int s = 0; s < S - 2; s++) { /* the first S - 2 slices in flight (empty groups past K) */
        if (s < ns) blk.issue(a, s * PK_MMA_BK, stages + s * SE);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    uint4 g = block::norm_chunk(a, 0);
    for (int s = 0; s < ns; s++) {
        const int st = s % S;
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 3) : "memory"); /* slice s (groups: through s + S - 3) */
        blk.transform(a, t0, s * PK_MMA_BK, stages + st * SE, scale_s, g);
        pk_fence_proxy_async();
        pk_cta_sync();
        if (s + S - 2 < ns) blk.issue(a, (s + S - 2) * PK_MMA_BK, stages + ((s + S - 2) % S) * SE);
        asm volatile("cp.async.commit_group;" ::: "memory");
        if (s + 1 < ns) g = block::norm_chunk(a, (s + 1) * PK_MMA_BK);
        pk_wg_product<BN>(acc, base + (uint32_t)(st * SE * 2 + wg * 64 * PK_MMA_BK * 2),
                          base + (uint32_t)((st * SE + block::BOFF) * 2));
        pk_wgmma_wait<1>();
    }
    pk_wgmma_wait<0>();
    /* epilogue: the thread holds rows wg · 64 + 16 warp + lane / 4 (+ 8) and, per n8 block i,
     * columns 8 i + 2 (lane % 4) + {0, 1} (wgmma.cuh) */
#pragma unroll
    for (int i = 0; i < BN / 8; i++)
#pragma unroll
        for (int q = 0; q < 4; q++)
            pk_mma_store(a, t0, nt, wg * 64 + warp * 16 + lane / 4 + (q / 2) * 8, j0 + 8 * i + 2 * (lane % 4) + q % 2,
                         acc[4 * i + q]);
    asm volatile("cp.async.wait_all;" ::: "memory"); /* only empty groups are left; no copy outlives us */
    pk_cta_sync(); /* every warp is done with the stages */
}

#endif /* PK_CUDA_LINEAR_WGMMA_CUH */
