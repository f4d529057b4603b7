/* attention_decode.cuh — PK_TASK_ATTENTION for one decode row, with the KV cache read before the
 * task's dependency fires. Same result as pk_dev_attention (attention.cuh) to bf16 tolerance, same
 * cache writes bit for bit; the general kernel stays the path for prefill, long contexts and any
 * shape this one does not take.
 *
 * Why: in the persistent kernel a decode attention task spent ~30 us of which the arithmetic is
 * ~1: its loads form a chain (token position -> page table -> K rows -> scores -> V rows, each
 * one DRAM round trip, since the ~1 GB of weights streamed since the layer's last use evicted
 * the cache from L2). Everything but the new position's K / V and the query is known before
 * the qkv projection finishes: positions 0 .. pos-1 of the cache were written in earlier steps.
 *
 * Two calls per task, in the static schedule:
 *   pk_dev_attention_decode_stage (before the dependency wait): the row's request and position,
 *     the slots of positions 0 .. pos, bf16 cos / sin of position pos, and 16-byte cp.async copies
 *     of K and V rows 0 .. pos-1 of KV head kv0 into shared memory; returns P = pos + 1, or 0
 *     when this path does not apply (then nothing is staged and the caller runs the general
 *     kernel). The caller waits for the copies (cp.async.wait_all) and __syncthreads.
 *   pk_dev_attention_decode (after the wait): phase A as the general kernel (K rotated and V into
 *     the cache and into the staged rows at pos, q heads rotated into q_s), then from shared
 *     memory only: scores of all P positions (thread j: position j, fp32 dot products over d
 *     ascending, as attention.cuh), the max and the exp-sum per head (warp butterflies, then the 8
 *     warps in order), and Σ_j e_j · v_j (thread: 8 dims of positions jg, jg + 256 / (D / 8), ...,
 *     lanes of a warp then warps in order); out = bf16(acc / l). Every order is fixed by the
 *     shapes: the same bits on every run.
 * Applies when: one row (n_tok 1) whose pages are mapped, one KV head per task, D in {64, 128,
 * 256}, G <= PK_ATTD_G_MAX, 16-byte aligned caches, the code generator's inv_freq table, and
 * the layout below fits in smem_bytes.
 * Shared memory (bytes from smem): hdr [16] i32 {P, req, pos, new slot}; cs_s, sn_s [D/2] f32;
 * q_s [G][D] f32; red [8 warps][G][D] f32; red_m, red_l [8][G] f32; sc_s [G][Pr] f32 (Pr = P
 * rounded up to 4; before the wait it holds the slots [P] i32); K_s, V_s [Pr][D] bf16, row j's
 * 16-byte chunk c at chunk c ^ (j & 7) (a quarter-warp reading one chunk of 8 consecutive rows,
 * or 8 chunks of one row, hits 8 distinct bank groups).
 */
#ifndef PK_CUDA_ATTENTION_DECODE_CUH
#define PK_CUDA_ATTENTION_DECODE_CUH

#include "kernels/cuda/attention.cuh"

#define PK_ATTD_G_MAX 8 /* query heads per KV head this path takes (Llama-3-70B: 8) */
#define PK_ATTD_HB 4    /* heads per pass of the P·V loop (registers: 4 x 8 accumulators) */
#ifndef PK_ATT_DECODE_STAGE
#define PK_ATT_DECODE_STAGE 1 /* 0: never stage, always the general kernel (PK_NVCC_DEFINES, to compare) */
#endif

/* Byte offsets of the areas, for D, G and P positions. */
struct pk_attd_layout {
    int cs, sn, q, red, red_m, red_l, sc, k, v, end, Pr;
};
__device__ __forceinline__ pk_attd_layout pk_attd_layout_of(int D, int G, int P) {
    pk_attd_layout L;
    L.Pr = (P + 3) & ~3;
    L.cs = 64;
    L.sn = L.cs + 2 * D;
    L.q = L.sn + 2 * D;
    L.red = L.q + 4 * G * D;
    L.red_m = L.red + 4 * PK_DEV_WARPS * G * D;
    L.red_l = L.red_m + 4 * PK_DEV_WARPS * G;
    L.sc = (L.red_l + 4 * PK_DEV_WARPS * G + 15) & ~15;
    L.k = (L.sc + 4 * G * L.Pr + 15) & ~15;
    L.v = L.k + 2 * L.Pr * D;
    L.end = L.v + 2 * L.Pr * D;
    return L;
}

