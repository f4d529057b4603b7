// SPDX-License-Identifier: Apache-2.0
/* attention.c — PK_TASK_ATTENTION: causal GQA attention over a paged KV cache, KV heads kv0 ..
 * kv0+nkv-1. qkv row [Hkv · (G+2) · D], G = Hq / Hkv: per KV head g, query heads g·G .. g·G+G-1,
 * then K, V. out row [Hq · D], head h at h·D. Cache [num_pages, page_size, Hkv, D]: (request r,
 * position p) is in page page_table[r · pages_per_req + p / page_size], slot p % page_size.
 * Phases 1+2 (norm, RoPE, K and V into the cache) run for all rows before phase 3 reads the cache,
 * so a prefill chunk sees its own tokens. Softmax takes two passes over j (max, then exp-sum into a
 * [D] fp32 accumulator): scratch is fixed stack arrays, D <= PK_CPU_ATTN_MAX_HEAD_DIM.
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

enum { MAX_D = PK_CPU_ATTN_MAX_HEAD_DIM };

/* cs[i], sn[i] = bf16(cos / sin(fp32(pos) · inv_freq[i])), i < half: shared by i and i + half. */
static void rope_cos_sin(const float *inv_freq, int half, int pos, float *cs, float *sn) {
    for (int i = 0; i < half; i++) {
        float a = (float)pos * inv_freq[i];
        cs[i] = pk_round_bf16(cosf(a));
        sn[i] = pk_round_bf16(sinf(a));
    }
}

/* y [D] = RoPE(rmsnorm(x) · norm_w) of one head vector x [D] (no norm when norm_w is NULL),
 * as fp32 holding bf16 values: HF's x·cos + rotate_half(x)·sin in bf16 arithmetic. */
static void head_norm_rope(const pk_bf16 *x, const pk_bf16 *norm_w, float eps, const float *cs,
                           const float *sn, int D, float *y) {
    pk_bf16 xn[MAX_D];
    if (norm_w) {
        pk_cpu_rmsnorm(x, 0, norm_w, 1, D, eps, xn, 0);
        x = xn;
    }
    int half = D / 2;
    for (int i = 0; i < half; i++) {
        float a = pk_bf16_to_f32(x[i]), b = pk_bf16_to_f32(x[i + half]);
        y[i] = pk_round_bf16(pk_round_bf16(a * cs[i]) - pk_round_bf16(b * sn[i]));
        y[i + half] = pk_round_bf16(pk_round_bf16(b * cs[i]) + pk_round_bf16(a * sn[i]));
    }
}

/* Whether row t's request and position fit the page table: pages 0 .. pos / page_size mapped. */
static int row_valid(const pk_attn_step *s, int t) {
    int req = s->token_req[t], pos = s->token_pos[t];
    if (req < 0 || pos < 0 || s->page_size <= 0 || pos / s->page_size >= s->pages_per_req) return 0;
    for (int i = 0; i <= pos / s->page_size; i++)
        if (s->page_table[(int64_t)req * s->pages_per_req + i] < 0) return 0;
    return 1;
}

/* Element offset of (req, pos, head g) in a cache (for a valid row's request, pos <= its pos). */
static int64_t cache_offset(const pk_attn_step *s, int req, int pos, int Hkv, int g, int D) {
    int32_t page = s->page_table[(int64_t)req * s->pages_per_req + pos / s->page_size];
    return (((int64_t)page * s->page_size + pos % s->page_size) * Hkv + g) * D;
}

/* sc[b] = (q · k_b) · scale for b < nb <= 4: independent fp32 sums over i ascending, computed
 * together so they overlap; each is the same bits as if computed alone. q [D], k_b [D]. */
static void scores(const float *q, const pk_bf16 *const *k, int nb, int D, float scale, float *sc) {
    if (nb == 4) {
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (int i = 0; i < D; i++) {
            s0 += q[i] * pk_bf16_to_f32(k[0][i]);
            s1 += q[i] * pk_bf16_to_f32(k[1][i]);
            s2 += q[i] * pk_bf16_to_f32(k[2][i]);
            s3 += q[i] * pk_bf16_to_f32(k[3][i]);
        }
        sc[0] = s0 * scale;
        sc[1] = s1 * scale;
        sc[2] = s2 * scale;
        sc[3] = s3 * scale;
        return;
    }
    for (int b = 0; b < nb; b++) {
        float s = 0.0f;
        for (int i = 0; i < D; i++) s += q[i] * pk_bf16_to_f32(k[b][i]);
        sc[b] = s * scale;
    }
}

