// SPDX-License-Identifier: Apache-2.0
/* test_sample.c — sampling's arithmetic and rule (src/kernels/sample.h) and the CPU's row sampler
 * (pk_cpu_sample_row):
 *   - Philox4x32-10 against the Random123 known-answer vectors; the portable log and exp against
 *     libm; the float order keys;
 *   - draw frequencies against softmax(logits / T) restricted by top-k, top-p, min-p and their
 *     mix: a chi-square test over 20,000 draws (5,000 in the sanitizer builds) with a fixed seed;
 *   - top-k's ties keep the lower indices; NaN and infinite logits are never drawn, and a row of
 *     nothing else keeps its argmax; a vocabulary of 151,936 draws only kept tokens;
 *   - the same (seed, position) draws the same token, other seeds other tokens.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "common/bf16.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/sample.h"

static void philox_vectors(void) {
    static const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                                       {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                       {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
    static const uint32_t key[3][2] = {{0, 0}, {0xffffffffu, 0xffffffffu}, {0xa4093822u, 0x299f31d0u}};
    static const uint32_t want[3][4] = {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
                                        {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
                                        {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
    for (int v = 0; v < 3; v++) {
        uint32_t x[4] = {ctr[v][0], ctr[v][1], ctr[v][2], ctr[v][3]};
        pk_philox4x32_10(x, key[v][0], key[v][1]);
        CHECK(!memcmp(x, want[v], sizeof x), "philox vector %d: %08x %08x %08x %08x", v, x[0], x[1], x[2], x[3]);
    }
}

static void log_exp_accuracy(void) {
    double worst_log = 0, worst_exp = 0;
    uint64_t seed = 3;
    for (int i = 0; i < 200000; i++) {
        /* log: over (0, 1) as the uniforms, and (0, 20] as -log of them */
        float x = i % 2 ? (float)(check_rand_u64(&seed) >> 40) * 5.9604644775390625e-8f + 2.98e-8f
                        : 20.0f * (float)((check_rand_u64(&seed) >> 40) + 1) * 5.9604644775390625e-8f;
        double e = fabs(pk_sample_log(x) - log((double)x)) / fmax(fabs(log((double)x)), 1e-3);
        if (e > worst_log) worst_log = e;
        float y = -87.0f * (float)(check_rand_u64(&seed) >> 40) * 5.9604644775390625e-8f;
        double f = fabs(pk_sample_exp(y) - exp((double)y)) / exp((double)y);
        if (f > worst_exp) worst_exp = f;
    }
    CHECK(worst_log < 1e-6, "pk_sample_log: worst relative error %g", worst_log);
    CHECK(worst_exp < 1e-6, "pk_sample_exp: worst relative error %g", worst_exp);
    CHECK(pk_sample_exp(-100.0f) == 0.0f && pk_sample_exp(0.0f) == 1.0f, "exp(-100) %g, exp(0) %g",
          (double)pk_sample_exp(-100.0f), (double)pk_sample_exp(0.0f));
    CHECK(pk_sample_log(1e-40f) < -92.0f && pk_sample_log(1e-40f) > -92.2f, "log of a subnormal: %g",
          (double)pk_sample_log(1e-40f));
    const float ordered[] = {-INFINITY, -3.5f, -1e-30f, -0.0f, 0.0f, 1e-30f, 2.0f, INFINITY};
    int in_order = 1;
    for (int i = 0; i + 1 < 8; i++) in_order &= pk_sample_order(ordered[i]) < pk_sample_order(ordered[i + 1]);
    for (int i = 0; i < 8; i++) in_order &= pk_sample_unorder(pk_sample_order(ordered[i])) == ordered[i];
    CHECK(in_order, "pk_sample_order is not the floats' order, or pk_sample_unorder not its inverse");
}

typedef struct cfg {
    float temp, top_p, min_p;
    int top_k;
} cfg;

static void words_of(cfg c, uint64_t seed, int32_t w[PK_SAMPLE_PARAMS]) {
    memset(w, 0, PK_SAMPLE_PARAMS * sizeof *w);
    w[PK_SAMPLE_INV_TEMP] = pk_sample_bits_of(1.0f / c.temp);
    w[PK_SAMPLE_TOP_K] = c.top_k;
    w[PK_SAMPLE_TOP_P] = pk_sample_bits_of(c.top_p > 0 ? c.top_p : 1.0f);
    w[PK_SAMPLE_MIN_P] = pk_sample_bits_of(c.min_p);
    w[PK_SAMPLE_SEED_LO] = (int32_t)(uint32_t)seed;
    w[PK_SAMPLE_SEED_HI] = (int32_t)(uint32_t)(seed >> 32);
}

