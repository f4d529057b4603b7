// SPDX-License-Identifier: Apache-2.0
/* test_runtime_stress.c — the CPU runtime gives the same bits however it is scheduled.
 *
 * Seeded random graphs through pk.h (an embedding, then random blocks of rmsnorm, rmsnorm_linear,
 * linear, linear_with_residual, silu_mul, silu_mul_linear_with_residual and attention over widths
 * 8–96 with random dividing grids, then an argmax into pk_step_output) run the same requests
 * (2–4, prompts of 1–20 tokens, up to 40 new tokens, T of 4–8 so prefill is chunked and requests
 * wait for slots) in static mode with 1, 2, 5 and 16 workers and in dynamic mode with (workers,
 * schedulers) (1, 1), (3, 2), (16, 4): tokens, finish reasons and the last step's logits must be
 * byte-identical, and on_token must report every token in order. Then one long request (2000
 * tokens: thousands of steps) in both modes, EOS stopping, and pk_run called twice on a kernel.
 *
 * PK_STRESS_SCALE (default 1; 0.25 under ThreadSanitizer) scales the number of graphs (40 at 1),
 * and below 0.25 the long run's length.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/bf16.h"
#include "pk.h"

#if defined(__SANITIZE_THREAD__)
#define STRESS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRESS_TSAN 1
#endif
#endif
#ifndef STRESS_TSAN
#define STRESS_TSAN 0
#endif

/* ---- weights: freed with the kernel ---- */

typedef struct pool {
    void *p[512];
    int n;
} pool;

static void pool_free(pool *wp) {
    for (int i = 0; i < wp->n; i++) free(wp->p[i]);
    wp->n = 0;
}

static float unit(uint64_t *s) { return check_rand_f32(s); }
static int pick(uint64_t *s, int n) { return (int)(check_rand_u64(s) % (uint64_t)n); }

static int rand_div(uint64_t *s, int n) {
    int d[64], nd = 0;
    for (int i = 1; i <= n && nd < 64; i++)
        if (n % i == 0) d[nd++] = i;
    return d[pick(s, nd)];
}

/* A bf16 weight of offset + scale·U[-1, 1), attached under "w<n>". */
static pk_tensor *weight(pk_kernel *k, pool *wp, uint64_t *s, int *nt, int64_t d0, int64_t d1, float scale,
                         float offset) {
    size_t n = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    pk_bf16 *data = malloc(n * sizeof *data);
    for (size_t i = 0; i < n; i++) data[i] = pk_f32_to_bf16(offset + scale * unit(s));
    if (wp->n < 512) wp->p[wp->n++] = data;
    char name[32];
    snprintf(name, sizeof name, "w%d", (*nt)++);
    int64_t dims[2] = {d0, d1};
    pk_tensor *t = pk_attach_input(k, name, PK_DTYPE_BF16, d1 ? 2 : 1, dims, NULL, data);
    CHECK(t != NULL, "attach %s: %s", name, pk_kernel_error(k));
    return t;
}

static pk_tensor *act(pk_kernel *k, int *nt, int64_t T, int64_t n) {
    char name[32];
    snprintf(name, sizeof name, "t%d", (*nt)++);
    int64_t dims[2] = {T, n};
    pk_tensor *t = pk_new_tensor(k, name, PK_DTYPE_BF16, 2, dims, PK_IO_LOCAL);
    CHECK(t != NULL, "new_tensor %s: %s", name, pk_kernel_error(k));
    return t;
}

