// SPDX-License-Identifier: Apache-2.0
/* argmax.c — PK_TASK_ARGMAX_PARTIAL and PK_TASK_ARGMAX_REDUCE: greedy sampling over [T, V] logits.
 *
 * A partial task scans its vocabulary tile [v0, v0 + nv) of each row and writes the best fp32
 * value and its global index; the reduce task picks the best of the `grid` partials per row.
 * Ties keep the smallest index (partials are ordered by v0, so "first partial" is the same rule).
 * NaN counts as larger than any number, as torch.argmax does; the first NaN wins.
 */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

/* Whether v replaces the current best b (strictly larger; NaN beats any number). */
static int beats(float v, float b) { return v > b || (isnan(v) && !isnan(b)); }

void pk_cpu_argmax_partial(const pk_bf16 *logits, int64_t stride, int n_tok, int v0, int nv,
                           float *val, int32_t *idx, int64_t part_stride) {
    for (int t = 0; t < n_tok; t++) {
        const pk_bf16 *row = logits + t * stride; /* [nv] */
        float best = -INFINITY;
        int32_t bi = v0;
        for (int j = 0; j < nv; j++) {
            float v = pk_bf16_to_f32(row[j]);
            if (beats(v, best)) {
                best = v;
                bi = v0 + j;
            }
        }
        val[t * part_stride] = best;
        idx[t * part_stride] = bi;
    }
}

void pk_cpu_argmax_reduce(const float *val, const int32_t *idx, int64_t part_stride, int n_tok,
                          int nparts, int32_t *out) {
    for (int t = 0; t < n_tok; t++) {
        const float *v = val + t * part_stride; /* [nparts] */
        const int32_t *ix = idx + t * part_stride; /* [nparts] */
        float best = -INFINITY;
        int32_t bi = -1; /* stays -1 only when nparts < 1 */
        for (int p = 0; p < nparts; p++) {
            if (p == 0 || beats(v[p], best)) {
                best = v[p];
                bi = ix[p];
            }
        }
        out[t] = bi;
    }
}
