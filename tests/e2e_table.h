// SPDX-License-Identifier: Apache-2.0
/* e2e_table.h — the end-to-end test table: rows of backend × scheduling mode × workers × variant
 * (e2e_model.h's options that change the graph), every row run on the small model of e2e_model.h
 * and checked against its reference forward. tests/test_e2e_graph.c runs the whole table (a CUDA
 * row without a GPU is skipped and counted, said once); tests/gpu/test_cuda_e2e.c runs it on the
 * GPU machine, with its GPU-only checks around it.
 *
 * The scenario: 4 requests with prompts of 5, 40, 1 and 19 tokens, 12 new tokens each; 2 slots (the
 * third and fourth request wait for one), T = 8 (the 40- and 19-token prompts are prefilled in
 * chunks that share steps with other requests' rows, so they start off the T grid), a paged KV
 * cache of 4-token pages. Request 1 reaches position 51: 32-position blocks 0 and 1 are in
 * different splits of a split attention (and with 3 splits one is empty). An EOS row sets the EOS
 * token to request 1's 5th token: requests end early, as the reference says they must.
 *
 * Each row's kernel runs the scenario twice. Per run: every request's tokens and finish reason are
 * the reference's, on_token streams each of them in order, and the last step's logits (the rows
 * that step decoded) match the reference's: relative L2 error <= 1e-2 and argmax equal wherever
 * the reference's top-2 gap is decisive (> 4 bf16 steps of the top logit, scripts/compare_logits.py);
 * the second run's logits are the first's bits (but for the down_proj split over K, whose fp32 adds
 * come in the order its tasks finish). Across rows: rows of one backend with the same graph bits
 * (its attention split, fused MLP, EOS; on the GPU its LM head too) give bit-identical last-step
 * logits in every mode and worker count, and every row runs the same number of steps.
 */
#ifndef PK_TEST_E2E_TABLE_H
#define PK_TEST_E2E_TABLE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "common/bf16.h"
#include "e2e_model.h"
#include "pk.h"

enum { E2E_T = 8, E2E_NREQ = 4, E2E_NEW = 12, E2E_RUNS = 2, E2E_MAX_ROWS = 64 };
static const int e2e_prompt_len[E2E_NREQ] = {5, 40, 19, 1};

typedef struct e2e_row {
    pk_backend backend;
    pk_sched_mode mode;
    int workers, schedulers; /* schedulers: dynamic mode's */
    e2e_variant v;
    int eos;   /* 1: eos_token_id is e2e_ref.eos */
    int quick; /* 1: also in test_cuda_e2e --quick (compute-sanitizer's short run) */
} e2e_row;

#define CPU_S(w) PK_BACKEND_CPU, PK_SCHED_STATIC, (w), 1
#define CPU_D(w, s) PK_BACKEND_CPU, PK_SCHED_DYNAMIC, (w), (s)
#define CUDA_S(w) PK_BACKEND_CUDA, PK_SCHED_STATIC, (w), 1
#define CUDA_D(w, s) PK_BACKEND_CUDA, PK_SCHED_DYNAMIC, (w), (s)
#define BASE {0, E2E_MLP_ROWS, 0}
#define SPLIT(n) {(n), E2E_MLP_ROWS, 0}
#define SPLITK(n) {(n), E2E_MLP_SPLITK, 0}
#define FUSED(n) {(n), E2E_MLP_FUSED, 0}
#define ARGMAX(n) {(n), E2E_MLP_ROWS, 1}
#define FUSED_ARGMAX(n) {(n), E2E_MLP_FUSED, 1}

/* The table. CUDA rows: 12 distinct kernels (workers × variant; the mode does not change kernel.cu),
 * the ones test_cuda_e2e --precompile compiles. */
