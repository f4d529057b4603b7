// SPDX-License-Identifier: Apache-2.0
/* mbarrier.cuh — mbarrier and bulk-copy (cp.async.bulk) primitives of sm_90 and later, shared-memory
 * addresses as 32-bit; on older GPUs they compile to nothing (their callers check
 * PK_DEV_HAVE_BULK first). Used by the fused MLP's paced stage (runtime.cuh) and the decode
 * attention's bulk KV rows (attention_decode.cuh).
 */
#ifndef PK_CUDA_MBARRIER_CUH
#define PK_CUDA_MBARRIER_CUH

#include <stdint.h>

#include "kernels/cuda/rows.cuh" /* pk_dev_globaltimer */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PK_DEV_HAVE_BULK 1 /* cp.async.bulk, mbarrier tx-counts */
#else
#define PK_DEV_HAVE_BULK 0
#endif

__device__ __forceinline__ void pk_dev_mbar_init(uint32_t bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void pk_dev_mbar_inval(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
#endif
}
/* Makes this thread's mbarrier.init visible to the copy engine (async proxy). */
__device__ __forceinline__ void pk_dev_mbar_init_fence(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
/* Orders this thread's earlier generic shared-memory accesses before later copy-engine writes. */
__device__ __forceinline__ void pk_dev_fence_proxy_async_smem(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
/* Arrives and adds `bytes` to the phase's expected transaction count. */
__device__ __forceinline__ void pk_dev_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
#endif
}
/* Arrives once (release: this thread's earlier reads of what the barrier guards are done). */
__device__ __forceinline__ void pk_dev_mbar_arrive(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
#endif
}
/* Whether the phase of parity `parity` has completed: OP "try_wait" may suspend a while,
 * "test_wait" returns at once (for a thread that polls something else between tests). */
#define PK_DEV_MBAR_PROBE(OP, bar, parity, done)                                                  \
    asm volatile("{\n\t.reg .pred p;\n\t"                                                        \
                 "mbarrier." OP ".parity.shared::cta.b64 p, [%1], %2;\n\t"                       \
                 "selp.u32 %0, 1, 0, p;\n\t}"                                                    \
                 : "=r"(done)                                                                    \
                 : "r"(bar), "r"(parity)                                                         \
                 : "memory")
/* Whether the phase of parity `parity` has completed (one try_wait: it may suspend a while). */
__device__ __forceinline__ bool pk_dev_mbar_test(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t done;
    PK_DEV_MBAR_PROBE("try_wait", bar, parity, done);
    return done != 0;
#else
    (void)bar, (void)parity;
    return true;
#endif
}
/* The same without suspending (test_wait). */
__device__ __forceinline__ bool pk_dev_mbar_test_now(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t done;
    PK_DEV_MBAR_PROBE("test_wait", bar, parity, done);
    return done != 0;
#else
    (void)bar, (void)parity;
    return true;
#endif
}
/* Waits until the phase of parity `parity` has completed (acquire: the copies it counted are
 * visible). try_wait suspends in hardware for a while; the loop retries. Debug builds
 * (pk_gen_tuning::debug_spin_limit_ms) trap past the limit instead of hanging: a wrong byte count would
 * otherwise wait forever. */
__device__ __forceinline__ void pk_dev_mbar_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const uint64_t t0 = pk_gen_tuning::debug_spin_limit_ms ? pk_dev_globaltimer() : 0;
    while (!pk_dev_mbar_test(bar, parity)) {
        if constexpr (pk_gen_tuning::debug_spin_limit_ms != 0)
            if (pk_dev_globaltimer() - t0 > (uint64_t)pk_gen_tuning::debug_spin_limit_ms * 1000000ull) __trap();
    }
#endif
}
/* bytes (a multiple of 16, both addresses 16-byte aligned) from global src to shared dst by the
 * copy engine; completes as transactions on mbarrier bar. The weight loads' L2 policy. */
__device__ __forceinline__ void pk_dev_bulk_copy_w(uint32_t dst, const void *src, uint32_t bytes,
                                                   uint32_t bar, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                 : "memory");
#endif
}

#endif /* PK_CUDA_MBARRIER_CUH */