#define OK(expr)                                                                                           \
    do {                                                                                                   \
        pk_status s_ = (expr);                                                                             \
        CHECK(s_ == PK_OK, "line %d: %s -> %s: %s", __LINE__, #expr, pk_status_name(s_), pk_kernel_error(k)); \
    } while (0)

/* How to run a graph. */
typedef struct run_cfg {
    pk_sched_mode mode;
    int workers, schedulers;
    int64_t eos;
    int max_seq;  /* 0: 64 */
    int max_reqs; /* 0: from the graph's seed */
    const char *trace; /* trace_path, or NULL */
} run_cfg;

typedef struct graph_shape {
    int T, R, V;
} graph_shape;

/* Builds graph `gseed` (structure, grids and weights depend on the seed only) with the run's
 * config, compiles it. *logits gets the LM head's output. */
static pk_kernel *build(uint64_t gseed, const run_cfg *rc, pool *wp, pk_tensor **logits, graph_shape *shape) {
    uint64_t s = gseed * 0x9E3779B97F4A7C15ull + 1;
    static const int Hs[] = {8, 12, 16, 20, 24, 32, 40, 48, 60, 64, 80, 96};
    static const int Vs[] = {16, 24, 30, 48, 64, 96};
    static const int pages[] = {1, 2, 4, 8};
    int T = 4 + pick(&s, 5), R = 2 + pick(&s, 2), H = Hs[pick(&s, 12)], V = Vs[pick(&s, 6)];
    int page = pages[pick(&s, 4)];
    if (rc->max_reqs) R = rc->max_reqs;
    pk_config c = pk_config_default();
    c.max_seq_length = rc->max_seq ? rc->max_seq : 64;
    c.max_requests = R;
    c.max_tokens_per_step = T;
    c.page_size = page;
    c.num_pages = 0;
    c.num_workers = rc->workers;
    c.num_local_schedulers = rc->schedulers;
    c.sched_mode = rc->mode;
    c.eos_token_id = rc->eos;
    c.trace_path = rc->trace;
    pk_kernel *k = pk_kernel_new(&c);
    CHECK(k && pk_kernel_status(k) == PK_OK, "kernel_new: %s", pk_kernel_error(k));
    int nt = 0;
#define W(d0, d1, sc) weight(k, wp, &s, &nt, (d0), (d1), (sc), 0.0f)
#define NORM(n) weight(k, wp, &s, &nt, (n), 0, 0.2f, 1.0f)
#define LIN(n_out, n_in) W((n_out), (n_in), sqrtf(3.0f / (float)(n_in)))
#define A(n) act(k, &nt, T, (n))
#define DIV(n) rand_div(&s, (n))
    pk_tensor *h = A(H);
    pk_tensor *emb = W(V, H, 1.0f);
    OK(pk_embedding_layer(k, pk_step_tokens(k), emb, h, DIV(H)));
    int blocks = 1 + pick(&s, 5), ncache = 0;
    for (int b = 0; b < blocks; b++) {
        int kind = pick(&s, 7), I = 4 * (1 + pick(&s, 12));
        pk_tensor *h2 = A(H);
        if (kind == 0) { /* rmsnorm_linear → linear_with_residual */
            pk_tensor *a = A(I), *nw = NORM(H), *w1 = LIN(I, H), *w2 = LIN(H, I);
            OK(pk_rmsnorm_linear_layer(k, h, nw, w1, a, 1e-5f, DIV(I)));
            OK(pk_linear_with_residual_layer(k, a, w2, h, h2, DIV(H)));
        } else if (kind == 1) { /* rmsnorm → linear → silu_mul → linear_with_residual */
            pk_tensor *n = A(H), *gu = A(2 * I), *m = A(I), *nw = NORM(H), *w1 = LIN(2 * I, H), *w2 = LIN(H, I);
            OK(pk_rmsnorm_layer(k, h, nw, n, 1e-5f, DIV(T)));
            OK(pk_linear_layer(k, n, w1, gu, DIV(2 * I)));
            OK(pk_silu_mul_layer(k, gu, m, DIV(I)));
            OK(pk_linear_with_residual_layer(k, m, w2, h, h2, DIV(H)));
        } else if (kind == 2) { /* rmsnorm_linear → silu_mul_linear_with_residual */
            pk_tensor *gu = A(2 * I), *nw = NORM(H), *w1 = LIN(2 * I, H), *w2 = LIN(H, I);
            OK(pk_rmsnorm_linear_layer(k, h, nw, w1, gu, 1e-5f, DIV(2 * I)));
            OK(pk_silu_mul_linear_with_residual_layer(k, gu, w2, h, h2, DIV(H)));
        } else if (kind == 3) { /* a projection of the stream */
            pk_tensor *w1 = LIN(H, H);
            OK(pk_linear_layer(k, h, w1, h2, DIV(H)));
        } else if (kind == 4) { /* two row-split rmsnorms (gcd events), the first the residual */
            pk_tensor *x1 = A(H), *x2 = A(H), *n1 = NORM(H), *n2 = NORM(H), *w1 = LIN(H, H);
            OK(pk_rmsnorm_layer(k, h, n1, x1, 1e-5f, DIV(T)));
            OK(pk_rmsnorm_layer(k, x1, n2, x2, 1e-5f, DIV(T)));
            OK(pk_linear_with_residual_layer(k, x2, w1, x1, h2, DIV(H)));
        } else if (kind == 5) { /* attention over the paged KV cache */
            int Hkv = 1 + pick(&s, 2), G = 1 + pick(&s, 2), D = 4 * (1 + pick(&s, 2)), Hq = Hkv * G;
            int qk_norm = pick(&s, 2);
            const pk_config *kc = pk_kernel_config(k);
            int64_t cd[4] = {kc->num_pages, kc->page_size, Hkv, D};
            char name[32];
            snprintf(name, sizeof name, "kc%d", ncache);
            pk_tensor *kcache = pk_new_tensor(k, name, PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL);
            snprintf(name, sizeof name, "vc%d", ncache++);
            pk_tensor *vcache = pk_new_tensor(k, name, PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL);
            pk_tensor *qkv = A(Hkv * (G + 2) * D), *att = A(Hq * D), *nw = NORM(H);
            pk_tensor *wqkv = LIN(Hkv * (G + 2) * D, H), *wo = LIN(H, Hq * D);
            pk_tensor *qn = qk_norm ? NORM(D) : NULL, *kn = qk_norm ? NORM(D) : NULL;
            pk_attention_params p = {.num_q_heads = Hq, .num_kv_heads = Hkv, .head_dim = D, .rope_theta = 10000.0f,
                                     .qk_norm_eps = 1e-6f};
            OK(pk_rmsnorm_linear_layer(k, h, nw, wqkv, qkv, 1e-5f, DIV(Hkv * (G + 2) * D)));
            OK(pk_attention_layer(k, qkv, kcache, vcache, qn, kn, att, &p, DIV(Hkv)));
            OK(pk_linear_with_residual_layer(k, att, wo, h, h2, DIV(H)));
        } else { /* the stream becomes a row-split rmsnorm output */
            pk_tensor *nw = NORM(H);
            OK(pk_rmsnorm_layer(k, h, nw, h2, 1e-5f, DIV(T)));
        }
        h = h2;
    }
    pk_tensor *lg = A(V), *fn = NORM(H), *lm = W(V, H, 3.0f * sqrtf(3.0f / (float)H));
    OK(pk_rmsnorm_linear_layer(k, h, fn, lm, lg, 1e-5f, DIV(V)));
    OK(pk_argmax_layer(k, lg, pk_step_output(k), DIV(V)));
#undef W
#undef NORM
#undef LIN
#undef A
#undef DIV
    pk_status st = pk_compile(k, NULL);
    CHECK(st == PK_OK, "graph %llu: compile: %s", (unsigned long long)gseed, pk_kernel_error(k));
    *logits = lg;
    shape->T = T;
    shape->R = R;
    shape->V = V;
    return k;
}

/* ---- requests and results ---- */

enum { MAXREQ = 4, MAXNEW = 40, MAXPROMPT = 20, LOGMAX = 1 << 16 };

typedef struct token_log {
    int n;
    int overflow;
    int T;
    struct {
        int req, row;
        int32_t tok;
    } e[LOGMAX];
} token_log;

static void on_token(void *user, int request, int32_t token, int row) {
    token_log *l = user;
    if (l->n < LOGMAX) {
        l->e[l->n].req = request;
        l->e[l->n].tok = token;
        l->e[l->n].row = row;
        l->n++;
    } else {
        l->overflow = 1;
    }
}

typedef struct result {
    int nreq;
    int32_t out[MAXREQ][MAXNEW];
    int num[MAXREQ];
    pk_finish_reason finish[MAXREQ];
    size_t logit_bytes;
    unsigned char *logits;
    int64_t steps;
} result;

typedef struct workload {
    int nreq;
    int32_t prompt[MAXREQ][MAXPROMPT];
    int len[MAXREQ], max_new[MAXREQ];
} workload;

static workload make_workload(uint64_t seed, int V) {
    workload w;
    memset(&w, 0, sizeof w);
    uint64_t s = seed ^ 0xA5A5A5A5ull;
    w.nreq = 2 + pick(&s, 3);
    for (int i = 0; i < w.nreq; i++) {
        w.len[i] = 1 + pick(&s, MAXPROMPT);
        w.max_new[i] = 1 + pick(&s, MAXNEW);
        for (int j = 0; j < w.len[i]; j++) w.prompt[i][j] = pick(&s, V);
    }
    return w;
}

/* Runs the workload on k; checks the callback log against the outputs. */
static void run_workload(pk_kernel *k, pk_tensor *lg, const workload *w, result *res, token_log *log,
                         const char *what) {
    pk_request rq[MAXREQ];
    memset(res->out, 0xff, sizeof res->out);
    for (int i = 0; i < w->nreq; i++)
        rq[i] = (pk_request){.prompt = w->prompt[i], .prompt_len = w->len[i], .max_new_tokens = w->max_new[i],
                             .output = res->out[i]};
    log->n = 0;
    log->overflow = 0;
    pk_status st = pk_run(k, rq, w->nreq, on_token, log);
    CHECK(st == PK_OK, "%s: run: %s", what, pk_kernel_error(k));
    res->nreq = w->nreq;
    int total = 0;
    for (int i = 0; i < w->nreq; i++) {
        res->num[i] = rq[i].num_output;
        res->finish[i] = rq[i].finish;
        total += rq[i].num_output;
        CHECK(rq[i].num_output >= 1 && rq[i].num_output <= w->max_new[i] && rq[i].finish != PK_FINISH_NONE,
              "%s: request %d: %d tokens of %d, finish %d", what, i, rq[i].num_output, w->max_new[i],
              (int)rq[i].finish);
    }
    /* on_token: every token once, in order per request, rows inside the step. */
    CHECK(!log->overflow && log->n == total, "%s: on_token called %d times for %d tokens", what, log->n, total);
    int seen[MAXREQ] = {0}, bad = 0;
    for (int e = 0; e < log->n; e++) {
        int r = log->e[e].req;
        if (r < 0 || r >= w->nreq || seen[r] >= res->num[r] || log->e[e].tok != res->out[r][seen[r]] ||
            log->e[e].row < 0 || log->e[e].row >= log->T)
            bad++;
        else
            seen[r]++;
    }
    CHECK(bad == 0, "%s: %d on_token calls out of order or wrong", what, bad);
    pk_graph_stats stats;
    CHECK(pk_kernel_stats(k, &stats) == PK_OK && stats.steps_run >= 1, "%s: stats", what);
    res->steps = stats.steps_run;
    res->logit_bytes = (size_t)pk_tensor_dim(lg, 0) * (size_t)pk_tensor_dim(lg, 1) * 2;
    res->logits = malloc(res->logit_bytes);
    CHECK(pk_tensor_read(k, lg, res->logits, res->logit_bytes) == PK_OK, "%s: read logits: %s", what,
          pk_kernel_error(k));
}

static int same_result(const result *a, const result *b, const char *what) {
    int ok = a->nreq == b->nreq && a->logit_bytes == b->logit_bytes && a->steps == b->steps;
    for (int i = 0; ok && i < a->nreq; i++)
        ok = a->num[i] == b->num[i] && a->finish[i] == b->finish[i] &&
             memcmp(a->out[i], b->out[i], (size_t)a->num[i] * sizeof(int32_t)) == 0;
    CHECK(ok, "%s: tokens differ from the first run", what);
    if (!ok)
        for (int i = 0; i < a->nreq && i < b->nreq; i++) {
            fprintf(stderr, "  req %d: %d/%d tokens, finish %d/%d:", i, a->num[i], b->num[i], (int)a->finish[i],
                    (int)b->finish[i]);
            for (int j = 0; j < a->num[i] && j < 12; j++) fprintf(stderr, " %d/%d", a->out[i][j], b->out[i][j]);
            fputc('\n', stderr);
        }
    int lsame = a->logit_bytes == b->logit_bytes && memcmp(a->logits, b->logits, a->logit_bytes) == 0;
    CHECK(lsame, "%s: last-step logits not byte-identical to the first run", what);
    return ok && lsame;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static token_log g_log;

static const run_cfg RUNS[] = {
    {PK_SCHED_STATIC, 1, 1, -1, 0, 0, NULL},  {PK_SCHED_STATIC, 2, 1, -1, 0, 0, NULL},  {PK_SCHED_STATIC, 5, 1, -1, 0, 0, NULL},
    {PK_SCHED_STATIC, 16, 1, -1, 0, 0, NULL}, {PK_SCHED_DYNAMIC, 1, 1, -1, 0, 0, NULL}, {PK_SCHED_DYNAMIC, 3, 2, -1, 0, 0, NULL},
    {PK_SCHED_DYNAMIC, 16, 4, -1, 0, 0, NULL},
};
enum { NRUNS = sizeof RUNS / sizeof RUNS[0] };

/* The trace of a run holds every task once per step (tid = the worker that ran it). */
static void check_trace(const char *path, int64_t steps, int ntasks, int nworkers, const char *what) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "%s: no trace at %s", what, path);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    text[fread(text, 1, (size_t)n, f)] = '\0';
    fclose(f);
    cJSON *root = cJSON_Parse(text);
    free(text);
    CHECK(root != NULL, "%s: trace does not parse", what);
    if (!root) return;
    unsigned char *seen = calloc((size_t)(steps + 1) * (size_t)ntasks, 1);
    int bad = 0, meta = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(root, "traceEvents")) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");
        if (cJSON_IsString(ph) && !strcmp(ph->valuestring, "M")) {
            meta++;
            continue;
        }
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
        int task = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(args, "task"));
        int64_t step = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(args, "step"));
        int tid = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ev, "tid"));
        const cJSON *out = cJSON_GetObjectItemCaseSensitive(args, "out"); /* the layer's output tensor */
        if (!cJSON_IsString(out) || !out->valuestring[0]) bad++;
        if (task < 1 || task >= ntasks || step < 1 || step > steps || tid < 0 || tid >= nworkers)
            bad++;
        else
            seen[step * ntasks + task]++;
    }
    for (int64_t st = 1; st <= steps; st++)
        for (int t = 1; t < ntasks; t++) bad += seen[st * ntasks + t] != 1;
    CHECK(bad == 0 && meta == nworkers, "%s: trace: %d (step, task) pairs not run exactly once, %d worker tracks",
          what, bad, meta);
    free(seen);
    cJSON_Delete(root);
    remove(path);
}