static const e2e_row e2e_rows[] = {
    /* the plain graph: both modes, 1 to 16 workers, 1 to 3 schedulers */
    {CPU_S(1), BASE, 0, 1}, {CPU_S(3), BASE, 0, 0}, {CPU_S(8), BASE, 0, 0},
    {CPU_D(1, 1), BASE, 0, 0}, {CPU_D(4, 2), BASE, 0, 0}, {CPU_D(7, 3), BASE, 0, 0},
    {CUDA_S(4), BASE, 0, 1}, {CUDA_D(4, 1), BASE, 0, 1}, {CUDA_D(4, 3), BASE, 0, 0},
    {CUDA_S(16), BASE, 0, 0}, {CUDA_D(16, 2), BASE, 0, 0},
    /* the attention split over the KV length (kv_splits 1: not split) */
    {CPU_S(3), SPLIT(1), 0, 0}, {CPU_S(3), SPLIT(2), 0, 0}, {CPU_S(5), SPLIT(3), 0, 0}, {CPU_D(4, 2), SPLIT(2), 0, 0},
    {CUDA_S(16), SPLIT(2), 0, 1}, {CUDA_D(4, 1), SPLIT(3), 0, 1}, {CUDA_S(4), SPLIT(3), 0, 0},
    /* layer 1's down_proj split over K, alone and beside the split attention */
    {CPU_S(1), SPLITK(0), 0, 0}, {CPU_S(3), SPLITK(0), 0, 0}, {CPU_S(8), SPLITK(2), 0, 0},
    {CPU_D(4, 2), SPLITK(0), 0, 0}, {CPU_D(7, 3), SPLITK(3), 0, 0},
    {CUDA_S(16), SPLITK(0), 0, 1}, {CUDA_S(4), SPLITK(2), 0, 0}, {CUDA_D(4, 1), SPLITK(0), 0, 0},
    /* layer 0's MLP as one layer, its sum in an int64 accumulator (exact adds: the same bits) */
    {CPU_S(1), FUSED(0), 0, 0}, {CPU_S(3), FUSED(0), 0, 0}, {CPU_S(8), FUSED(2), 0, 0},
    {CPU_D(4, 2), FUSED(0), 0, 0}, {CPU_D(7, 3), FUSED(0), 0, 0},
    {CUDA_S(16), FUSED(0), 0, 0}, {CUDA_S(4), FUSED(2), 0, 0},
    /* the LM head and the argmax as one layer, alone and beside the fused MLP */
    {CPU_S(1), ARGMAX(0), 0, 0}, {CPU_S(3), ARGMAX(0), 0, 0}, {CPU_S(8), ARGMAX(2), 0, 0},
    {CPU_D(4, 2), ARGMAX(0), 0, 0}, {CPU_D(7, 3), ARGMAX(3), 0, 0}, {CPU_S(5), FUSED_ARGMAX(0), 0, 0},
    {CUDA_S(16), ARGMAX(0), 0, 0}, {CUDA_D(4, 1), ARGMAX(3), 0, 0}, {CUDA_S(4), FUSED_ARGMAX(2), 0, 0},
    /* EOS inside the runtime: requests end at the EOS token, finish reason EOS */
    {CPU_S(4), BASE, 1, 0}, {CPU_D(4, 2), BASE, 1, 0}, {CUDA_S(4), BASE, 1, 0}, {CUDA_D(4, 3), BASE, 1, 0},
};
enum { E2E_NROWS = sizeof e2e_rows / sizeof e2e_rows[0] };
#undef CPU_S
#undef CPU_D
#undef CUDA_S
#undef CUDA_D
#undef BASE
#undef SPLIT
#undef SPLITK
#undef FUSED
#undef ARGMAX
#undef FUSED_ARGMAX

/* "cuda dynamic W4 S3 split 3 fused argmax eos" */
static inline const char *e2e_row_name(const e2e_row *r, char *buf, size_t n) {
    int len = snprintf(buf, n, "%s %s W%d", r->backend == PK_BACKEND_CUDA ? "cuda" : "cpu",
                       r->mode == PK_SCHED_DYNAMIC ? "dynamic" : "static", r->workers);
    if (r->mode == PK_SCHED_DYNAMIC && len < (int)n) len += snprintf(buf + len, n - len, " S%d", r->schedulers);
    if (r->v.kv_splits && len < (int)n) len += snprintf(buf + len, n - len, " split %d", r->v.kv_splits);
    if (r->v.mlp == E2E_MLP_SPLITK && len < (int)n) len += snprintf(buf + len, n - len, " splitk");
    if (r->v.mlp == E2E_MLP_FUSED && len < (int)n) len += snprintf(buf + len, n - len, " fused");
    if (r->v.lm_argmax && len < (int)n) len += snprintf(buf + len, n - len, " argmax");
    if (r->eos && len < (int)n) snprintf(buf + len, n - len, " eos");
    return buf;
}

/* ---- the reference's answers ---- */

typedef struct e2e_ref {
    int32_t prompts[E2E_NREQ][MAXLEN];
    int32_t tokens[E2E_NREQ][E2E_NEW];       /* greedy continuation */
    float logits[E2E_NREQ][E2E_NEW][V];      /* the logits that chose tokens[i][n] */
    int32_t eos;                             /* the EOS rows' eos_token_id */
    int eos_len[E2E_NREQ];                   /* tokens up to and with the first eos (E2E_NEW: none) */
} e2e_ref;

