/* test_e2e_graph.c — a 2-layer Qwen3-shaped model built by hand through pk.h (GQA, q/k norm,
 * heads·head_dim ≠ hidden, untied LM head, fused qkv and gate|up weights), run by the CPU
 * backend for 3 requests of different prompt lengths with chunked prefill, a paged KV cache and
 * fewer slots than requests; its greedy tokens must equal a plain single-threaded reference
 * forward written here (whole-sequence recompute, no cache, no tasks), in both scheduling modes
 * and for several worker counts, and the runs must be bit-identical to each other.
 */
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
    pk_bf16 *embed;               /* [V, H] */
    pk_bf16 *attn_norm[NL];       /* [H] */
    pk_bf16 *wq[NL], *wk[NL], *wv[NL]; /* [HQ·D, H], [HKV·D, H], [HKV·D, H] */
    pk_bf16 *q_norm[NL], *k_norm[NL];  /* [D] */
    pk_bf16 *wo[NL];              /* [H, HQ·D] */
    pk_bf16 *mlp_norm[NL];        /* [H] */
    pk_bf16 *wg[NL], *wu[NL];     /* [I, H] */
    pk_bf16 *wd[NL];              /* [H, I] */
    pk_bf16 *final_norm;          /* [H] */
    pk_bf16 *lm_head;             /* [V, H] */
} weights;

static pk_bf16 *rand_bf16(uint64_t *seed, size_t n, float scale, float offset) {
    pk_bf16 *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = pk_f32_to_bf16(offset + scale * check_rand_f32(seed));
    return p;
}

static void make_weights(weights *w) {
    uint64_t s = 0xabcdef;
    w->embed = rand_bf16(&s, (size_t)V * H, 1.0f, 0);
    for (int l = 0; l < NL; l++) {
        w->attn_norm[l] = rand_bf16(&s, H, 0.2f, 1.0f);
        w->wq[l] = rand_bf16(&s, (size_t)HQ * D * H, 0.15f, 0);
        w->wk[l] = rand_bf16(&s, (size_t)HKV * D * H, 0.15f, 0);
        w->wv[l] = rand_bf16(&s, (size_t)HKV * D * H, 0.15f, 0);
        w->q_norm[l] = rand_bf16(&s, D, 0.2f, 1.0f);
        w->k_norm[l] = rand_bf16(&s, D, 0.2f, 1.0f);
        w->wo[l] = rand_bf16(&s, (size_t)H * HQ * D, 0.1f, 0);
        w->mlp_norm[l] = rand_bf16(&s, H, 0.2f, 1.0f);
        w->wg[l] = rand_bf16(&s, (size_t)I * H, 0.15f, 0);
        w->wu[l] = rand_bf16(&s, (size_t)I * H, 0.15f, 0);
        w->wd[l] = rand_bf16(&s, (size_t)H * I, 0.1f, 0);
    }
    w->final_norm = rand_bf16(&s, H, 0.2f, 1.0f);
    w->lm_head = rand_bf16(&s, (size_t)V * H, 0.6f, 0);
}

static void free_weights(weights *w) {
    pk_bf16 **p = (pk_bf16 **)w; /* every field is a pk_bf16 * */
    for (size_t i = 0; i < sizeof *w / sizeof *p; i++) free(p[i]);
}

/* ---- the reference: one sequence at a time, fp32 math, bf16 where torch stores bf16 ---- */

static float b(pk_bf16 x) { return pk_bf16_to_f32(x); }
static float r(float x) { return pk_round_bf16(x); }

static void ref_rmsnorm(const float *x, const pk_bf16 *w, int n, float *out) {
    float ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + EPS);
    for (int i = 0; i < n; i++) out[i] = r(r(x[i] * inv) * b(w[i]));
}

static void ref_matvec(const float *x, const pk_bf16 *w, int n, int k, float *out) {
    for (int j = 0; j < n; j++) {
        float acc = 0;
        for (int i = 0; i < k; i++) acc += x[i] * b(w[(size_t)j * k + i]);
        out[j] = r(acc);
    }
}