/* Whether position j is in split `split` of `nsplit`: blocks of PK_ATTN_SPLIT_BLOCK positions
 * go round-robin to the splits (block b to split b mod nsplit). */
static int in_split(int j, int split, int nsplit) { return (j / PK_ATTN_SPLIT_BLOCK) % nsplit == split; }

/* A split's positions in groups of 4, ascending: the group after the one starting at j0 (the
 * next 4 of its block, or the start of the split's next block). Groups never cross a block:
 * PK_ATTN_SPLIT_BLOCK % 4 == 0. The first group of split s starts at s · PK_ATTN_SPLIT_BLOCK. */
static int next_group(int j0, int nsplit) {
    j0 += 4;
    return j0 % PK_ATTN_SPLIT_BLOCK ? j0 : j0 + (nsplit - 1) * PK_ATTN_SPLIT_BLOCK;
}

/* The three kernels' one body. Phases 1 + 2 write the K / V of rows whose position is in the
 * split; phase 3 runs each (row, query head) over the positions 0 .. pos of the split, 4 at a
 * time in ascending order (never across a block: PK_ATTN_SPLIT_BLOCK % 4 == 0, so with one split
 * the groups, and the bits, are those of a loop over all positions). out != NULL: the normalised
 * bf16 output; otherwise part gets acc [D], m, l per (row, head). */
static void attention_core(const pk_layer_params *p, const pk_attn_step *s, int kv0, int nkv, int split,
                           int nsplit, const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *k_cache,
                           pk_bf16 *v_cache, const pk_bf16 *q_norm, const pk_bf16 *k_norm, pk_bf16 *out,
                           int64_t out_stride, float *part, int64_t part_stride) {
    int D = p->head_dim, Hq = p->num_q_heads, Hkv = p->num_kv_heads;
    if (D <= 0 || D > MAX_D || D % 2 != 0 || Hkv <= 0 || Hq % Hkv != 0 || kv0 < 0 || nkv < 0 ||
        kv0 + nkv > Hkv || nsplit < 1 || split < 0 || split >= nsplit)
        return; /* a layer the API rejects, or a task outside it */
    int G = Hq / Hkv, half = D / 2;
    int64_t group_cols = (int64_t)(G + 2) * D;
    float inv_freq[MAX_D / 2], cs[MAX_D / 2], sn[MAX_D / 2];
    float q[MAX_D], acc[MAX_D], kr[MAX_D];
    pk_rope_inv_freq(p, inv_freq);

    /* phases 1 + 2: rotated K and raw V of every row (of this split) into the cache */
    for (int t = 0; t < s->n_tok; t++) {
        int pos = s->token_pos[t], req = s->token_req[t];
        if (!row_valid(s, t) || !in_split(pos, split, nsplit)) continue;
        rope_cos_sin(inv_freq, half, pos, cs, sn);
        for (int g = kv0; g < kv0 + nkv; g++) {
            const pk_bf16 *kv = qkv + t * qkv_stride + g * group_cols + (int64_t)G * D; /* K, V */
            int64_t off = cache_offset(s, req, pos, Hkv, g, D);
            head_norm_rope(kv, k_norm, p->qk_norm_eps, cs, sn, D, kr);
            for (int i = 0; i < D; i++) k_cache[off + i] = pk_f32_to_bf16(kr[i]);
            memcpy(v_cache + off, kv + D, (size_t)D * sizeof *v_cache);
        }
    }

    /* phase 3: each query head against the positions 0 .. pos of its request (in the split) */
    const int B = PK_ATTN_SPLIT_BLOCK;
    float scale = 1.0f / sqrtf((float)D);
    for (int t = 0; t < s->n_tok; t++) {
        int pos = s->token_pos[t], req = s->token_req[t];
        int valid = row_valid(s, t);
        if (valid) rope_cos_sin(inv_freq, half, pos, cs, sn);
        for (int g = kv0; g < kv0 + nkv; g++) {
            for (int hh = 0; hh < G; hh++) {
                float m = -INFINITY, sum = 0.0f, sc[4];
                for (int i = 0; i < D; i++) acc[i] = 0.0f;
                if (valid) {
                    const pk_bf16 *qx = qkv + t * qkv_stride + g * group_cols + (int64_t)hh * D;
                    head_norm_rope(qx, q_norm, p->qk_norm_eps, cs, sn, D, q);
                    /* pass 1: the max score; pass 2: exp-sum and Σ e_j v_j, 4 positions at a time */
                    const pk_bf16 *kp[4];
                    for (int j0 = split * B; j0 <= pos; j0 = next_group(j0, nsplit)) {
                        int nb = pos + 1 - j0 < 4 ? pos + 1 - j0 : 4;
                        for (int b = 0; b < nb; b++) kp[b] = k_cache + cache_offset(s, req, j0 + b, Hkv, g, D);
                        scores(q, kp, nb, D, scale, sc);
                        for (int b = 0; b < nb; b++)
                            if (sc[b] > m) m = sc[b];
                    }
                    for (int j0 = split * B; j0 <= pos; j0 = next_group(j0, nsplit)) {
                        int nb = pos + 1 - j0 < 4 ? pos + 1 - j0 : 4;
                        for (int b = 0; b < nb; b++) kp[b] = k_cache + cache_offset(s, req, j0 + b, Hkv, g, D);
                        scores(q, kp, nb, D, scale, sc);
                        for (int b = 0; b < nb; b++) {
                            float e = expf(sc[b] - m);
                            const pk_bf16 *v = v_cache + cache_offset(s, req, j0 + b, Hkv, g, D); /* [D] */
                            sum += e;
                            for (int i = 0; i < D; i++) acc[i] += e * pk_bf16_to_f32(v[i]);
                        }
                    }
                }
                int64_t head = (int64_t)(g - kv0) * G + hh; /* within the task's heads */
                if (out) {
                    pk_bf16 *o = out + t * out_stride + ((int64_t)g * G + hh) * D; /* [D] */
                    if (valid)
                        for (int i = 0; i < D; i++) o[i] = pk_f32_to_bf16(acc[i] / sum);
                    else
                        memset(o, 0, (size_t)D * sizeof *o);
                } else {
                    float *pr = part + t * part_stride + head * (D + 2); /* acc [D], m, l */
                    memcpy(pr, acc, (size_t)D * sizeof *pr);
                    pr[D] = m;
                    pr[D + 1] = sum;
                }
            }
        }
    }
}