/* Every schedule of graph g on its workload; returns the first run's result in *base. */
static void stress_graph(uint64_t g, result *base, workload *wl_out, graph_shape *shape_out) {
    workload wl;
    memset(&wl, 0, sizeof wl);
    char trace[64];
    snprintf(trace, sizeof trace, "/tmp/pk_stress_trace_%d.json", (int)getpid());
    for (int r = 0; r < NRUNS; r++) {
        pool wp = {.n = 0};
        pk_tensor *lg;
        graph_shape shape;
        run_cfg rc = RUNS[r];
        if (g <= 3 && (r == 1 || r == 5)) rc.trace = trace; /* tracing must not change anything */
        pk_kernel *k = build(g, &rc, &wp, &lg, &shape);
        if (r == 0) {
            wl = make_workload(g, shape.V);
            *wl_out = wl;
            *shape_out = shape;
        }
        char what[96];
        snprintf(what, sizeof what, "graph %llu, %s %d workers %d schedulers", (unsigned long long)g,
                 RUNS[r].mode == PK_SCHED_STATIC ? "static" : "dynamic", RUNS[r].workers, RUNS[r].schedulers);
        g_log.T = shape.T;
        result res;
        run_workload(k, lg, &wl, r == 0 ? base : &res, &g_log, what);
        if (r > 0) {
            same_result(base, &res, what);
            free(res.logits);
            if (rc.trace) {
                pk_graph_stats st;
                pk_kernel_stats(k, &st);
                check_trace(trace, res.steps, st.num_tasks, rc.workers, what);
            }
        } else {
            /* pk_run again on the same kernel: the same again. */
            result again;
            run_workload(k, lg, &wl, &again, &g_log, what);
            same_result(base, &again, "second pk_run on one kernel");
            free(again.logits);
        }
        pk_kernel_free(k);
        pool_free(&wp);
    }
}