static void ref_rope(float *x, int pos) {
    for (int i = 0; i < D / 2; i++) {
        float inv = 1.0f / powf(THETA, (float)(2 * i) / (float)D);
        float c = r(cosf((float)pos * inv)), s = r(sinf((float)pos * inv));
        float a = x[i], bb = x[i + D / 2];
        x[i] = r(r(a * c) - r(bb * s));
        x[i + D / 2] = r(r(bb * c) + r(a * s));
    }
}

/* Greedy next token after seq[0 .. len); logits of the last position into logits. */
static int ref_next(const weights *w, const int32_t *seq, int len, float *logits) {
    static float h[MAXLEN][H], q[MAXLEN][HQ * D], kk[MAXLEN][HKV * D], vv[MAXLEN][HKV * D];
    static float att[MAXLEN][HQ * D], tmp[H], xn[H], g[I], u[I], m[I];
    for (int t = 0; t < len; t++)
        for (int i = 0; i < H; i++) h[t][i] = b(w->embed[(size_t)seq[t] * H + i]);
    for (int l = 0; l < NL; l++) {
        for (int t = 0; t < len; t++) {
            ref_rmsnorm(h[t], w->attn_norm[l], H, xn);
            ref_matvec(xn, w->wq[l], HQ * D, H, q[t]);
            ref_matvec(xn, w->wk[l], HKV * D, H, kk[t]);
            ref_matvec(xn, w->wv[l], HKV * D, H, vv[t]);
            for (int hh = 0; hh < HQ; hh++) {
                ref_rmsnorm(&q[t][hh * D], w->q_norm[l], D, tmp);
                memcpy(&q[t][hh * D], tmp, D * sizeof(float));
                ref_rope(&q[t][hh * D], t);
            }
            for (int hh = 0; hh < HKV; hh++) {
                ref_rmsnorm(&kk[t][hh * D], w->k_norm[l], D, tmp);
                memcpy(&kk[t][hh * D], tmp, D * sizeof(float));
                ref_rope(&kk[t][hh * D], t);
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
                    att[t][hh * D + i] = r(acc);
                }
            }
        for (int t = 0; t < len; t++) {
            ref_matvec(att[t], w->wo[l], H, HQ * D, tmp);
            for (int i = 0; i < H; i++) h[t][i] = r(tmp[i] + h[t][i]);
            ref_rmsnorm(h[t], w->mlp_norm[l], H, xn);
            ref_matvec(xn, w->wg[l], I, H, g);
            ref_matvec(xn, w->wu[l], I, H, u);
            for (int i = 0; i < I; i++) m[i] = r(r(g[i] / (1.0f + expf(-g[i]))) * u[i]);
            ref_matvec(m, w->wd[l], H, I, tmp);
            for (int i = 0; i < H; i++) h[t][i] = r(tmp[i] + h[t][i]);
        }
    }
    ref_rmsnorm(h[len - 1], w->final_norm, H, xn);
    ref_matvec(xn, w->lm_head, V, H, logits);
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    return best;
}

/* ---- the same model through pk.h ---- */

static pk_tensor *attach(pk_kernel *k, const char *name, const pk_bf16 *data, int64_t d0, int64_t d1) {
    int64_t dims[2] = {d0, d1};
    return pk_attach_input(k, name, PK_DTYPE_BF16, d1 ? 2 : 1, dims, NULL, data);
}

static pk_tensor *act(pk_kernel *k, const char *name, int64_t T, int64_t n) {
    int64_t dims[2] = {T, n};
    return pk_new_tensor(k, name, PK_DTYPE_BF16, 2, dims, PK_IO_LOCAL);
}