void pk_cpu_attention(const pk_layer_params *p, const pk_attn_step *s, int kv0, int nkv,
                      const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *k_cache, pk_bf16 *v_cache,
                      const pk_bf16 *q_norm, const pk_bf16 *k_norm, pk_bf16 *out,
                      int64_t out_stride) {
    attention_core(p, s, kv0, nkv, 0, 1, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, out, out_stride,
                   NULL, 0);
}

void pk_cpu_attention_partial(const pk_layer_params *p, const pk_attn_step *s, int kv0, int nkv, int split,
                              int nsplit, const pk_bf16 *qkv, int64_t qkv_stride, pk_bf16 *k_cache,
                              pk_bf16 *v_cache, const pk_bf16 *q_norm, const pk_bf16 *k_norm, float *part,
                              int64_t part_stride) {
    attention_core(p, s, kv0, nkv, split, nsplit, qkv, qkv_stride, k_cache, v_cache, q_norm, k_norm, NULL, 0,
                   part, part_stride);
}

void pk_cpu_attention_combine(int n_tok, int nheads, int D, int nsplit, const float *part, int64_t part_stride,
                              pk_bf16 *out, int64_t out_stride) {
    if (D <= 0 || D > MAX_D || nheads < 0 || nsplit < 1) return;
    const int64_t split_cols = (int64_t)nheads * (D + 2);
    for (int t = 0; t < n_tok; t++) {
        const float *row = part + t * part_stride;
        for (int h = 0; h < nheads; h++) {
            pk_bf16 *o = out + t * out_stride + (int64_t)h * D; /* [D] */
            float M = -INFINITY;
            for (int sp = 0; sp < nsplit; sp++) {
                float m = row[sp * split_cols + h * (D + 2) + D];
                if (m > M) M = m;
            }
            if (M == -INFINITY) { /* no position anywhere: a row the kernels skip */
                memset(o, 0, (size_t)D * sizeof *o);
                continue;
            }
            float den = 0.0f, num[MAX_D];
            for (int i = 0; i < D; i++) num[i] = 0.0f;
            for (int sp = 0; sp < nsplit; sp++) {
                const float *pr = row + sp * split_cols + h * (D + 2); /* acc [D], m, l */
                float f = expf(pr[D] - M); /* 0 for a split without positions */
                den += f * pr[D + 1];
                for (int i = 0; i < D; i++) num[i] += f * pr[i];
            }
            for (int i = 0; i < D; i++) o[i] = pk_f32_to_bf16(num[i] / den);
        }
    }
}
