// SPDX-License-Identifier: Apache-2.0
/* test_kernels.c — every CPU kernel (src/kernels/cpu) against a naive reference written here.
 *
 * Two references per arithmetic kernel: a plain fp32 one that follows cpu_kernels.h to the letter
 * (same rounding points, k ascending), which the kernel must match bit for bit, and an fp64 one
 * with the same bf16 rounding points, matched within abs 1e-2 + rel 1e-2. Outputs are poisoned
 * (0xFFFF) before each call: the tile must be fully written, everything else (other columns, rows
 * >= n_tok) left alone. Attention is checked over several steps of two requests against full
 * causal attention per request, with shuffled KV pages. Seeds are fixed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "pk.h"

#define POISON 0xFFFFu

static float bf(pk_bf16 h) { return pk_bf16_to_f32(h); }
static float rbf(float x) { return pk_round_bf16(x); }
static float rbfd(double x) { return pk_round_bf16((float)x); }

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* n random bf16 values in [-scale, scale). */
static pk_bf16 *rand_bf16(size_t n, float scale, uint64_t *seed) {
    pk_bf16 *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = pk_f32_to_bf16(scale * check_rand_f32(seed));
    return p;
}

static void poison(pk_bf16 *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = POISON;
}

/* ---- error statistics: the first mismatches, then max / mean error -------------------------- */

typedef struct errstat {
    char name[160];
    long n, bad;
    double max_err, sum_err;
} errstat;

static void err_init(errstat *e, const char *name) {
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
}

/* Tolerance compare (atol = rtol = 0 and got/want bf16 values: exact). */
static void err_add(errstat *e, int t, int j, double got, double want, double atol, double rtol) {
    double err = fabs(got - want);
    e->n++;
    if (!isnan(err)) {
        if (err > e->max_err) e->max_err = err;
        e->sum_err += err;
    }
    if (err <= atol + rtol * fabs(want)) return;
    if (e->bad++ < 5)
        fprintf(stderr, "  %s: [%d, %d] got %.6g want %.6g (err %.3g)\n", e->name, t, j, got, want,
                err);
}

/* Bit compare of two bf16 values. */
static void err_bits(errstat *e, int t, int j, pk_bf16 got, pk_bf16 want) {
    e->n++;
    double err = fabs((double)bf(got) - bf(want));
    if (!isnan(err)) {
        if (err > e->max_err) e->max_err = err;
        e->sum_err += err;
    }
    if (got == want) return;
    if (e->bad++ < 5)
        fprintf(stderr, "  %s: [%d, %d] got 0x%04x (%.6g) want 0x%04x (%.6g)\n", e->name, t, j, got,
                bf(got), want, bf(want));
}

static void err_report(const errstat *e) {
    CHECK(e->bad == 0, "%s: %ld of %ld mismatch, max err %.3g, mean err %.3g", e->name, e->bad,
          e->n, e->max_err, e->n ? e->sum_err / (double)e->n : 0.0);
}

/* out [rows, stride] was poisoned: rows < n_tok must be written exactly in columns [c0, c0 + nc),
 * everything else untouched. */
static void check_tile(const char *what, const pk_bf16 *out, int rows, int64_t stride, int n_tok,
                       int c0, int nc) {
    long unwritten = 0, stray = 0;
    for (int t = 0; t < rows; t++)
        for (int64_t c = 0; c < stride; c++) {
            int in_tile = t < n_tok && c >= c0 && c < c0 + nc;
            pk_bf16 v = out[t * stride + c];
            if (in_tile && v == POISON) unwritten++;
            if (!in_tile && v != POISON) stray++;
        }
    CHECK(unwritten == 0 && stray == 0, "%s: %ld tile elements unwritten, %ld written outside",
          what, unwritten, stray);
}

/* ---- pk_rows: fused weights ----------------------------------------------------------------- */

/* A weight of `groups` groups of nseg segments, each segment its own buffer with row stride
 * `stride` >= K, and the same weight materialised as a dense [rows, K] matrix. */
typedef struct fused_w {
    pk_rows w;
    pk_bf16 *seg[PK_FUSE_MAX];
    pk_bf16 *dense; /* [rows, K] */
    int rows, K;
} fused_w;

static fused_w fused_new(int nseg, const int *seg_rows, int groups, int K, int64_t stride,
                         uint64_t *seed) {
    fused_w f;
    memset(&f, 0, sizeof f);
    int group_rows = 0;
    for (int i = 0; i < nseg; i++) group_rows += seg_rows[i];
    f.rows = groups * group_rows;
    f.K = K;
    f.w.nseg = (uint32_t)nseg;
    f.w.row_stride = (uint64_t)stride;
    for (int i = 0; i < nseg; i++) {
        f.seg[i] = rand_bf16((size_t)groups * seg_rows[i] * stride, 1.0f, seed);
        f.w.seg[i] = f.seg[i];
        f.w.seg_rows[i] = (uint32_t)seg_rows[i];
    }
    f.dense = xmalloc((size_t)f.rows * K * sizeof *f.dense);
    int r = 0;
    for (int g = 0; g < groups; g++)
        for (int i = 0; i < nseg; i++)
            for (int o = 0; o < seg_rows[i]; o++, r++)
                memcpy(f.dense + (size_t)r * K, f.seg[i] + ((size_t)g * seg_rows[i] + o) * stride,
                       (size_t)K * sizeof *f.dense);
    return f;
}

static void fused_free(fused_w *f) {
    for (int i = 0; i < PK_FUSE_MAX; i++) free(f->seg[i]);
    free(f->dense);
}

/* The weight layouts the GEMV tests run on. */
static fused_w make_layout(int which, int K, uint64_t *seed) {
    static const int plain[1] = {300}, two[2] = {7, 4}, three[3] = {3, 5, 2},
                     rows4[4] = {2, 1, 3, 1};
    switch (which) {
    case 0: return fused_new(1, plain, 1, K, K + 3, seed); /* plain, 300 rows, padded stride */
    case 1: return fused_new(2, two, 3, K, K, seed); /* 33 rows */
    case 2: return fused_new(3, three, 30, K, K + 1, seed); /* 300 rows */
    default: return fused_new(4, rows4, 5, K, K, seed); /* 35 rows */
    }
}

