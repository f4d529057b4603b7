/* micro.cuh — what the microbenchmarks of bench/ (sm_bandwidth.cu, poll_latency.cu,
 * layer_chain.cu, handoff.cu, cluster_chain.cu: docs/PERF.md "Measuring") share: the CUDA error
 * check, %globaltimer, %smid, the event protocol's acquire load and release add, qsort's order of
 * doubles.
 * Each benchmark is one .cu built alone: nvcc -O3 -arch=sm_90a -o build/NAME bench/NAME.cu */
#ifndef PK_BENCH_MICRO_CUH
#define PK_BENCH_MICRO_CUH

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
__device__ __forceinline__ uint32_t sm_id(void) {
    uint32_t s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
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

#endif /* PK_BENCH_MICRO_CUH */
