// SPDX-License-Identifier: Apache-2.0
/* wgmma.cuh — Hopper's warpgroup MMA (sm_90a only: wgmma.mma_async, bf16 in, fp32 sums), the
 * multi-row GEMM's tensor-core step where the build targets sm_90a (linear_mma.cuh).
 *
 * A warpgroup (4 warps, 128 threads) computes D[64][N] += A[64][16] · B[N][16]^T with both
 * operands in shared memory, described by 64-bit matrix descriptors; both are K-major (each row's
 * 16 K elements contiguous, as x's rows and the weight rows are). The operand layout used here is
 * the 64-byte swizzle: rows of 32 bf16 (64 bytes) one after another, 8 rows (512 bytes) one
 * swizzle atom, the 16-byte chunk c of row r stored at chunk c ^ ((r >> 1) & 3) (CUTLASS's
 * Swizzle<2, 4, 3> of the byte address, so a buffer starts on a 512-byte boundary). The second
 * k16 half of a row is the descriptor's start address plus 32 bytes; the hardware applies the
 * swizzle to the address it forms.
 * D's registers (per thread t of the warpgroup, warp w = t / 32, lane l): for each n8 block i,
 * d[4i], d[4i + 1] are row 16 w + l / 4, columns 8 i + 2 (l % 4) + {0, 1}; d[4i + 2], d[4i + 3]
 * the same columns of row + 8 (mma.sync's m16n8 C layout, one per warp).
 * Ordering (PTX ISA "asynchronous warpgroup level matrix operations"): operands written by the
 * generic proxy (st.shared, cp.async) need fence.proxy.async before the barrier that publishes
 * them; wgmma.fence before the first wgmma of a batch (the accumulators were touched by other
 * instructions); commit_group closes a batch; wait_group N leaves at most N batches in flight.
 */
#ifndef PK_CUDA_WGMMA_CUH
#define PK_CUDA_WGMMA_CUH

#include <stdint.h>

/* Whether this compilation has wgmma (sm_90a's architecture-specific features): a constant the
 * callers branch on (the asm below is compiled only where the feature macro says so). */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
static constexpr bool PK_HAVE_WGMMA = true;
#else
static constexpr bool PK_HAVE_WGMMA = false;
#endif

/* The byte offset of chunk c (16 bytes) of row r in a 64-byte-swizzled buffer of 64-byte rows. */
__device__ __forceinline__ uint32_t pk_sw64_off(int r, int c) { return (uint32_t)(r * 64 + ((c ^ ((r >> 1) & 3)) << 4)); }

/* The descriptor of a K-major, 64-byte-swizzled operand at shared address addr (512-byte
 * aligned, plus 32 for the second k16): start >> 4 in bits 0-13, leading offset (unused by
 * swizzled K-major layouts; 1 as CUTLASS sets it) in 16-29, stride between 8-row groups (512
 * bytes) >> 4 in 32-45, base offset 0, layout 2 (64-byte swizzle) in 62-63. */
__device__ __forceinline__ uint64_t pk_wgmma_desc_sw64(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(512 >> 4) << 32) | ((uint64_t)2 << 62);
}

__device__ __forceinline__ void pk_wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void pk_wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void pk_wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
/* Shared-memory writes of this thread (st.shared, landed cp.async) made visible to wgmma's reads
 * (the async proxy); a barrier after it publishes them to the other threads' wgmma. */
__device__ __forceinline__ void pk_fence_proxy_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/* d (+)= A · B^T of one k16 step: A 64 rows, B N rows (N = 64 or 128); accumulate 0 overwrites d. */
__device__ __forceinline__ void pk_wgmma_m64n64k16(float (&d)[32], uint64_t a_desc, uint64_t b_desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
    (void)d, (void)a_desc, (void)b_desc, (void)accumulate;
    __trap();
#endif
}

__device__ __forceinline__ void pk_wgmma_m64n128k16(float (&d)[64], uint64_t a_desc, uint64_t b_desc, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
    (void)d, (void)a_desc, (void)b_desc, (void)accumulate;
    __trap();
#endif
}

#endif /* PK_CUDA_WGMMA_CUH */