static void test_rows(void) {
    uint64_t seed = 11;
    long bad = 0, n = 0;
    for (int which = 0; which < 4; which++) {
        fused_w f = make_layout(which, 9, &seed);
        for (int r = 0; r < f.rows; r++, n++)
            if (memcmp(pk_rows_get(&f.w, (uint32_t)r), f.dense + (size_t)r * f.K,
                       (size_t)f.K * sizeof *f.dense) != 0)
                bad++;
        fused_free(&f);
    }
    CHECK(bad == 0, "pk_rows_get: %ld of %ld rows differ from the materialised concatenation", bad,
          n);
    /* the pointer itself: group 1, segment 1, offset 2 of {3, 5} */
    pk_bf16 a[64], b[64];
    pk_rows w = {{a, b}, {3, 5}, 2, 4};
    CHECK(pk_rows_get(&w, 8 + 3 + 2) == b + (1 * 5 + 2) * 4, "pk_rows_get pointer arithmetic");
    CHECK(pk_rows_get(&w, 8 + 1) == a + (1 * 3 + 1) * 4, "pk_rows_get pointer arithmetic");
}

/* ---- embedding ------------------------------------------------------------------------------- */

static void test_embedding(void) {
    uint64_t seed = 21;
    static const int Hs[] = {1, 7, 80};
    for (int which = 1; which < 4; which++)
        for (size_t hi = 0; hi < sizeof Hs / sizeof *Hs; hi++) {
            int H = Hs[hi], T = 6;
            fused_w f = make_layout(which, H, &seed);
            int32_t tokens[6];
            for (int t = 0; t < T; t++)
                tokens[t] = (int32_t)(check_rand_u64(&seed) % (uint64_t)f.rows);
            tokens[0] = f.rows - 1;
            int tiles[3][2] = {{0, H}, {H / 3, H - H / 3}, {H - 1, 1}};
            for (int ti = 0; ti < 3; ti++)
                for (int n_tok = 1; n_tok <= 5; n_tok += 2) {
                    int c0 = tiles[ti][0], nc = tiles[ti][1];
                    int64_t stride = nc + 2;
                    pk_bf16 *out = xmalloc((size_t)T * stride * sizeof *out);
                    poison(out, (size_t)T * stride);
                    pk_cpu_embedding(tokens, n_tok, &f.w, c0, nc, out + 1, stride);
                    char name[160];
                    snprintf(name, sizeof name, "embedding layout %d H %d tile [%d, +%d) n_tok %d",
                             which, H, c0, nc, n_tok);
                    check_tile(name, out, T, stride, n_tok, 1, nc);
                    errstat e;
                    err_init(&e, name);
                    for (int t = 0; t < n_tok; t++)
                        for (int j = 0; j < nc; j++)
                            err_bits(&e, t, j, out[t * stride + 1 + j],
                                     f.dense[(size_t)tokens[t] * H + c0 + j]);
                    err_report(&e);
                    free(out);
                }
            fused_free(&f);
        }
}

/* ---- rmsnorm, silu_mul ---------------------------------------------------------------------- */

static const int Ks[] = {1, 7, 80, 200, 1003};
enum { NK = sizeof Ks / sizeof *Ks };

static void test_rmsnorm(void) {
    uint64_t seed = 31;
    const float eps = 1e-6f;
    for (int ki = 0; ki < NK; ki++)
        for (int n_tok = 1; n_tok <= 5; n_tok += 2) {
            int H = Ks[ki], T = 7;
            int64_t xs = H + 5, os = H + 3;
            pk_bf16 *x = rand_bf16((size_t)T * xs, 3.0f, &seed);
            pk_bf16 *w = rand_bf16((size_t)H, 2.0f, &seed);
            pk_bf16 *out = xmalloc((size_t)T * os * sizeof *out);
            pk_bf16 *out2 = xmalloc((size_t)T * os * sizeof *out);
            poison(out, (size_t)T * os);
            poison(out2, (size_t)T * os);
            pk_cpu_rmsnorm(x, xs, w, n_tok, H, eps, out, os);
            pk_cpu_rmsnorm(x, xs, w, n_tok, H, eps, out2, os);
            char name[160];
            snprintf(name, sizeof name, "rmsnorm H %d n_tok %d", H, n_tok);
            check_tile(name, out, T, os, n_tok, 0, H);
            CHECK(memcmp(out, out2, (size_t)T * os * sizeof *out) == 0, "%s: two runs differ",
                  name);
            errstat ex, e64;
            err_init(&ex, name);
            strcat(ex.name, " (fp32 exact)");
            err_init(&e64, name);
            strcat(e64.name, " (fp64)");
            for (int t = 0; t < n_tok; t++) {
                const pk_bf16 *xr = x + t * xs;
                float s = 0.0f;
                double s64 = 0.0;
                for (int k = 0; k < H; k++) {
                    s += bf(xr[k]) * bf(xr[k]);
                    s64 += (double)bf(xr[k]) * bf(xr[k]);
                }
                float r = 1.0f / sqrtf(s / (float)H + eps);
                double r64 = 1.0 / sqrt(s64 / H + eps);
                for (int k = 0; k < H; k++) {
                    float y = rbf(rbf(bf(xr[k]) * r) * bf(w[k]));
                    err_bits(&ex, t, k, out[t * os + k], pk_f32_to_bf16(y));
                    err_add(&e64, t, k, bf(out[t * os + k]), rbfd(rbfd(bf(xr[k]) * r64) * bf(w[k])),
                            1e-2, 1e-2);
                }
            }
            err_report(&ex);
            err_report(&e64);
            free(x);
            free(w);
            free(out);
            free(out2);
        }
}

