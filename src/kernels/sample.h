// SPDX-License-Identifier: Apache-2.0
/* sample.h — the arithmetic of pk's sampling, written once for both backends (plain C; PK_SAMPLE_HD
 * marks it host + device for nvcc), so that the same seed and the same logits give the same token
 * on either: every operation is an IEEE add, multiply or fma, correctly rounded on a CPU and a
 * GPU alike (no libm, no division), and never contracted: nvcc fuses a product into a following
 * add unless told not to, so the scaling that feeds later additions is pk_sample_scale.
 *
 * A request that samples (inverse temperature > 0) draws its token at position `pos` from the
 * logits row l[0 .. V) as follows (the Gumbel-max trick: exact sampling from the softmax, and the
 * result does not depend on how the vocabulary is split over tasks or in what order they sum):
 *   s_i = float(l_i) · inv_temp; a NaN or -inf logit is never drawn;
 *   kept = every finite s_i, then
 *     top_k > 0:   the top_k largest s (ties: the lower index first);
 *     top_p < 1:   those with s_i >= tau for the largest tau at which their weights
 *                  w_i = exp(s_i - s_max) sum to at least top_p · the total over kept (ties at
 *                  tau are all kept; the sums are exact: pk_sample_fixed);
 *     min_p > 0:   those with w_i >= min_p;
 *   token = argmax over kept of s_i + g_i (ties: the lower index), g_i = -log(-log(u_i)), u_i the
 *   uniform in (0, 1) of Philox4x32-10 with key = seed and counter = (pos, i, 0, 0).
 * The kept set never loses the largest s, so a row with a finite logit always draws a token.
 */
#ifndef PK_KERNELS_SAMPLE_H
#define PK_KERNELS_SAMPLE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define PK_SAMPLE_HD static inline __host__ __device__
#else
#define PK_SAMPLE_HD static inline
#endif

/* A request's sampling as the step state holds it per slot: PK_SAMPLE_PARAMS int32 words. */
enum {
    PK_SAMPLE_INV_TEMP = 0, /* float bits; 0: greedy (the argmax) */
    PK_SAMPLE_TOP_K = 1,    /* int; 0: off */
    PK_SAMPLE_TOP_P = 2,    /* float bits; >= 1: off */
    PK_SAMPLE_MIN_P = 3,    /* float bits; <= 0: off */
    PK_SAMPLE_SEED_LO = 4,
    PK_SAMPLE_SEED_HI = 5,
    PK_SAMPLE_PARAMS = 8
};