/* Element offset of (row j, dim d) in K_s / V_s: the 16-byte chunk d / 8 swizzled by j & 7. */
__device__ __forceinline__ int pk_attd_idx(int j, int d, int D) {
    return j * D + ((((d >> 3) ^ j) & 7) | ((d >> 3) & ~7)) * 8 + (d & 7);
}

template <int NP>
__device__ inline int pk_dev_attention_decode_stage(const pk_layer_params *p, const float *inv_freq,
                                                    const pk_attn_step *s, int kv0, int nkv,
                                                    const pk_bf16 *k_cache, const pk_bf16 *v_cache,
                                                    char *smem, int smem_bytes) {
    const int D = p->head_dim, Hq = p->num_q_heads, Hkv = p->num_kv_heads;
    if (!PK_ATT_DECODE_STAGE || s->n_tok != 1 || nkv != 1 || !inv_freq || (D != 64 && D != 128 && D != 256) || D > 64 * NP ||
        Hkv <= 0 || Hq % Hkv != 0 || Hq / Hkv > PK_ATTD_G_MAX || kv0 < 0 || kv0 >= Hkv ||
        !pk_dev_aligned16(k_cache) || !pk_dev_aligned16(v_cache))
        return 0;
    const int G = Hq / Hkv, g = kv0, lane = threadIdx.x % 32, C = D / 8;
    int req, pos;
    if (!pk_att_row_valid(s, 0, lane, &req, &pos)) return 0; /* the general kernel writes zeros */
    const int P = pos + 1;
    const pk_attd_layout L = pk_attd_layout_of(D, G, P);
    if (L.end > smem_bytes) return 0;

    int *hdr = (int *)smem, *slot_s = (int *)(smem + L.sc);
    for (int j = threadIdx.x; j < P; j += PK_CUDA_THREADS) slot_s[j] = (int)pk_att_slot(s, req, j);
    float *cs_s = (float *)(smem + L.cs), *sn_s = (float *)(smem + L.sn);
    for (int i = threadIdx.x; i < D / 2; i += PK_CUDA_THREADS) {
        double sd, cd;
        sincos((double)((float)pos * inv_freq[i]), &sd, &cd);
        cs_s[i] = pk_dev_round_bf16((float)cd);
        sn_s[i] = pk_dev_round_bf16((float)sd);
    }
    __syncthreads(); /* slot_s */
    const uint32_t k_dst = (uint32_t)__cvta_generic_to_shared(smem + L.k);
    const uint32_t v_dst = (uint32_t)__cvta_generic_to_shared(smem + L.v);
    const int lc = D == 64 ? 3 : D == 128 ? 4 : 5; /* log2(C) */
    for (int e = threadIdx.x; e < pos * C; e += PK_CUDA_THREADS) {
        const int j = e >> lc, c = e & (C - 1);
        const int64_t src = ((int64_t)slot_s[j] * Hkv + g) * D + 8 * c;
        const uint32_t dst = 2u * (uint32_t)pk_attd_idx(j, 8 * c, D);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(k_dst + dst), "l"(k_cache + src) : "memory");
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(v_dst + dst), "l"(v_cache + src) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    if (threadIdx.x == 0) {
        hdr[0] = P;
        hdr[1] = req;
        hdr[2] = pos;
        hdr[3] = slot_s[pos];
    }
    return P;
}