static void test_silu_mul(void) {
    uint64_t seed = 41;
    for (int ki = 0; ki < NK; ki++)
        for (int n_tok = 1; n_tok <= 5; n_tok += 2) {
            int I = Ks[ki], T = 6;
            int tiles[3][2] = {{0, I}, {I / 3, I - I / 3}, {I - 1, 1}};
            int64_t xs = 2 * I + 3;
            pk_bf16 *x = rand_bf16((size_t)T * xs, 6.0f, &seed);
            for (int ti = 0; ti < 3; ti++) {
                int i0 = tiles[ti][0], nc = tiles[ti][1];
                int64_t os = nc + 4;
                pk_bf16 *out = xmalloc((size_t)T * os * sizeof *out);
                poison(out, (size_t)T * os);
                pk_cpu_silu_mul(x, xs, n_tok, I, i0, nc, out + 2, os);
                char name[160];
                snprintf(name, sizeof name, "silu_mul I %d tile [%d, +%d) n_tok %d", I, i0, nc,
                         n_tok);
                check_tile(name, out, T, os, n_tok, 2, nc);
                errstat ex, e64;
                err_init(&ex, name);
                strcat(ex.name, " (fp32 exact)");
                err_init(&e64, name);
                strcat(e64.name, " (fp64)");
                for (int t = 0; t < n_tok; t++)
                    for (int j = 0; j < nc; j++) {
                        float g = bf(x[t * xs + i0 + j]), u = bf(x[t * xs + I + i0 + j]);
                        pk_bf16 got = out[t * os + 2 + j];
                        err_bits(&ex, t, j, got,
                                 pk_f32_to_bf16(rbf(rbf(g / (1.0f + expf(-g))) * u)));
                        err_add(&e64, t, j, bf(got), rbfd(rbfd(g / (1.0 + exp(-(double)g))) * u),
                                1e-2, 1e-2);
                    }
                err_report(&ex);
                err_report(&e64);
                free(out);
            }
            free(x);
        }
}

/* pk_cpu_swiglu_blocks against pk_cpu_silu_mul of the same features laid out gate-then-up: the
 * same bits, only the column order differs. Blocks of 1, 3 and the whole tile. */
static void test_swiglu_blocks(void) {
    uint64_t seed = 43;
    const int T = 5, nc = 12, blocks[3] = {1, 3, nc};
    for (int bi = 0; bi < 3; bi++)
        for (int n_tok = 1; n_tok <= T; n_tok += 2) {
            const int block = blocks[bi];
            const int64_t gs = 2 * nc + 5, xs = 2 * nc, os = nc + 4;
            pk_bf16 *gu = rand_bf16((size_t)T * gs, 6.0f, &seed);
            pk_bf16 *x = xmalloc((size_t)T * xs * sizeof *x); /* [gate | up] of the same features */
            for (int t = 0; t < T; t++)
                for (int j = 0; j < nc; j++) {
                    const int64_t g = 2 * (j / block) * block + j % block;
                    x[t * xs + j] = gu[t * gs + g];
                    x[t * xs + nc + j] = gu[t * gs + g + block];
                }
            pk_bf16 *out = xmalloc((size_t)T * os * sizeof *out), *want = xmalloc((size_t)T * os * sizeof *want);
            poison(out, (size_t)T * os);
            pk_cpu_swiglu_blocks(gu, gs, n_tok, nc, block, out + 2, os);
            pk_cpu_silu_mul(x, xs, n_tok, nc, 0, nc, want, os);
            char name[96];
            snprintf(name, sizeof name, "swiglu_blocks block %d n_tok %d", block, n_tok);
            check_tile(name, out, T, os, n_tok, 2, nc);
            errstat ex;
            err_init(&ex, name);
            for (int t = 0; t < n_tok; t++)
                for (int j = 0; j < nc; j++) err_bits(&ex, t, j, out[t * os + 2 + j], want[t * os + j]);
            err_report(&ex);
            free(gu);
            free(x);
            free(out);
            free(want);
        }
}

/* ---- the GEMV family ------------------------------------------------------------------------ */

typedef enum lin_kind { LIN, LIN_RES, NORM_LIN, SILU_LIN, SILU_LIN_RES, LIN_KINDS } lin_kind;
static const char *const lin_names[] = {"linear", "linear_residual", "rmsnorm_linear",
                                        "silu_mul_linear", "silu_mul_linear_residual"};

/* xn of one row: fp32 as the header says (x32) and fp64 with the same bf16 roundings (x64). */
static void ref_xn(lin_kind kind, const pk_bf16 *x, const pk_bf16 *norm_w, float eps, int K,
                   float *x32, double *x64) {
    if (kind == NORM_LIN) {
        float s = 0.0f;
        double s64 = 0.0;
        for (int k = 0; k < K; k++) {
            s += bf(x[k]) * bf(x[k]);
            s64 += (double)bf(x[k]) * bf(x[k]);
        }
        float r = 1.0f / sqrtf(s / (float)K + eps);
        double r64 = 1.0 / sqrt(s64 / K + eps);
        for (int k = 0; k < K; k++) {
            x32[k] = rbf(rbf(bf(x[k]) * r) * bf(norm_w[k]));
            x64[k] = rbfd(rbfd(bf(x[k]) * r64) * bf(norm_w[k]));
        }
    } else if (kind == SILU_LIN || kind == SILU_LIN_RES) {
        for (int k = 0; k < K; k++) {
            float g = bf(x[k]), u = bf(x[K + k]);
            x32[k] = rbf(rbf(g / (1.0f + expf(-g))) * u);
            x64[k] = rbfd(rbfd(g / (1.0 + exp(-(double)g))) * u);
        }
    } else {
        for (int k = 0; k < K; k++) x32[k] = bf(x[k]), x64[k] = bf(x[k]);
    }
}

static void run_lin(lin_kind kind, const pk_bf16 *x, int64_t xs, const pk_bf16 *norm_w, float eps,
                    int n_tok, int K, const pk_rows *w, int n0, int nc, const pk_bf16 *res,
                    int64_t rs, pk_bf16 *out, int64_t os) {
    switch (kind) {
    case LIN: pk_cpu_linear(x, xs, n_tok, K, w, n0, nc, NULL, 0, out, os); break;
    case LIN_RES: pk_cpu_linear(x, xs, n_tok, K, w, n0, nc, res, rs, out, os); break;
    case NORM_LIN: pk_cpu_rmsnorm_linear(x, xs, norm_w, eps, n_tok, K, w, n0, nc, out, os); break;
    case SILU_LIN: pk_cpu_silu_mul_linear(x, xs, n_tok, K, w, n0, nc, NULL, 0, out, os); break;
    default: pk_cpu_silu_mul_linear(x, xs, n_tok, K, w, n0, nc, res, rs, out, os); break;
    }
}