static pk_kernel *build(const weights *w, pk_sched_mode mode, int workers, int schedulers, pk_tensor **logits_out) {
    pk_config c = pk_config_default();
    c.max_seq_length = MAXLEN;
    c.max_requests = 2;
    c.max_tokens_per_step = 8;
    c.page_size = 4;
    c.num_pages = 24;
    c.num_workers = workers;
    c.num_local_schedulers = schedulers;
    c.sched_mode = mode;
    pk_kernel *k = pk_kernel_new(&c);
    const int64_t T = c.max_tokens_per_step;
    char name[64];
    pk_tensor *h = act(k, "h0", T, H);
    pk_embedding_layer(k, pk_step_tokens(k), attach(k, "embed", w->embed, V, H), h, 5);
    for (int l = 0; l < NL; l++) {
#define NAME(fmt) (snprintf(name, sizeof name, fmt, l), name)
        pk_tensor *qkv_in[3] = {attach(k, NAME("wq%d"), w->wq[l], HQ * D, H),
                                attach(k, NAME("wk%d"), w->wk[l], HKV * D, H),
                                attach(k, NAME("wv%d"), w->wv[l], HKV * D, H)};
        pk_tensor *wqkv = pk_fuse_tensors(k, NAME("wqkv%d"), qkv_in, 3, 0, HKV);
        pk_tensor *qkv = act(k, NAME("qkv%d"), T, QKV);
        pk_rmsnorm_linear_layer(k, h, attach(k, NAME("attn_norm%d"), w->attn_norm[l], H, 0), wqkv, qkv, EPS, 4);
        int64_t cache_dims[4] = {c.num_pages, c.page_size, HKV, D};
        pk_tensor *kc = pk_new_tensor(k, NAME("k_cache%d"), PK_DTYPE_BF16, 4, cache_dims, PK_IO_LOCAL);
        pk_tensor *vc = pk_new_tensor(k, NAME("v_cache%d"), PK_DTYPE_BF16, 4, cache_dims, PK_IO_LOCAL);
        pk_tensor *att = act(k, NAME("att%d"), T, HQ * D);
        pk_attention_params ap = {.num_q_heads = HQ, .num_kv_heads = HKV, .head_dim = D, .rope_theta = THETA,
                                  .qk_norm_eps = EPS};
        pk_attention_layer(k, qkv, kc, vc, attach(k, NAME("q_norm%d"), w->q_norm[l], D, 0),
                           attach(k, NAME("k_norm%d"), w->k_norm[l], D, 0), att, &ap, 2);
        pk_tensor *h2 = act(k, NAME("h_attn%d"), T, H);
        pk_linear_with_residual_layer(k, att, attach(k, NAME("wo%d"), w->wo[l], H, HQ * D), h, h2, 8);
        pk_tensor *gu_in[2] = {attach(k, NAME("wg%d"), w->wg[l], I, H), attach(k, NAME("wu%d"), w->wu[l], I, H)};
        pk_tensor *wgu = pk_fuse_tensors(k, NAME("wgu%d"), gu_in, 2, 0, 1);
        pk_tensor *gu = act(k, NAME("gu%d"), T, 2 * I);
        pk_rmsnorm_linear_layer(k, h2, attach(k, NAME("mlp_norm%d"), w->mlp_norm[l], H, 0), wgu, gu, EPS, 10);
        pk_tensor *h3 = act(k, NAME("h_mlp%d"), T, H);
        pk_silu_mul_linear_with_residual_layer(k, gu, attach(k, NAME("wd%d"), w->wd[l], H, I), h2, h3, 5);
        h = h3;
#undef NAME
    }
    pk_tensor *logits = act(k, "logits", T, V);
    pk_rmsnorm_linear_layer(k, h, attach(k, "final_norm", w->final_norm, H, 0), attach(k, "lm_head", w->lm_head, V, H),
                            logits, EPS, 1);
    pk_argmax_layer(k, logits, pk_step_output(k), 1);
    pk_status s = pk_compile(k, NULL);
    CHECK(s == PK_OK, "compile: %s", pk_kernel_error(k));
    *logits_out = logits;
    return k;
}