/* EOS = the token request 0 produced at position 3: each request stops at its first EOS, which
 * is included; the tokens before it are the same as without EOS. */
static void eos_check(uint64_t g, const result *base, const workload *wl, const graph_shape *shape) {
    (void)shape;
    int32_t eos = base->out[0][3];
    const run_cfg rcs[2] = {{PK_SCHED_STATIC, 3, 1, eos, 0, 0, NULL}, {PK_SCHED_DYNAMIC, 4, 2, eos, 0, 0, NULL}};
    for (int m = 0; m < 2; m++) {
        pool wp = {.n = 0};
        pk_tensor *lg;
        graph_shape sh;
        pk_kernel *k = build(g, &rcs[m], &wp, &lg, &sh);
        result res;
        g_log.T = sh.T;
        run_workload(k, lg, wl, &res, &g_log, m ? "eos dynamic" : "eos static");
        int stopped0 = 0;
        for (int i = 0; i < wl->nreq; i++) {
            int first = -1;
            for (int j = 0; j < base->num[i] && first < 0; j++)
                if (base->out[i][j] == eos) first = j;
            if (first >= 0) {
                CHECK(res.num[i] == first + 1 && res.finish[i] == PK_FINISH_EOS && res.out[i][first] == eos,
                      "eos %d, mode %d: request %d has %d tokens, finish %d; expected to stop after token %d", eos, m,
                      i, res.num[i], (int)res.finish[i], first);
                if (i == 0) stopped0 = first <= 3;
            } else {
                CHECK(res.num[i] == base->num[i] && res.finish[i] == base->finish[i],
                      "eos %d, mode %d: request %d without EOS has %d tokens (base %d)", eos, m, i, res.num[i],
                      base->num[i]);
            }
            int n = res.num[i] < base->num[i] ? res.num[i] : base->num[i];
            CHECK(memcmp(res.out[i], base->out[i], (size_t)n * sizeof(int32_t)) == 0,
                  "eos mode %d: request %d's tokens differ from the run without EOS", m, i);
        }
        CHECK(stopped0, "eos: request 0 did not stop by position 3");
        free(res.logits);
        pk_kernel_free(k);
        pool_free(&wp);
    }
}