static void test_linear(void) {
    uint64_t seed = 51;
    const float eps = 1e-5f;
    const int T = 7;
    for (int ki = 0; ki < NK; ki++) {
        int K = Ks[ki];
        for (int which = 0; which < 4; which++) {
            fused_w f = make_layout(which, K, &seed);
            int N = f.rows;
            int tiles[4][2] = {{0, N}, {N / 3, N / 3 + 1}, {N - 1, 1}, {5, N - 9}};
            int64_t xs = 2 * K + 5;
            pk_bf16 *x = rand_bf16((size_t)T * xs, 2.0f, &seed);
            pk_bf16 *norm_w = rand_bf16((size_t)K, 1.5f, &seed);
            float *x32 = xmalloc((size_t)K * sizeof *x32);
            double *x64 = xmalloc((size_t)K * sizeof *x64);
            for (int kind = 0; kind < LIN_KINDS; kind++)
                for (int ti = 0; ti < 4; ti++)
                    for (int n_tok = 1; n_tok <= 5; n_tok += 2) {
                        int n0 = tiles[ti][0], nc = tiles[ti][1];
                        int64_t os = nc + 3, rs = nc + 1;
                        pk_bf16 *res = rand_bf16((size_t)T * rs, 8.0f, &seed);
                        pk_bf16 *out = xmalloc((size_t)T * os * sizeof *out);
                        pk_bf16 *out2 = xmalloc((size_t)T * os * sizeof *out);
                        poison(out, (size_t)T * os);
                        poison(out2, (size_t)T * os);
                        run_lin((lin_kind)kind, x, xs, norm_w, eps, n_tok, K, &f.w, n0, nc, res, rs,
                                out + 1, os);
                        run_lin((lin_kind)kind, x, xs, norm_w, eps, n_tok, K, &f.w, n0, nc, res, rs,
                                out2 + 1, os);
                        char name[160];
                        snprintf(name, sizeof name, "%s K %d layout %d tile [%d, +%d) n_tok %d",
                                 lin_names[kind], K, which, n0, nc, n_tok);
                        check_tile(name, out, T, os, n_tok, 1, nc);
                        CHECK(memcmp(out, out2, (size_t)T * os * sizeof *out) == 0,
                              "%s: two runs differ", name);
                        errstat ex, e64;
                        err_init(&ex, name);
                        strcat(ex.name, " (fp32 exact)");
                        err_init(&e64, name);
                        strcat(e64.name, " (fp64)");
                        int has_res = kind == LIN_RES || kind == SILU_LIN_RES;
                        for (int t = 0; t < n_tok; t++) {
                            ref_xn((lin_kind)kind, x + t * xs, norm_w, eps, K, x32, x64);
                            for (int j = 0; j < nc; j++) {
                                const pk_bf16 *wr = f.dense + (size_t)(n0 + j) * K;
                                float a = 0.0f;
                                double a64 = 0.0;
                                for (int k = 0; k < K; k++) {
                                    a += x32[k] * bf(wr[k]);
                                    a64 += x64[k] * bf(wr[k]);
                                }
                                float r = has_res ? bf(res[t * rs + j]) : 0.0f;
                                float want = has_res ? rbf(rbf(a) + r) : rbf(a);
                                double want64 = has_res ? rbfd(rbfd(a64) + r) : rbfd(a64);
                                pk_bf16 got = out[t * os + 1 + j];
                                err_bits(&ex, t, j, got, pk_f32_to_bf16(want));
                                err_add(&e64, t, j, bf(got), want64, 1e-2, 1e-2);
                            }
                        }
                        err_report(&ex);
                        err_report(&e64);
                        free(res);
                        free(out);
                        free(out2);
                    }
            free(x);
            free(norm_w);
            free(x32);
            free(x64);
            fused_free(&f);
        }
    }
}

/* ---- RoPE frequencies --------------------------------------------------------------------- */

/* inv_freq by hand in fp64, from the fp32 exponent torch forms (arange(0, D, 2).float() / D). */
static void ref_inv_freq(double theta, int D, int llama3, double factor, double low, double high,
                         double old_len, double *inv) {
    for (int i = 0; i < D / 2; i++) {
        double e = (float)(2 * i) / (float)D;
        double f = 1.0 / pow(theta, e);
        if (llama3) {
            double wavelen = 2.0 * 3.14159265358979323846 / f;
            double low_wl = old_len / low, high_wl = old_len / high;
            if (wavelen > low_wl) {
                f = f / factor;
            } else if (wavelen >= high_wl) {
                double smooth = (old_len / wavelen - low) / (high - low);
                f = (1.0 - smooth) * f / factor + smooth * f;
            }
        }
        inv[i] = f;
    }
}

static pk_layer_params attn_params(int Hq, int Hkv, int D, float theta, int llama3, int qk_norm) {
    pk_layer_params p;
    memset(&p, 0, sizeof p);
    p.kind = PK_TASK_ATTENTION;
    p.grid = 1;
    p.num_q_heads = Hq;
    p.num_kv_heads = Hkv;
    p.head_dim = D;
    p.rope_theta = theta;
    p.rope_scaling = llama3 ? PK_ROPE_SCALING_LLAMA3 : PK_ROPE_SCALING_NONE;
    p.rope_factor = 8.0f;
    p.rope_low_freq_factor = 1.0f;
    p.rope_high_freq_factor = 4.0f;
    p.rope_original_max_position = 8192;
    p.qk_norm_eps = 1e-6f;
    p.has_qk_norm = qk_norm;
    return p;
}

