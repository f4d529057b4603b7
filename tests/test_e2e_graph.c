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

#include "e2e_model.h"

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

static pk_kernel *build(const weights *w, pk_sched_mode mode, int workers, int schedulers, int kv_splits, int splitk,
                        pk_tensor **logits_out) {
    pk_config c = e2e_config(8);
    c.num_workers = workers;
    c.num_local_schedulers = schedulers;
    c.sched_mode = mode;
    pk_kernel *k = pk_kernel_new(&c);
    pk_tensor *logits = e2e_add_layers(k, w, &c, kv_splits, splitk);
    pk_status s = pk_compile(k, NULL);
    CHECK(s == PK_OK, "compile: %s", pk_kernel_error(k));
    *logits_out = logits;
    return k;
}

/* Attention split over the KV length (CPU backend): a 40-token prompt and 12 new tokens reach
 * position 51, so blocks 0 and 1 (32 positions each) are in different splits and the prefill
 * chunks (8 rows) cross the block boundary; with 3 splits one is always empty. Greedy tokens must
 * be the reference's. */
static void test_kv_splits(const weights *w) {
    enum { PLEN = 40, N = 12 };
    int32_t prompt[PLEN], expect[N], seq[MAXLEN];
    uint64_t seed = 4242;
    for (int j = 0; j < PLEN; j++) prompt[j] = (int32_t)(check_rand_u64(&seed) % V);
    float logits[V];
    memcpy(seq, prompt, sizeof prompt);
    for (int n = 0; n < N; n++) seq[PLEN + n] = expect[n] = ref_next(w, seq, PLEN + n, logits);
    const struct { pk_sched_mode mode; int workers, splits; } runs[] = {
        {PK_SCHED_STATIC, 3, 1}, {PK_SCHED_STATIC, 3, 2}, {PK_SCHED_STATIC, 5, 3}, {PK_SCHED_DYNAMIC, 4, 2},
    };
    int unsplit_layers = 0;
    for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
        pk_tensor *lt;
        pk_kernel *k = build(w, runs[ri].mode, runs[ri].workers, 1, runs[ri].splits, 0, &lt);
        int32_t out[N];
        pk_request req = {.prompt = prompt, .prompt_len = PLEN, .max_new_tokens = N, .output = out};
        pk_status s = pk_run(k, &req, 1, NULL, NULL);
        CHECK(s == PK_OK, "kv_splits %d: %s", runs[ri].splits, pk_kernel_error(k));
        CHECK(req.num_output == N && memcmp(out, expect, sizeof out) == 0,
              "kv_splits %d (mode %d, %d workers): %d tokens, not the reference's", runs[ri].splits,
              (int)runs[ri].mode, runs[ri].workers, req.num_output);
        pk_graph_stats st;
        pk_kernel_stats(k, &st);
        if (ri == 0) unsplit_layers = st.num_layers;
        if (runs[ri].splits > 1) /* each attention layer is one partial layer (its last tasks fold) */
            CHECK(st.num_layers == unsplit_layers, "kv_splits %d: %d layers, want %d", runs[ri].splits,
                  st.num_layers, unsplit_layers);
        pk_kernel_free(k);
    }
    /* (the CUDA backend runs the split too: tests/gpu/test_cuda_e2e, tests/cuda's harness) */
}

enum { NREQ = 3, NEW = 12 };
static const int prompt_len[NREQ] = {5, 19, 1};

/* Runs the NREQ requests on k, NEW tokens each, into out; req gets their results. */
static pk_status run_requests(pk_kernel *k, int32_t prompts[NREQ][32], pk_request req[NREQ], int32_t out[NREQ][NEW]) {
    for (int i = 0; i < NREQ; i++)
        req[i] = (pk_request){.prompt = prompts[i], .prompt_len = prompt_len[i], .max_new_tokens = NEW,
                              .output = out[i]};
    return pk_run(k, req, NREQ, NULL, NULL);
}

/* Runs the requests on k and checks every request's tokens against the reference's; `what` names
 * the run in the messages. */
