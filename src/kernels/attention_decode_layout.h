// SPDX-License-Identifier: Apache-2.0
/* attention_decode_layout.h — the shared-memory layout of the staged decode attention
 * (src/kernels/cuda/attention_decode.cuh), in plain C so the host can ask what the device path
 * holds: the model builder splits attention over the KV length only for contexts it does not
 * (src/model/model.c). One definition for both sides, so they cannot drift apart.
 */
#ifndef PK_ATTENTION_DECODE_LAYOUT_H
#define PK_ATTENTION_DECODE_LAYOUT_H

#ifdef __CUDACC__
#define PK_ATTD_HD __host__ __device__ __forceinline__
#else
#define PK_ATTD_HD static inline
#endif

#define PK_ATTD_G_MAX 8 /* query heads per KV head the staged path takes (Llama-3-70B: 8) */
#define PK_ATTD_WARPS 8 /* warps of a CTA (PK_CUDA_THREADS / 32) */
/* The static-mode block's shared memory the staged path plans with: 192 KB, less than the 226 KB
 * the static launch takes on the H100 / H200 (runtime.cuh PK_STATIC_SMEM_BYTES), so the device has
 * room to spare; GPUs that give a block less hold fewer positions (the device path then takes the
 * general kernel: slower, the same result). */
#define PK_ATTD_STATIC_SMEM_BYTES (192 * 1024)

/* Byte offsets of the areas, for head size D, G query heads per KV head and P positions: first
 * what only the task itself writes, after its wait — q [G][D] f32, red [warps][G][D] f32, red_m /
 * red_l [warps][G] f32, up to hdr (a multiple of 128) —, then what the stage writes before it —
 * hdr [16] i32, cs / sn [D/2] f32, nq / nk [D] bf16, slots [Pr] i32, K and V [Pr][D + 8] bf16 (Pr:
 * P rounded up to 4; rows padded by 16 bytes: 8 consecutive rows start in distinct bank groups,
 * which ldmatrix needs). The tensor-core path keeps q as bf16 [G][D + 8] in q's area. Every
 * offset up to sc depends on D and G alone (the task finds hdr before it knows P). So a stage
 * issued during another task (runtime.cuh's pk_att_early) may start its layout hdr bytes below
 * the free area, in that task's bytes, which are dead by the time this task writes q and red:
 * the Qwen3-0.6B's stage beside its qkv tile then holds 288 positions instead of 272. */
typedef struct pk_attd_layout {
    int q, red, red_m, red_l, hdr, cs, sn, nq, nk, sc, k, v, end, Pr;
} pk_attd_layout;

PK_ATTD_HD pk_attd_layout pk_attd_layout_of(int D, int G, int P) {
    pk_attd_layout L;
    L.Pr = (P + 3) & ~3;
    L.q = 0;
    L.red = L.q + 4 * G * D;
    L.red_m = L.red + 4 * PK_ATTD_WARPS * G * D;
    L.red_l = L.red_m + 4 * PK_ATTD_WARPS * G;
    L.hdr = (L.red_l + 4 * PK_ATTD_WARPS * G + 127) & ~127;
    L.cs = L.hdr + 64;
    L.sn = L.cs + 2 * D;
    L.nq = L.sn + 2 * D;
    L.nk = L.nq + 2 * D;
    L.sc = (L.nk + 2 * D + 15) & ~15;
    L.k = (L.sc + 4 * L.Pr + 15) & ~15;
    L.v = L.k + 2 * L.Pr * (D + 8);
    L.end = L.v + 2 * L.Pr * (D + 8);
    return L;
}

/* Whether the staged path takes head size D and G query heads per KV head at all. */
PK_ATTD_HD int pk_attd_shape_ok(int D, int G) { return (D == 64 || D == 128 || D == 256) && G >= 1 && G <= PK_ATTD_G_MAX; }

/* The most positions (a multiple of 4) whose layout fits smem_bytes; 0 when none or the shape is
 * not the path's. At PK_ATTD_STATIC_SMEM_BYTES with the weight ring: D 128: 276 with G 2, 260
 * with G 4, 228 with G 8; D 256, G 2: 132; D 64, G 2: 540 (without it: 336, 320, 288, 164, 652). */
PK_ATTD_HD int pk_attd_max_positions(int D, int G, int smem_bytes) {
    if (!pk_attd_shape_ok(D, G)) return 0;
    const int fixed = pk_attd_layout_of(D, G, 0).k + 16; /* + the slots' alignment */
    const int per_row = 4 + 4 * (D + 8);                /* slot, K row, V row */
    return smem_bytes > fixed ? (smem_bytes - fixed) / per_row / 4 * 4 : 0;
}

#endif /* PK_ATTENTION_DECODE_LAYOUT_H */
