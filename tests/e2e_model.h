// SPDX-License-Identifier: Apache-2.0
/* e2e_model.h — the small random Qwen3-shaped model of the end-to-end table (tests/e2e_table.h), built
 * through pk.h, and its reference forward written out in C. 2 layers, hidden 80, 4 query / 2 KV heads
 * of 32, MLP 200, vocabulary 97; weights from a fixed seed. The one builder is e2e_add_layers: the
 * table's variants (attention split over the KV length, down_proj split over K, fused MLP, LM head
 * with argmax) are its arguments. The reference (e2e_ref_next) recomputes the whole sequence, one
 * position at a time, fp32 math rounded to bf16 where torch stores bf16: no cache, no tasks.
 */
#ifndef PK_TEST_E2E_MODEL_H
#define PK_TEST_E2E_MODEL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/bf16.h"
#include "pk.h"

enum { V = 97, H = 80, HQ = 4, HKV = 2, D = 32, I = 200, NL = 2, G = HQ / HKV };
enum { QKV = HKV * (G + 2) * D, MAXLEN = 64 };
#define EPS 1e-6f
#define THETA 10000.0f

typedef struct weights {
    pk_bf16 *embed;                    /* [V, H] */
    pk_bf16 *attn_norm[NL];            /* [H] */
    pk_bf16 *wq[NL], *wk[NL], *wv[NL]; /* [HQ·D, H], [HKV·D, H], [HKV·D, H] */
    pk_bf16 *q_norm[NL], *k_norm[NL];  /* [D] */
    pk_bf16 *wo[NL];                   /* [H, HQ·D] */
    pk_bf16 *mlp_norm[NL];             /* [H] */
    pk_bf16 *wg[NL], *wu[NL];          /* [I, H] */
    pk_bf16 *wd[NL];                   /* [H, I] */
    pk_bf16 *final_norm;               /* [H] */
    pk_bf16 *lm_head;                  /* [V, H] */
} weights;

static inline pk_bf16 *e2e_rand_bf16(uint64_t *seed, size_t n, float scale, float offset) {
    pk_bf16 *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = pk_f32_to_bf16(offset + scale * check_rand_f32(seed));
    return p;
}

static inline void e2e_make_weights(weights *w) {
    uint64_t s = 0xabcdef;
    w->embed = e2e_rand_bf16(&s, (size_t)V * H, 1.0f, 0);
    for (int l = 0; l < NL; l++) {
        w->attn_norm[l] = e2e_rand_bf16(&s, H, 0.2f, 1.0f);
        w->wq[l] = e2e_rand_bf16(&s, (size_t)HQ * D * H, 0.15f, 0);
        w->wk[l] = e2e_rand_bf16(&s, (size_t)HKV * D * H, 0.15f, 0);
        w->wv[l] = e2e_rand_bf16(&s, (size_t)HKV * D * H, 0.15f, 0);
        w->q_norm[l] = e2e_rand_bf16(&s, D, 0.2f, 1.0f);
        w->k_norm[l] = e2e_rand_bf16(&s, D, 0.2f, 1.0f);
        w->wo[l] = e2e_rand_bf16(&s, (size_t)H * HQ * D, 0.1f, 0);
        w->mlp_norm[l] = e2e_rand_bf16(&s, H, 0.2f, 1.0f);
        w->wg[l] = e2e_rand_bf16(&s, (size_t)I * H, 0.15f, 0);
        w->wu[l] = e2e_rand_bf16(&s, (size_t)I * H, 0.15f, 0);
        w->wd[l] = e2e_rand_bf16(&s, (size_t)H * I, 0.1f, 0);
    }
    w->final_norm = e2e_rand_bf16(&s, H, 0.2f, 1.0f);
    w->lm_head = e2e_rand_bf16(&s, (size_t)V * H, 0.6f, 0);
}

static inline void e2e_free_weights(weights *w) {
    pk_bf16 **p = (pk_bf16 **)w; /* every field is a pk_bf16 * */
    for (size_t i = 0; i < sizeof *w / sizeof *p; i++) free(p[i]);
}

/* The tests' kernel configuration: 2 requests of up to MAXLEN tokens, T rows per step, pages of
 * 4 tokens; the caller sets workers, schedulers, mode and backend. */
static inline pk_config e2e_config(int T) {
    pk_config c = pk_config_default();
    c.max_seq_length = MAXLEN;
    c.max_requests = 2;
    c.max_tokens_per_step = T;
    c.page_size = 4;
    c.num_pages = 24;
    return c;
}

static inline pk_tensor *e2e_attach(pk_kernel *k, const char *name, const pk_bf16 *data, int64_t d0, int64_t d1) {
    int64_t dims[2] = {d0, d1};
    return pk_attach_input(k, name, PK_DTYPE_BF16, d1 ? 2 : 1, dims, NULL, data);
}