static void check_reference_tokens(pk_kernel *k, int32_t prompts[NREQ][32], int32_t expect[NREQ][NEW],
                                   const char *what) {
    int32_t out[NREQ][NEW];
    pk_request req[NREQ];
    pk_status s = run_requests(k, prompts, req, out);
    CHECK(s == PK_OK, "%s: %s", what, pk_kernel_error(k));
    for (int i = 0; i < NREQ; i++)
        CHECK(req[i].num_output == NEW && memcmp(out[i], expect[i], sizeof out[i]) == 0,
              "%s request %d: %d tokens, not the reference's", what, i, req[i].num_output);
}

/* How many of k's layers are of `kind` (pk_layer_info's name). */
static int layers_of_kind(pk_kernel *k, const char *kind) {
    pk_graph_stats st;
    pk_kernel_stats(k, &st);
    int n = 0;
    for (int l = 0; l < st.num_layers; l++) {
        pk_layer_info li;
        n += pk_kernel_layer(k, l, &li) == PK_OK && strcmp(li.kind, kind) == 0;
    }
    return n;
}

/* Layer 1's down_proj split over K (pk_linear_splitk_with_residual_layer): the reference's greedy
 * tokens in both modes, several worker counts, with the attention split too. Not compared bit for
 * bit across runs: the accumulator's adds come in the order the tasks finish. Each step's last task
 * clears the accumulator: a second run on the same kernel must give the same tokens. */
static void test_splitk(const weights *w, int32_t prompts[NREQ][32], int32_t expect[NREQ][NEW]) {
    const struct { pk_sched_mode mode; int workers, schedulers, splits; } runs[] = {
        {PK_SCHED_STATIC, 1, 1, 0}, {PK_SCHED_STATIC, 3, 1, 0}, {PK_SCHED_STATIC, 8, 1, 2},
        {PK_SCHED_DYNAMIC, 4, 2, 0}, {PK_SCHED_DYNAMIC, 7, 3, 3},
    };
    for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
        pk_tensor *lt;
        pk_kernel *k = build(w, runs[ri].mode, runs[ri].workers, runs[ri].schedulers, runs[ri].splits, E2E_MLP_SPLITK, &lt);
        for (int rep = 0; rep < 2; rep++) {
            char what[96];
            snprintf(what, sizeof what, "splitk run %zu.%d (mode %d, %d workers, kv split %d)", ri, rep,
                     (int)runs[ri].mode, runs[ri].workers, runs[ri].splits);
            check_reference_tokens(k, prompts, expect, what);
        }
        pk_kernel_free(k);
    }
}

/* Layer 0's MLP as one layer (pk_rmsnorm_swiglu_down_layer): its sum stays in an int64 accumulator
 * that layer 1's qkv adds to its x and its o_proj clears. The reference's greedy tokens in both modes
 * and several worker counts; the accumulator's adds are exact, so the logits are the same bits in
 * every run (any order of the tasks), and a second run on the same kernel (the accumulator cleared
 * at every step) gives them again. */
static void test_mlp_fused(const weights *w, int32_t prompts[NREQ][32], int32_t expect[NREQ][NEW]) {
    const struct { pk_sched_mode mode; int workers, schedulers, splits; } runs[] = {
        {PK_SCHED_STATIC, 1, 1, 0}, {PK_SCHED_STATIC, 3, 1, 0}, {PK_SCHED_STATIC, 8, 1, 2},
        {PK_SCHED_DYNAMIC, 4, 2, 0}, {PK_SCHED_DYNAMIC, 7, 3, 0},
    };
    static float first[8 * V]; /* the last step's logits of the first run */
    for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
        pk_tensor *lt;
        pk_kernel *k = build(w, runs[ri].mode, runs[ri].workers, runs[ri].schedulers, runs[ri].splits,
                             E2E_MLP_FUSED, &lt);
        const int fused = layers_of_kind(k, "rmsnorm_swiglu_down");
        CHECK(fused == 1, "mlp fused run %zu: %d rmsnorm_swiglu_down layers, want 1", ri, fused);
        for (int rep = 0; rep < 2; rep++) {
            char what[96];
            snprintf(what, sizeof what, "mlp fused run %zu.%d (mode %d, %d workers, kv split %d)", ri, rep,
                     (int)runs[ri].mode, runs[ri].workers, runs[ri].splits);
            check_reference_tokens(k, prompts, expect, what);
            float lg[8 * V];
            uint16_t raw[8 * V];
            CHECK(pk_tensor_read(k, lt, raw, sizeof raw) == PK_OK, "mlp fused: reading the logits: %s",
                  pk_kernel_error(k));
            for (int j = 0; j < 8 * V; j++) lg[j] = pk_bf16_to_f32(raw[j]);
            if (ri == 0 && rep == 0)
                memcpy(first, lg, sizeof first);
            else
                CHECK(memcmp(first, lg, sizeof first) == 0, "mlp fused run %zu.%d: logits differ from run 0's bits",
                      ri, rep);
        }
        pk_kernel_free(k);
    }
}

