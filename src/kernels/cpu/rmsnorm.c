// SPDX-License-Identifier: Apache-2.0
/* rmsnorm.c — PK_TASK_RMSNORM: out = bf16(bf16(x · scale) · w) per row, as HF's RMSNorm.
 *
 * x, out [rows, hidden] (row strides x_stride, out_stride), w [hidden]. The row's scale is
 * 1/sqrt(Σ x² / hidden + eps) with Σ an fp32 sum over k ascending, so the result is the same bits
 * on every run. pk_cpu_rms_scale is shared with rmsnorm_linear and attention's q/k norm.
 * Rows t >= n_tok are not touched.
 */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

float pk_cpu_rms_scale(const pk_bf16 *x, int n, float eps) {
    float s = 0.0f;
    for (int k = 0; k < n; k++) {
        float v = pk_bf16_to_f32(x[k]);
        s += v * v;
    }
    return 1.0f / sqrtf(s / (float)n + eps);
}

void pk_cpu_rmsnorm(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *w, int n_tok, int hidden,
                    float eps, pk_bf16 *out, int64_t out_stride) {
    for (int t = 0; t < n_tok; t++) {
        const pk_bf16 *xr = x + t * x_stride; /* [hidden] */
        pk_bf16 *o = out + t * out_stride; /* [hidden] */
        float scale = pk_cpu_rms_scale(xr, hidden, eps);
        for (int k = 0; k < hidden; k++) o[k] = pk_f32_to_bf16(pk_cpu_rmsnorm1(xr[k], scale, w[k]));
    }
}
