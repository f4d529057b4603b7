// SPDX-License-Identifier: Apache-2.0
/* rows.cuh — what every CUDA task kernel shares: pk_rows on the device, bf16 <-> fp32 with the
 * host's rounding, and the load paths.
 *
 * Load paths (DESIGN.md, "CUDA backend"): activations, the KV cache and the step metadata may have
 * been written by another CTA of this launch, so they are read through L2 (ld.global.cg: never a
 * possibly stale L1 line) — pk_dev_ldcg_*; weights are never written while a kernel runs and use
 * the read-only path — pk_dev_ldw_*. 16-byte helpers need 16-byte aligned addresses: callers check
 * with pk_dev_aligned16 and fall back to narrower loads.
 *
 * pk_rows and pk_attn_step are the plain structs of cpu_kernels.h (its static inline host
 * functions stay unused here).
 */
#ifndef PK_CUDA_ROWS_CUH
#define PK_CUDA_ROWS_CUH

#include <cuda_bf16.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "kernels/cpu/cpu_kernels.h"
}

#define PK_CUDA_THREADS 256          /* threads of every CTA: 8 warps */
#define PK_CUDA_SMEM_BYTES (96 * 1024) /* the task kernels' own shared memory (the start of the block) */
#define PK_DEV_WARPS (PK_CUDA_THREADS / 32)
static_assert(PK_CUDA_THREADS % 32 == 0 && (PK_DEV_WARPS & (PK_DEV_WARPS - 1)) == 0 &&
                  PK_DEV_WARPS <= 32,
              "the kernels assume a power-of-two number of whole warps, at most 32");

#define PK_DEV_FULL_MASK 0xffffffffu

/* The task threads' barrier (every CTA is PK_CUDA_THREADS task threads); pk_cta_sync_or:
 * __syncthreads_or's. */
__device__ __forceinline__ void pk_cta_sync(void) { __syncthreads(); }
__device__ __forceinline__ int pk_cta_sync_or(int pred) { return __syncthreads_or(pred); }

/* Row r of a (possibly fused) weight: the same arithmetic as pk_rows_get. */
__device__ inline const pk_bf16 *pk_dev_rows_get(const pk_rows *w, uint32_t r) {
    uint32_t nseg = w->nseg, group_rows = 0;
    for (uint32_t i = 0; i < nseg; i++) group_rows += w->seg_rows[i];
    uint32_t g = r / group_rows, o = r % group_rows, i = 0;
    while (o >= w->seg_rows[i]) o -= w->seg_rows[i++];
    return w->seg[i] + ((uint64_t)g * w->seg_rows[i] + o) * w->row_stride;
}

/* ---- bf16 <-> fp32 --------------------------------------------------------------------------- */

__device__ __forceinline__ float pk_dev_bf16_to_f32(pk_bf16 h) {
    return __uint_as_float((uint32_t)h << 16);
}

/* Round to nearest even (cvt.rn.bf16.f32), bit for bit pk_f32_to_bf16 — NaN too: the host keeps
 * sign and payload and sets the quiet bit, where cvt would return the canonical NaN. */
__device__ __forceinline__ pk_bf16 pk_dev_f32_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (pk_bf16)((u >> 16) | 0x40u);
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

/* Rounds an fp32 value to the nearest bf16 and back (pk_round_bf16). */
__device__ __forceinline__ float pk_dev_round_bf16(float f) {
    return pk_dev_bf16_to_f32(pk_dev_f32_to_bf16(f));
}

