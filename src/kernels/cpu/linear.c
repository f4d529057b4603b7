// SPDX-License-Identifier: Apache-2.0
/* linear.c — y = xn · Wᵀ: tasks LINEAR, LINEAR_RESIDUAL, RMSNORM_LINEAR, SILU_MUL_LINEAR_RESIDUAL.
 *
 * A task computes output columns [n0, n0 + ncols) (weight rows) for rows t < n_tok. xn is the
 * GEMV's input row: x itself, rmsnorm(x) · norm_w, or silu(gate) · up (rounded to bf16 as in
 * cpu_kernels.h), built once per (token block, column block, k chunk) into a stack buffer.
 * Each output is one fp32 sum over k ascending from 0.0f, never split or reordered: blocking only
 * interleaves independent sums, so a result's bits do not depend on the tile or block it is in
 * (and no FMA contraction: see cpu_kernels.h). Stack use is fixed (~10 KiB).
 */
#include "kernels/cpu/cpu_kernels.h"

enum {
    LIN_TB = 4, /* tokens per block: the lanes of xs and acc */
    LIN_NR = 4, /* weight rows per inner loop: independent sums in flight */
    LIN_NR1 = 8, /* the same for a single token */
    LIN_KC = 256, /* k chunk of xs */
    LIN_NB = 256, /* output columns per block: acc's rows */
};

typedef enum xn_kind { XN_PLAIN, XN_RMSNORM, XN_SILU_MUL } xn_kind;

typedef struct linear_in {
    xn_kind kind;
    const pk_bf16 *x; /* [n_tok, K] (XN_SILU_MUL: [n_tok, 2K], gate then up), row stride x_stride */
    int64_t x_stride;
    int K;
    const pk_bf16 *norm_w; /* [K], XN_RMSNORM only */
    float eps;
} linear_in;

/* xs[k][l] = xn[t0 + l, k0 + k] for k < kc, l < nt; lanes l >= nt are 0. scale[l]: RMSNorm scale
 * of token t0 + l (XN_RMSNORM). */
static void load_xn(const linear_in *in, int t0, int nt, const float *scale, int k0, int kc,
                    float xs[][LIN_TB]) {
    for (int l = 0; l < LIN_TB; l++) {
        if (l >= nt) {
            for (int k = 0; k < kc; k++) xs[k][l] = 0.0f;
            continue;
        }
        const pk_bf16 *x = in->x + (t0 + l) * in->x_stride + k0; /* [kc] */
        switch (in->kind) {
        case XN_PLAIN:
            for (int k = 0; k < kc; k++) xs[k][l] = pk_bf16_to_f32(x[k]);
            break;
        case XN_RMSNORM:
            for (int k = 0; k < kc; k++)
                xs[k][l] = pk_cpu_rmsnorm1(x[k], scale[l], in->norm_w[k0 + k]);
            break;
        case XN_SILU_MUL:
            for (int k = 0; k < kc; k++)
                xs[k][l] = pk_cpu_silu_mul1(pk_bf16_to_f32(x[k]), pk_bf16_to_f32(x[in->K + k]));
            break;
        }
    }
}

/* One token (decode): acc[r][0] += xs[k][0] · w[r][k0 + k], k in order, for LIN_NR1 rows at once
 * (independent sums in flight instead of idle lanes). */
static void dot_rows_1tok(const float xs[][LIN_TB], int kc, const pk_bf16 *const *w, int k0,
                          float acc[][LIN_TB]) {
    const pk_bf16 *w0 = w[0] + k0, *w1 = w[1] + k0, *w2 = w[2] + k0, *w3 = w[3] + k0;
    const pk_bf16 *w4 = w[4] + k0, *w5 = w[5] + k0, *w6 = w[6] + k0, *w7 = w[7] + k0;
    float a0 = acc[0][0], a1 = acc[1][0], a2 = acc[2][0], a3 = acc[3][0];
    float a4 = acc[4][0], a5 = acc[5][0], a6 = acc[6][0], a7 = acc[7][0];
    for (int k = 0; k < kc; k++) {
        float x = xs[k][0];
        a0 += x * pk_bf16_to_f32(w0[k]);
        a1 += x * pk_bf16_to_f32(w1[k]);
        a2 += x * pk_bf16_to_f32(w2[k]);
        a3 += x * pk_bf16_to_f32(w3[k]);
        a4 += x * pk_bf16_to_f32(w4[k]);
        a5 += x * pk_bf16_to_f32(w5[k]);
        a6 += x * pk_bf16_to_f32(w6[k]);
        a7 += x * pk_bf16_to_f32(w7[k]);
    }
    acc[0][0] = a0;
    acc[1][0] = a1;
    acc[2][0] = a2;
    acc[3][0] = a3;
    acc[4][0] = a4;
    acc[5][0] = a5;
    acc[6][0] = a6;
    acc[7][0] = a7;
}

