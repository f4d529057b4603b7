// SPDX-License-Identifier: Apache-2.0
/* test_taskgraph.c — white-box checks of the compiled task graph (k->graph) of many graphs built
 * through pk.h: Qwen3-shaped models with many grids, rmsnorm/linear/silu_mul chains whose grids
 * give events of gcd > 1 and = 1, odd dims (80, 200, 1003), and seeded random residual-stream
 * graphs. For each: (a) every output element is written by exactly one task; (b) event trigger
 * counts and consumer ranges match the tasks; (c) producers precede consumers; (d) every task
 * that writes a region another task reads is its ancestor in the task/event DAG (the gcd rule
 * and redundancy elimination never drop a needed edge); (e) the static schedule lists every
 * task once, ascending per worker; (f) task_graph.json round-trips; (g) an output feeding two
 * independent layers is refused.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "pk_internal.h"

/* One zero buffer behind every weight: the graph does not look at values. */
static uint16_t *g_zeros;
#define ZEROS_ELEMS (4u << 20)

static pk_tensor *weight(pk_kernel *k, const char *name, int64_t d0, int64_t d1) {
    int64_t dims[2] = {d0, d1};
    CHECK((uint64_t)d0 * (uint64_t)(d1 ? d1 : 1) <= ZEROS_ELEMS, "weight %s too large", name);
    pk_tensor *t = pk_attach_input(k, name, PK_DTYPE_BF16, d1 ? 2 : 1, dims, NULL, g_zeros);
    CHECK(t != NULL, "attach %s: %s", name, pk_kernel_error(k));
    return t;
}

static pk_tensor *act(pk_kernel *k, const char *name, int64_t T, int64_t n) {
    int64_t dims[2] = {T, n};
    pk_tensor *t = pk_new_tensor(k, name, PK_DTYPE_BF16, 2, dims, PK_IO_LOCAL);
    CHECK(t != NULL, "new_tensor %s: %s", name, pk_kernel_error(k));
    return t;
}

/* Named by a format and an int: a local buffer per call, so several may share one statement. */
static pk_tensor *weightf(pk_kernel *k, const char *fmt, int i, int64_t d0, int64_t d1) {
    char name[64];
    snprintf(name, sizeof name, fmt, i);
    return weight(k, name, d0, d1);
}
static pk_tensor *actf(pk_kernel *k, const char *fmt, int i, int64_t T, int64_t n) {
    char name[64];
    snprintf(name, sizeof name, fmt, i);
    return act(k, name, T, n);
}

static int rand_div(uint64_t *seed, int n) {
    int d[64], nd = 0;
    for (int i = 1; i <= n && nd < 64; i++)
        if (n % i == 0) d[nd++] = i;
    return d[check_rand_u64(seed) % (uint64_t)nd];
}

