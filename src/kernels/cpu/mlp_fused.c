// SPDX-License-Identifier: Apache-2.0
/* mlp_fused.c — the CPU side of RMSNORM_SWIGLU_DOWN's accumulator: down_proj's partial sums added
 * to the int64 fixed-point accumulator, and the sum its readers take as x (cpu_kernels.h).
 *
 * The adds are exact integer atomics: the tasks of a layer add concurrently in any order and the
 * sum is the same bits (unlike an fp32 accumulator, linear_splitk.c).
 */
#include <stdatomic.h>

#include "kernels/cpu/cpu_kernels.h"

void pk_cpu_mlp_down_add(const pk_bf16 *act, int64_t act_stride, int n_tok, int ib, const pk_bf16 *wd, int N,
                         int64_t *acc, int64_t acc_stride) {
    for (int t = 0; t < n_tok; t++) {
        const pk_bf16 *a = act + t * act_stride;
        for (int n = 0; n < N; n++) {
            const pk_bf16 *w = wd + (int64_t)n * ib;
            float sum = 0.0f;
            for (int j = 0; j < ib; j++) sum += pk_bf16_to_f32(a[j]) * pk_bf16_to_f32(w[j]); /* j ascending */
            atomic_fetch_add_explicit((_Atomic int64_t *)(acc + t * acc_stride + n), pk_fixed_from_f32(sum),
                                      memory_order_relaxed);
        }
    }
}

void pk_cpu_acc_sum(const pk_bf16 *x, int64_t x_stride, const int64_t *acc, int64_t acc_stride, int n_tok, int K,
                    pk_bf16 *out, int64_t out_stride) {
    for (int t = 0; t < n_tok; t++)
        for (int k = 0; k < K; k++) {
            const int64_t a = atomic_load_explicit((_Atomic int64_t *)(acc + t * acc_stride + k), memory_order_relaxed);
            out[t * out_stride + k] = pk_f32_to_bf16(pk_fixed_to_bf16(a) + pk_bf16_to_f32(x[t * x_stride + k]));
        }
}