static inline pk_tensor *e2e_act(pk_kernel *k, const char *name, int64_t T, int64_t n) {
    int64_t dims[2] = {T, n};
    return pk_new_tensor(k, name, PK_DTYPE_BF16, 2, dims, PK_IO_LOCAL);
}

/* Adds the model's tensors and layers to k (made with e2e_config's T, page_size, num_pages): fused
 * QKV with RMSNorm, attention with q/k norms, o_proj + residual, fused gate/up with RMSNorm,
 * silu·mul + down + residual (layer 0: silu·mul in the down_proj tasks; layer 1: in the gate/up
 * tasks, pk_rmsnorm_linear_swiglu_layer), final norm + LM head, argmax into pk_step_output. Odd grids on
 * purpose, and the linear family's uneven ones (tiles of ⌊N/grid⌋ or ⌈N/grid⌉ rows): qkv 6 (256 rows;
 * tiles cross the fused KV groups' and q / k / v's boundaries, and the attention's two events take
 * three tiles each), o_proj 6, gate|up 9, down 7 and 3, LM head 3. The variant v: kv_splits, the
 * attention's split over the KV length; mlp E2E_MLP_SPLITK: layer 1's down_proj split over K (the
 * gate/up layer's grid 5: each task follows one gate/up task); E2E_MLP_FUSED: layer 0's MLP as one
 * layer of 5 tasks whose sum stays in an accumulator: layer 1's qkv reads h + acc
 * (pk_rmsnorm_linear_acc_layer) and its o_proj clears acc; lm_argmax: the LM head and the argmax as
 * one layer (grid 3). Returns the logits tensor [T, V]. */
typedef enum e2e_mlp {
    E2E_MLP_ROWS = 0,   /* gate|up then down, each by rows */
    E2E_MLP_SPLITK = 1, /* layer 1's down_proj split over K (pk_linear_splitk_with_residual_layer) */
    E2E_MLP_FUSED = 2,  /* layer 0's MLP as one layer (pk_rmsnorm_swiglu_down_layer) */
} e2e_mlp;

/* The model options that change the graph: one column group of the table. */
typedef struct e2e_variant {
    int kv_splits; /* pk_attention_params.kv_splits: the attention's split over the KV length; 0, 1: none */
    e2e_mlp mlp;
    int lm_argmax; /* 1: the LM head and the argmax as one layer (pk_rmsnorm_linear_argmax_layer) */
} e2e_variant;