#define OK(expr)                                                                               \
    do {                                                                                       \
        pk_status s_ = (expr);                                                                 \
        CHECK(s_ == PK_OK, "%s -> %s: %s", #expr, pk_status_name(s_), pk_kernel_error(k));     \
    } while (0)

static pk_kernel *new_kernel(int T, int workers) {
    pk_config c = pk_config_default();
    c.max_seq_length = 64;
    c.max_requests = 2;
    c.max_tokens_per_step = T;
    c.page_size = 4;
    c.num_pages = 32;
    c.num_workers = workers;
    pk_kernel *k = pk_kernel_new(&c);
    CHECK(k && pk_kernel_status(k) == PK_OK, "kernel_new: %s", pk_kernel_error(k));
    return k;
}

/* ---- graphs ---------------------------------------------------------------------------- */

typedef struct qwen_grids {
    int emb, qkv, att, wo, gu, down, lm, argmax;
} qwen_grids;

/* The 2-layer Qwen3-shaped model of test_e2e_graph.c, grids as given. */
static pk_kernel *build_qwen(int T, int workers, int V, qwen_grids g) {
    enum { H = 80, HQ = 4, HKV = 2, D = 32, I = 200, NL = 2, G = HQ / HKV, QKV = HKV * (G + 2) * D };
    pk_kernel *k = new_kernel(T, workers);
    const pk_config *c = pk_kernel_config(k);
    pk_tensor *h = act(k, "h0", T, H);
    OK(pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", V, H), h, g.emb));
    for (int l = 0; l < NL; l++) {
        char name[64];
        pk_tensor *qkv_in[3];
        qkv_in[0] = weightf(k, "wq%d", l, HQ * D, H);
        qkv_in[1] = weightf(k, "wk%d", l, HKV * D, H);
        qkv_in[2] = weightf(k, "wv%d", l, HKV * D, H);
        snprintf(name, sizeof name, "wqkv%d", l);
        pk_tensor *wqkv = pk_fuse_tensors(k, name, qkv_in, 3, 0, HKV);
        CHECK(wqkv != NULL, "fuse: %s", pk_kernel_error(k));
        pk_tensor *qkv = actf(k, "qkv%d", l, T, QKV);
        OK(pk_rmsnorm_linear_layer(k, h, weightf(k, "attn_norm%d", l, H, 0), wqkv, qkv, 1e-6f, g.qkv));
        int64_t cache_dims[4] = {c->num_pages, c->page_size, HKV, D};
        snprintf(name, sizeof name, "k_cache%d", l);
        pk_tensor *kc = pk_new_tensor(k, name, PK_DTYPE_BF16, 4, cache_dims, PK_IO_LOCAL);
        snprintf(name, sizeof name, "v_cache%d", l);
        pk_tensor *vc = pk_new_tensor(k, name, PK_DTYPE_BF16, 4, cache_dims, PK_IO_LOCAL);
        pk_tensor *att = actf(k, "att%d", l, T, HQ * D);
        pk_attention_params ap = {.num_q_heads = HQ, .num_kv_heads = HKV, .head_dim = D, .rope_theta = 1e4f,
                                  .qk_norm_eps = 1e-6f};
        OK(pk_attention_layer(k, qkv, kc, vc, weightf(k, "q_norm%d", l, D, 0), weightf(k, "k_norm%d", l, D, 0),
                              att, &ap, g.att));
        pk_tensor *h2 = actf(k, "h_attn%d", l, T, H);
        OK(pk_linear_with_residual_layer(k, att, weightf(k, "wo%d", l, H, HQ * D), h, h2, g.wo));
        pk_tensor *gu_in[2];
        gu_in[0] = weightf(k, "wg%d", l, I, H);
        gu_in[1] = weightf(k, "wu%d", l, I, H);
        snprintf(name, sizeof name, "wgu%d", l);
        pk_tensor *wgu = pk_fuse_tensors(k, name, gu_in, 2, 0, 1);
        pk_tensor *gu = actf(k, "gu%d", l, T, 2 * I);
        OK(pk_rmsnorm_linear_layer(k, h2, weightf(k, "mlp_norm%d", l, H, 0), wgu, gu, 1e-6f, g.gu));
        pk_tensor *h3 = actf(k, "h_mlp%d", l, T, H);
        OK(pk_silu_mul_linear_with_residual_layer(k, gu, weightf(k, "wd%d", l, H, I), h2, h3, g.down));
        h = h3;
    }
    pk_tensor *logits = act(k, "logits", T, V);
    OK(pk_rmsnorm_linear_layer(k, h, weight(k, "final_norm", H, 0), weight(k, "lm_head", V, H), logits, 1e-6f, g.lm));
    OK(pk_argmax_layer(k, logits, pk_step_output(k), g.argmax));
    return k;
}

/* The MLP as the GPU builds it: embedding, rmsnorm_linear_swiglu (grid g) and the down projection
 * split over K with the same grid (each task waits on one gate / up task), then the LM head. */
static pk_kernel *build_splitk_mlp(int workers, int g, int g_lm) {
    enum { T = 8, H = 80, I = 240, V = 96 };
    pk_kernel *k = new_kernel(T, workers);
    pk_tensor *h = act(k, "h0", T, H), *a = act(k, "act", T, I), *h2 = act(k, "h_mlp", T, H);
    OK(pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", V, H), h, 4));
    pk_tensor *gu_in[2] = {weight(k, "wg", I, H), weight(k, "wu", I, H)};
    pk_tensor *wgu = pk_fuse_tensors(k, "wgu", gu_in, 2, 0, g);
    CHECK(wgu != NULL, "fuse: %s", pk_kernel_error(k));
    OK(pk_rmsnorm_linear_swiglu_layer(k, h, weight(k, "mlp_norm", H, 0), wgu, I / g, a, 1e-6f, g));
    OK(pk_linear_splitk_with_residual_layer(k, a, weight(k, "wd", H, I), h, h2, g));
    pk_tensor *logits = act(k, "logits", T, V);
    OK(pk_rmsnorm_linear_layer(k, h2, weight(k, "final_norm", H, 0), weight(k, "lm_head", V, H), logits, 1e-6f, g_lm));
    OK(pk_argmax_layer(k, logits, pk_step_output(k), 1));
    return k;
}

/* The MLP as one layer (grid g) whose accumulator the next qkv (grid gq) adds to its x, a linear
 * standing in for the attention, and the o_proj that clears the accumulator (grid go). */
static pk_kernel *build_mlp_fused(int workers, int g, int gq, int go) {
    enum { T = 8, H = 80, I = 240, V = 96 };
    pk_kernel *k = new_kernel(T, workers);
    pk_tensor *h = act(k, "h0", T, H), *qkv = act(k, "qkv", T, H), *att = act(k, "att", T, H);
    pk_tensor *h_in = act(k, "h_in", T, H), *h2 = act(k, "h2", T, H);
    int64_t acc_dims[2] = {T, H};
    pk_tensor *acc = pk_new_tensor(k, "acc", PK_DTYPE_INT64, 2, acc_dims, PK_IO_LOCAL);
    OK(pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", V, H), h, 4));
    pk_tensor *gu_in[2] = {weight(k, "wg", I, H), weight(k, "wu", I, H)};
    pk_tensor *wgu = pk_fuse_tensors(k, "wgu", gu_in, 2, 0, g);
    CHECK(wgu != NULL && acc != NULL, "fuse / acc: %s", pk_kernel_error(k));
    OK(pk_rmsnorm_swiglu_down_layer(k, h, weight(k, "mlp_norm", H, 0), wgu, weight(k, "wd", H, I), acc, 1e-6f, g));
    OK(pk_rmsnorm_linear_acc_layer(k, h, acc, weight(k, "attn_norm", H, 0), weight(k, "wqkv", H, H), qkv, h_in, 1e-6f,
                                   gq));
    OK(pk_linear_layer(k, qkv, weight(k, "watt", H, H), att, gq));
    OK(pk_linear_with_residual_clear_layer(k, att, weight(k, "wo", H, H), h_in, acc, h2, go));
    pk_tensor *logits = act(k, "logits", T, V);
    OK(pk_rmsnorm_linear_layer(k, h2, weight(k, "final_norm", H, 0), weight(k, "lm_head", V, H), logits, 1e-6f, 2));
    OK(pk_argmax_layer(k, logits, pk_step_output(k), 1));
    return k;
}

/* rmsnorm / linear / silu_mul chains over T = 12, H = 200, I = 1003: row-split rmsnorms
 * (gcd 2 and 6 events), whole reads (1 event), argmax over a column-split LM head (gcd 8). */
static pk_kernel *build_chain(int workers, int g_emb, int g_n1, int g_n2, int g_n3, int g_gu, int g_sm, int g_d,
                              int g_r, int g_lm, int g_am) {
    enum { T = 12, V = 80, H = 200, I = 1003 };
    pk_kernel *k = new_kernel(T, workers);
    pk_tensor *h0 = act(k, "h0", T, H), *n1 = act(k, "n1", T, H), *n2 = act(k, "n2", T, H);
    pk_tensor *n3 = act(k, "n3", T, H), *gu = act(k, "gu", T, 2 * I), *m = act(k, "m", T, I);
    pk_tensor *d = act(k, "d", T, H), *r = act(k, "r", T, H), *lg = act(k, "logits", T, V);
    OK(pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", V, H), h0, g_emb));
    OK(pk_rmsnorm_layer(k, h0, weight(k, "nw1", H, 0), n1, 1e-5f, g_n1));
    OK(pk_rmsnorm_layer(k, n1, weight(k, "nw2", H, 0), n2, 1e-5f, g_n2));
    OK(pk_rmsnorm_layer(k, n2, weight(k, "nw3", H, 0), n3, 1e-5f, g_n3));
    OK(pk_linear_layer(k, n3, weight(k, "wgu", 2 * I, H), gu, g_gu));
    OK(pk_silu_mul_layer(k, gu, m, g_sm));
    OK(pk_linear_layer(k, m, weight(k, "wd", H, I), d, g_d));
    OK(pk_linear_with_residual_layer(k, d, weight(k, "wr", H, H), d, r, g_r));
    OK(pk_rmsnorm_linear_layer(k, r, weight(k, "fn", H, 0), weight(k, "lm", V, H), lg, 1e-5f, g_lm));
    OK(pk_argmax_layer(k, lg, pk_step_output(k), g_am));
    return k;
}

/* A linear_with_residual whose x is an attached input and whose residual is column-split by a
 * producer: the edge keeps gcd(g_p, g_r) events. Then redundancy: h0 feeds a rmsnorm_linear and,
 * later, a residual layer that waits on that rmsnorm_linear. */
static pk_kernel *build_residual(int workers, int g_emb, int g_p, int g_r, int g_nl, int g_lr2) {
    enum { T = 8, V = 1003, H = 80, K = 48 };
    pk_kernel *k = new_kernel(T, workers);
    pk_tensor *h0 = act(k, "h0", T, H), *p = act(k, "p", T, H), *r = act(k, "r", T, H);
    pk_tensor *a = act(k, "a", T, 40), *r2 = act(k, "r2", T, H), *lg = act(k, "logits", T, V);
    int64_t xd[2] = {T, K};
    pk_tensor *x = pk_attach_input(k, "x_in", PK_DTYPE_BF16, 2, xd, NULL, g_zeros);
    OK(pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", V, H), h0, g_emb));
    OK(pk_linear_layer(k, h0, weight(k, "wp", H, H), p, g_p));
    OK(pk_linear_with_residual_layer(k, x, weight(k, "wr", H, K), p, r, g_r));
    OK(pk_rmsnorm_linear_layer(k, r, weight(k, "n", H, 0), weight(k, "wa", 40, H), a, 1e-6f, g_nl));
    OK(pk_linear_with_residual_layer(k, a, weight(k, "wo", H, 40), r, r2, g_lr2));
    OK(pk_linear_layer(k, r2, weight(k, "lm", V, H), lg, 17));
    OK(pk_argmax_layer(k, lg, pk_step_output(k), 59));
    return k;
}

/* Seeded random residual-stream graph: blocks of rmsnorm(_linear) → [silu_mul] → residual. */
static pk_kernel *build_random(uint64_t *seed, int workers) {
    static const int Ts[] = {4, 6, 8, 12};
    int T = Ts[check_rand_u64(seed) % 4];
    pk_kernel *k = new_kernel(T, workers);
    int H = 8 * (1 + (int)(check_rand_u64(seed) % 12)), V = 16 + (int)(check_rand_u64(seed) % 80);
    int nt = 0; /* names: t<n> activations, w<n> weights */
#define FRESH(n) actf(k, "t%d", nt++, T, (n))
#define W(d0, d1) weightf(k, "w%d", nt++, (d0), (d1))
#define DIV(n) rand_div(seed, (n))
/* the linear family's N: a divisor, or half the time any grid up to N (uneven tiles) */
#define ROWS(n) (check_rand_u64(seed) % 2 ? rand_div(seed, (n)) : 1 + (int)(check_rand_u64(seed) % (uint64_t)(n)))
    pk_tensor *h = FRESH(H);
    pk_tensor *w = W(V, H);
    OK(pk_embedding_layer(k, pk_step_tokens(k), w, h, DIV(H)));
    int blocks = 1 + (int)(check_rand_u64(seed) % 5);
    for (int b = 0; b < blocks; b++) {
        int kind = (int)(check_rand_u64(seed) % 7);
        int I = 4 * (1 + (int)(check_rand_u64(seed) % 12));
        pk_tensor *nw = W(H, 0), *w1 = NULL, *w2 = NULL, *h2 = FRESH(H);
        if (kind == 0) { /* "attention" block without attention: rmsnorm_linear → linear_with_residual */
            pk_tensor *a = FRESH(I);
            w1 = W(I, H);
            w2 = W(H, I);
            OK(pk_rmsnorm_linear_layer(k, h, nw, w1, a, 1e-6f, ROWS(I)));
            OK(pk_linear_with_residual_layer(k, a, w2, h, h2, ROWS(H)));
        } else if (kind == 1) { /* rmsnorm → linear → silu_mul → linear_with_residual */
            pk_tensor *n = FRESH(H), *gu = FRESH(2 * I), *m = FRESH(I);
            w1 = W(2 * I, H);
            w2 = W(H, I);
            OK(pk_rmsnorm_layer(k, h, nw, n, 1e-6f, DIV(T)));
            OK(pk_linear_layer(k, n, w1, gu, ROWS(2 * I)));
            OK(pk_silu_mul_layer(k, gu, m, DIV(I)));
            OK(pk_linear_with_residual_layer(k, m, w2, h, h2, ROWS(H)));
        } else if (kind == 2) { /* rmsnorm_linear → silu_mul_linear_with_residual */
            pk_tensor *gu = FRESH(2 * I);
            w1 = W(2 * I, H);
            w2 = W(H, I);
            OK(pk_rmsnorm_linear_layer(k, h, nw, w1, gu, 1e-6f, ROWS(2 * I)));
            OK(pk_silu_mul_linear_with_residual_layer(k, gu, w2, h, h2, ROWS(H)));
        } else if (kind == 3) { /* a plain projection of the stream */
            w1 = W(H, H);
            OK(pk_linear_layer(k, h, w1, h2, ROWS(H)));
        } else if (kind == 4) { /* row-split rmsnorms (gcd events), the first one the residual */
            pk_tensor *x1 = FRESH(H), *x2 = FRESH(H);
            w1 = W(H, 0);
            w2 = W(H, H);
            OK(pk_rmsnorm_layer(k, h, nw, x1, 1e-6f, DIV(T)));
            OK(pk_rmsnorm_layer(k, x1, w1, x2, 1e-6f, DIV(T)));
            OK(pk_linear_with_residual_layer(k, x2, w2, x1, h2, ROWS(H)));
        } else if (kind == 5) { /* the same with a linear between */
            pk_tensor *x1 = FRESH(H), *x2 = FRESH(H), *x3 = FRESH(I);
            pk_tensor *w3 = W(I, H);
            w1 = W(H, 0);
            w2 = W(H, I);
            OK(pk_rmsnorm_layer(k, h, nw, x1, 1e-6f, DIV(T)));
            OK(pk_rmsnorm_layer(k, x1, w1, x2, 1e-6f, DIV(T)));
            OK(pk_linear_layer(k, x2, w3, x3, ROWS(I)));
            OK(pk_linear_with_residual_layer(k, x3, w2, x1, h2, ROWS(H)));
        } else { /* the stream becomes a row-split rmsnorm output */
            OK(pk_rmsnorm_layer(k, h, nw, h2, 1e-6f, DIV(T)));
        }
        h = h2;
    }
    pk_tensor *lg = FRESH(V), *nw = W(H, 0), *lm = W(V, H);
    if (check_rand_u64(seed) % 2) { /* the LM head and its argmax as one layer */
        OK(pk_rmsnorm_linear_argmax_layer(k, h, nw, lm, lg, pk_step_output(k), 1e-6f, ROWS(V)));
    } else {
        OK(pk_rmsnorm_linear_layer(k, h, nw, lm, lg, 1e-6f, ROWS(V)));
        OK(pk_argmax_layer(k, lg, pk_step_output(k), DIV(V)));
    }
#undef FRESH
#undef W
#undef DIV
#undef ROWS
    return k;
}

/* ---- invariants -------------------------------------------------------------------------- */

/* Output views of a task: the last one (three for the argmax: its value, its index and out; four
 * for the LM head's argmax: the logits before them; two for the swiglu and split-K layers, the
 * fused MLP, and a rmsnorm_linear with an accumulator: its sum). */
static int task_outputs(const pk_task *task) {
    const uint32_t kind = task->kind;
    if (kind == PK_TASK_RMSNORM_LINEAR) return task->views[PK_V_NL_ACC].nseg ? 2 : 1;
    if (kind == PK_TASK_ARGMAX_PARTIAL) return 3;
    if (kind == PK_TASK_RMSNORM_LINEAR_ARGMAX) return 4;
    return kind == PK_TASK_RMSNORM_LINEAR_SWIGLU || kind == PK_TASK_LINEAR_SPLITK_RESIDUAL ||
                   kind == PK_TASK_RMSNORM_SWIGLU_DOWN
               ? 2
               : 1;
}
/* Output views every task of the layer views whole and the layer writes once between them (a
 * split-K layer's accumulator and out, written by its last task; the argmax's out, by its last
 * task (in either argmax kind); the fused MLP's accumulator, the sum of its adds; a rmsnorm_linear's sum, in shares):
 * counted once per layer, not per task. */
static int shared_output(const pk_task *task, uint32_t v) {
    return task->kind == PK_TASK_LINEAR_SPLITK_RESIDUAL || (task->kind == PK_TASK_ARGMAX_PARTIAL && v == PK_V_AMP_OUT) ||
           (task->kind == PK_TASK_RMSNORM_LINEAR_ARGMAX && v == PK_V_NLA_OUT) ||
           (task->kind == PK_TASK_RMSNORM_SWIGLU_DOWN && v == PK_V_MLP_ACC) ||
           (task->kind == PK_TASK_RMSNORM_LINEAR && v == PK_V_NL_SUM);
}

static int64_t t_rows(const pk_tensor *t) { return t->ndim >= 2 ? t->dims[0] : 1; }
static int64_t t_cols(const pk_tensor *t) { return pk_tensor_numel(t) / t_rows(t); }

static int overlap(const pk_view *a, const pk_view *b) {
    return a->row0 < b->row0 + b->rows && b->row0 < a->row0 + a->rows && a->col0 < b->col0 + b->cols &&
           b->col0 < a->col0 + a->cols;
}

typedef struct bitset {
    uint64_t *w;
    int words;
} bitset;

static int bit(const uint64_t *row, int i) { return (int)((row[i / 64] >> (i % 64)) & 1); }

/* Failures of one graph's invariants: the first few are printed, then one CHECK counts them. */
static int g_bad;
#define EXPECT_G(cond, ...)                                                                  \
    do {                                                                                     \
        if (!(cond) && g_bad++ < 8) {                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                  \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
        }                                                                                    \
    } while (0)

/* Runs (a)–(e) on a compiled kernel. `what` names the graph in messages. */
static void check_graph(pk_kernel *k, const char *what) {
    const pk_taskgraph *g = &k->graph;
    int nt = g->ntasks, ne = g->nevents, nl = k->nlayers;
    g_bad = 0;
    EXPECT_G(nt >= 2 && ne >= 2 && g->nlayers == nl, "%s: %d tasks, %d events, %d layers", what, nt, ne, nl);
    pk_graph_stats st;
    EXPECT_G(pk_kernel_stats(k, &st) == PK_OK && st.num_tasks == nt && st.num_events == ne && st.num_layers == nl,
          "%s: stats disagree", what);

    /* Layers: layer_order is a permutation, each layer's tasks contiguous and labelled. */
    int *seen = calloc((size_t)nl, sizeof *seen);
    int next = 1;
    for (int i = 0; i < nl; i++) {
        int l = g->layer_order[i];
        EXPECT_G(l >= 0 && l < nl && !seen[l], "%s: layer_order[%d] = %d", what, i, l);
        if (l < 0 || l >= nl) continue;
        seen[l] = 1;
        const pk_layer *L = &k->layers[l];
        EXPECT_G(L->first_task == next, "%s: layer %s first_task %d, expected %d", what, L->name, L->first_task, next);
        for (int t = 0; t < L->grid; t++) {
            const pk_task *task = &g->tasks[L->first_task + t];
            EXPECT_G(task->layer == (uint32_t)l && task->index == (uint32_t)t && task->kind == (uint32_t)L->kind,
                  "%s: task %d labelled layer %u index %u kind %u", what, L->first_task + t, task->layer,
                  task->index, task->kind);
            EXPECT_G(task->nviews == (uint32_t)(L->ninputs + L->noutputs) && L->noutputs == task_outputs(task),
                  "%s: task %d has %u views, layer %d+%d", what, L->first_task + t, task->nviews, L->ninputs,
                  L->noutputs);
        }
        next += L->grid;
        EXPECT_G(memcmp(&g->layer_params[l], &L->params, sizeof L->params) == 0, "%s: layer_params[%d]", what, l);
    }
    EXPECT_G(next == nt, "%s: layers cover %d tasks of %d", what, next, nt);
    free(seen);
    EXPECT_G(g->tasks[0].kind == PK_TASK_BEGIN && g->tasks[0].dep_event == PK_NO_EVENT &&
              g->tasks[0].trig_event == g->begin_event && g->begin_event == 0,
          "%s: BEGIN task", what);
    EXPECT_G(g->end_event == (uint32_t)ne - 1 && g->events[g->end_event].kind == PK_EVENT_END_OF_GRAPH &&
              g->events[0].kind == PK_EVENT_BEGIN,
          "%s: event kinds", what);

    /* (a) every output element written by exactly one task; views inside their tensors. */
    int **cover = calloc((size_t)k->ntensors, sizeof *cover);
    for (int t = 1; t < nt; t++) {
        const pk_task *task = &g->tasks[t];
        for (uint32_t v = 0; v < task->nviews; v++) {
            const pk_view *vw = &task->views[v];
            if (vw->nseg == 0) continue;
            int64_t rows = 0, cols = -1;
            for (uint32_t s = 0; s < vw->nseg; s++) {
                EXPECT_G(vw->seg_buffer[s] < (uint32_t)k->ntensors, "%s: task %d view %u buffer %u", what, t, v,
                      vw->seg_buffer[s]);
                if (vw->seg_buffer[s] >= (uint32_t)k->ntensors) return;
            }
            const pk_tensor *x = k->tensors[vw->seg_buffer[0]];
            if (vw->nseg == 1) {
                rows = t_rows(x);
                cols = t_cols(x);
            } else {
                for (uint32_t s = 0; s < vw->nseg; s++) rows += t_rows(k->tensors[vw->seg_buffer[s]]);
                cols = t_cols(x);
            }
            EXPECT_G((int64_t)vw->row0 + vw->rows <= rows && (int64_t)vw->col0 + vw->cols <= cols &&
                      vw->row_stride == (uint64_t)cols && vw->rows > 0 && vw->cols > 0 && vw->dtype == (uint32_t)x->dtype,
                  "%s: task %d view %u [%u+%u, %u+%u] stride %llu outside '%s' [%lld, %lld]", what, t, v, vw->row0,
                  vw->rows, vw->col0, vw->cols, (unsigned long long)vw->row_stride, x->name, (long long)rows,
                  (long long)cols);
            if (v + (uint32_t)task_outputs(task) < task->nviews) continue; /* an input */
            EXPECT_G(vw->nseg == 1 && x->storage == PK_STORAGE_OWNED && x->producer == (int)task->layer,
                  "%s: task %d writes '%s' (producer %d, layer %u)", what, t, x->name, x->producer, task->layer);
            if (shared_output(task, v) && task->index > 0) continue;
            if (!cover[x->id]) cover[x->id] = calloc((size_t)(rows * cols), sizeof(int));
            for (uint32_t r = vw->row0; r < vw->row0 + vw->rows && r < rows; r++)
                for (uint32_t c = vw->col0; c < vw->col0 + vw->cols && c < cols; c++) cover[x->id][r * cols + c]++;
        }
    }
    for (int l = 0; l < nl; l++)
        for (int o = 0; o < k->layers[l].noutputs; o++) {
            const pk_tensor *x = k->tensors[k->layers[l].outputs[o]];
            int64_t n = t_rows(x) * t_cols(x), bad = 0, first = -1;
            for (int64_t i = 0; cover[x->id] && i < n; i++)
                if (cover[x->id][i] != 1 && bad++ == 0) first = i;
            EXPECT_G(cover[x->id] && bad == 0, "%s: output '%s' of %s: %lld of %lld elements not written once (first %lld, count %d)",
                  what, x->name, k->layers[l].name, (long long)bad, (long long)n, (long long)first,
                  cover[x->id] && first >= 0 ? cover[x->id][first] : -1);
        }
    for (int i = 0; i < k->ntensors; i++) free(cover[i]);
    free(cover);

    /* (b) triggers and consumer ranges. */
    int *trig = calloc((size_t)ne, sizeof *trig);
    for (int t = 0; t < nt; t++) {
        const pk_task *task = &g->tasks[t];
        EXPECT_G(task->trig_event < (uint32_t)ne, "%s: task %d trig_event %u", what, t, task->trig_event);
        if (task->trig_event < (uint32_t)ne) trig[task->trig_event]++;
        if (t == 0) continue;
        uint32_t e = task->dep_event;
        EXPECT_G(e < (uint32_t)ne && e != g->end_event, "%s: task %d dep_event %u", what, t, e);
        if (e < (uint32_t)ne)
            EXPECT_G(g->events[e].first_task <= (uint32_t)t && (uint32_t)t < g->events[e].last_task,
                  "%s: task %d not in the range [%u, %u) of its event %u", what, t, g->events[e].first_task,
                  g->events[e].last_task, e);
    }
    for (int e = 0; e < ne; e++) {
        const pk_event *ev = &g->events[e];
        EXPECT_G(ev->num_triggers == (uint32_t)trig[e] && trig[e] > 0, "%s: event %d num_triggers %u, %d tasks trigger it",
              what, e, ev->num_triggers, trig[e]);
        if ((uint32_t)e == g->end_event) {
            EXPECT_G(ev->first_task == ev->last_task, "%s: END_OF_GRAPH has consumers", what);
            continue;
        }
        EXPECT_G(e == 0 ? ev->kind == PK_EVENT_BEGIN : ev->kind == PK_EVENT_NORMAL, "%s: event %d kind %u", what, e, ev->kind);
        EXPECT_G(ev->first_task < ev->last_task && ev->last_task <= (uint32_t)nt, "%s: event %d range [%u, %u)", what, e,
              ev->first_task, ev->last_task);
        for (uint32_t t = ev->first_task; t < ev->last_task && t < (uint32_t)nt; t++)
            EXPECT_G(g->tasks[t].dep_event == (uint32_t)e, "%s: task %u in event %d's range waits on %u", what, t, e,
                  g->tasks[t].dep_event);
    }
    free(trig);

    /* (c) producers before consumers; ancestors in index order. */
    int words = (nt + 63) / 64;
    uint64_t *anc = calloc((size_t)nt * (size_t)words, sizeof *anc);
    for (int t = 1; t < nt; t++) {
        uint32_t e = g->tasks[t].dep_event;
        if (e >= (uint32_t)ne) continue;
        for (int p = 0; p < nt; p++) {
            if (g->tasks[p].trig_event != e) continue;
            EXPECT_G(p < t, "%s: task %d waits on event %u that task %d (later) triggers", what, t, e, p);
            if (p >= t) continue;
            anc[(size_t)t * words + p / 64] |= 1ull << (p % 64);
            for (int w = 0; w < words; w++) anc[(size_t)t * words + w] |= anc[(size_t)p * words + w];
        }
    }

    /* (d) every producer task of a region a task reads is its ancestor. */
    int missing = 0;
    for (int t = 1; t < nt; t++) {
        const pk_task *task = &g->tasks[t];
        uint32_t nin = task->nviews - (uint32_t)task_outputs(task);
        for (uint32_t v = 0; v < nin; v++) {
            const pk_view *in = &task->views[v];
            if (in->nseg != 1) continue; /* absent, or fused weights: no producer */
            const pk_tensor *x = k->tensors[in->seg_buffer[0]];
            int p = x->producer;
            if (p < 0 || p == (int)task->layer) continue; /* an input, or the task's own KV cache */
            const pk_layer *P = &k->layers[p];
            int nfound = 0;
            for (int q = P->first_task; q < P->first_task + P->grid; q++) {
                const pk_task *pt = &g->tasks[q];
                for (uint32_t ov = pt->nviews - (uint32_t)task_outputs(pt); ov < pt->nviews; ov++) {
                    const pk_view *out = &pt->views[ov];
                    if (out->seg_buffer[0] != in->seg_buffer[0] || !overlap(in, out)) continue;
                    nfound++;
                    if (!bit(&anc[(size_t)t * words], q) && missing++ < 5)
                        EXPECT_G(0 && "ancestor", "%s: task %d (%s #%u) reads '%s' [%u+%u, %u+%u] written by task %d (%s #%u), "
                                 "which is not its ancestor",
                              what, t, k->layers[task->layer].name, task->index, x->name, in->row0, in->rows,
                              in->col0, in->cols, q, P->name, pt->index);
                }
            }
            EXPECT_G(nfound > 0, "%s: task %d reads '%s' but no task of its producer writes that region", what, t, x->name);
        }
    }
    EXPECT_G(missing == 0, "%s: %d missing dependencies", what, missing);
    free(anc);

    /* (e) the static schedule. */
    int W = g->nworkers;
    EXPECT_G(W == pk_kernel_config(k)->num_workers && g->sched_offset[0] == 0 &&
              g->sched_offset[W] == (uint32_t)nt - 1,
          "%s: schedule of %d workers over %u tasks", what, W, g->sched_offset[W]);
    int *count = calloc((size_t)nt, sizeof *count);
    for (int w = 0; w < W; w++) {
        EXPECT_G(g->sched_offset[w] <= g->sched_offset[w + 1], "%s: sched_offset not monotone at %d", what, w);
        for (uint32_t i = g->sched_offset[w]; i < g->sched_offset[w + 1] && i < (uint32_t)nt - 1; i++) {
            uint32_t t = g->sched_tasks[i];
            EXPECT_G(t >= 1 && t < (uint32_t)nt, "%s: worker %d lists task %u", what, w, t);
            if (t < (uint32_t)nt) count[t]++;
            if (i > g->sched_offset[w])
                EXPECT_G(g->sched_tasks[i - 1] < t, "%s: worker %d's list not ascending at %u", what, w, i);
        }
    }
    for (int t = 1; t < nt; t++) EXPECT_G(count[t] == 1, "%s: task %d scheduled %d times", what, t, count[t]);
    /* A layer is a phase: when its tasks all wait on one event and there are workers enough,
     * each runs on its own worker (none queues behind a sibling). */
    size_t nw = W > 0 ? (size_t)W : 1, ntk = nt > 0 ? (size_t)nt : 1;
    int *owner = calloc(ntk, sizeof *owner), *on_worker = calloc(nw, sizeof *on_worker);
    for (int w = 0; w < W; w++)
        for (uint32_t i = g->sched_offset[w]; i < g->sched_offset[w + 1] && i < (uint32_t)nt - 1; i++)
            if (g->sched_tasks[i] < (uint32_t)nt) owner[g->sched_tasks[i]] = w;
    for (int l = 0; l < k->nlayers; l++) {
        const pk_layer *L = &k->layers[l];
        if (L->grid > W) continue;
        int one_event = 1;
        for (int i = 1; i < L->grid; i++)
            one_event &= g->tasks[L->first_task + i].dep_event == g->tasks[L->first_task].dep_event;
        if (!one_event) continue;
        memset(on_worker, 0, nw * sizeof *on_worker);
        for (int i = 0; i < L->grid; i++) {
            int w = owner[L->first_task + i];
            EXPECT_G(on_worker[w] == 0, "%s: layer %s has tasks %d and %d on worker %d", what, L->name, on_worker[w] - 1, i, w);
            on_worker[w] = i + 1;
        }
    }
    free(owner);
    free(on_worker);
    free(count);
    CHECK(g_bad == 0, "%s: %d invariant violations (the first ones above)", what, g_bad);
}

/* ---- (f) JSON ---------------------------------------------------------------------------- */

static const char *const task_kind_names[PK_TASK_KIND_COUNT] = {
    "begin", "embedding", "rmsnorm", "rmsnorm_linear", "linear", "linear_with_residual",
    "silu_mul", "silu_mul_linear_with_residual", "attention", "argmax_partial", "argmax_reduce",
    "terminate", "attention_partial", "rmsnorm_linear_swiglu", "linear_splitk_with_residual", "rmsnorm_swiglu_down",
    "rmsnorm_linear_argmax",
};
static const char *const event_kind_names[] = {"begin", "normal", "end_of_graph"};

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -12345.0;
}
static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static void check_json(pk_kernel *k, const char *path, const char *what) {
    const pk_taskgraph *g = &k->graph;
    char *text = slurp(path);
    CHECK(text != NULL, "%s: cannot read %s", what, path);
    if (!text) return;
    cJSON *root = cJSON_Parse(text);
    free(text);
    CHECK(root != NULL, "%s: %s does not parse", what, path);
    if (!root) return;
    int bad = 0;
    char hash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)g->hash);
    CHECK(strcmp(str(root, "hash"), hash) == 0 && strcmp(str(root, "pk_version"), PK_VERSION_STRING) == 0 &&
              num(root, "abi_version") == PK_ABI_VERSION,
          "%s: header %s %s", what, str(root, "hash"), hash);
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
    CHECK(cJSON_GetArraySize(layers) == k->nlayers, "%s: %d layers in JSON", what, cJSON_GetArraySize(layers));
    for (int l = 0; l < k->nlayers && l < cJSON_GetArraySize(layers); l++) {
        const cJSON *o = cJSON_GetArrayItem(layers, l);
        const pk_layer *L = &k->layers[l];
        bad += strcmp(str(o, "name"), L->name) != 0 || strcmp(str(o, "kind"), task_kind_names[L->kind]) != 0 ||
               num(o, "grid") != L->grid || num(o, "first_task") != L->first_task;
    }
    const cJSON *tasks = cJSON_GetObjectItemCaseSensitive(root, "tasks");
    CHECK(cJSON_GetArraySize(tasks) == g->ntasks, "%s: %d tasks in JSON", what, cJSON_GetArraySize(tasks));
    for (int t = 0; t < g->ntasks && t < cJSON_GetArraySize(tasks); t++) {
        const cJSON *o = cJSON_GetArrayItem(tasks, t);
        const pk_task *task = &g->tasks[t];
        int b0 = bad;
        bad += num(o, "id") != t || strcmp(str(o, "kind"), task_kind_names[task->kind]) != 0;
        bad += strcmp(str(o, "layer"), t == 0 ? "begin" : k->layers[task->layer].name) != 0;
        bad += num(o, "index") != task->index || num(o, "trig_event") != task->trig_event ||
               num(o, "dep_event") != (task->dep_event == PK_NO_EVENT ? -1.0 : (double)task->dep_event) ||
               num(o, "cost_bytes") != (double)task->cost_bytes;
        const cJSON *views = cJSON_GetObjectItemCaseSensitive(o, "views");
        bad += cJSON_GetArraySize(views) != (int)task->nviews;
        for (uint32_t v = 0; v < task->nviews && (int)v < cJSON_GetArraySize(views); v++) {
            const cJSON *jv = cJSON_GetArrayItem(views, (int)v);
            const pk_view *vw = &task->views[v];
            bad += num(jv, "row0") != vw->row0 || num(jv, "rows") != vw->rows || num(jv, "col0") != vw->col0 ||
                   num(jv, "cols") != vw->cols || num(jv, "row_stride") != (double)vw->row_stride;
            const cJSON *names = cJSON_GetObjectItemCaseSensitive(jv, "tensors");
            const cJSON *srows = cJSON_GetObjectItemCaseSensitive(jv, "seg_rows");
            bad += cJSON_GetArraySize(names) != (int)vw->nseg || cJSON_GetArraySize(srows) != (int)vw->nseg;
            for (uint32_t s = 0; s < vw->nseg && (int)s < cJSON_GetArraySize(names); s++) {
                const cJSON *n = cJSON_GetArrayItem(names, (int)s);
                bad += !cJSON_IsString(n) || strcmp(n->valuestring, k->tensors[vw->seg_buffer[s]]->name) != 0;
                const cJSON *r = cJSON_GetArrayItem(srows, (int)s);
                bad += !cJSON_IsNumber(r) || r->valuedouble != vw->seg_rows[s];
            }
        }
        if (bad != b0 && bad - (bad - b0) < 3) fprintf(stderr, "%s: JSON task %d differs\n", what, t);
    }
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "events");
    CHECK(cJSON_GetArraySize(events) == g->nevents, "%s: %d events in JSON", what, cJSON_GetArraySize(events));
    for (int e = 0; e < g->nevents && e < cJSON_GetArraySize(events); e++) {
        const cJSON *o = cJSON_GetArrayItem(events, e);
        const pk_event *ev = &g->events[e];
        bad += num(o, "id") != e || strcmp(str(o, "kind"), event_kind_names[ev->kind]) != 0 ||
               num(o, "num_triggers") != ev->num_triggers || num(o, "first_task") != ev->first_task ||
               num(o, "last_task") != ev->last_task;
    }
    const cJSON *sched = cJSON_GetObjectItemCaseSensitive(root, "schedule");
    CHECK(cJSON_GetArraySize(sched) == g->nworkers, "%s: %d schedule lists", what, cJSON_GetArraySize(sched));
    for (int w = 0; w < g->nworkers && w < cJSON_GetArraySize(sched); w++) {
        const cJSON *list = cJSON_GetArrayItem(sched, w);
        uint32_t n = g->sched_offset[w + 1] - g->sched_offset[w];
        bad += cJSON_GetArraySize(list) != (int)n;
        for (uint32_t i = 0; i < n && (int)i < cJSON_GetArraySize(list); i++)
            bad += cJSON_GetArrayItem(list, (int)i)->valuedouble != g->sched_tasks[g->sched_offset[w] + i];
    }
    CHECK(bad == 0, "%s: %d JSON fields differ from k->graph (%s)", what, bad, path);
    cJSON_Delete(root);
}

/* Compiles with output_dir, checks the invariants and both JSON files, frees k. */
static void compile_and_check(pk_kernel *k, const char *what) {
    char dir[] = "/tmp/pk_taskgraph_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char sub[96], path[160], path2[160];
    snprintf(sub, sizeof sub, "%s/out", dir); /* pk_compile creates it */
    pk_compile_options opts = {.output_dir = sub};
    pk_status s = pk_compile(k, &opts);
    CHECK(s == PK_OK, "%s: compile: %s %s", what, pk_status_name(s), pk_kernel_error(k));
    if (s == PK_OK) {
        check_graph(k, what);
        snprintf(path, sizeof path, "%s/task_graph.json", sub);
        check_json(k, path, what);
        snprintf(path2, sizeof path2, "%s/again.json", dir);
        CHECK(pk_write_task_graph(k, path2) == PK_OK, "%s: write_task_graph: %s", what, pk_kernel_error(k));
        check_json(k, path2, what);
        unlink(path);
        unlink(path2);
    }
    rmdir(sub);
    rmdir(dir);
}

/* The events a layer waits on: -1 for a root (BEGIN). */
static int layer_events(const pk_kernel *k, int l) {
    const pk_layer *L = &k->layers[l];
    const pk_taskgraph *g = &k->graph;
    uint32_t e0 = g->tasks[L->first_task].dep_event;
    if (e0 == g->begin_event) return -1;
    int n = 1;
    for (int t = 1; t < L->grid; t++)
        if (g->tasks[L->first_task + t].dep_event != g->tasks[L->first_task + t - 1].dep_event) n++;
    return n;
}

/* Layers whose tasks trigger the events of layer l. */
static int producers_of(const pk_kernel *k, int l, int *out) {
    const pk_taskgraph *g = &k->graph;
    const pk_layer *L = &k->layers[l];
    int n = 0;
    for (int t = 1; t < g->ntasks; t++) {
        uint32_t e = g->tasks[t].trig_event;
        if (e == g->end_event) continue;
        if (g->events[e].first_task >= (uint32_t)L->first_task &&
            g->events[e].first_task < (uint32_t)(L->first_task + L->grid)) {
            int p = (int)g->tasks[t].layer, dup = 0;
            for (int i = 0; i < n; i++) dup |= out[i] == p;
            if (!dup) out[n++] = p;
        }
    }
    return n;
}

/* Split-K: task i of the down projection (layer 2) waits on an event that task i of the gate / up
 * layer (layer 1) alone triggers, and the static schedule runs it on that task's worker. */
static void test_splitk_graph(void) {
    const struct { int workers, g, g_lm; } cs[] = {{8, 8, 1}, {3, 6, 2}, {16, 12, 4}, {1, 4, 1}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        char what[64];
        snprintf(what, sizeof what, "splitk#%zu", c);
        pk_kernel *k = build_splitk_mlp(cs[c].workers, cs[c].g, cs[c].g_lm);
        compile_and_check(k, what);
        const pk_taskgraph *g = &k->graph;
        const pk_layer *gu = &k->layers[1], *down = &k->layers[2];
        CHECK(down->kind == PK_TASK_LINEAR_SPLITK_RESIDUAL && layer_events(k, 2) == cs[c].g,
              "%s: the split-K layer has %d events, want %d", what, layer_events(k, 2), cs[c].g);
        int *owner = calloc((size_t)g->ntasks, sizeof *owner);
        for (int w = 0; w < g->nworkers; w++)
            for (uint32_t i = g->sched_offset[w]; i < g->sched_offset[w + 1]; i++) owner[g->sched_tasks[i]] = w;
        int paired = 0, local = 0;
        for (int i = 0; i < down->grid; i++) {
            const pk_task *d = &g->tasks[down->first_task + i], *u = &g->tasks[gu->first_task + i];
            paired += u->trig_event == d->dep_event && g->events[d->dep_event].num_triggers == 1;
            local += owner[down->first_task + i] == owner[gu->first_task + i];
        }
        CHECK(paired == down->grid, "%s: %d of %d split-K tasks wait on their gate / up task alone", what, paired,
              down->grid);
        CHECK(local == down->grid, "%s: %d of %d split-K tasks run on their gate / up task's worker", what, local,
              down->grid);
        free(owner);
        pk_kernel_free(k);
    }
}

/* The fused MLP: every task of the layer that reads its accumulator waits on all of its tasks (one
 * event, grid triggers), and the graph passes the invariants with its shared outputs. */
static void test_mlp_fused_graph(void) {
    const struct { int workers, g, gq, go; } cs[] = {{8, 8, 5, 4}, {3, 6, 80, 7}, {1, 4, 1, 1}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        char what[64];
        snprintf(what, sizeof what, "mlp fused#%zu", c);
        pk_kernel *k = build_mlp_fused(cs[c].workers, cs[c].g, cs[c].gq, cs[c].go);
        compile_and_check(k, what);
        const pk_taskgraph *g = &k->graph;
        const pk_layer *mlp = &k->layers[1], *qkv = &k->layers[2];
        CHECK(mlp->kind == PK_TASK_RMSNORM_SWIGLU_DOWN && layer_events(k, 2) == 1, "%s: the accumulator's reader has %d events",
              what, layer_events(k, 2));
        int whole = 0;
        for (int i = 0; i < qkv->grid; i++) {
            const pk_task *q = &g->tasks[qkv->first_task + i];
            whole += g->events[q->dep_event].num_triggers == (uint32_t)mlp->grid &&
                     g->tasks[mlp->first_task].trig_event == q->dep_event;
        }
        CHECK(whole == qkv->grid, "%s: %d of %d qkv tasks wait on the whole fused MLP", what, whole, qkv->grid);
        pk_kernel_free(k);
    }
}

int main(void) {
    g_zeros = calloc(ZEROS_ELEMS, sizeof *g_zeros);
    test_splitk_graph();
    test_mlp_fused_graph();

    /* Qwen3-shaped graphs. */
    const struct {
        int T, workers, V;
        qwen_grids g;
    } qs[] = {
        {8, 4, 97, {5, 4, 2, 8, 10, 5, 1, 1}},       /* test_e2e_graph's grids */
        {8, 1, 97, {1, 1, 1, 1, 1, 1, 1, 1}},
        {8, 3, 97, {80, 256, 2, 80, 400, 80, 97, 97}},
        {16, 7, 97, {16, 8, 2, 16, 8, 16, 97, 97}},  /* qkv 8 → attention 2: gcd 2 events */
        {8, 64, 1003, {4, 16, 1, 20, 25, 40, 17, 59}}, /* argmax gcd(17, 59) = 1 */
        {8, 5, 1003, {2, 2, 2, 2, 2, 2, 59, 59}},     /* argmax gcd 59 */
        {4, 2, 200, {10, 32, 2, 5, 16, 4, 8, 40}},    /* argmax gcd(8, 40) = 8 */
    };
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "qwen#%zu", i);
        pk_kernel *k = build_qwen(qs[i].T, qs[i].workers, qs[i].V, qs[i].g);
        compile_and_check(k, what);
        /* Layer indices: 0 emb; per block 1 qkv, 2 attention, 3 wo, 4 gu, 5 down; then lm, argmax. */
        int att_e = layer_events(k, 2), am_e = layer_events(k, 12);
        int ga = qs[i].g.att, gq = qs[i].g.qkv;
        int expect_att = ga < gq ? ga : gq;
        while (gq % expect_att || ga % expect_att) expect_att--;
        CHECK(att_e == expect_att, "%s: attention has %d events, expected gcd(%d, %d) = %d", what, att_e, gq, ga,
              expect_att);
        int gl = qs[i].g.lm, gm = qs[i].g.argmax, expect_am = gl < gm ? gl : gm;
        while (gl % expect_am || gm % expect_am) expect_am--;
        CHECK(am_e == expect_am, "%s: argmax has %d events, expected %d", what, am_e, expect_am);
        /* wo (layer 3) reads att and h0: the embedding is covered by the qkv layer, so only the
         * attention triggers wo's event; likewise gu's residual reader (5) waits on gu only. */
        int prods[16], np = producers_of(k, 3, prods);
        CHECK(np == 1 && prods[0] == 2, "%s: wo waits on %d layers (first %d)", what, np, np ? prods[0] : -1);
        np = producers_of(k, 5, prods);
        CHECK(np == 1 && prods[0] == 4, "%s: down waits on %d layers (first %d)", what, np, np ? prods[0] : -1);
        CHECK(layer_events(k, 0) == -1 && layer_events(k, 3) == 1, "%s: embedding is a root, wo 1 event", what);
        pk_kernel_free(k);
    }

    /* Same graph twice: same hash; other grids: another hash. */
    {
        qwen_grids g = {5, 4, 2, 8, 10, 5, 1, 1}, g2 = {5, 4, 2, 8, 10, 5, 97, 1};
        pk_kernel *a = build_qwen(8, 4, 97, g), *b = build_qwen(8, 4, 97, g), *c = build_qwen(8, 4, 97, g2);
        CHECK(pk_compile(a, NULL) == PK_OK && pk_compile(b, NULL) == PK_OK && pk_compile(c, NULL) == PK_OK,
              "hash graphs compile");
        CHECK(a->graph.hash == b->graph.hash && a->graph.hash != c->graph.hash, "graph hash %llx %llx %llx",
              (unsigned long long)a->graph.hash, (unsigned long long)b->graph.hash, (unsigned long long)c->graph.hash);
        pk_kernel_free(a);
        pk_kernel_free(b);
        pk_kernel_free(c);
    }

    /* Chains: emb, n1, n2, n3, gu, silu, d, r, lm, argmax (its last task reduces: no layer of its own). */
    const struct {
        int grids[10];
        int n2_events, n3_events, am_events;
    } cs[] = {
        {{8, 4, 6, 12, 59, 17, 25, 8, 16, 8}, 2, 6, 8},
        {{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, 1, 1},
        {{200, 12, 12, 12, 2006, 1003, 200, 200, 80, 80}, 12, 12, 80},
        {{5, 3, 4, 6, 34, 59, 40, 5, 5, 4}, 1, 2, 1},
        {{40, 6, 4, 3, 17, 17, 8, 25, 20, 16}, 2, 1, 4},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "chain#%zu", i);
        const int *g = cs[i].grids;
        pk_kernel *k = build_chain(1 + (int)i * 3, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9]);
        compile_and_check(k, what);
        CHECK(layer_events(k, 1) == 1 && layer_events(k, 2) == cs[i].n2_events && layer_events(k, 3) == cs[i].n3_events &&
                  layer_events(k, 4) == 1 && layer_events(k, 5) == 1 && layer_events(k, 9) == cs[i].am_events &&
                  k->nlayers == 10,
              "%s: events n1 %d n2 %d n3 %d gu %d silu %d argmax %d; %d layers", what, layer_events(k, 1),
              layer_events(k, 2), layer_events(k, 3), layer_events(k, 4), layer_events(k, 5), layer_events(k, 9),
              k->nlayers);
        pk_kernel_free(k);
    }

    /* Residual edges with gcd events, and redundancy two levels deep. */
    const int rs[][5] = {{4, 8, 20, 8, 16}, {5, 5, 10, 5, 5}, {1, 80, 40, 40, 2}, {16, 8, 8, 1, 80}};
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "residual#%zu", i);
        pk_kernel *k = build_residual(3, rs[i][0], rs[i][1], rs[i][2], rs[i][3], rs[i][4]);
        compile_and_check(k, what);
        int gp = rs[i][1], gr = rs[i][2], e = gp < gr ? gp : gr;
        while (gp % e || gr % e) e--;
        CHECK(layer_events(k, 2) == e, "%s: residual layer has %d events, expected %d", what, layer_events(k, 2), e);
        int prods[16], np = producers_of(k, 4, prods);
        CHECK(np == 1 && prods[0] == 3, "%s: the second residual layer waits on %d layers", what, np);
        pk_kernel_free(k);
    }

    /* Random residual-stream graphs. */
    uint64_t seed = 0x5eed1234;
    for (int i = 0; i < 150; i++) {
        char what[64];
        snprintf(what, sizeof what, "random#%d", i);
        pk_kernel *k = build_random(&seed, 1 + (int)(check_rand_u64(&seed) % 9));
        compile_and_check(k, what);
        pk_kernel_free(k);
    }

    /* (g) one output read by two layers that do not depend on each other. */
    {
        enum { T = 8, H = 16 };
        pk_kernel *k = new_kernel(T, 2);
        pk_tensor *h = act(k, "h", T, H), *x = act(k, "x", T, H), *a = act(k, "a", T, H), *b = act(k, "b", T, H);
        OK(pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", 32, H), h, 2));
        OK(pk_linear_layer(k, h, weight(k, "w0", H, H), x, 4));
        OK(pk_linear_layer(k, x, weight(k, "wa", H, H), a, 2));
        OK(pk_linear_layer(k, x, weight(k, "wb", H, H), b, 2));
        pk_status s = pk_compile(k, NULL);
        const char *msg = pk_kernel_error(k);
        CHECK(s == PK_ERR_INVALID_ARGUMENT, "two readers: %s", pk_status_name(s));
        CHECK(strstr(msg, "L1.linear") && strstr(msg, "L2.linear") && strstr(msg, "L3.linear"),
              "two readers message: %s", msg);
        CHECK(k->graph.tasks == NULL && k->graph.ntasks == 0, "failed compile leaves a graph");
        /* Not compiled: a layer can still be added, and the compile fails again the same way. */
        pk_tensor *c2 = act(k, "c", T, H);
        OK(pk_linear_with_residual_layer(k, a, weight(k, "wc", H, H), b, c2, 2));
        CHECK(pk_compile(k, NULL) == PK_ERR_INVALID_ARGUMENT, "two readers, joined later: %s", pk_kernel_error(k));
        pk_kernel_free(k);
    }
    {   /* The same through a residual: x's second reader does not wait on all of the first. */
        enum { T = 8, H = 16 };
        pk_kernel *k = new_kernel(T, 2);
        pk_tensor *h = act(k, "h", T, H), *x = act(k, "x", T, H), *a = act(k, "a", T, H), *b = act(k, "b", T, H);
        OK(pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", 32, H), h, 2));
        OK(pk_rmsnorm_layer(k, h, weight(k, "n", H, 0), x, 1e-6f, 4));
        OK(pk_rmsnorm_layer(k, x, weight(k, "n2", H, 0), a, 1e-6f, 4)); /* reads rows of x: 4 events */
        OK(pk_linear_with_residual_layer(k, a, weight(k, "wb", H, H), x, b, 2));
        pk_status s = pk_compile(k, NULL);
        /* Valid: b waits on all of a (x read whole), and a's tasks together wait on all of x. */
        CHECK(s == PK_OK, "residual over a row-split chain: %s %s", pk_status_name(s), pk_kernel_error(k));
        if (s == PK_OK) check_graph(k, "rowsplit-residual");
        pk_kernel_free(k);
    }

    {   /* Refused: p is read whole by l, but l could only wait on q's chunks, and each q task
         * follows one chunk of p. (Dropping p as "covered by q" would lose a dependency.) */
        enum { T = 8, H = 80, K = 48 };
        pk_kernel *k = new_kernel(T, 3);
        pk_tensor *h0 = act(k, "h0", T, H), *p = act(k, "p", T, H), *q = act(k, "q", T, H), *l = act(k, "l", T, H);
        int64_t xd[2] = {T, K};
        pk_tensor *x = pk_attach_input(k, "x_in", PK_DTYPE_BF16, 2, xd, NULL, g_zeros);
        OK(pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", 32, H), h0, 4));
        OK(pk_linear_layer(k, h0, weight(k, "wp", H, H), p, 4));
        OK(pk_linear_with_residual_layer(k, x, weight(k, "wq", H, K), p, q, 4)); /* 4 events on p */
        OK(pk_linear_with_residual_layer(k, p, weight(k, "wl", H, H), q, l, 4));
        pk_status s = pk_compile(k, NULL);
        CHECK(s == PK_ERR_INVALID_ARGUMENT && strstr(pk_kernel_error(k), "L1.linear") &&
                  strstr(pk_kernel_error(k), "L2.linear_with_residual") && strstr(pk_kernel_error(k), "L3.linear_with_residual"),
              "partial cover: %s %s", pk_status_name(s), pk_kernel_error(k));
        if (s == PK_OK) check_graph(k, "partial-cover");
        pk_kernel_free(k);
    }
    {   /* Compiles: m reads x1 whole and q split; every q task follows all of x1 through r, which
         * waits on all of the row-split x2, whose tasks together follow all of x1. */
        enum { T = 8, H = 80, K = 48 };
        pk_kernel *k = new_kernel(T, 3);
        pk_tensor *h0 = act(k, "h0", T, H), *x1 = act(k, "x1", T, H), *x2 = act(k, "x2", T, H);
        pk_tensor *r = act(k, "r", T, H), *q = act(k, "q", T, H), *m = act(k, "m", T, H);
        int64_t xd[2] = {T, K};
        pk_tensor *x = pk_attach_input(k, "x_in", PK_DTYPE_BF16, 2, xd, NULL, g_zeros);
        OK(pk_embedding_layer(k, pk_step_tokens(k), weight(k, "embed", 32, H), h0, 4));
        OK(pk_rmsnorm_layer(k, h0, weight(k, "n1", H, 0), x1, 1e-6f, 4));
        OK(pk_rmsnorm_layer(k, x1, weight(k, "n2", H, 0), x2, 1e-6f, 2));
        OK(pk_linear_layer(k, x2, weight(k, "wr", H, H), r, 4));
        OK(pk_linear_with_residual_layer(k, x, weight(k, "wq", H, K), r, q, 8));
        OK(pk_linear_with_residual_layer(k, x1, weight(k, "wm", H, H), q, m, 4));
        pk_status s = pk_compile(k, NULL);
        CHECK(s == PK_OK, "deep cover: %s %s", pk_status_name(s), pk_kernel_error(k));
        if (s == PK_OK) {
            check_graph(k, "deep-cover");
            int prods[16], np = producers_of(k, 5, prods);
            CHECK(np == 1 && prods[0] == 4 && layer_events(k, 5) == 4 && layer_events(k, 2) == 2,
                  "deep cover: m waits on %d layers, %d events", np, layer_events(k, 5));
        }
        pk_kernel_free(k);
    }

    free(g_zeros);
    return check_report("taskgraph");
}