/* The distribution the rule defines, in double: softmax(l / T) over the kept, renormalized. */
static void expected(const pk_bf16 *l, int V, cfg c, double *p) {
    double s[64], smax = -INFINITY;
    int order[64];
    for (int i = 0; i < V; i++) {
        s[i] = (double)(pk_bf16_to_f32(l[i]) * (1.0f / c.temp));
        smax = fmax(smax, s[i]);
        order[i] = i;
    }
    for (int a = 0; a < V; a++) /* by s, larger first, then the lower index */
        for (int b = a + 1; b < V; b++)
            if (s[order[b]] > s[order[a]]) {
                int t = order[a];
                order[a] = order[b];
                order[b] = t;
            }
    int keep[64] = {0}, nk = c.top_k > 0 && c.top_k < V ? c.top_k : V;
    double total = 0;
    for (int j = 0; j < nk; j++) keep[order[j]] = 1, total += exp(s[order[j]] - smax);
    if (c.top_p > 0 && c.top_p < 1) {
        double cum = 0;
        int j = 0;
        for (; j < nk && cum < c.top_p * total; j++) cum += exp(s[order[j]] - smax);
        for (; j < nk; j++) keep[order[j]] = 0;
    }
    double z = 0;
    for (int i = 0; i < V; i++) {
        if (keep[i] && c.min_p > 0 && exp(s[i] - smax) < c.min_p) keep[i] = 0;
        p[i] = keep[i] ? exp(s[i] - smax) : 0;
        z += p[i];
    }
    for (int i = 0; i < V; i++) p[i] /= z;
}

/* N draws; the chi-square statistic over tokens expected at least 5 times, against the
 * 0.001 critical value of its degrees of freedom (Wilson-Hilferty); no draw outside the kept. */
static void frequencies(const char *what, const pk_bf16 *l, int V, cfg c) {
    const int N = SANITIZED ? 5000 : 20000; /* the sanitizer builds: the same test, fewer draws */
    int32_t w[PK_SAMPLE_PARAMS];
    words_of(c, 0x5eed, w);
    int count[64] = {0}, outside = 0;
    double p[64];
    expected(l, V, c, p);
    for (int n = 0; n < N; n++) {
        int32_t t = pk_cpu_sample_row(l, V, w, n, -1);
        if (t < 0 || t >= V || p[t] == 0) outside++;
        else count[t]++;
    }
    double chi2 = 0;
    int cells = 0;
    for (int i = 0; i < V; i++)
        if (p[i] * N >= 5) {
            double e = p[i] * N;
            chi2 += (count[i] - e) * (count[i] - e) / e;
            cells++;
        }
    const double df = cells - 1, z = 3.0902; /* the 0.999 quantile of the normal */
    const double crit = df * pow(1 - 2 / (9 * df) + z * sqrt(2 / (9 * df)), 3);
    printf("%s: chi-square %.1f over %d tokens (critical %.1f)\n", what, chi2, cells, crit);
    CHECK(outside == 0, "%s: %d draws outside the kept tokens", what, outside);
    CHECK(cells >= 3 && chi2 < crit, "%s: chi-square %.2f >= %.2f (df %g)", what, chi2, crit, df);
}

static void distributions(void) {
    static const float lf[16] = {1.2f, -0.4f, 2.5f, 0.3f, 2.1f, -1.0f, 0.9f, 1.7f,
                                 -2.2f, 0.0f, 1.1f, 2.4f, -0.7f, 0.5f, 1.9f, -3.0f};
    pk_bf16 l[16];
    for (int i = 0; i < 16; i++) l[i] = pk_f32_to_bf16(lf[i]);
    frequencies("temperature 0.8", l, 16, (cfg){.temp = 0.8f});
    frequencies("temperature 2", l, 16, (cfg){.temp = 2.0f});
    frequencies("top_k 5", l, 16, (cfg){.temp = 1.0f, .top_k = 5});
    frequencies("top_p 0.7", l, 16, (cfg){.temp = 1.0f, .top_p = 0.7f});
    frequencies("min_p 0.2", l, 16, (cfg){.temp = 0.7f, .min_p = 0.2f});
    frequencies("top_k 9, top_p 0.9, min_p 0.05", l, 16, (cfg){.temp = 1.3f, .top_k = 9, .top_p = 0.9f, .min_p = 0.05f});
}