static inline pk_tensor *e2e_add_layers(pk_kernel *k, const weights *w, const pk_config *c, const e2e_variant *v) {
    const int64_t T = c->max_tokens_per_step;
    char name[64];
    pk_tensor *h = e2e_act(k, "h0", T, H), *acc = NULL; /* the layer's input: h (+ acc) */
    pk_embedding_layer(k, pk_step_tokens(k), e2e_attach(k, "embed", w->embed, V, H), h, 5);
    for (int l = 0; l < NL; l++) {
#define NAME(fmt) (snprintf(name, sizeof name, fmt, l), name)
        pk_tensor *qkv_in[3] = {e2e_attach(k, NAME("wq%d"), w->wq[l], HQ * D, H),
                                e2e_attach(k, NAME("wk%d"), w->wk[l], HKV * D, H),
                                e2e_attach(k, NAME("wv%d"), w->wv[l], HKV * D, H)};
        pk_tensor *wqkv = pk_fuse_tensors(k, NAME("wqkv%d"), qkv_in, 3, 0, HKV);
        pk_tensor *qkv = e2e_act(k, NAME("qkv%d"), T, QKV);
        pk_tensor *attn_norm = e2e_attach(k, NAME("attn_norm%d"), w->attn_norm[l], H, 0);
        pk_tensor *h_in = acc ? e2e_act(k, NAME("h_in%d"), T, H) : h; /* h + acc, written by the qkv tasks */
        if (acc)
            pk_rmsnorm_linear_acc_layer(k, h, acc, attn_norm, wqkv, qkv, h_in, EPS, 6);
        else
            pk_rmsnorm_linear_layer(k, h, attn_norm, wqkv, qkv, EPS, 6);
        int64_t cache_dims[4] = {c->num_pages, c->page_size, HKV, D};
        pk_tensor *kc = pk_new_tensor(k, NAME("k_cache%d"), PK_DTYPE_BF16, 4, cache_dims, PK_IO_LOCAL);
        pk_tensor *vc = pk_new_tensor(k, NAME("v_cache%d"), PK_DTYPE_BF16, 4, cache_dims, PK_IO_LOCAL);
        pk_tensor *att = e2e_act(k, NAME("att%d"), T, HQ * D);
        pk_attention_params ap = {.num_q_heads = HQ, .num_kv_heads = HKV, .head_dim = D, .rope_theta = THETA,
                                  .qk_norm_eps = EPS, .kv_splits = v->kv_splits};
        pk_tensor *qn = e2e_attach(k, NAME("q_norm%d"), w->q_norm[l], D, 0);
        pk_tensor *kn = e2e_attach(k, NAME("k_norm%d"), w->k_norm[l], D, 0);
        pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &ap, 2);
        pk_tensor *h2 = e2e_act(k, NAME("h_attn%d"), T, H);
        pk_tensor *wo = e2e_attach(k, NAME("wo%d"), w->wo[l], H, HQ * D);
        if (acc)
            pk_linear_with_residual_clear_layer(k, att, wo, h_in, acc, h2, 6);
        else
            pk_linear_with_residual_layer(k, att, wo, h_in, h2, 6);
        acc = NULL;
        pk_tensor *gu_in[2] = {e2e_attach(k, NAME("wg%d"), w->wg[l], I, H),
                               e2e_attach(k, NAME("wu%d"), w->wu[l], I, H)};
        pk_tensor *mlp_norm = e2e_attach(k, NAME("mlp_norm%d"), w->mlp_norm[l], H, 0);
        pk_tensor *wd = e2e_attach(k, NAME("wd%d"), w->wd[l], H, I);
        if (l == 0 && v->mlp == E2E_MLP_FUSED) { /* 5 tasks of 40 features: gate, up and down rows each */
            pk_tensor *wgu = pk_fuse_tensors(k, NAME("wgu%d"), gu_in, 2, 0, 5);
            int64_t acc_dims[2] = {T, H};
            acc = pk_new_tensor(k, NAME("acc%d"), PK_DTYPE_INT64, 2, acc_dims, PK_IO_LOCAL);
            pk_rmsnorm_swiglu_down_layer(k, h2, mlp_norm, wgu, wd, acc, EPS, 5);
            h = h2;
            continue;
        }
        pk_tensor *h3 = e2e_act(k, NAME("h_mlp%d"), T, H);
        if (l == 0) { /* gate|up, then silu·mul inside every down_proj task */
            pk_tensor *wgu = pk_fuse_tensors(k, NAME("wgu%d"), gu_in, 2, 0, 1);
            pk_tensor *gu = e2e_act(k, NAME("gu%d"), T, 2 * I);
            pk_rmsnorm_linear_layer(k, h2, mlp_norm, wgu, gu, EPS, 9);
            pk_silu_mul_linear_with_residual_layer(k, gu, wd, h2, h3, 7);
        } else { /* silu·mul in the gate|up layer: 5 tasks of 40 features, blocks of 8 gate / up rows */
            pk_tensor *wgu = pk_fuse_tensors(k, NAME("wgu%d"), gu_in, 2, 0, I / 8);
            pk_tensor *act = e2e_act(k, NAME("act%d"), T, I);
            pk_rmsnorm_linear_swiglu_layer(k, h2, mlp_norm, wgu, 8, act, EPS, 5);
            if (v->mlp == E2E_MLP_SPLITK)
                pk_linear_splitk_with_residual_layer(k, act, wd, h2, h3, 5);
            else
                pk_linear_with_residual_layer(k, act, wd, h2, h3, 3);
        }
        h = h3;
#undef NAME
    }
    pk_tensor *logits = e2e_act(k, "logits", T, V);
    pk_tensor *final_norm = e2e_attach(k, "final_norm", w->final_norm, H, 0);
    pk_tensor *lm_head = e2e_attach(k, "lm_head", w->lm_head, V, H);
    if (v->lm_argmax) {
        pk_rmsnorm_linear_argmax_layer(k, h, final_norm, lm_head, logits, pk_step_output(k), EPS, 3);
    } else {
        pk_rmsnorm_linear_layer(k, h, final_norm, lm_head, logits, EPS, 3);
        pk_argmax_layer(k, logits, pk_step_output(k), 1);
    }
    return logits;
}

/* Layers e2e_add_layers adds for v: the embedding, 5 per transformer layer (qkv, attention, o_proj,
 * gate|up, down; the fused MLP is one), the LM head and the argmax (one layer with lm_argmax). The
 * split attention is one layer too: its last tasks fold. */
static inline int e2e_num_layers(const e2e_variant *v) {
    return 1 + 5 * NL + 2 - (v->mlp == E2E_MLP_FUSED) - (v->lm_argmax != 0);
}

/* ---- the reference: one sequence at a time, fp32 math, bf16 where torch stores bf16 ---- */

static inline float e2e_b(pk_bf16 x) { return pk_bf16_to_f32(x); }
static inline float e2e_r(float x) { return pk_round_bf16(x); }

