/* micro.cuh — what the microbenchmarks of bench/ (sm_bandwidth.cu, poll_latency.cu,
 * layer_chain.cu, handoff.cu, cluster_chain.cu, comm_handoff.cu, clock_skew.cu, line_latency.cu,
 * attd_loop.cu, step_advance.cu, kv_gather.cu, red_width.cu: docs/PERF.md "Measuring") share: the CUDA error check, %globaltimer, %smid, the event
 * protocol's acquire load and release add, qsort's order of doubles, a filled device buffer (the
 * stand-in weights), the launch of one CTA per SM.
 * Each benchmark is one .cu built alone: nvcc -O3 -arch=sm_90a -o build/NAME bench/NAME.cu
 * (attd_loop.cu, step_advance.cu and kv_gather.cu include pk's headers: add -std=c++17 -Isrc
 * -Iinclude) */
#ifndef PK_BENCH_MICRO_CUH
#define PK_BENCH_MICRO_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A CUDA call that must succeed: else the benchmark names the call and stops. */
#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s: %s: %s (line %d)\n", __FILE__, #x, cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

__device__ __forceinline__ uint64_t now_ns(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
/* %globaltimer read once v is known: the read is predicated on v (never equal to `never` in the
 * callers), so ptxas cannot schedule it before the load that produced v. A plain now_ns() after a
 * chain of dependent loads has no register dependency on them, and ptxas hoisted it above them
 * (line_latency's first run, session 27: 1-3 ns per L2 load). */
__device__ __forceinline__ uint64_t now_ns_after(uint64_t v, uint64_t never = 0x5a5a5a5a5a5a5a5aull) {
    uint64_t t = 0;
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u64 p, %1, %2;\n\t@p mov.u64 %0, %%globaltimer;\n\t}"
                 : "+l"(t)
                 : "l"(v), "l"(never));
    return t;
}
/* %clock64 read once v is known, for the same reason (attd_loop.cu's stamps inside a loop). */
__device__ __forceinline__ long long clock_after(uint64_t v, uint64_t never = 0x5a5a5a5a5a5a5a5aull) {
    long long t = 0;
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u64 p, %1, %2;\n\t@p mov.u64 %0, %%clock64;\n\t}"
                 : "+l"(t)
                 : "l"(v), "l"(never));
    return t;
}
__device__ __forceinline__ uint32_t sm_id(void) {
    uint32_t s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

/* bf16 pairs packed in a 32-bit word (the hand-off models' activations): the low / high element as
 * fp32, and fp32 rounded to bf16's bits */
__device__ __forceinline__ float lo_f32(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi_f32(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ uint32_t bf16_bits(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

/* The CTA's row scale rsqrt(Σ x² / n + 1e-6) from every thread's partial sum ss: each warp's
 * butterfly, then the W warps' sums in order through red [W] behind a barrier (the same bits in
 * every caller). Every thread; red is free again after the caller's next barrier. */
template <int W>
__device__ __forceinline__ float cta_rms_scale(float ss, float *red, int n) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
    __syncthreads();
    float tot = 0.0f;
#pragma unroll
    for (int w = 0; w < W; w++) tot += red[w];
    return rsqrtf(tot / n + 1e-6f);
}

/* pk's event protocol (src/runtime/cuda/device/sync.cuh): the poll's gpu-scope acquire load and the
 * signal's release reduction. */
__device__ __forceinline__ unsigned long long ld_acquire(const unsigned long long *p) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void red_release(unsigned long long *p, unsigned long long v) {
    asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* qsort's order of doubles (the benchmarks' medians and percentiles) */
static inline int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* qsort's order of uint64_t (nanoseconds, cycle counts) */
static inline int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* `bytes` of device memory, every byte `fill` (the stand-in weights: their values do not matter,
 * their traffic does). */
static inline char *device_filled(size_t bytes, int fill) {
    char *p;
    CHECK(cudaMalloc(&p, bytes));
    CHECK(cudaMemset(p, fill, bytes));
    return p;
}

/* The GPU's SM count; stops the benchmark when it is above `max` (its per-CTA arrays). */
static inline int sm_count_at_most(int max) {
    int n = 0;
    CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
    if (n > max) {
        fprintf(stderr, "%d SMs: this benchmark holds at most %d\n", n, max);
        exit(1);
    }
    return n;
}

/* One CTA of `threads` per SM, all resident at once (cooperative launch: the benchmarks' spins
 * need it), each with the most dynamic shared memory a block may have, so that no two share an
 * SM; waits for the kernel. Returns the CTA count (the SMs). */
static inline int launch_one_per_sm(const void *kernel, int threads, void **args) {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const int smem = (int)prop.sharedMemPerBlockOptin;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CHECK(cudaLaunchCooperativeKernel(kernel, dim3(prop.multiProcessorCount), dim3(threads), args, smem, 0));
    CHECK(cudaDeviceSynchronize());
    return prop.multiProcessorCount;
}

#endif /* PK_BENCH_MICRO_CUH */