/* The two bf16 halves of a 32-bit word (element 0 in the low half, as in memory). */
__device__ __forceinline__ float pk_dev_lo_f32(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float pk_dev_hi_f32(uint32_t u) {
    return __uint_as_float(u & 0xffff0000u);
}

/* f[0 .. 8) = the 8 bf16 of v, in memory order. */
__device__ __forceinline__ void pk_dev_unpack8(uint4 v, float *f) {
    f[0] = pk_dev_lo_f32(v.x); f[1] = pk_dev_hi_f32(v.x);
    f[2] = pk_dev_lo_f32(v.y); f[3] = pk_dev_hi_f32(v.y);
    f[4] = pk_dev_lo_f32(v.z); f[5] = pk_dev_hi_f32(v.z);
    f[6] = pk_dev_lo_f32(v.w); f[7] = pk_dev_hi_f32(v.w);
}

__device__ __forceinline__ uint32_t pk_dev_pack2(pk_bf16 lo, pk_bf16 hi) {
    return (uint32_t)lo | ((uint32_t)hi << 16);
}

/* 8 fp32 values, each rounded to bf16 (RNE), packed in memory order. */
__device__ __forceinline__ uint4 pk_dev_pack8(const float *f) {
    uint4 v;
    v.x = pk_dev_pack2(pk_dev_f32_to_bf16(f[0]), pk_dev_f32_to_bf16(f[1]));
    v.y = pk_dev_pack2(pk_dev_f32_to_bf16(f[2]), pk_dev_f32_to_bf16(f[3]));
    v.z = pk_dev_pack2(pk_dev_f32_to_bf16(f[4]), pk_dev_f32_to_bf16(f[5]));
    v.w = pk_dev_pack2(pk_dev_f32_to_bf16(f[6]), pk_dev_f32_to_bf16(f[7]));
    return v;
}

/* ---- loads ----------------------------------------------------------------------------------- */

__device__ __forceinline__ bool pk_dev_aligned16(const void *p) {
    return ((uintptr_t)p & 15u) == 0;
}
__device__ __forceinline__ bool pk_dev_aligned4(const void *p) { return ((uintptr_t)p & 3u) == 0; }
/* The GPU's nanosecond clock (%globaltimer): the diagnostics' stamps and the debug spin limits. */
__device__ __forceinline__ unsigned long long pk_dev_globaltimer(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Event polling (one thread): spins until *ctr >= need with gpu-scope acquire loads, sleeping
 * between polls: every waiting SM reads one L2 line (the event's counter), so a tight loop over
 * many SMs keeps that L2 slice busy for everyone else's loads. The sleep starts at
 * PK_SPIN_SLEEP_NS and doubles up to PK_SPIN_SLEEP_MAX_NS (equal: a fixed period). The runtime's
 * pk_wait_event (sync.cuh) and the deferred wait below (pk_dev_dep_wait) use it. */
#define PK_SPIN_SLEEP_NS 32
#define PK_SPIN_SLEEP_MAX_NS PK_SPIN_SLEEP_NS
__device__ __forceinline__ unsigned long long pk_dev_ld_acquire_u64(const unsigned long long *p) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void pk_dev_spin_until(const unsigned long long *ctr, unsigned long long need) {
    unsigned ns = PK_SPIN_SLEEP_NS;
    while (pk_dev_ld_acquire_u64(ctr) < need) {
        __nanosleep(ns);
        ns = 2 * ns < PK_SPIN_SLEEP_MAX_NS ? 2 * ns : PK_SPIN_SLEEP_MAX_NS;
    }
}

/* A task's dependency wait left to the task (static mode, runtime.cuh's pk_defer_wait): the
 * runtime calls the task before its event fires and the kernel waits right before its first
 * read of what the wait guards (linear.cuh's PK_WST_ASYNC_LATE, the decode attention's `late`),
 * so the dispatch — the task switch, the call-through, the kernel's set-up — runs while the
 * worker waits. The runtime sets the event (thread 0) before a barrier. */
__shared__ const unsigned long long *pk_dep_ctr; /* nullptr once waited */
__shared__ unsigned long long pk_dep_need, pk_dep_seen; /* threshold; %globaltimer when it was seen */
/* A staged task's count (a GEMV's staged rows, an attention's 1 + positions) with this bit: its
 * dependency wait and the wait for its staging copies are left to the kernel (counts are far
 * below it). */
#define PK_STAGED_LATE (1 << 30)
/* Thread 0, once it has seen the deferred event: the time for the trace record, and the wait
 * marked done (runtime.cuh's pk_defer_end checks it). */
__device__ __forceinline__ void pk_dev_dep_seen_now(void) {
    pk_dep_seen = pk_dev_globaltimer();
    pk_dep_ctr = nullptr;
}
/* Every thread: thread 0 polls the deferred event, then the barrier (as sync.cuh's pk_wait_event). */
__device__ __forceinline__ void pk_dev_dep_wait(void) {
    if (threadIdx.x == 0) {
        pk_dev_spin_until(pk_dep_ctr, pk_dep_need);
        pk_dev_dep_seen_now();
    }
    pk_cta_sync();
}
/* The same for a task whose staging copies were left to it too (a staged GEMV tile, a staged
 * decode attention): this thread's copies first, then the wait, whose barrier covers everyone's. */
__device__ __forceinline__ void pk_dev_dep_wait_staged(void) {
    asm volatile("cp.async.wait_all;" ::: "memory");
    pk_dev_dep_wait();
}

/* Activations (and anything another CTA may have written in this launch): through L2. */
__device__ __forceinline__ uint4 pk_dev_ldcg16(const void *p) {
    return __ldcg((const uint4 *)p);
}
__device__ __forceinline__ uint32_t pk_dev_ldcg4(const void *p) {
    return __ldcg((const unsigned int *)p);
}
__device__ __forceinline__ pk_bf16 pk_dev_ldcg_bf16(const pk_bf16 *p) {
    return __ldcg((const unsigned short *)p);
}
__device__ __forceinline__ float pk_dev_ldcg_f32(const float *p) { return __ldcg(p); }
__device__ __forceinline__ int32_t pk_dev_ldcg_i32(const int32_t *p) {
    return __ldcg((const int *)p);
}

/* Weights (read-only for the whole launch): the non-coherent read-only path. */
/* 16 weight bytes: read-only path, not kept in L1 (each weight byte is read once per step), the
 * L2 asked to fetch 256-byte blocks (a decode GEMV streams whole rows: fewer, larger DRAM
 * requests) and to evict these lines first: a step streams far more
 * weight bytes than the L2 holds, so keeping them only pushes out what is read again soon — the
 * KV cache, the activations and the persistent kernel's own instructions, which each task kind
 * fetches again after the others ran. */
/* The L2 cache policy of weight loads (createpolicy: evict first, every line). */
__device__ __forceinline__ uint64_t pk_dev_weight_policy(void) {
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}
__device__ __forceinline__ uint4 pk_dev_ldw16(const void *p) {
#if __CUDA_ARCH__ >= 800
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p), "l"(pk_dev_weight_policy()));
    return v;
#else
    return __ldg((const uint4 *)p);
#endif
}
/* 16 bytes of an rmsnorm_linear's norm weights (K bf16 per norm, read by every task of the layer
 * right after its wait). Where the GEMV tiles stage whole (pk_gen_tuning::lin_wst_lds: the small
 * models) the L2 keeps them (evict-last; 2 KB per norm, 112 KB for Qwen3-0.6B): loaded as weights
 * (evict-first) the first task of a layer to read them finds them in DRAM, behind the layer's
 * copies, and every task of the layer waits for that read. The same bits either way. */
__device__ __forceinline__ uint4 pk_dev_ldn16(const void *p) {
#if __CUDA_ARCH__ >= 800
    if constexpr (pk_gen_tuning::lin_wst_lds) {
        uint4 v;
        uint64_t pol;
        asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
        asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p), "l"(pol));
        return v;
    }