/* The LM head and the argmax as one layer (pk_rmsnorm_linear_argmax_layer, 3 tasks of 32 / 32 / 33
 * logits, the last to finish reducing): the reference's greedy tokens in both modes and several
 * worker counts, alone and beside layer 0's fused MLP, and the last step's logits the bits of the
 * two-layer graph's (first_logits: main's run 0, whose kernel is the same but for that layer). */
static void test_lm_argmax(const weights *w, int32_t prompts[NREQ][32], int32_t expect[NREQ][NEW],
                           const pk_bf16 *first_logits) {
    const struct { pk_sched_mode mode; int workers, schedulers, splits, mlp; } runs[] = {
        {PK_SCHED_STATIC, 1, 1, 0, E2E_MLP_ROWS}, {PK_SCHED_STATIC, 3, 1, 0, E2E_MLP_ROWS},
        {PK_SCHED_STATIC, 8, 1, 2, E2E_MLP_ROWS}, {PK_SCHED_DYNAMIC, 4, 2, 0, E2E_MLP_ROWS},
        {PK_SCHED_DYNAMIC, 7, 3, 3, E2E_MLP_ROWS}, {PK_SCHED_STATIC, 5, 1, 0, E2E_MLP_FUSED},
    };
    for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
        pk_tensor *lt;
        pk_kernel *k = build(w, runs[ri].mode, runs[ri].workers, runs[ri].schedulers, runs[ri].splits,
                             runs[ri].mlp | E2E_LM_ARGMAX, &lt);
        const int fused = layers_of_kind(k, "rmsnorm_linear_argmax"), argmax = layers_of_kind(k, "argmax_partial");
        CHECK(fused == 1 && argmax == 0, "lm argmax run %zu: %d rmsnorm_linear_argmax and %d argmax_partial layers", ri,
              fused, argmax);
        for (int rep = 0; rep < 2; rep++) {
            char what[96];
            snprintf(what, sizeof what, "lm argmax run %zu.%d (mode %d, %d workers, kv split %d, mlp %d)", ri, rep,
                     (int)runs[ri].mode, runs[ri].workers, runs[ri].splits, runs[ri].mlp);
            check_reference_tokens(k, prompts, expect, what);
            pk_bf16 lg[8 * V];
            CHECK(pk_tensor_read(k, lt, lg, sizeof lg) == PK_OK, "lm argmax: reading the logits: %s", pk_kernel_error(k));
            if (runs[ri].mlp == E2E_MLP_ROWS)
                CHECK(memcmp(first_logits, lg, sizeof lg) == 0,
                      "lm argmax run %zu.%d: last-step logits not the two-layer graph's bits", ri, rep);
        }
        pk_kernel_free(k);
    }
}

int main(void) {
    weights w;
    e2e_make_weights(&w);
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
        pk_kernel *k = build(&w, runs[ri].mode, runs[ri].workers, runs[ri].schedulers, 0, 0, &lt);
        int32_t out[NREQ][NEW];
        pk_request req[NREQ];
        pk_status s = run_requests(k, prompts, req, out);
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
    test_kv_splits(&w);
    test_splitk(&w, prompts, expect);
    test_mlp_fused(&w, prompts, expect);
    test_lm_argmax(&w, prompts, expect, first_logits);
    e2e_free_weights(&w);
    return check_report("e2e_graph");
}
