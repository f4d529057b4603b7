// SPDX-License-Identifier: Apache-2.0
/* sample.c — a sampling row's token on the CPU: kernels/sample.h's rule over one logits row,
 * in passes over the row that need no memory (thresholds found by binary search over the floats'
 * order, so top-k and top-p need no sort), each of which a GPU block can run in parallel.
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/sample.h"

typedef struct row {
    const pk_bf16 *l;
    int V;
    float inv_temp;
} row;

/* s_i, or NaN when token i is never drawn (a NaN or infinite scaled logit). */
static float scaled(const row *r, int i) {
    const float s = pk_sample_scale(pk_bf16_to_f32(r->l[i]), r->inv_temp);
    return isfinite(s) ? s : NAN;
}

/* Tokens with s > the value of order key o (strictly), and with s == it at an index below imax. */
static int64_t count_above(const row *r, uint32_t o, int imax) {
    int64_t n = 0;
    for (int i = 0; i < r->V; i++) {
        const float s = scaled(r, i);
        if (isnan(s)) continue;
        const uint32_t so = pk_sample_order(s);
        n += so > o || (so == o && i < imax);
    }
    return n;
}

/* Whether token i is kept by top-k: s above the k-th largest (order key ok), or equal to it at an
 * index below ik. */
static int in_top_k(uint32_t so, int i, uint32_t ok, int ik) { return so > ok || (so == ok && i < ik); }

/* The fixed-point weight of the tokens top-k keeps whose order key is at least lo (lo 0: all). */
static uint64_t weight_from(const row *r, float smax, uint32_t ok, int ik, uint32_t lo) {
    uint64_t w = 0;
    for (int i = 0; i < r->V; i++) {
        const float s = scaled(r, i);
        if (isnan(s)) continue;
        const uint32_t so = pk_sample_order(s);
        if (so >= lo && in_top_k(so, i, ok, ik)) w += pk_sample_fixed(pk_sample_exp(s - smax));
    }
    return w;
}

int32_t pk_cpu_sample_row(const pk_bf16 *logits, int V, const int32_t *params, int32_t pos, int32_t greedy) {
    const row r = {logits, V, pk_sample_f32_of(params[PK_SAMPLE_INV_TEMP])};
    const int top_k = params[PK_SAMPLE_TOP_K];
    const float top_p = pk_sample_f32_of(params[PK_SAMPLE_TOP_P]), min_p = pk_sample_f32_of(params[PK_SAMPLE_MIN_P]);
    const uint64_t seed = (uint64_t)(uint32_t)params[PK_SAMPLE_SEED_LO] | (uint64_t)(uint32_t)params[PK_SAMPLE_SEED_HI] << 32;
    int64_t nfinite = 0;
    float smax = -INFINITY;
    for (int i = 0; i < V; i++) {
        const float s = scaled(&r, i);
        if (isnan(s)) continue;
        nfinite++;
        if (s > smax) smax = s;
    }
    if (nfinite == 0) return greedy; /* nothing can be drawn: the argmax stands */

    /* top-k: the order key ok of the k-th largest s (the largest key with at least k at or
     * above it), then the index bound ik among the ties at it */
    uint32_t ok = 0;
    int ik = V;
    if (top_k > 0 && top_k < nfinite) {
        uint32_t lo = 0, hi = 0xffffffffu; /* count(>= key lo) >= k; find the largest such lo */
        while (lo < hi) {
            const uint32_t mid = (uint32_t)(((uint64_t)lo + hi + 1) / 2); /* hi - lo + 1 may not fit */
            if (count_above(&r, mid, V) >= top_k) lo = mid; /* imax V: every tie counts, i.e. >= mid */
            else hi = mid - 1;
        }
        ok = lo;
        int ilo = 0, ihi = V; /* the smallest ik with (strictly above) + (ties below ik) >= k */
        while (ilo < ihi) {
            const int mid = ilo + (ihi - ilo) / 2;
            if (count_above(&r, ok, mid) >= top_k) ihi = mid; /* above, plus the ties below mid */
            else ilo = mid + 1;
        }
        ik = ilo;
    }

    /* top-p: the largest threshold key op whose kept tokens at or above it weigh >= top_p · total */
    uint32_t op = 0;
    if (top_p > 0.0f && top_p < 1.0f) {
        const uint64_t target = (uint64_t)ceil((double)weight_from(&r, smax, ok, ik, 0) * (double)top_p);
        uint32_t lo = 0, hi = pk_sample_order(smax); /* weight(>= lo) >= target holds at lo = 0 */
        while (lo < hi) {
            const uint32_t mid = (uint32_t)(((uint64_t)lo + hi + 1) / 2);
            if (weight_from(&r, smax, ok, ik, mid) >= target) lo = mid;
            else hi = mid - 1;
        }
        op = lo;
    }

    /* the draw: the largest Gumbel key among the kept */
    int32_t best = greedy;
    float best_key = -INFINITY;
    int any = 0;
    for (int i = 0; i < V; i++) {
        const float s = scaled(&r, i);
        if (isnan(s)) continue;
        const uint32_t so = pk_sample_order(s);
        if (!in_top_k(so, i, ok, ik) || so < op) continue;
        if (min_p > 0.0f && pk_sample_exp(s - smax) < min_p) continue;
        const float key = pk_sample_key(s, seed, pos, i);
        if (!any || key > best_key) {
            best = i;
            best_key = key;
            any = 1;
        }
    }
    return best;
}
