// SPDX-License-Identifier: Apache-2.0
/* fixed_point.cuh — RMSNORM_SWIGLU_DOWN's accumulator on the device: int64 fixed point, value ·
 * 2^32, with the roundings of the CPU's pk_fixed_from_f32 / pk_fixed_to_bf16 (cpu_kernels.h), so
 * the same partials give the same sum, and the same bf16, on both backends. Shared by the real
 * kernels (mlp_fused.cuh, linear.cuh) and the fallback kernels.
 */
#ifndef PK_CUDA_FIXED_POINT_CUH
#define PK_CUDA_FIXED_POINT_CUH

#include <stdint.h>

/* round(v · 2^32) to nearest even, v clamped to ±2^23 (NaN to -2^23, fmaxf's rule): 2^9 tasks'
 * adds stay inside 63 bits. The scaling is exact, so this is the CPU's llrint((double)v · 2^32). */
__device__ __forceinline__ long long pk_dev_fixed_from_f32(float v) {
    v = fminf(fmaxf(v, -0x1p23f), 0x1p23f);
    return __float2ll_rn(v * 0x1p32f);
}

/* acc · 2^-32 as fp32 (through double: the scaling is exact), for the caller to round to bf16. */
__device__ __forceinline__ float pk_dev_fixed_to_f32(long long a) {
    return __double2float_rn(__ll2double_rn(a) * 0x1p-32);
}

/* Adds v to *p with a 64-bit integer reduction in L2 (red.global.add.u64: two's complement, so
 * signed values add exactly). */
__device__ __forceinline__ void pk_dev_fixed_add(int64_t *p, long long v) {
    atomicAdd((unsigned long long *)p, (unsigned long long)v);
}

#endif /* PK_CUDA_FIXED_POINT_CUH */