template <int NP>
__device__ inline void pk_dev_attention_decode(const pk_layer_params *p, int kv0, const pk_bf16 *qkv,
                                               pk_bf16 *k_cache, pk_bf16 *v_cache, const pk_bf16 *q_norm,
                                               const pk_bf16 *k_norm, pk_bf16 *out, char *smem) {
    const int D = p->head_dim, Hkv = p->num_kv_heads, G = p->num_q_heads / Hkv, g = kv0;
    const int half = D / 2, C = D / 8, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int *hdr = (const int *)smem;
    const int P = hdr[0], pos = hdr[2];
    const pk_attd_layout L = pk_attd_layout_of(D, G, P);
    const float *cs_s = (const float *)(smem + L.cs), *sn_s = (const float *)(smem + L.sn);
    float *q_s = (float *)(smem + L.q), *red = (float *)(smem + L.red);
    float *red_m = (float *)(smem + L.red_m), *red_l = (float *)(smem + L.red_l);
    float *sc_s = (float *)(smem + L.sc);
    pk_bf16 *K_s = (pk_bf16 *)(smem + L.k), *V_s = (pk_bf16 *)(smem + L.v);
    const float eps = p->qk_norm_eps;
    const pk_bf16 *grp = qkv + (int64_t)g * (G + 2) * D; /* q heads [G][D], K [D], V [D] of head g */

    /* phase A: item 0 (warp 0) writes K and V of position pos to the cache and to K_s / V_s;
     * items 1 .. G rotate q head item - 1 into q_s */
    for (int item = warp; item <= G; item += PK_DEV_WARPS) {
        float cs[NP], sn[NP];
#pragma unroll
        for (int ii = 0; ii < NP; ii++) {
            const int i = lane + 32 * ii;
            cs[ii] = i < half ? cs_s[i] : 0.0f;
            sn[ii] = i < half ? sn_s[i] : 0.0f;
        }
        if (item > 0) {
            pk_att_store_q<NP>(grp + (int64_t)(item - 1) * D, q_norm, eps, cs, sn, D, lane, q_s + (item - 1) * D);
            continue;
        }
        const int64_t off = ((int64_t)hdr[3] * Hkv + g) * D;
        float ya[NP], yb[NP];
        pk_att_head<NP>(grp + (int64_t)G * D, k_norm, eps, cs, sn, D, lane, ya, yb);
#pragma unroll
        for (int ii = 0; ii < NP; ii++) {
            const int i = lane + 32 * ii;
            if (i < half) {
                const pk_bf16 a = pk_dev_f32_to_bf16(ya[ii]), b = pk_dev_f32_to_bf16(yb[ii]);
                k_cache[off + i] = a;
                k_cache[off + i + half] = b;
                K_s[pk_attd_idx(pos, i, D)] = a;
                K_s[pk_attd_idx(pos, i + half, D)] = b;
            }
        }
        const pk_bf16 *vx = grp + (int64_t)(G + 1) * D;
        for (int i = lane; i < half; i += 32) { /* bf16 pairs (2i, 2i + 1): one chunk each */
            const uint32_t u = pk_dev_aligned4(vx) ? pk_dev_ldcg4(vx + 2 * i)
                                                   : (uint32_t)pk_dev_ldcg_bf16(vx + 2 * i) |
                                                         (uint32_t)pk_dev_ldcg_bf16(vx + 2 * i + 1) << 16;
            *(uint32_t *)(v_cache + off + 2 * i) = u;
            *(uint32_t *)(V_s + pk_attd_idx(pos, 2 * i, D)) = u;
        }
    }
    __syncthreads();

    /* scores: thread j takes positions j, j + 256, ...; then the max per head */
    const float scale = 1.0f / sqrtf((float)D);
    float mx[PK_ATTD_G_MAX];
#pragma unroll
    for (int h = 0; h < PK_ATTD_G_MAX; h++) mx[h] = -INFINITY;
    for (int j = threadIdx.x; j < P; j += PK_CUDA_THREADS) {
        float sc[PK_ATTD_G_MAX];
#pragma unroll
        for (int h = 0; h < PK_ATTD_G_MAX; h++) sc[h] = 0.0f;
#pragma unroll 2
        for (int c = 0; c < C; c++) {
            float kf[8];
            pk_dev_unpack8(*(const uint4 *)(K_s + pk_attd_idx(j, 8 * c, D)), kf);
#pragma unroll
            for (int h = 0; h < PK_ATTD_G_MAX; h++) {
                if (h < G) {
                    const float4 q0 = *(const float4 *)(q_s + h * D + 8 * c);
                    const float4 q1 = *(const float4 *)(q_s + h * D + 8 * c + 4);
                    float sv = sc[h];
                    sv = fmaf(q0.x, kf[0], sv); sv = fmaf(q0.y, kf[1], sv);
                    sv = fmaf(q0.z, kf[2], sv); sv = fmaf(q0.w, kf[3], sv);
                    sv = fmaf(q1.x, kf[4], sv); sv = fmaf(q1.y, kf[5], sv);
                    sv = fmaf(q1.z, kf[6], sv); sv = fmaf(q1.w, kf[7], sv);
                    sc[h] = sv;
                }
            }
        }
#pragma unroll
        for (int h = 0; h < PK_ATTD_G_MAX; h++) {
            if (h < G) {
                const float sv = sc[h] * scale;
                sc_s[h * L.Pr + j] = sv;
                mx[h] = fmaxf(mx[h], sv);
            }
        }
    }
#pragma unroll
    for (int h = 0; h < PK_ATTD_G_MAX; h++)
        if (h < G) {
            const float m = pk_dev_warp_max(mx[h]);
            if (lane == 0) red_m[warp * G + h] = m;
        }
    __syncthreads();

    /* e_j = exp(s_j - M) in place, and the sums */
    float lsum[PK_ATTD_G_MAX];
#pragma unroll
    for (int h = 0; h < PK_ATTD_G_MAX; h++) {
        mx[h] = -INFINITY;
        lsum[h] = 0.0f;
        if (h < G)
            for (int w = 0; w < PK_DEV_WARPS; w++) mx[h] = fmaxf(mx[h], red_m[w * G + h]);
    }
    for (int j = threadIdx.x; j < P; j += PK_CUDA_THREADS)
#pragma unroll
        for (int h = 0; h < PK_ATTD_G_MAX; h++)
            if (h < G) {
                const float e = expf(sc_s[h * L.Pr + j] - mx[h]);
                sc_s[h * L.Pr + j] = e;
                lsum[h] += e;
            }
#pragma unroll
    for (int h = 0; h < PK_ATTD_G_MAX; h++)
        if (h < G) {
            const float l = pk_dev_warp_sum(lsum[h]);
            if (lane == 0) red_l[warp * G + h] = l;
        }
    __syncthreads();

    /* Σ_j e_j · v_j: thread = (chunk c, position group jg), PK_ATTD_HB heads per pass */
    const int c = threadIdx.x & (C - 1), jg = threadIdx.x / C, NJ = PK_CUDA_THREADS / C;
    for (int h0 = 0; h0 < G; h0 += PK_ATTD_HB) {
        float acc[PK_ATTD_HB][8];
#pragma unroll
        for (int h = 0; h < PK_ATTD_HB; h++)
#pragma unroll
            for (int i = 0; i < 8; i++) acc[h][i] = 0.0f;
        for (int j = jg; j < P; j += NJ) {
            float vf[8];
            pk_dev_unpack8(*(const uint4 *)(V_s + pk_attd_idx(j, 8 * c, D)), vf);
#pragma unroll
            for (int h = 0; h < PK_ATTD_HB; h++) {
                if (h0 + h < G) {
                    const float e = sc_s[(h0 + h) * L.Pr + j];
#pragma unroll
                    for (int i = 0; i < 8; i++) acc[h][i] = fmaf(e, vf[i], acc[h][i]);
                }
            }
        }
        for (int o = C; o < 32; o <<= 1) /* the lanes of a warp holding the same chunk */
#pragma unroll
            for (int h = 0; h < PK_ATTD_HB; h++)
#pragma unroll
                for (int i = 0; i < 8; i++) acc[h][i] += __shfl_xor_sync(PK_DEV_FULL_MASK, acc[h][i], o);
        if (lane < C)
#pragma unroll
            for (int h = 0; h < PK_ATTD_HB; h++)
                if (h0 + h < G)
#pragma unroll
                    for (int i = 0; i < 8; i++) red[(warp * G + h0 + h) * D + 8 * c + i] = acc[h][i];
    }
    __syncthreads();

    /* out[h][d] = bf16(Σ_w red[w][h][d] / Σ_w red_l[w][h]), warps in order */
    pk_bf16 *orow = out + (int64_t)g * G * D;
    for (int i = threadIdx.x; i < G * D; i += PK_CUDA_THREADS) {
        const int h = i / D;
        float num = 0.0f, den = 0.0f;
        for (int w = 0; w < PK_DEV_WARPS; w++) {
            num += red[w * G * D + i];
            den += red_l[w * G + h];
        }
        orow[i] = pk_dev_f32_to_bf16(__fdiv_rn(num, den));
    }
}

#endif /* PK_CUDA_ATTENTION_DECODE_CUH */