/* The scenario's prompts (seeded) and the reference's continuations; checks they are not degenerate
 * and that the EOS ends a request early. */
static inline void e2e_ref_init(e2e_ref *r, const weights *w) {
    memset(r, 0, sizeof *r);
    uint64_t seed = 99;
    for (int i = 0; i < E2E_NREQ; i++)
        for (int j = 0; j < e2e_prompt_len[i]; j++) r->prompts[i][j] = (int32_t)(check_rand_u64(&seed) % V);
    for (int i = 0; i < E2E_NREQ; i++) {
        int32_t seq[MAXLEN];
        memcpy(seq, r->prompts[i], (size_t)e2e_prompt_len[i] * sizeof(int32_t));
        int distinct = 0;
        for (int n = 0; n < E2E_NEW; n++) {
            seq[e2e_prompt_len[i] + n] = r->tokens[i][n] = e2e_ref_next(w, seq, e2e_prompt_len[i] + n, r->logits[i][n]);
            int seen = 0;
            for (int m = 0; m < n; m++) seen |= r->tokens[i][m] == r->tokens[i][n];
            distinct += !seen;
        }
        CHECK(distinct >= 3, "reference for request %d is degenerate (%d distinct tokens)", i, distinct);
    }
    r->eos = r->tokens[1][4];
    int early = 0;
    for (int i = 0; i < E2E_NREQ; i++) {
        r->eos_len[i] = E2E_NEW;
        for (int n = 0; n < E2E_NEW && r->eos_len[i] == E2E_NEW; n++)
            if (r->tokens[i][n] == r->eos) r->eos_len[i] = n + 1;
        early += r->eos_len[i] < E2E_NEW;
    }
    CHECK(early >= 1, "eos %d ends no request early", (int)r->eos);
}

/* ---- one row ---- */

static inline double e2e_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The row's kernel, not compiled; eos: the EOS token (-1: none); trace: NULL or a trace path. */
static inline pk_kernel *e2e_row_kernel(const weights *w, const e2e_row *r, int64_t eos, const char *trace,
                                        pk_tensor **logits) {
    pk_config c = e2e_config(E2E_T);
    c.backend = r->backend;
    c.sched_mode = r->mode;
    c.num_workers = r->workers;
    c.num_local_schedulers = r->schedulers;
    c.eos_token_id = eos;
    c.trace_path = trace;
    pk_kernel *k = pk_kernel_new(&c);
    *logits = e2e_add_layers(k, w, &c, &r->v);
    return k;
}

/* How many of k's layers are of `kind` (pk_layer_info's name). */
static inline int e2e_layers_of_kind(const pk_kernel *k, const char *kind) {
    pk_graph_stats st;
    pk_kernel_stats(k, &st);
    int n = 0;
    for (int l = 0; l < st.num_layers; l++) {
        pk_layer_info li;
        n += pk_kernel_layer(k, l, &li) == PK_OK && strcmp(li.kind, kind) == 0;
    }
    return n;
}

/* The tokens on_token hands out, in order. */
typedef struct e2e_stream {
    int count, out_of_order;
    int n[E2E_NREQ];                                       /* tokens seen per request */
    int req[E2E_NREQ * E2E_NEW], row[E2E_NREQ * E2E_NEW]; /* each token's request and step row */
    int32_t token[E2E_NREQ * E2E_NEW];
} e2e_stream;

static inline void e2e_on_token(void *user, int request, int32_t token, int row) {
    e2e_stream *s = user;
    if (request < 0 || request >= E2E_NREQ || s->count >= E2E_NREQ * E2E_NEW || s->n[request] >= E2E_NEW) {
        s->out_of_order = 1;
        return;
    }
    s->req[s->count] = request;
    s->row[s->count] = row;
    s->token[s->count++] = token;
    s->n[request]++;
}

/* Relative L2 error and decisive argmax of logits rows [nv] against the reference's, accumulated. */
typedef struct e2e_cmp {
    double d2, r2, max_abs;
    int rows, decisive, agree;
} e2e_cmp;