/* One request of 2000 tokens on a graph with attention: thousands of steps, both modes. */
static void long_run(uint64_t g, int new_tokens) {
    const run_cfg rcs[2] = {{PK_SCHED_STATIC, 4, 1, -1, new_tokens + 100, 1, NULL},
                            {PK_SCHED_DYNAMIC, 4, 2, -1, new_tokens + 100, 1, NULL}};
    int32_t *out[2];
    unsigned char *logits[2] = {NULL, NULL};
    size_t lbytes = 0;
    int64_t steps[2] = {0, 0};
    int32_t prompt[20];
    for (int m = 0; m < 2; m++) {
        pool wp = {.n = 0};
        pk_tensor *lg;
        graph_shape sh;
        pk_kernel *k = build(g, &rcs[m], &wp, &lg, &sh);
        uint64_t s = 77;
        for (int j = 0; j < 20; j++) prompt[j] = pick(&s, sh.V);
        out[m] = calloc((size_t)new_tokens, sizeof(int32_t));
        pk_request rq = {.prompt = prompt, .prompt_len = 20, .max_new_tokens = new_tokens, .output = out[m]};
        g_log.n = 0;
        g_log.overflow = 0;
        g_log.T = sh.T;
        double t0 = now_s();
        pk_status st = pk_run(k, &rq, 1, on_token, &g_log);
        double dt = now_s() - t0;
        CHECK(st == PK_OK && rq.num_output == new_tokens && rq.finish == PK_FINISH_LENGTH,
              "long run mode %d: %s, %d tokens, finish %d", m, pk_kernel_error(k), rq.num_output, (int)rq.finish);
        CHECK(g_log.n == new_tokens && !g_log.overflow, "long run: %d callbacks", g_log.n);
        int bad = 0;
        for (int i = 0; i < g_log.n && i < new_tokens; i++) bad += g_log.e[i].tok != out[m][i] || g_log.e[i].req != 0;
        CHECK(bad == 0, "long run: %d callbacks disagree with the output", bad);
        pk_graph_stats stats;
        pk_kernel_stats(k, &stats);
        steps[m] = stats.steps_run;
        lbytes = (size_t)sh.T * (size_t)sh.V * 2;
        logits[m] = malloc(lbytes);
        CHECK(pk_tensor_read(k, lg, logits[m], lbytes) == PK_OK, "long run: read logits");
        printf("long run, %s: %d tokens, %lld steps, %.2f s\n", m ? "dynamic 4/2" : "static 4", rq.num_output,
               (long long)steps[m], dt);
        pk_kernel_free(k);
        pool_free(&wp);
    }
    CHECK(steps[0] == steps[1] && steps[0] >= new_tokens, "long run steps %lld / %lld", (long long)steps[0],
          (long long)steps[1]);
    CHECK(memcmp(out[0], out[1], (size_t)new_tokens * sizeof(int32_t)) == 0, "long run: tokens differ between modes");
    CHECK(memcmp(logits[0], logits[1], lbytes) == 0, "long run: logits differ between modes");
    int distinct = 0;
    for (int i = 0; i < new_tokens && distinct < 3; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = out[0][j] == out[0][i];
        distinct += !seen;
    }
    CHECK(distinct >= 2, "long run: only %d distinct tokens", distinct);
    free(out[0]);
    free(out[1]);
    free(logits[0]);
    free(logits[1]);
}