static void test_rope_inv_freq(void) {
    static const struct {
        float theta;
        int D, llama3;
    } cases[] = {
        {10000.0f, 64, 0},    {10000.0f, 128, 0},  {10000.0f, 80, 0},
        {1000000.0f, 128, 0}, {1000000.0f, 80, 0}, {500000.0f, 128, 1},
        {500000.0f, 64, 1},   {500000.0f, 80, 1},  {500000.0f, 2, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int D = cases[c].D;
        pk_layer_params p = attn_params(1, 1, D, cases[c].theta, cases[c].llama3, 0);
        float inv[256];
        double ref[256];
        pk_rope_inv_freq(&p, inv);
        ref_inv_freq(cases[c].theta, D, cases[c].llama3, 8.0, 1.0, 4.0, 8192.0, ref);
        errstat e;
        char name[160];
        snprintf(name, sizeof name, "rope_inv_freq theta %g D %d llama3 %d", cases[c].theta, D,
                 cases[c].llama3);
        err_init(&e, name);
        for (int i = 0; i < D / 2; i++) err_add(&e, 0, i, inv[i], ref[i], 0.0, 1e-6);
        err_report(&e);
    }
    /* anchors: inv_freq[0] = 1; theta 10000, D 64, i 16: 10000^-0.5 = 0.01; llama3 at D 128:
     * i = 0 (wavelen 2π) unchanged, i = 63 (wavelen ≈ 2.3e6 > 8192) divided by 8 */
    float inv[64];
    pk_layer_params p = attn_params(1, 1, 64, 10000.0f, 0, 0);
    pk_rope_inv_freq(&p, inv);
    CHECK(inv[0] == 1.0f && fabs(inv[16] - 0.01) < 1e-9, "rope anchors: %g %g", inv[0], inv[16]);
    p = attn_params(1, 1, 128, 500000.0f, 1, 0);
    pk_rope_inv_freq(&p, inv);
    double plain63 = 1.0 / pow(500000.0, 126.0 / 128.0);
    CHECK(inv[0] == 1.0f && fabs(inv[63] - plain63 / 8) < 1e-6 * plain63 / 8,
          "llama3 anchors: %g %g", inv[0], inv[63]);
}

/* ---- attention ------------------------------------------------------------------------------- */

/* The reference's per-head q / k: RMSNorm (if w) and RoPE exactly as cpu_kernels.h says, fp32. */
static void ref_head(const pk_bf16 *x, const pk_bf16 *w, float eps, const float *inv, int D,
                     int pos, float *y) {
    float xn[512];
    for (int i = 0; i < D; i++) xn[i] = bf(x[i]);
    if (w) {
        float s = 0.0f;
        for (int i = 0; i < D; i++) s += xn[i] * xn[i];
        float r = 1.0f / sqrtf(s / (float)D + eps);
        for (int i = 0; i < D; i++) xn[i] = rbf(rbf(xn[i] * r) * bf(w[i]));
    }
    int h = D / 2;
    for (int i = 0; i < D; i++) {
        float a = (float)pos * inv[i % h];
        float c = rbf(cosf(a)), s = rbf(sinf(a));
        float rot = i < h ? -xn[i + h] : xn[i - h]; /* rotate_half */
        y[i] = rbf(rbf(xn[i] * c) + rbf(rot * s));
    }
}

typedef struct att_row {
    int req, pos;
} att_row;

static void test_attention_case(int D, int G, int Hkv, int qk_norm, int llama3, uint64_t seed) {
    enum { PAGE = 8, PPR = 6, MAXREQ = 3, NPAGES = 20, NSTEP = 3, T = 40 };
    const int Hq = G * Hkv;
    const int64_t cols = (int64_t)Hkv * (G + 2) * D, ocols = (int64_t)Hq * D;
    const int req_slot[2] = {2, 0}, req_len[2] = {37, 7}; /* requests A (slot 2) and B (slot 0) */
    pk_layer_params p = attn_params(Hq, Hkv, D, llama3 ? 500000.0f : 1000000.0f, llama3, qk_norm);
    float inv[256];
    pk_rope_inv_freq(&p, inv);

    /* shuffled pages; slot 1 is unused, its pages never touched */
    int32_t pages[NPAGES], page_table[MAXREQ * PPR];
    for (int i = 0; i < NPAGES; i++) pages[i] = i;
    for (int i = NPAGES - 1; i > 0; i--) {
        int j = (int)(check_rand_u64(&seed) % (uint64_t)(i + 1));
        int32_t tmp = pages[i];
        pages[i] = pages[j];
        pages[j] = tmp;
    }
    for (int i = 0; i < MAXREQ * PPR; i++) page_table[i] = pages[i];

    /* every request's qkv rows for all its positions; q/k larger when not normalised */
    pk_bf16 *seq[2];
    for (int r = 0; r < 2; r++)
        seq[r] = rand_bf16((size_t)req_len[r] * cols, qk_norm ? 1.0f : 3.0f, &seed);
    pk_bf16 *q_norm = qk_norm ? rand_bf16((size_t)D, 1.0f, &seed) : NULL;
    pk_bf16 *k_norm = qk_norm ? rand_bf16((size_t)D, 1.0f, &seed) : NULL;
    if (qk_norm)
        for (int i = 0; i < D; i++) { /* weights in [0.5, 1.5) */
            q_norm[i] = pk_f32_to_bf16(1.0f + 0.5f * bf(q_norm[i]));
            k_norm[i] = pk_f32_to_bf16(1.0f + 0.5f * bf(k_norm[i]));
        }

    /* steps: A prefills 0..29 with B 0..4; then B decodes 5 beside A's chunk 30..35; then both
     * decode (A 36, B 6) */
    att_row steps[NSTEP][T];
    int n_rows[NSTEP] = {0, 0, 0};
    for (int i = 0; i < 30; i++) steps[0][n_rows[0]++] = (att_row){0, i};
    for (int i = 0; i < 5; i++) steps[0][n_rows[0]++] = (att_row){1, i};
    steps[1][n_rows[1]++] = (att_row){1, 5};
    for (int i = 30; i < 36; i++) steps[1][n_rows[1]++] = (att_row){0, i};
    steps[2][n_rows[2]++] = (att_row){0, 36};
    steps[2][n_rows[2]++] = (att_row){1, 6};

    size_t cache_n = (size_t)NPAGES * PAGE * Hkv * D;
    pk_bf16 *kc[3], *vc[3];
    for (int c = 0; c < 3; c++) {
        kc[c] = xmalloc(cache_n * sizeof **kc);
        vc[c] = xmalloc(cache_n * sizeof **vc);
        poison(kc[c], cache_n);
        poison(vc[c], cache_n);
    }
    pk_bf16 *qkv = xmalloc((size_t)T * cols * sizeof *qkv);
    pk_bf16 *out[3];
    for (int c = 0; c < 3; c++) out[c] = xmalloc((size_t)T * ocols * sizeof **out);
    /* run 2: split over the KV length (2 or 3 splits: the second block starts at position 32, so
     * a split may be empty for a row, and step 1's chunk 30 .. 35 crosses into it) */
    const int nsplit = 2 + (D + G) % 2;
    const int64_t pstride = (int64_t)nsplit * Hq * (D + 2);
    float *part = xmalloc((size_t)T * pstride * sizeof *part);
    float *kref = xmalloc((size_t)2 * 40 * Hkv * D * sizeof *kref); /* [req][pos][g][D] */
    float *qref = xmalloc((size_t)D * sizeof *qref);
    double *score = xmalloc(40 * sizeof *score);

    for (int r = 0; r < 2; r++)
        for (int pos = 0; pos < req_len[r]; pos++)
            for (int g = 0; g < Hkv; g++)
                ref_head(seq[r] + pos * cols + (int64_t)g * (G + 2) * D + (int64_t)G * D, k_norm,
                         p.qk_norm_eps, inv, D, pos, kref + (((size_t)r * 40 + pos) * Hkv + g) * D);

    char name[160];
    snprintf(name, sizeof name, "attention D %d G %d Hkv %d qk_norm %d llama3 %d", D, G, Hkv,
             qk_norm, llama3);
    errstat eo, es;
    err_init(&eo, name);
    char sname[160];
    snprintf(sname, sizeof sname, "attention D %d G %d Hkv %d qk_norm %d llama3 %d, %d KV splits", D, G, Hkv,
             qk_norm, llama3, nsplit);
    err_init(&es, sname);
    long differ = 0, cache_differ = 0;
    for (int st = 0; st < NSTEP; st++) {
        int n_tok = n_rows[st];
        int32_t token_pos[T], token_req[T];
        for (int t = 0; t < T; t++) {
            att_row row = steps[st][t < n_tok ? t : 0];
            token_pos[t] = row.pos;
            token_req[t] = req_slot[row.req];
            memcpy(qkv + t * cols, seq[row.req] + row.pos * cols, (size_t)cols * sizeof *qkv);
        }
        pk_attn_step s = {n_tok, token_pos, token_req, page_table, PPR, PAGE};
        /* run 0: two tasks (heads {0}, {1 .. Hkv-1}); run 1: one task per KV head */
        for (int c = 0; c < 2; c++) {
            poison(out[c], (size_t)T * ocols);
            if (c == 0) {
                pk_cpu_attention(&p, &s, 0, 1, qkv, cols, kc[c], vc[c], q_norm, k_norm, out[c],
                                 ocols);
                pk_cpu_attention(&p, &s, 1, Hkv - 1, qkv, cols, kc[c], vc[c], q_norm, k_norm,
                                 out[c], ocols);
            } else {
                for (int g = Hkv - 1; g >= 0; g--)
                    pk_cpu_attention(&p, &s, g, 1, qkv, cols, kc[c], vc[c], q_norm, k_norm, out[c],
                                     ocols);
            }
        }
        check_tile(name, out[0], T, ocols, n_tok, 0, (int)ocols);
        if (memcmp(out[0], out[1], (size_t)T * ocols * sizeof **out) != 0) differ++;

        /* run 2: the splits in reverse order (each writes only its own rows), then the combine */
        poison(out[2], (size_t)T * ocols);
        for (int sp = nsplit - 1; sp >= 0; sp--)
            pk_cpu_attention_partial(&p, &s, 0, Hkv, sp, nsplit, qkv, cols, kc[2], vc[2], q_norm, k_norm,
                                     part + (int64_t)sp * Hq * (D + 2), pstride);
        pk_cpu_attention_combine(n_tok, Hq, D, nsplit, part, pstride, out[2], ocols);
        check_tile(sname, out[2], T, ocols, n_tok, 0, (int)ocols);
        for (int t = 0; t < n_tok; t++)
            for (int i = 0; i < ocols; i++)
                err_add(&es, t, i, bf(out[2][t * ocols + i]), bf(out[0][t * ocols + i]), 2e-2, 2e-2);
        cache_differ += memcmp(kc[2], kc[0], cache_n * sizeof **kc) != 0 ||
                        memcmp(vc[2], vc[0], cache_n * sizeof **vc) != 0;

        for (int t = 0; t < n_tok; t++) {
            int r = steps[st][t].req, pos = steps[st][t].pos;
            for (int h = 0; h < Hq; h++) {
                int g = h / G;
                ref_head(seq[r] + pos * cols + (int64_t)g * (G + 2) * D + (int64_t)(h % G) * D,
                         q_norm, p.qk_norm_eps, inv, D, pos, qref);
                double m = -INFINITY, sum = 0.0;
                for (int j = 0; j <= pos; j++) {
                    const float *kj = kref + (((size_t)r * 40 + j) * Hkv + g) * D;
                    double sc = 0.0;
                    for (int i = 0; i < D; i++) sc += (double)qref[i] * kj[i];
                    score[j] = sc / sqrt((double)D);
                    if (score[j] > m) m = score[j];
                }
                for (int j = 0; j <= pos; j++) sum += (score[j] = exp(score[j] - m));
                for (int i = 0; i < D; i++) {
                    double o = 0.0;
                    for (int j = 0; j <= pos; j++)
                        o += score[j] / sum *
                             bf(seq[r][j * cols + (int64_t)g * (G + 2) * D + (int64_t)(G + 1) * D +
                                       i]);
                    err_add(&eo, t, h * D + i, bf(out[0][t * ocols + h * D + i]), o, 1e-2, 1e-2);
                }
            }
        }
    }
    err_report(&eo);
    err_report(&es);
    CHECK(cache_differ == 0, "%s: the splits' cache writes differ from the unsplit kernel's", sname);
    CHECK(differ == 0 && memcmp(kc[0], kc[1], cache_n * sizeof **kc) == 0 &&
              memcmp(vc[0], vc[1], cache_n * sizeof **vc) == 0,
          "%s: results depend on how KV heads are split into tasks", name);

    /* the cache: every (request, position) slot holds the reference K (bit-exact) and the raw V;
     * every other slot is still poison */
    errstat ek, ev;
    err_init(&ek, name);
    strcat(ek.name, " K cache");
    err_init(&ev, name);
    strcat(ev.name, " V cache");
    char *used = calloc((size_t)NPAGES * PAGE, 1);
    for (int r = 0; r < 2; r++)
        for (int pos = 0; pos < req_len[r]; pos++) {
            int page = page_table[req_slot[r] * PPR + pos / PAGE], slot = pos % PAGE;
            used[page * PAGE + slot] = 1;
            for (int g = 0; g < Hkv; g++) {
                size_t off = (((size_t)page * PAGE + slot) * Hkv + g) * D;
                const float *kr = kref + (((size_t)r * 40 + pos) * Hkv + g) * D;
                const pk_bf16 *v =
                    seq[r] + pos * cols + (int64_t)g * (G + 2) * D + (int64_t)(G + 1) * D;
                for (int i = 0; i < D; i++) {
                    err_bits(&ek, pos, g * D + i, kc[0][off + i], pk_f32_to_bf16(kr[i]));
                    err_bits(&ev, pos, g * D + i, vc[0][off + i], v[i]);
                }
            }
        }
    err_report(&ek);
    err_report(&ev);
    long stray = 0;
    for (int ps = 0; ps < NPAGES * PAGE; ps++)
        if (!used[ps])
            for (size_t i = 0; i < (size_t)Hkv * D; i++)
                stray += (kc[0][(size_t)ps * Hkv * D + i] != POISON) +
                         (vc[0][(size_t)ps * Hkv * D + i] != POISON);
    CHECK(stray == 0, "%s: %ld cache elements written outside the requests' slots", name, stray);

    free(used);
    for (int r = 0; r < 2; r++) free(seq[r]);
    free(part);
    for (int c = 0; c < 3; c++) {
        free(kc[c]);
        free(vc[c]);
        free(out[c]);
    }
    free(q_norm);
    free(k_norm);
    free(qkv);
    free(kref);
    free(qref);
    free(score);
}

/* Rows the page table cannot hold get zeros and write no cache; a head_dim above the stack limit
 * writes nothing. */
static void test_attention_edges(void) {
    enum { D = 64, PAGE = 4, PPR = 2 };
    uint64_t seed = 71;
    pk_layer_params p = attn_params(2, 1, D, 10000.0f, 0, 0);
    int64_t cols = 4 * D, ocols = 2 * D;
    pk_bf16 *qkv = rand_bf16(2 * (size_t)cols, 1.0f, &seed);
    pk_bf16 kc[2 * PAGE * D], vc[2 * PAGE * D], out[2 * 2 * D];
    int32_t page_table[2 * PPR] = {1, 0, -1, -1};
    int32_t pos[2] = {0, 8}, req[2] = {0, 0}; /* row 1: position 8 is past 2 pages of 4 */
    pk_attn_step s = {2, pos, req, page_table, PPR, PAGE};
    poison(kc, sizeof kc / sizeof *kc);
    poison(vc, sizeof vc / sizeof *vc);
    poison(out, sizeof out / sizeof *out);
    pk_cpu_attention(&p, &s, 0, 1, qkv, cols, kc, vc, NULL, NULL, out, ocols);
    long zeros = 0, written = 0;
    for (int i = 0; i < 2 * D; i++) zeros += out[ocols + i] == 0;
    for (int i = 0; i < 2 * PAGE * D; i++) written += (kc[i] != POISON) + (vc[i] != POISON);
    CHECK(zeros == 2 * D, "attention: out-of-table row: %ld of %d outputs zero", zeros, 2 * D);
    CHECK(written == 2 * D, "attention: %ld cache elements written, want %d (row 0 only)", written,
          2 * D);
    check_tile("attention edges", out, 2, ocols, 2, 0, (int)ocols);
    /* request 1 has no pages */
    req[0] = 1;
    req[1] = 1;
    pos[1] = 1;
    poison(out, sizeof out / sizeof *out);
    pk_cpu_attention(&p, &s, 0, 1, qkv, cols, kc, vc, NULL, NULL, out, ocols);
    zeros = 0;
    for (int i = 0; i < 2 * 2 * D; i++) zeros += out[i] == 0;
    CHECK(zeros == 4 * D, "attention: unmapped pages: %ld of %d outputs zero", zeros, 4 * D);

    pk_layer_params big = attn_params(1, 1, 514, 10000.0f, 0, 0);
    pk_bf16 *bq = rand_bf16(3 * 514, 1.0f, &seed), *bk = xmalloc(PAGE * 2 * 514 * sizeof *bk);
    pk_bf16 *bo = xmalloc(514 * sizeof *bo);
    poison(bk, PAGE * 2 * 514);
    poison(bo, 514);
    req[0] = 0;
    pos[0] = 0;
    s.n_tok = 1;
    pk_cpu_attention(&big, &s, 0, 1, bq, 3 * 514, bk, bk + PAGE * 514, NULL, NULL, bo, 514);
    check_tile("attention head_dim 514 (over the limit)", bo, 1, 514, 0, 0, 0);
    free(bq);
    free(bk);
    free(bo);
    free(qkv);
}

static void test_attention(void) {
    static const int Ds[] = {64, 128, 80};
    uint64_t seed = 61;
    for (size_t di = 0; di < sizeof Ds / sizeof *Ds; di++)
        for (int G = 2; G <= 3; G++)
            for (int qk_norm = 0; qk_norm <= 1; qk_norm++)
                for (int llama3 = 0; llama3 <= 1; llama3++)
                    test_attention_case(Ds[di], G, G == 2 ? 3 : 2, qk_norm, llama3,
                                        check_rand_u64(&seed));
    test_attention_edges();
}

/* ---- argmax ---------------------------------------------------------------------------------- */

static void test_argmax(void) {
    uint64_t seed = 81;
    static const int Vs[] = {1, 7, 1003, 5000};
    static const int grids[] = {1, 2, 3, 7};
    const int T = 8, n_tok = 6;
    for (size_t vi = 0; vi < sizeof Vs / sizeof *Vs; vi++)
        for (size_t gi = 0; gi < sizeof grids / sizeof *grids; gi++) {
            int V = Vs[vi], grid = grids[gi];
            if (grid > V) continue;
            int64_t ls = V + 2;
            pk_bf16 *logits = rand_bf16((size_t)T * ls, 4.0f, &seed);
            /* row 1: the max planted twice, across the part boundary; row 2: all -inf;
             * row 3: all equal; row 4: a NaN after a large value; row 5 random */
            pk_bf16 big = pk_f32_to_bf16(100.0f);
            logits[1 * ls + V - 1] = big;
            logits[1 * ls + V / 2] = big;
            for (int v = 0; v < V; v++) logits[2 * ls + v] = pk_f32_to_bf16(-INFINITY);
            for (int v = 0; v < V; v++) logits[3 * ls + v] = pk_f32_to_bf16(0.5f);
            logits[4 * ls + 0] = big;
            logits[4 * ls + V - 1] = 0x7fc0;
            float *val = xmalloc((size_t)T * grid * sizeof *val);
            int32_t *idx = xmalloc((size_t)T * grid * sizeof *idx);
            int32_t outv[8];
            for (int i = 0; i < T * grid; i++) {
                idx[i] = 0x7eadbeef;
                val[i] = 12345.0f;
            }
            for (int t = 0; t < T; t++) outv[t] = 0x7eadbeef;
            for (int part = 0; part < grid; part++) {
                int v0 = (int)((int64_t)V * part / grid),
                    v1 = (int)((int64_t)V * (part + 1) / grid);
                pk_cpu_argmax_partial(logits + v0, ls, n_tok, v0, v1 - v0, val + part, idx + part,
                                      grid);
            }
            pk_cpu_argmax_reduce(val, idx, grid, n_tok, grid, outv);
            long bad = 0, stray = 0;
            for (int t = 0; t < T; t++) {
                for (int part = 0; part < grid; part++)
                    stray += (t >= n_tok) != (idx[t * grid + part] == 0x7eadbeef);
                stray += (t >= n_tok) != (outv[t] == 0x7eadbeef);
                if (t >= n_tok) continue;
                int best = 0;
                for (int v = 1; v < V; v++) {
                    float a = bf(logits[t * ls + v]), b = bf(logits[t * ls + best]);
                    if (!isnan(b) && (isnan(a) || a > b)) best = v;
                }
                if (outv[t] != best) {
                    if (bad++ < 5)
                        fprintf(stderr, "  argmax V %d grid %d row %d: got %d want %d\n", V, grid,
                                t, outv[t], best);
                }
            }
            CHECK(bad == 0 && stray == 0,
                  "argmax V %d grid %d: %ld rows wrong, %ld coverage errors", V, grid, bad, stray);
            if (V > 2)
                CHECK(outv[1] == V / 2 && outv[2] == 0 && outv[3] == 0 && outv[4] == V - 1,
                      "argmax V %d grid %d: planted rows give %d %d %d %d", V, grid, outv[1],
                      outv[2], outv[3], outv[4]);
            free(logits);
            free(val);
            free(idx);
        }
}

/* The fused MLP's fixed point (cpu_kernels.h): exact scaling, round to nearest even, the clamp, and
 * down's partial sums: adding the tasks' partials in any order gives the same accumulator, whose
 * value is the fp32 sum of the partials to within 2^-32 each. */
static void test_fixed_point(void) {
    CHECK(pk_fixed_from_f32(1.0f) == (int64_t)1 << 32 && pk_fixed_from_f32(-0.5f) == -((int64_t)1 << 31),
          "fixed(1) = 2^32, fixed(-0.5) = -2^31");
    CHECK(pk_fixed_from_f32(0x1p-33f) == 0 && pk_fixed_from_f32(0x1.8p-32f) == 2 && pk_fixed_from_f32(0x1p-32f) == 1,
          "fixed rounds to nearest even (2^-33 -> 0, 1.5 · 2^-32 -> 2)");
    CHECK(pk_fixed_from_f32(1e30f) == (int64_t)1 << 55 && pk_fixed_from_f32(-INFINITY) == -((int64_t)1 << 55) &&
              pk_fixed_from_f32(NAN) == -((int64_t)1 << 55),
          "fixed clamps to +-2^23 (NaN to -2^23)");
    CHECK(pk_fixed_to_bf16((int64_t)3 << 32) == 3.0f && pk_fixed_to_bf16(-((int64_t)1 << 30)) == -0.25f,
          "fixed back to bf16");
    uint64_t seed = 47;
    enum { NT = 2, IB = 7, NTASK = 5, N = 24, ACS = N + 2 };
    const int64_t as = IB + 3, ws = N + 8, acs = ACS;
    pk_bf16 *act = rand_bf16((size_t)NT * as * NTASK, 2.0f, &seed);
    pk_bf16 *wt = rand_bf16((size_t)IB * NTASK * ws, 0.5f, &seed); /* column blocks: task i's [N][IB] at i · N · IB */
    int64_t acc[2][NT * ACS];
    memset(acc, 0, sizeof acc);
    for (int order = 0; order < 2; order++)
        for (int i = 0; i < NTASK; i++) {
            const int task = order ? NTASK - 1 - i : i;
            pk_cpu_mlp_down_add(act + task * NT * as, as, NT, IB, wt + (int64_t)task * N * IB, N, acc[order], acs);
        }
    CHECK(memcmp(acc[0], acc[1], sizeof acc[0]) == 0, "mlp_down_add: the same sum in either order of the tasks");
    double worst = 0;
    for (int t = 0; t < NT; t++)
        for (int n = 0; n < N; n++) {
            double want = 0;
            for (int task = 0; task < NTASK; task++)
                for (int j = 0; j < IB; j++)
                    want += (double)pk_bf16_to_f32(act[task * NT * as + t * as + j]) *
                            pk_bf16_to_f32(wt[((int64_t)task * N + n) * IB + j]);
            const double got = (double)acc[0][t * acs + n] / 0x1p32, e = fabs(got - want) / (fabs(want) + 1e-3);
            if (e > worst) worst = e;
        }
    CHECK(worst < 1e-5, "mlp_down_add: the partials' sum within fp32 rounding of the exact one (%g)", worst);
    /* acc_sum: bf16(bf16(acc) + x) */
    pk_bf16 x[2] = {pk_f32_to_bf16(1.0f), pk_f32_to_bf16(-2.0f)}, out[2];
    const int64_t a2[2] = {(int64_t)1 << 31, (int64_t)3 << 32};
    pk_cpu_acc_sum(x, 1, a2, 1, 2, 1, out, 1);
    CHECK(pk_bf16_to_f32(out[0]) == 1.5f && pk_bf16_to_f32(out[1]) == 1.0f, "acc_sum: 0.5 + 1 and 3 - 2 (%g, %g)",
          pk_bf16_to_f32(out[0]), pk_bf16_to_f32(out[1]));
    free(act);
    free(wt);
}

int main(void) {
    test_fixed_point();
    test_rows();
    test_embedding();
    test_rmsnorm();
    test_silu_mul();
    test_swiglu_blocks();
    test_linear();
    test_rope_inv_freq();
    test_attention();
    test_argmax();
    return check_report("kernels");
}