#endif
    return pk_dev_ldw16(p);
}
/* cp.async of 16 weight bytes to shared memory, with the weight loads' L2 policy. */
__device__ __forceinline__ void pk_dev_cp_async_w16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "l"(pk_dev_weight_policy())
                 : "memory");
}
/* Copies `bytes` (a multiple of 16) from src into shared memory at smem + off with 16-byte
 * cp.async copies (the weight loads' L2 policy), one commit group: the runtime's tile staging
 * and the fused MLP's down block. Every thread calls it. */
__device__ __forceinline__ void pk_stage_copy(const char *src, uint32_t bytes, char *smem, uint32_t off) {
    const uint32_t n16 = bytes / 16, dst = (uint32_t)__cvta_generic_to_shared(smem + off);
    for (uint32_t e = threadIdx.x; e < n16; e += PK_CUDA_THREADS)
        pk_dev_cp_async_w16(dst + 16 * e, src + 16 * (unsigned long long)e);
    asm volatile("cp.async.commit_group;" ::: "memory");
}
__device__ __forceinline__ uint32_t pk_dev_ldw4(const void *p) {
    return __ldg((const unsigned int *)p);
}
__device__ __forceinline__ pk_bf16 pk_dev_ldw_bf16(const pk_bf16 *p) {
    return __ldg((const unsigned short *)p);
}

/* 8 consecutive bf16 at p as one uint4, for any 2-byte aligned p: one 16-byte load, four 4-byte
 * loads or eight 2-byte loads, whichever the alignment allows. CG: through L2 (activations). */
template <bool CG>
__device__ __forceinline__ uint4 pk_dev_load8_any(const pk_bf16 *p) {
    if (pk_dev_aligned16(p)) return CG ? pk_dev_ldcg16(p) : pk_dev_ldw16(p);
    uint32_t u[4];
    if (pk_dev_aligned4(p)) {
#pragma unroll
        for (int i = 0; i < 4; i++) u[i] = CG ? pk_dev_ldcg4(p + 2 * i) : pk_dev_ldw4(p + 2 * i);
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            pk_bf16 lo = CG ? pk_dev_ldcg_bf16(p + 2 * i) : pk_dev_ldw_bf16(p + 2 * i);
            pk_bf16 hi = CG ? pk_dev_ldcg_bf16(p + 2 * i + 1) : pk_dev_ldw_bf16(p + 2 * i + 1);
            u[i] = pk_dev_pack2(lo, hi);
        }
    }
    return make_uint4(u[0], u[1], u[2], u[3]);
}

/* 8 consecutive norm weights at p, any 2-byte aligned p: pk_dev_ldn16's policy when 16-byte aligned,
 * else pk_dev_load8_any's smaller loads. */
__device__ __forceinline__ uint4 pk_dev_load8_norm(const pk_bf16 *p) {
    return pk_dev_aligned16(p) ? pk_dev_ldn16(p) : pk_dev_load8_any<false>(p);
}

/* ---- warp reductions (fixed butterfly order: the same bits on every run) --------------------- */

__device__ __forceinline__ float pk_dev_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(PK_DEV_FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float pk_dev_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(PK_DEV_FULL_MASK, v, o));
    return v;
}

#endif /* PK_CUDA_ROWS_CUH */