/* A graph seed whose small graph (hidden size <= 32) has an attention layer (for the long run). */
static uint64_t graph_with_attention(void) {
    for (uint64_t g = 1000;; g++) {
        run_cfg rc = {PK_SCHED_STATIC, 1, 1, -1, 0, 0, NULL};
        pool wp = {.n = 0};
        pk_tensor *lg;
        graph_shape sh;
        pk_kernel *k = build(g, &rc, &wp, &lg, &sh);
        int has = pk_find_tensor(k, "kc0") != NULL && pk_tensor_dim(pk_find_tensor(k, "t0"), 1) <= 32;
        pk_kernel_free(k);
        pool_free(&wp);
        if (has) return g;
    }
}

int main(void) {
    double scale = STRESS_TSAN ? 0.25 : 1.0;
    const char *env = getenv("PK_STRESS_SCALE");
    if (env && atof(env) > 0) scale = atof(env);
    int ngraphs = (int)(40 * scale + 0.5);
    if (ngraphs < 2) ngraphs = 2;
    /* The long run keeps its 2000 tokens down to scale 0.25 (ThreadSanitizer's default). */
    int long_tokens = scale >= 0.25 ? 2000 : (int)(8000 * scale) + 1;
    double t0 = now_s();

    int distinct_total = 0, eos_done = 0;
    for (int i = 0; i < ngraphs; i++) {
        uint64_t g = 1 + (uint64_t)i;
        result base;
        workload wl;
        graph_shape shape;
        stress_graph(g, &base, &wl, &shape);
        /* Are the tokens varied at all (the weights are meant to make argmax decisive)? */
        for (int r = 0; r < base.nreq; r++)
            for (int j = 1; j < base.num[r]; j++) distinct_total += base.out[r][j] != base.out[r][0];
        if (base.num[0] >= 4 && eos_done < 3) {
            eos_check(g, &base, &wl, &shape);
            eos_done++;
        }
        free(base.logits);
    }
    CHECK(distinct_total > 0, "every graph generates one repeated token");
    CHECK(eos_done >= 1, "no graph had a request of 4+ tokens for the EOS check");
    printf("%d graphs x %d schedules: %.2f s\n", ngraphs, NRUNS, now_s() - t0);

    long_run(graph_with_attention(), long_tokens);
    printf("total %.2f s (scale %.2f)\n", now_s() - t0, scale);
    return check_report("runtime_stress");
}