static inline void e2e_cmp_row(e2e_cmp *c, const pk_bf16 *got, const float *ref, int nv) {
    int i1 = 0, g1 = 0;
    float v2 = -INFINITY;
    for (int v = 0; v < nv; v++) {
        double x = pk_bf16_to_f32(got[v]), y = ref[v], d = fabs(x - y);
        c->d2 += d * d;
        c->r2 += y * y;
        if (d > c->max_abs || d != d) c->max_abs = d;
        if (ref[v] > ref[i1]) i1 = v;
        if (pk_bf16_to_f32(got[v]) > pk_bf16_to_f32(got[g1])) g1 = v;
    }
    for (int v = 0; v < nv; v++)
        if (v != i1 && ref[v] > v2) v2 = ref[v];
    double step = ldexp(1.0, (int)floor(log2(fmax(fabs(ref[i1]), 1e-30))) - 7); /* a bf16 step at the top logit */
    c->rows++;
    if (ref[i1] - v2 > 4 * step) {
        c->decisive++;
        c->agree += g1 == i1;
    }
}

static inline double e2e_cmp_rel(const e2e_cmp *c) { return c->r2 > 0 ? sqrt(c->d2 / c->r2) : INFINITY; }

/* What a row's runs gave. */
typedef struct e2e_result {
    int ran;                   /* compiled, and the last run's logits read */
    pk_bf16 logits[E2E_T * V]; /* the last step's, every row */
    int64_t steps;
    double compile_ms, run_ms; /* run_ms: the last run (warm) */
    int tokens_ok;
    e2e_cmp cmp;               /* the last run's last step against the reference */
    const char *bitwise;       /* against its group's first row: "base", "yes", "NO", "-" */
} e2e_result;

/* Runs the scenario once on k (compiled) and checks it against the reference; fills r's logits,
 * steps, run_ms, tokens_ok and cmp. Returns 1 when the run and the logits read succeeded. */
static inline int e2e_run_once(pk_kernel *k, pk_tensor *lt, const e2e_ref *ref, const e2e_row *row, const char *name,
                               e2e_result *r) {
    int32_t out[E2E_NREQ][E2E_NEW];
    pk_request req[E2E_NREQ];
    for (int i = 0; i < E2E_NREQ; i++)
        req[i] = (pk_request){.prompt = ref->prompts[i], .prompt_len = e2e_prompt_len[i], .max_new_tokens = E2E_NEW,
                              .output = out[i]};
    static e2e_stream st;
    memset(&st, 0, sizeof st);
    double t0 = e2e_now_ms();
    pk_status s = pk_run(k, req, E2E_NREQ, e2e_on_token, &st);
    r->run_ms = e2e_now_ms() - t0;
    CHECK(s == PK_OK, "%s: run: %s: %s", name, pk_status_name(s), pk_kernel_error(k));
    if (s != PK_OK) return 0;
    r->tokens_ok = 1;
    int total = 0;
    for (int i = 0; i < E2E_NREQ; i++) {
        int want = row->eos ? ref->eos_len[i] : E2E_NEW;
        pk_finish_reason fin = want < E2E_NEW || (row->eos && ref->tokens[i][E2E_NEW - 1] == ref->eos) ? PK_FINISH_EOS
                                                                                                       : PK_FINISH_LENGTH;
        int same = req[i].num_output == want && req[i].finish == fin &&
                   memcmp(out[i], ref->tokens[i], (size_t)want * sizeof(int32_t)) == 0;
        CHECK(same, "%s request %d: %d tokens, finish %d, not the reference's %d tokens, finish %d", name, i,
              req[i].num_output, (int)req[i].finish, want, (int)fin);
        if (!same) {
            fprintf(stderr, "  got/reference:");
            for (int n = 0; n < req[i].num_output && n < E2E_NEW; n++) fprintf(stderr, " %d/%d", out[i][n], ref->tokens[i][n]);
            fputc('\n', stderr);
        }
        r->tokens_ok &= same;
        total += req[i].num_output;
    }
    int streamed_ok = !st.out_of_order && st.count == total;
    for (int j = 0, n[E2E_NREQ] = {0}; streamed_ok && j < st.count; j++)
        streamed_ok = st.token[j] == out[st.req[j]][n[st.req[j]]++];
    CHECK(streamed_ok, "%s: on_token streamed %d tokens%s, not the %d generated in order", name, st.count,
          st.out_of_order ? " (one out of range)" : "", total);
    pk_graph_stats gs;
    pk_kernel_stats(k, &gs);
    r->steps = gs.steps_run;
    /* 40 prompt tokens at 8 per step, 2 slots for 4 requests: more steps than any request's tokens */
    CHECK(r->steps > E2E_NEW + 5, "%s: %lld steps", name, (long long)r->steps);
    s = pk_tensor_read(k, lt, r->logits, sizeof r->logits);
    CHECK(s == PK_OK, "%s: reading the logits: %s", name, pk_kernel_error(k));
    if (s != PK_OK) return 0;
    /* the last step decoded only (a prompt row there would need a step after it): each of its rows
     * gave one token, the last ones streamed, each its request's last */
    pk_step_times tm;
    int last_rows = 0;
    if (pk_run_step_times(k, &tm) == PK_OK && tm.num_timed > 0 && tm.prompt_rows[tm.num_timed - 1] == 0)
        last_rows = tm.rows[tm.num_timed - 1];
    CHECK(last_rows >= 1 && last_rows <= E2E_T && last_rows <= st.count, "%s: the last step's rows: %d", name, last_rows);
    memset(&r->cmp, 0, sizeof r->cmp);
    if (!r->tokens_ok || !streamed_ok) return 1; /* the reference's logits are for its tokens */
    for (int j = st.count - last_rows; j < st.count && last_rows > 0; j++) {
        int q = st.req[j], n = req[q].num_output - 1, ok = st.row[j] >= 0 && st.row[j] < E2E_T;
        for (int m = j + 1; m < st.count; m++) ok &= st.req[m] != q; /* its last token */
        CHECK(ok, "%s: the last step's token %d (request %d, row %d) is not its request's last", name, j, q, st.row[j]);
        if (ok) e2e_cmp_row(&r->cmp, r->logits + (size_t)st.row[j] * V, ref->logits[q][n], V);
    }
    double rel = e2e_cmp_rel(&r->cmp);
    CHECK(r->cmp.rows == last_rows && rel <= 1e-2 && r->cmp.agree == r->cmp.decisive,
          "%s: last step's logits (%d rows) against the reference: relative L2 %.3g (max %.0e), max |d| %.4g, argmax "
          "equal at %d of %d decisive rows",
          name, r->cmp.rows, rel, 1e-2, r->cmp.max_abs, r->cmp.agree, r->cmp.decisive);
    return 1;
}