static void edges(void) {
    int32_t w[PK_SAMPLE_PARAMS];
    /* ties at the k-th value: the lower indices */
    pk_bf16 tie[8];
    const float tf[8] = {1, 3, 3, 3, 0, 3, -1, 2};
    for (int i = 0; i < 8; i++) tie[i] = pk_f32_to_bf16(tf[i]);
    words_of((cfg){.temp = 1.0f, .top_k = 2}, 1, w);
    int bad = 0;
    for (int n = 0; n < 2000; n++) {
        int32_t t = pk_cpu_sample_row(tie, 8, w, n, -1);
        bad += t != 1 && t != 2;
    }
    CHECK(bad == 0, "top_k 2 over four tied maxima drew %d times outside indices 1 and 2", bad);
    /* NaN and infinities are never drawn; a row of nothing else keeps the argmax given */
    pk_bf16 odd[6];
    const float of[6] = {NAN, 0.5f, INFINITY, -INFINITY, 0.25f, NAN};
    for (int i = 0; i < 6; i++) odd[i] = pk_f32_to_bf16(of[i]);
    words_of((cfg){.temp = 1.0f}, 2, w);
    bad = 0;
    for (int n = 0; n < 2000; n++) {
        int32_t t = pk_cpu_sample_row(odd, 6, w, n, 0);
        bad += t != 1 && t != 4;
    }
    CHECK(bad == 0, "a row with NaN and infinities drew %d of them", bad);
    CHECK(pk_cpu_sample_row(odd, 1, w, 0, 7) == 7, "a row of NaN only does not keep the argmax");
    /* the same (seed, position): the same token; other seeds: others */
    static pk_bf16 flat[4096];
    for (int i = 0; i < 4096; i++) flat[i] = pk_f32_to_bf16(0.001f * (float)(i % 7));
    int32_t w2[PK_SAMPLE_PARAMS];
    words_of((cfg){.temp = 1.0f}, 42, w);
    int same = 1, differ = 0;
    for (int n = 0; n < 64; n++) {
        same &= pk_cpu_sample_row(flat, 4096, w, n, -1) == pk_cpu_sample_row(flat, 4096, w, n, -1);
        words_of((cfg){.temp = 1.0f}, 43 + (uint64_t)n, w2);
        differ += pk_cpu_sample_row(flat, 4096, w, n, -1) != pk_cpu_sample_row(flat, 4096, w2, n, -1);
    }
    CHECK(same, "one (seed, position) drew two tokens");
    CHECK(differ >= 60, "other seeds drew the same token %d times of 64 over 4,096 near-equal logits", 64 - differ);
    /* a vocabulary of Qwen3's size: only kept tokens */
    enum { BIG = 151936 };
    static pk_bf16 big[BIG];
    uint64_t seed = 9;
    for (int i = 0; i < BIG; i++) big[i] = pk_f32_to_bf16(4.0f * check_rand_f32(&seed) - 2.0f);
    words_of((cfg){.temp = 0.9f, .top_k = 50, .top_p = 0.95f}, 7, w);
    float kth = 0;
    { /* the 50th largest logit */
        static float sorted[BIG];
        for (int i = 0; i < BIG; i++) sorted[i] = pk_bf16_to_f32(big[i]);
        for (int a = 0; a < 50; a++)
            for (int b = a + 1; b < BIG; b++)
                if (sorted[b] > sorted[a]) {
                    float t = sorted[a];
                    sorted[a] = sorted[b];
                    sorted[b] = t;
                }
        kth = sorted[49];
    }
    bad = 0;
    for (int n = 0; n < 4; n++) bad += pk_bf16_to_f32(big[pk_cpu_sample_row(big, BIG, w, n, -1)]) < kth;
    CHECK(bad == 0, "a 151,936-token row with top_k 50 drew %d tokens below its 50th largest logit", bad);
}

int main(void) {
    philox_vectors();
    log_exp_accuracy();
    distributions();
    edges();
    return check_report("sample");
}
