// SPDX-License-Identifier: Apache-2.0
/* silu_mul.c — PK_TASK_SILU_MUL: the SwiGLU activation, out = bf16(bf16(silu(gate)) · up).
 *
 * x [rows, 2I]: gate in columns [0, I), up in [I, 2I); out [rows, ncols tile] holds columns
 * [i0, i0 + ncols) of the result. silu(g) = g / (1 + exp(-g)) in fp32, rounded to bf16 where torch
 * writes its bf16 tensor, then the product rounded again. Elementwise: no order to keep.
 * Rows t >= n_tok are not touched.
 */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

float pk_cpu_silu_mul1(float g, float u) {
    return pk_round_bf16(pk_round_bf16(g / (1.0f + expf(-g))) * u);
}

void pk_cpu_silu_mul(const pk_bf16 *x, int64_t x_stride, int n_tok, int I, int i0, int ncols,
                     pk_bf16 *out, int64_t out_stride) {
    for (int t = 0; t < n_tok; t++) {
        const pk_bf16 *gate = x + t * x_stride + i0; /* [ncols] */
        const pk_bf16 *up = gate + I; /* [ncols] */
        pk_bf16 *o = out + t * out_stride; /* [ncols] */
        for (int j = 0; j < ncols; j++)
            o[j] = pk_f32_to_bf16(pk_cpu_silu_mul1(pk_bf16_to_f32(gate[j]), pk_bf16_to_f32(up[j])));
    }
}

void pk_cpu_swiglu_blocks(const pk_bf16 *gu, int64_t gu_stride, int n_tok, int ncols, int block, pk_bf16 *out,
                          int64_t out_stride) {
    for (int t = 0; t < n_tok; t++)
        for (int b = 0; b < ncols / block; b++) {
            const pk_bf16 *gate = gu + t * gu_stride + 2 * (int64_t)b * block; /* [block] */
            const pk_bf16 *up = gate + block;                                    /* [block] */
            pk_bf16 *o = out + t * out_stride + (int64_t)b * block;            /* [block] */
            for (int j = 0; j < block; j++)
                o[j] = pk_f32_to_bf16(pk_cpu_silu_mul1(pk_bf16_to_f32(gate[j]), pk_bf16_to_f32(up[j])));
        }
}