/* Compiles the row's kernel, checks its layers, runs it E2E_RUNS times (each against the reference,
 * the logits the same bits every time but with splitk). */
static inline void e2e_run_row(const weights *w, const e2e_ref *ref, const e2e_row *row, e2e_result *r) {
    char name[96];
    e2e_row_name(row, name, sizeof name);
    memset(r, 0, sizeof *r);
    r->bitwise = "-";
    pk_tensor *lt;
    pk_kernel *k = e2e_row_kernel(w, row, row->eos ? ref->eos : -1, NULL, &lt);
    double t0 = e2e_now_ms();
    pk_status s = pk_compile(k, NULL);
    r->compile_ms = e2e_now_ms() - t0;
    CHECK(s == PK_OK, "%s: compile: %s: %s", name, pk_status_name(s), pk_kernel_error(k));
    if (s == PK_OK) {
        pk_graph_stats gs;
        pk_kernel_stats(k, &gs);
        int fused = e2e_layers_of_kind(k, "rmsnorm_swiglu_down"), lm = e2e_layers_of_kind(k, "rmsnorm_linear_argmax");
        int partial = e2e_layers_of_kind(k, "argmax_partial");
        CHECK(gs.num_layers == e2e_num_layers(&row->v) && fused == (row->v.mlp == E2E_MLP_FUSED) &&
                  lm == row->v.lm_argmax && partial == !row->v.lm_argmax,
              "%s: %d layers (want %d): %d rmsnorm_swiglu_down, %d rmsnorm_linear_argmax, %d argmax_partial", name,
              gs.num_layers, e2e_num_layers(&row->v), fused, lm, partial);
        static pk_bf16 first[E2E_T * V];
        for (int run = 0; run < E2E_RUNS; run++) {
            char what[112];
            snprintf(what, sizeof what, "%s run %d", name, run);
            r->ran = e2e_run_once(k, lt, ref, row, what, r);
            if (!r->ran) break;
            if (run == 0)
                memcpy(first, r->logits, sizeof first);
            else if (row->v.mlp != E2E_MLP_SPLITK)
                CHECK(memcmp(first, r->logits, sizeof first) == 0, "%s: logits not the bits of run 0", what);
        }
    }
    pk_kernel_free(k);
}

/* Rows whose last-step logits must be the same bits: one backend, one graph but for the mode and the
 * worker count. The CPU's fused LM head + argmax writes the two layers' bits; splitk rows have none. */