/* acc[r][l] += xs[k][l] · w[r][k0 + k] for k = 0 .. kc-1 in order, r < nr, every lane l. */
static void dot_rows(const float xs[][LIN_TB], int kc, const pk_bf16 *const *w, int nr, int k0,
                     float acc[][LIN_TB]) {
    if (nr == LIN_NR) {
        const pk_bf16 *w0 = w[0] + k0, *w1 = w[1] + k0, *w2 = w[2] + k0, *w3 = w[3] + k0;
        float a0[LIN_TB], a1[LIN_TB], a2[LIN_TB], a3[LIN_TB];
        for (int l = 0; l < LIN_TB; l++) {
            a0[l] = acc[0][l];
            a1[l] = acc[1][l];
            a2[l] = acc[2][l];
            a3[l] = acc[3][l];
        }
        for (int k = 0; k < kc; k++) {
            float b0 = pk_bf16_to_f32(w0[k]), b1 = pk_bf16_to_f32(w1[k]);
            float b2 = pk_bf16_to_f32(w2[k]), b3 = pk_bf16_to_f32(w3[k]);
            for (int l = 0; l < LIN_TB; l++) {
                a0[l] += xs[k][l] * b0;
                a1[l] += xs[k][l] * b1;
                a2[l] += xs[k][l] * b2;
                a3[l] += xs[k][l] * b3;
            }
        }
        for (int l = 0; l < LIN_TB; l++) {
            acc[0][l] = a0[l];
            acc[1][l] = a1[l];
            acc[2][l] = a2[l];
            acc[3][l] = a3[l];
        }
        return;
    }
    for (int r = 0; r < nr; r++) {
        const pk_bf16 *wr = w[r] + k0;
        float a[LIN_TB];
        for (int l = 0; l < LIN_TB; l++) a[l] = acc[r][l];
        for (int k = 0; k < kc; k++) {
            float b = pk_bf16_to_f32(wr[k]);
            for (int l = 0; l < LIN_TB; l++) a[l] += xs[k][l] * b;
        }
        for (int l = 0; l < LIN_TB; l++) acc[r][l] = a[l];
    }
}

/* The shared tile loop: token blocks of LIN_TB × column blocks of LIN_NB × k chunks of LIN_KC. */
static void linear_tile(const linear_in *in, int n_tok, const pk_rows *w, int n0, int ncols,
                        const pk_bf16 *residual, int64_t res_stride, pk_bf16 *out,
                        int64_t out_stride) {
    float xs[LIN_KC][LIN_TB];
    float acc[LIN_NB][LIN_TB];
    const pk_bf16 *wrow[LIN_NB]; /* rows n0 + j0 + j of W, each [K] */
    for (int t0 = 0; t0 < n_tok; t0 += LIN_TB) {
        int nt = n_tok - t0 < LIN_TB ? n_tok - t0 : LIN_TB;
        float scale[LIN_TB] = {0};
        if (in->kind == XN_RMSNORM)
            for (int l = 0; l < nt; l++)
                scale[l] = pk_cpu_rms_scale(in->x + (t0 + l) * in->x_stride, in->K, in->eps);
        for (int j0 = 0; j0 < ncols; j0 += LIN_NB) {
            int nj = ncols - j0 < LIN_NB ? ncols - j0 : LIN_NB;
            for (int j = 0; j < nj; j++) {
                wrow[j] = pk_rows_get(w, (uint32_t)(n0 + j0 + j));
                for (int l = 0; l < LIN_TB; l++) acc[j][l] = 0.0f;
            }
            for (int k0 = 0; k0 < in->K; k0 += LIN_KC) {
                int kc = in->K - k0 < LIN_KC ? in->K - k0 : LIN_KC;
                load_xn(in, t0, nt, scale, k0, kc, xs);
                int j = 0;
                if (nt == 1)
                    for (; j + LIN_NR1 <= nj; j += LIN_NR1)
                        dot_rows_1tok((const float(*)[LIN_TB])xs, kc, wrow + j, k0, acc + j);
                for (; j < nj; j += LIN_NR)
                    dot_rows((const float(*)[LIN_TB])xs, kc, wrow + j,
                             nj - j < LIN_NR ? nj - j : LIN_NR, k0, acc + j);
            }
            for (int l = 0; l < nt; l++) {
                pk_bf16 *o = out + (t0 + l) * out_stride + j0; /* [nj] */
                if (residual) {
                    const pk_bf16 *r = residual + (t0 + l) * res_stride + j0; /* [nj] */
                    for (int j = 0; j < nj; j++)
                        o[j] = pk_f32_to_bf16(pk_round_bf16(acc[j][l]) + pk_bf16_to_f32(r[j]));
                } else {
                    for (int j = 0; j < nj; j++) o[j] = pk_f32_to_bf16(acc[j][l]);
                }
            }
        }
    }
}

void pk_cpu_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K, const pk_rows *w, int n0,
                   int ncols, const pk_bf16 *residual, int64_t res_stride, pk_bf16 *out,
                   int64_t out_stride) {
    linear_in in = {XN_PLAIN, x, x_stride, K, NULL, 0.0f};
    linear_tile(&in, n_tok, w, n0, ncols, residual, res_stride, out, out_stride);
}

void pk_cpu_rmsnorm_linear(const pk_bf16 *x, int64_t x_stride, const pk_bf16 *norm_w, float eps,
                           int n_tok, int K, const pk_rows *w, int n0, int ncols, pk_bf16 *out,
                           int64_t out_stride) {
    linear_in in = {XN_RMSNORM, x, x_stride, K, norm_w, eps};
    linear_tile(&in, n_tok, w, n0, ncols, NULL, 0, out, out_stride);
}

void pk_cpu_silu_mul_linear(const pk_bf16 *x, int64_t x_stride, int n_tok, int K, const pk_rows *w,
                            int n0, int ncols, const pk_bf16 *residual, int64_t res_stride,
                            pk_bf16 *out, int64_t out_stride) {
    linear_in in = {XN_SILU_MUL, x, x_stride, K, NULL, 0.0f};
    linear_tile(&in, n_tok, w, n0, ncols, residual, res_stride, out, out_stride);
}
