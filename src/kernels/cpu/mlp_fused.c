/* mlp_fused.c — the CPU side of RMSNORM_SWIGLU_DOWN's accumulator: down_proj's partial sums added
 * to the int64 fixed-point accumulator, and the sum its readers take as x (cpu_kernels.h).
 *
 * The adds are exact integer atomics: the tasks of a layer add concurrently in any order and the
 * sum is the same bits (unlike an fp32 accumulator, linear_splitk.c).
 */
#include <stdatomic.h>

#include "kernels/cpu/cpu_kernels.h"

enum { DOWN_NC = 64 }; /* output columns per pass: their partial sums stay in registers / L1 */

void pk_cpu_mlp_down_add(const pk_bf16 *act, int64_t act_stride, int n_tok, int ib, const pk_rows *w, uint32_t r0,
                         int N, int64_t *acc, int64_t acc_stride) {
    for (int t = 0; t < n_tok; t++) {
        for (int n0 = 0; n0 < N; n0 += DOWN_NC) {
            const int nc = N - n0 < DOWN_NC ? N - n0 : DOWN_NC;
            float sum[DOWN_NC] = {0};
            for (int j = 0; j < ib; j++) { /* j ascending: the fp32 order of every partial */
                const float a = pk_bf16_to_f32(act[t * act_stride + j]);
                const pk_bf16 *wr = pk_rows_get(w, r0 + (uint32_t)j) + n0;
                for (int c = 0; c < nc; c++) sum[c] += a * pk_bf16_to_f32(wr[c]);
            }
            for (int c = 0; c < nc; c++) {
                _Atomic int64_t *dst = (_Atomic int64_t *)(acc + t * acc_stride + n0 + c);
                atomic_fetch_add_explicit(dst, pk_fixed_from_f32(sum[c]), memory_order_relaxed);
            }
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