static inline int e2e_same_bits(const e2e_row *a, const e2e_row *b) {
    return a->backend == b->backend && (a->v.kv_splits > 1 ? a->v.kv_splits : 0) == (b->v.kv_splits > 1 ? b->v.kv_splits : 0) &&
           a->v.mlp == b->v.mlp && a->v.mlp != E2E_MLP_SPLITK && a->eos == b->eos &&
           (a->backend == PK_BACKEND_CPU || a->v.lm_argmax == b->v.lm_argmax);
}

/* ---- the table ---- */

static inline int e2e_has_gpu(void) {
    FILE *p = popen("nvidia-smi -L 2>/dev/null", "r");
    if (!p) return 0;
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, p)) n += strncmp(line, "GPU ", 4) == 0;
    pclose(p);
    return n > 0;
}

enum { E2E_TABLE_QUICK = 1, E2E_TABLE_CUDA_ONLY = 2 };

/* Runs the table's rows (flags: E2E_TABLE_QUICK only the quick ones; E2E_TABLE_CUDA_ONLY no CPU row),
 * CUDA rows only with a GPU (else skipped, counted and said once), the cross-row checks, and prints
 * the table. Returns how many rows ran. */
static inline int e2e_run_table(const weights *w, const e2e_ref *ref, int flags, int gpu) {
    static e2e_result res[E2E_NROWS];
    int ran[E2E_NROWS] = {0}, nran = 0, skipped = 0;
    for (int i = 0; i < E2E_NROWS; i++) {
        const e2e_row *row = &e2e_rows[i];
        if ((flags & E2E_TABLE_QUICK) && !row->quick) continue;
        if ((flags & E2E_TABLE_CUDA_ONLY) && row->backend != PK_BACKEND_CUDA) continue;
        if (row->backend == PK_BACKEND_CUDA && !gpu) {
            skipped++;
            continue;
        }
        e2e_run_row(w, ref, row, &res[i]);
        ran[i] = res[i].ran;
        nran++;
    }
    /* across rows: the same steps; the same bits within a group */
    int64_t steps[2] = {-1, -1}; /* [eos] */
    for (int i = 0; i < E2E_NROWS; i++) {
        if (!ran[i]) continue;
        char name[96];
        e2e_row_name(&e2e_rows[i], name, sizeof name);
        int64_t *st = &steps[e2e_rows[i].eos];
        if (*st < 0) *st = res[i].steps;
        CHECK(res[i].steps == *st, "%s: %lld steps, the first row %lld", name, (long long)res[i].steps, (long long)*st);
        if (e2e_rows[i].v.mlp == E2E_MLP_SPLITK) continue;
        int base = -1;
        for (int j = 0; j < i && base < 0; j++)
            if (ran[j] && e2e_same_bits(&e2e_rows[j], &e2e_rows[i])) base = j;
        if (base < 0) {
            res[i].bitwise = "base";
            continue;
        }
        int bit = memcmp(res[i].logits, res[base].logits, sizeof res[i].logits) == 0;
        char bname[96];
        CHECK(bit, "%s: last-step logits not the bits of '%s'", name, e2e_row_name(&e2e_rows[base], bname, sizeof bname));
        res[i].bitwise = bit ? "yes" : "NO";
    }
    /* argmax: decisive last-step rows with the reference's argmax / decisive rows / rows compared */
    printf("%-38s %9s %8s %6s %7s %9s %9s %9s %8s\n", "row", "compile s", "run ms", "steps", "tokens", "rel L2",
           "max|d|", "argmax", "bitwise");
    for (int i = 0; i < E2E_NROWS; i++) {
        if (!ran[i]) continue;
        char name[96], dec[16];
        snprintf(dec, sizeof dec, "%d/%d/%d", res[i].cmp.agree, res[i].cmp.decisive, res[i].cmp.rows);
        printf("%-38s %9.2f %8.2f %6lld %7s %9.2e %9.3g %9s %8s\n", e2e_row_name(&e2e_rows[i], name, sizeof name),
               res[i].compile_ms / 1e3, res[i].run_ms, (long long)res[i].steps, res[i].tokens_ok ? "ref" : "DIFFER",
               e2e_cmp_rel(&res[i].cmp), res[i].cmp.max_abs, dec, res[i].bitwise);
    }
    if (skipped) printf("skipped: %d CUDA rows (no CUDA GPU)\n", skipped);
    return nran;
}

#endif /* PK_TEST_E2E_TABLE_H */