PK_SAMPLE_HD float pk_sample_f32_of(int32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

PK_SAMPLE_HD int32_t pk_sample_bits_of(float f) {
    int32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* Philox4x32-10 (Salmon et al., SC'11): x (the counter) becomes the block of key (k0, k1). */
PK_SAMPLE_HD void pk_philox4x32_10(uint32_t x[4], uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        const uint64_t p0 = (uint64_t)0xD2511F53u * x[0], p1 = (uint64_t)0xCD9E8D57u * x[2];
        const uint32_t y0 = (uint32_t)(p1 >> 32) ^ x[1] ^ k0, y2 = (uint32_t)(p0 >> 32) ^ x[3] ^ k1;
        x[1] = (uint32_t)p1;
        x[3] = (uint32_t)p0;
        x[0] = y0;
        x[2] = y2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

/* The uniform in (0, 1) for token i at position pos: 24 random bits, centred in their interval. */
PK_SAMPLE_HD float pk_sample_uniform(uint64_t seed, int32_t pos, int32_t i) {
    uint32_t x[4] = {(uint32_t)pos, (uint32_t)i, 0, 0};
    pk_philox4x32_10(x, (uint32_t)seed, (uint32_t)(seed >> 32));
    return ((float)(x[0] >> 8) + 0.5f) * 5.9604644775390625e-8f; /* 2^-24 */
}

/* ln(x) for a finite x > 0 (normal or not), to within a few ulp: x = m · 2^e with m in
 * [sqrt(1/2), sqrt(2)), ln m = 2 atanh(t), t = (m - 1) / (m + 1), by its odd series (t^2 <= 0.0295:
 * terms to t^15 leave < 1e-10). t needs a division: t = (m - 1) · r, r from a Newton reciprocal
 * with fma (exact to 1 ulp, the same on both backends). */
PK_SAMPLE_HD float pk_sample_log(float x) {
    int32_t b = pk_sample_bits_of(x);
    int e = 0;
    if (b < 0x00800000) { /* subnormal: scale into the normal range */
        x = x * 16777216.0f; /* 2^24 */
        b = pk_sample_bits_of(x);
        e = -24;
    }
    e += ((b >> 23) & 0xff) - 127;
    float m = pk_sample_f32_of((b & 0x007fffff) | 0x3f800000); /* [1, 2) */
    if (m > 1.41421356f) {
        m = m * 0.5f;
        e += 1;
    }
    const float d = m + 1.0f; /* [1.707, 2.415) */
    float r = fmaf(-0.2357f, d, 0.9706f); /* 1 / d's tangent at 2.06: within 3.1 % */
    for (int it = 0; it < 4; it++) r = fmaf(r, fmaf(-d, r, 1.0f), r); /* Newton: the error squares */
    const float t = (m - 1.0f) * r, t2 = t * t;
    float p = 1.0f / 15.0f;
    p = fmaf(p, t2, 1.0f / 13.0f);
    p = fmaf(p, t2, 1.0f / 11.0f);
    p = fmaf(p, t2, 1.0f / 9.0f);
    p = fmaf(p, t2, 1.0f / 7.0f);
    p = fmaf(p, t2, 1.0f / 5.0f);
    p = fmaf(p, t2, 1.0f / 3.0f);
    p = fmaf(p, t2, 1.0f);
    const float ln2_hi = 0.693145751953125f, ln2_lo = 1.428606765330187e-06f;
    return fmaf((float)e, ln2_hi, fmaf((float)e, ln2_lo, 2.0f * t * p));
}

/* exp(x) for x <= 0 (0 below -87: the weights of pk's filters never need more), to within a few
 * ulp: x = k ln 2 + f, |f| <= ln2 / 2, exp f by its Taylor series to f^10. */
PK_SAMPLE_HD float pk_sample_exp(float x) {
    if (!(x > -87.0f)) return 0.0f;
    const float kf = floorf(fmaf(x, 1.4426950408889634f, 0.5f));
    const float f = fmaf(kf, -1.428606765330187e-06f, fmaf(kf, -0.693145751953125f, x));
    float p = 1.0f / 3628800.0f;
    p = fmaf(p, f, 1.0f / 362880.0f);
    p = fmaf(p, f, 1.0f / 40320.0f);
    p = fmaf(p, f, 1.0f / 5040.0f);
    p = fmaf(p, f, 1.0f / 720.0f);
    p = fmaf(p, f, 1.0f / 120.0f);
    p = fmaf(p, f, 1.0f / 24.0f);
    p = fmaf(p, f, 1.0f / 6.0f);
    p = fmaf(p, f, 0.5f);
    p = fmaf(p, f, 1.0f);
    p = fmaf(p, f, 1.0f);
    return p * pk_sample_f32_of(((int32_t)kf + 127) << 23); /* kf >= -126 here */
}

/* s = l · inv_temp, rounded on its own on either backend (nvcc would fuse it into the subtraction
 * that follows it in pk_sample_key or in a weight's exponent). */
PK_SAMPLE_HD float pk_sample_scale(float l, float inv_temp) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(l, inv_temp);
#else
    return l * inv_temp;
#endif
}

/* Floats as unsigned keys in the same order (-0 below +0; NaN is never compared here). */
PK_SAMPLE_HD uint32_t pk_sample_order(float f) {
    const uint32_t b = (uint32_t)pk_sample_bits_of(f);
    return b & 0x80000000u ? ~b : b | 0x80000000u;
}

PK_SAMPLE_HD float pk_sample_unorder(uint32_t o) {
    return pk_sample_f32_of((int32_t)(o & 0x80000000u ? o & 0x7fffffffu : ~o));
}

/* A weight w in [0, 1] as a fixed-point integer of 40 fraction bits: sums of up to 2^23 of them
 * are exact in 64 bits, the same in any order on any backend. */
PK_SAMPLE_HD uint64_t pk_sample_fixed(float w) { return (uint64_t)(w * 1099511627776.0f); /* 2^40 */ }

/* The Gumbel-max key of token i: s + g with g = -log(-log(u)). */
PK_SAMPLE_HD float pk_sample_key(float s, uint64_t seed, int32_t pos, int32_t i) {
    const float u = pk_sample_uniform(seed, pos, i);
    return s - pk_sample_log(-pk_sample_log(u));
}

#endif /* PK_KERNELS_SAMPLE_H */