enum { NREQ = 3, NEW = 12 };
static const int prompt_len[NREQ] = {5, 19, 1};

int main(void) {
    weights w;
    make_weights(&w);
    int32_t prompts[NREQ][32];
    uint64_t seed = 99;
    for (int i = 0; i < NREQ; i++)
        for (int j = 0; j < prompt_len[i]; j++) prompts[i][j] = (int32_t)(check_rand_u64(&seed) % V);

    /* Reference greedy continuations. */
    int32_t expect[NREQ][NEW];
    float logits[V];
    for (int i = 0; i < NREQ; i++) {
        int32_t seq[MAXLEN];
        memcpy(seq, prompts[i], (size_t)prompt_len[i] * sizeof(int32_t));
        for (int n = 0; n < NEW; n++) {
            expect[i][n] = ref_next(&w, seq, prompt_len[i] + n, logits);
            seq[prompt_len[i] + n] = expect[i][n];
        }
        int distinct = 0;
        for (int n = 0; n < NEW; n++) {
            int seen = 0;
            for (int m = 0; m < n; m++) seen |= expect[i][m] == expect[i][n];
            distinct += !seen;
        }
        CHECK(distinct >= 3, "reference for request %d is degenerate (%d distinct tokens)", i, distinct);
    }

    const struct { pk_sched_mode mode; int workers, schedulers; } runs[] = {
        {PK_SCHED_STATIC, 1, 1}, {PK_SCHED_STATIC, 3, 1}, {PK_SCHED_STATIC, 8, 1},
        {PK_SCHED_DYNAMIC, 1, 1}, {PK_SCHED_DYNAMIC, 4, 2}, {PK_SCHED_DYNAMIC, 7, 3},
    };
    pk_bf16 first_logits[8 * V];
    for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
        pk_tensor *lt;
        pk_kernel *k = build(&w, runs[ri].mode, runs[ri].workers, runs[ri].schedulers, &lt);
        int32_t out[NREQ][NEW];
        pk_request req[NREQ];
        for (int i = 0; i < NREQ; i++)
            req[i] = (pk_request){.prompt = prompts[i], .prompt_len = prompt_len[i], .max_new_tokens = NEW,
                                  .output = out[i]};
        pk_status s = pk_run(k, req, NREQ, NULL, NULL);
        CHECK(s == PK_OK, "run %zu: %s", ri, pk_kernel_error(k));
        for (int i = 0; i < NREQ; i++) {
            CHECK(req[i].num_output == NEW && req[i].finish == PK_FINISH_LENGTH, "run %zu request %d: %d tokens, finish %d",
                  ri, i, req[i].num_output, (int)req[i].finish);
            int same = memcmp(out[i], expect[i], sizeof out[i]) == 0;
            CHECK(same, "run %zu (mode %d, %d workers) request %d: tokens differ from the reference", ri,
                  (int)runs[ri].mode, runs[ri].workers, i);
            if (!same) {
                for (int n = 0; n < NEW; n++) fprintf(stderr, " %d/%d", out[i][n], expect[i][n]);
                fputc('\n', stderr);
            }
        }
        pk_graph_stats st;
        pk_kernel_stats(k, &st);
        /* 19 prompt tokens at 8 per step, 2 slots for 3 requests: more steps than tokens. */
        CHECK(st.steps_run > NEW, "steps %lld", (long long)st.steps_run);
        pk_bf16 lg[8 * V];
        CHECK(pk_tensor_read(k, lt, lg, sizeof lg) == PK_OK, "%s", pk_kernel_error(k));
        if (ri == 0)
            memcpy(first_logits, lg, sizeof lg);
        else
            CHECK(memcmp(first_logits, lg, sizeof lg) == 0, "run %zu: last-step logits not bit-identical to run 0", ri);
        pk_kernel_free(k);
    }
    free_weights(&w);
    return check_report("e2e_graph");
}