static inline void e2e_ref_rmsnorm(const float *x, const pk_bf16 *w, int n, float *out) {
    float ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + EPS);
    for (int i = 0; i < n; i++) out[i] = e2e_r(e2e_r(x[i] * inv) * e2e_b(w[i]));
}

static inline void e2e_ref_matvec(const float *x, const pk_bf16 *w, int n, int k, float *out) {
    for (int j = 0; j < n; j++) {
        float acc = 0;
        for (int i = 0; i < k; i++) acc += x[i] * e2e_b(w[(size_t)j * k + i]);
        out[j] = e2e_r(acc);
    }
}

static inline void e2e_ref_rope(float *x, int pos) {
    for (int i = 0; i < D / 2; i++) {
        float inv = 1.0f / powf(THETA, (float)(2 * i) / (float)D);
        float c = e2e_r(cosf((float)pos * inv)), s = e2e_r(sinf((float)pos * inv));
        float a = x[i], bb = x[i + D / 2];
        x[i] = e2e_r(e2e_r(a * c) - e2e_r(bb * s));
        x[i + D / 2] = e2e_r(e2e_r(bb * c) + e2e_r(a * s));
    }
}

/* Greedy next token after seq[0 .. len) (len <= MAXLEN); the last position's logits [V] into logits. */
static inline int e2e_ref_next(const weights *w, const int32_t *seq, int len, float *logits) {
    static float h[MAXLEN][H], q[MAXLEN][HQ * D], kk[MAXLEN][HKV * D], vv[MAXLEN][HKV * D];
    static float att[MAXLEN][HQ * D], tmp[H], xn[H], g[I], u[I], m[I];
    for (int t = 0; t < len; t++)
        for (int i = 0; i < H; i++) h[t][i] = e2e_b(w->embed[(size_t)seq[t] * H + i]);
    for (int l = 0; l < NL; l++) {
        for (int t = 0; t < len; t++) {
            e2e_ref_rmsnorm(h[t], w->attn_norm[l], H, xn);
            e2e_ref_matvec(xn, w->wq[l], HQ * D, H, q[t]);
            e2e_ref_matvec(xn, w->wk[l], HKV * D, H, kk[t]);
            e2e_ref_matvec(xn, w->wv[l], HKV * D, H, vv[t]);
            for (int hh = 0; hh < HQ; hh++) {
                e2e_ref_rmsnorm(&q[t][hh * D], w->q_norm[l], D, tmp);
                memcpy(&q[t][hh * D], tmp, D * sizeof(float));
                e2e_ref_rope(&q[t][hh * D], t);
            }
            for (int hh = 0; hh < HKV; hh++) {
                e2e_ref_rmsnorm(&kk[t][hh * D], w->k_norm[l], D, tmp);
                memcpy(&kk[t][hh * D], tmp, D * sizeof(float));
                e2e_ref_rope(&kk[t][hh * D], t);
            }
        }
        for (int t = 0; t < len; t++)
            for (int hh = 0; hh < HQ; hh++) {
                int kv = hh / G;
                float sc[MAXLEN], mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    float dot = 0;
                    for (int i = 0; i < D; i++) dot += q[t][hh * D + i] * kk[j][kv * D + i];
                    sc[j] = dot / sqrtf((float)D);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j <= t; j++) sum += (sc[j] = expf(sc[j] - mx));
                for (int i = 0; i < D; i++) {
                    float acc = 0;
                    for (int j = 0; j <= t; j++) acc += sc[j] / sum * vv[j][kv * D + i];
                    att[t][hh * D + i] = e2e_r(acc);
                }
            }
        for (int t = 0; t < len; t++) {
            e2e_ref_matvec(att[t], w->wo[l], H, HQ * D, tmp);
            for (int i = 0; i < H; i++) h[t][i] = e2e_r(tmp[i] + h[t][i]);
            e2e_ref_rmsnorm(h[t], w->mlp_norm[l], H, xn);
            e2e_ref_matvec(xn, w->wg[l], I, H, g);
            e2e_ref_matvec(xn, w->wu[l], I, H, u);
            for (int i = 0; i < I; i++) m[i] = e2e_r(e2e_r(g[i] / (1.0f + expf(-g[i]))) * u[i]);
            e2e_ref_matvec(m, w->wd[l], H, I, tmp);
            for (int i = 0; i < H; i++) h[t][i] = e2e_r(tmp[i] + h[t][i]);
        }
    }
    e2e_ref_rmsnorm(h[len - 1], w->final_norm, H, xn);
    e2e_ref_matvec(xn, w->lm_head, V, H, logits);
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    return best;
}

#endif /* PK_TEST_E2E_MODEL_H */
