// SPDX-License-Identifier: Apache-2.0
/* linear_splitk.c — LINEAR_SPLITK_RESIDUAL on the CPU: a task's partial sums over its K block,
 * added to the layer's fp32 accumulator, and the last task's out = bf16(bf16(acc) + residual).
 *
 * The adds are compare-and-swap loops on the accumulator's 32-bit words: the layer's tasks run
 * on several threads at once, so the order of a column's additions is the order the tasks get
 * there (the sum may round differently from run to run; the partials themselves do not).
 */
#include <stdatomic.h>

#include "kernels/cpu/cpu_kernels.h"

enum {
    SPLITK_NR = 8,   /* weight rows per inner loop: independent sums in flight */
    SPLITK_KC = 512, /* k chunk of x converted to fp32 at a time */
};

static void add_f32(float *dst, float v) {
    _Atomic uint32_t *a = (_Atomic uint32_t *)(void *)dst;
    uint32_t old = atomic_load_explicit(a, memory_order_relaxed), upd;
    do {
        float f;
        memcpy(&f, &old, sizeof f);
        f += v;
        memcpy(&upd, &f, sizeof upd);
    } while (!atomic_compare_exchange_weak_explicit(a, &old, upd, memory_order_relaxed, memory_order_relaxed));
}

void pk_cpu_linear_splitk_add(const pk_bf16 *x, int64_t x_stride, int n_tok, int kc, const pk_bf16 *w,
                              int64_t w_stride, int N, float *acc, int64_t acc_stride) {
    float xs[SPLITK_KC]; /* one token's x block, converted once per chunk of k */
    for (int t = 0; t < n_tok; t++) {
        for (int n0 = 0; n0 < N; n0 += SPLITK_NR) {
            const int nr = N - n0 < SPLITK_NR ? N - n0 : SPLITK_NR;
            float sum[SPLITK_NR] = {0};
            for (int k0 = 0; k0 < kc; k0 += SPLITK_KC) {
                const int kn = kc - k0 < SPLITK_KC ? kc - k0 : SPLITK_KC;
                for (int k = 0; k < kn; k++) xs[k] = pk_bf16_to_f32(x[t * x_stride + k0 + k]);
                for (int r = 0; r < nr; r++) {
                    const pk_bf16 *wr = w + (int64_t)(n0 + r) * w_stride + k0;
                    float s = sum[r];
                    for (int k = 0; k < kn; k++) s += xs[k] * pk_bf16_to_f32(wr[k]);
                    sum[r] = s;
                }
            }
            for (int r = 0; r < nr; r++) add_f32(&acc[t * acc_stride + n0 + r], sum[r]);
        }
    }
}

void pk_cpu_linear_splitk_finish(int n_tok, int N, float *acc, int64_t acc_stride, const pk_bf16 *residual,
                                 int64_t res_stride, pk_bf16 *out, int64_t out_stride) {
    for (int t = 0; t < n_tok; t++)
        for (int n = 0; n < N; n++) {
            float *a = &acc[t * acc_stride + n];
            const float sum = pk_round_bf16(*a) + pk_bf16_to_f32(residual[t * res_stride + n]);
            out[t * out_stride + n] = pk_f32_to_bf16(sum);
            *a = 0.0f;
        }
}
