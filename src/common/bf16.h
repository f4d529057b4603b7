// SPDX-License-Identifier: Apache-2.0
/* bf16.h — bfloat16 storage type and conversions, for host C and CUDA alike.
 * pk stores activations and weights as bf16 (the top 16 bits of an IEEE fp32) and computes in
 * fp32. fp32 → bf16 rounds to nearest even, as PyTorch does; NaN stays a (quiet) NaN. */
#ifndef PK_BF16_H
#define PK_BF16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t pk_bf16;

static inline float pk_bf16_to_f32(pk_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline pk_bf16 pk_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (pk_bf16)((u >> 16) | 0x40u); /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (pk_bf16)(u >> 16);
}

/* Rounds an fp32 value to the nearest bf16 and back: where PyTorch's bf16 math rounds. */
static inline float pk_round_bf16(float f) { return pk_bf16_to_f32(pk_f32_to_bf16(f)); }

/* IEEE half → fp32 (for loading fp16 checkpoints). */
static inline float pk_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while ((man & 0x400u) == 0) { man <<= 1; exp--; }
            u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif /* PK_BF16_H */
