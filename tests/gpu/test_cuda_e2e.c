/* test_cuda_e2e.c — the CUDA backend against the CPU backend on a GPU (scripts/gpu_check.sh).
 *
 * The 2-layer Qwen3-shaped model of tests/test_e2e_graph.c (GQA, q/k norm, fused qkv and
 * gate|up, untied LM head), built through pk.h for both backends: 3 requests of 5, 19 and 1
 * prompt tokens, 2 slots (the third waits), T = 8 (the 19-token prompt is prefilled in 3 chunks),
 * a paged KV cache of 4-token pages. Checked:
 *   - greedy tokens identical to the CPU backend's, for the task kernels of src/kernels/cuda and
 *     for the runtime's placeholder kernels, static and dynamic mode, 4 and 16 workers;
 *   - last-step logits within bf16 tolerance of the CPU's; bit-identical across modes and worker
 *     counts (fixed reduction orders);
 *   - 100 repeated generations on one kernel: bit-identical tokens and logits;
 *   - EOS inside the kernel: the same outputs and finish reasons as the CPU;
 *   - a trace (one slice per task and step, one track per worker).
 * Modes: (none) the checks above; --precompile: only generate and compile every kernel the
 * checks use (run with PK_CUDA_ARCH=sm_90a, no GPU needed) to fill the kernel cache; --stall:
 * with PK_CUDA_DEBUG=1 and PK_CUDA_DEBUG_STALL_TASK=N, a run must fail with the stuck wait named.
 * Without a GPU (and not --precompile) it prints "skipped: no CUDA GPU" and counts nothing.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "common/bf16.h"
#include "pk.h"

#include "../e2e_model.h"

enum { TT = 8, NREQ = 3, NEW = 12, REPEATS = 100 };

static const int prompt_len[NREQ] = {5, 19, 1};
static int32_t prompts[NREQ][32];

typedef struct run_cfg {
    const char *name;
    pk_backend backend;
    pk_sched_mode mode;
    int workers, schedulers;
    int fallback;        /* PK_CUDA_FALLBACK_KERNELS=1 */
    int64_t eos;
    const char *trace;
    int kv_splits; /* the attention's split over the KV length (0: none) */
    int splitk;    /* e2e_add_layers' mlp: E2E_MLP_SPLITK layer 1's down_proj split over K, E2E_MLP_FUSED layer
                    * 0's MLP as one layer (its sum in an accumulator); | E2E_LM_ARGMAX: the LM head and
                    * the argmax as one layer */
} run_cfg;

static pk_kernel *build(const weights *w, const run_cfg *rc, pk_tensor **logits_out) {
    pk_config c = e2e_config(TT);
    c.num_workers = rc->workers;
    c.num_local_schedulers = rc->schedulers;
    c.sched_mode = rc->mode;
    c.backend = rc->backend;
    c.eos_token_id = rc->eos;
    c.trace_path = rc->trace;
    pk_kernel *k = pk_kernel_new(&c);
    *logits_out = e2e_add_layers(k, w, &c, rc->kv_splits, rc->splitk);
    return k;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One generation's results. */
typedef struct result {
    int ok;
    int32_t out[NREQ][NEW];
    int nout[NREQ], finish[NREQ];
    int streamed;                /* tokens seen by on_token */
    pk_bf16 logits[TT * V];
    int64_t steps;
    double compile_ms, run_ms;
} result;

static void count_token(void *user, int request, int32_t token, int row) {
    (void)request, (void)token, (void)row;
    ((result *)user)->streamed++;
}

static void set_fallback(int on) {
    if (on)
        setenv("PK_CUDA_FALLBACK_KERNELS", "1", 1);
    else
        unsetenv("PK_CUDA_FALLBACK_KERNELS");
}

static pk_kernel *compile(const weights *w, const run_cfg *rc, pk_tensor **lt, double *ms) {
    set_fallback(rc->fallback);
    pk_kernel *k = build(w, rc, lt);
    double t0 = now_ms();
    pk_status s = pk_compile(k, NULL);
    *ms = now_ms() - t0;
    set_fallback(0);
    CHECK(s == PK_OK, "%s: compile: %s: %s", rc->name, pk_status_name(s), pk_kernel_error(k));
    if (s != PK_OK) {
        pk_kernel_free(k);
        return NULL;
    }
    return k;
}

static void run(pk_kernel *k, pk_tensor *lt, const run_cfg *rc, result *r) {
    pk_request req[NREQ];
    for (int i = 0; i < NREQ; i++)
        req[i] = (pk_request){.prompt = prompts[i], .prompt_len = prompt_len[i], .max_new_tokens = NEW,
                              .output = r->out[i]};
    r->streamed = 0;
    double t0 = now_ms();
    pk_status s = pk_run(k, req, NREQ, count_token, r);
    r->run_ms = now_ms() - t0;
    CHECK(s == PK_OK, "%s: run: %s: %s", rc->name, pk_status_name(s), pk_kernel_error(k));
    r->ok = s == PK_OK;
    for (int i = 0; i < NREQ; i++) {
        r->nout[i] = req[i].num_output;
        r->finish[i] = (int)req[i].finish;
    }
    pk_graph_stats st;
    pk_kernel_stats(k, &st);
    r->steps = st.steps_run;
    s = pk_tensor_read(k, lt, r->logits, sizeof r->logits);
    CHECK(s == PK_OK, "%s: read logits: %s", rc->name, pk_kernel_error(k));
}

static int same_tokens(const result *a, const result *b) {
    for (int i = 0; i < NREQ; i++) {
        if (a->nout[i] != b->nout[i] || a->finish[i] != b->finish[i]) return 0;
        if (memcmp(a->out[i], b->out[i], (size_t)a->nout[i] * sizeof(int32_t)) != 0) return 0;
    }
    return 1;
}

/* Largest |a - b| and whether every element is within abs + rel·|b| (bf16 tolerance). */
static double logits_diff(const result *a, const result *b, int *within) {
    double mx = 0;
    *within = 1;
    for (int i = 0; i < TT * V; i++) {
        double x = pk_bf16_to_f32(a->logits[i]), y = pk_bf16_to_f32(b->logits[i]);
        double d = fabs(x - y);
        if (!(d <= 0.03 + 0.02 * fabs(y))) *within = 0;
        if (d > mx || d != d) mx = d;
    }
    return mx;
}

static void print_tokens(const char *what, const result *r) {
    fprintf(stderr, "  %s:", what);
    for (int i = 0; i < NREQ; i++) {
        fprintf(stderr, " [");
        for (int n = 0; n < r->nout[i]; n++) fprintf(stderr, "%s%d", n ? " " : "", r->out[i][n]);
        fprintf(stderr, "] f%d", r->finish[i]);
    }
    fputc('\n', stderr);
}

/* The table printed at the end. */
static char table[64][200];
static int nrows;
#define ROW(...) snprintf(table[nrows < 63 ? nrows++ : 63], sizeof table[0], __VA_ARGS__)

/* The attention split over the KV length (attention_partial, each group folded by its last task, the
 * general kernel: D 32 has no decode path here; tests/cuda's harness and quick_gpu.sh's pk-tiny
 * split run check that one): two requests, prompts of 5 and 40 tokens and NEW new tokens each; the
 * second reaches position 51, so blocks 0 and 1 (32 positions) are in different splits, and as
 * its prefill chunks share steps with the first request's rows they start off the TT grid and
 * cross the block boundary (one step writes K / V through two split tasks); with 3 splits one is
 * empty. Against the CPU's unsplit run: the same tokens, logits within bf16 tolerance. The same for
 * layer 1's down_proj split over K (splitk), alone and with the split attention. */
static void split_check(const weights *w, int quick) {
    enum { PLEN = 40, PLEN_A = 5 };
    static const run_cfg cfgs[] = {
        {"cpu static W4 (ref)", PK_BACKEND_CPU, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 0, 0},
        {"cuda static W16 split 2", PK_BACKEND_CUDA, PK_SCHED_STATIC, 16, 1, 0, -1, NULL, 2, 0},
        {"cuda dynamic W4 S1 split 3", PK_BACKEND_CUDA, PK_SCHED_DYNAMIC, 4, 1, 0, -1, NULL, 3, 0},
        /* the down_proj split over K (its adds in L2, the last task's fold), also beside the split attention */
        {"cuda static W16 splitk", PK_BACKEND_CUDA, PK_SCHED_STATIC, 16, 1, 0, -1, NULL, 0, 1},
        {"cuda static W4 split 3", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 3, 0},
        {"fallback static W4 split 2", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 1, -1, NULL, 2, 0},
        {"cuda static W4 splitk split 2", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 2, 1},
        {"cuda dynamic W4 S1 splitk", PK_BACKEND_CUDA, PK_SCHED_DYNAMIC, 4, 1, 0, -1, NULL, 0, 1},
        {"fallback static W4 splitk", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 1, -1, NULL, 0, 1},
        /* layer 0's MLP as one layer: down's partial sums in an int64 accumulator (exact adds) */
        {"cuda static W16 mlp fused", PK_BACKEND_CUDA, PK_SCHED_STATIC, 16, 1, 0, -1, NULL, 0, 2},
        {"cuda static W4 mlp fused split 2", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 2, 2},
        {"fallback static W4 mlp fused", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 1, -1, NULL, 0, 2},
        /* the LM head and the argmax as one layer (its tasks' argmax partials, the last one's reduce) */
        {"cuda static W16 lm argmax", PK_BACKEND_CUDA, PK_SCHED_STATIC, 16, 1, 0, -1, NULL, 0, E2E_LM_ARGMAX},
        {"cuda dynamic W4 S1 lm argmax split 3", PK_BACKEND_CUDA, PK_SCHED_DYNAMIC, 4, 1, 0, -1, NULL, 3, E2E_LM_ARGMAX},
        {"fallback static W4 lm argmax", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 1, -1, NULL, 0, E2E_LM_ARGMAX},
        {"cuda static W4 mlp fused lm argmax split 2", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 2,
         E2E_MLP_FUSED | E2E_LM_ARGMAX},
    };
    int32_t prompt[PLEN];
    uint64_t seed = 4242;
    for (int j = 0; j < PLEN; j++) prompt[j] = (int32_t)(check_rand_u64(&seed) % V);
    static result res[sizeof cfgs / sizeof cfgs[0]];
    for (size_t c = 0; c < (quick ? 4 : sizeof cfgs / sizeof cfgs[0]); c++) {
        result *r = &res[c];
        pk_tensor *lt;
        pk_kernel *k = compile(w, &cfgs[c], &lt, &r->compile_ms);
        if (!k) continue;
        pk_request req[2] = {
            {.prompt = prompt + PLEN - PLEN_A, .prompt_len = PLEN_A, .max_new_tokens = NEW, .output = r->out[0]},
            {.prompt = prompt, .prompt_len = PLEN, .max_new_tokens = NEW, .output = r->out[1]},
        };
        double t0 = now_ms();
        pk_status s = pk_run(k, req, 2, NULL, NULL);
        r->run_ms = now_ms() - t0;
        CHECK(s == PK_OK, "%s: run: %s", cfgs[c].name, pk_kernel_error(k));
        r->ok = s == PK_OK && pk_tensor_read(k, lt, r->logits, sizeof r->logits) == PK_OK;
        r->nout[0] = req[0].num_output;
        r->nout[1] = req[1].num_output;
        pk_kernel_free(k);
        if (c == 0 || !r->ok) continue;
        int same = res[0].ok;
        for (int i = 0; i < 2; i++)
            same = same && r->nout[i] == res[0].nout[i] &&
                   memcmp(r->out[i], res[0].out[i], (size_t)NEW * sizeof(int32_t)) == 0;
        int within;
        double dl = logits_diff(r, &res[0], &within);
        CHECK(same, "%s: tokens differ from the CPU's unsplit run", cfgs[c].name);
        CHECK(within, "%s: logits differ from the CPU's by %g", cfgs[c].name, dl);
        ROW("%-24s %9.1f %9.2f %6s %8s %12.4g %10s", cfgs[c].name, r->compile_ms / 1e3, r->run_ms, "-",
            same ? "same" : "DIFFER", dl, "-");
    }
}

/* ---- --big: random-weight models shaped like Qwen3-0.6B / Qwen3-8B, CUDA vs CPU ----------- */

typedef struct shape {
    const char *name;
    int V, H, L, Hq, Hkv, D, I;
} shape;
static const shape shapes[] = {
    {"qwen3-0.6b", 151936, 1024, 28, 16, 8, 128, 3072},
    /* down_proj tiles of 16 rows [6144]: the async GEMV's 2-row groups (linear.cuh) */
    {"qwen3-1.7b", 151936, 2048, 28, 16, 8, 128, 6144},
    {"qwen3-8b", 151936, 4096, 36, 32, 8, 128, 12288},
};
enum { BIG_T = 16, BIG_SEQ = 64, BIG_NREQ = 2, BIG_NEW = 6 };
static const int big_prompt_len[BIG_NREQ] = {20, 6};

/* One weight tensor: uniform in [-a, a] + offset, bf16, drawn by 16 threads over fixed 1M-element
 * chunks (each chunk its own xorshift stream: the values do not depend on the thread count). */
typedef struct fill_job {
    pk_bf16 *p;
    size_t n;
    uint64_t seed;
    float a, offset;
    int tid, nthreads;
} fill_job;

static void *fill_chunks(void *arg) {
    fill_job *j = arg;
    const size_t chunk = (size_t)1 << 20;
    for (size_t c = (size_t)j->tid; c * chunk < j->n; c += (size_t)j->nthreads) {
        uint64_t st = (j->seed ^ (c * 0x9E3779B97F4A7C15ULL)) | 1;
        size_t end = (c + 1) * chunk < j->n ? (c + 1) * chunk : j->n;
        for (size_t i = c * chunk; i < end; i += 4) {
            uint64_t r = check_rand_u64(&st);
            for (size_t q = 0; q < 4 && i + q < end; q++, r >>= 16)
                j->p[i + q] = pk_f32_to_bf16(j->offset + j->a * ((float)(int)(r & 0xffff) / 32768.0f - 1.0f));
        }
    }
    return NULL;
}

static pk_bf16 *big_weight(uint64_t *seed, size_t n, double a, float offset, int dummy) {
    if (dummy) return (pk_bf16 *)(uintptr_t)16; /* compile only: never read */
    pk_bf16 *p = malloc(n * sizeof *p);
    if (!p) return NULL;
    enum { NT = 16 };
    pthread_t th[NT];
    fill_job jobs[NT];
    uint64_t s0 = check_rand_u64(seed);
    for (int t = 0; t < NT; t++) {
        jobs[t] = (fill_job){p, n, s0, (float)a, offset, t, NT};
        pthread_create(&th[t], NULL, fill_chunks, &jobs[t]);
    }
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
    return p;
}

typedef struct big_model {
    const shape *sh;
    pk_bf16 **all; /* every weight array, in the order big_build attaches them */
    int nall;
    int replay;    /* 1: big_build reuses `all` instead of drawing */
    int gridw;     /* grids: the largest divisor of a dimension up to this (the GPU's workers) */
} big_model;

/* The largest divisor of n that is at most w. */
static int big_grid(int n, int w) {
    for (int g = w < n ? w : n; g > 1; g--)
        if (n % g == 0) return g;
    return 1;
}

/* The next weight array: drawn, or m's next one when replaying. */
static pk_bf16 *big_next(big_model *m, uint64_t *seed, size_t n, double a, float off, int dummy) {
    if (!m->replay) m->all[m->nall] = big_weight(seed, n, a, off, dummy);
    return m->all[m->nall++];
}

static pk_tensor *big_attach(pk_kernel *k, const char *nm, const pk_bf16 *p, int64_t d0, int64_t d1) {
    int64_t d[2] = {d0, d1};
    return pk_attach_input(k, nm, PK_DTYPE_BF16, d1 ? 2 : 1, d, NULL, p);
}

static pk_tensor *big_act(pk_kernel *k, const char *nm, int64_t T, int64_t n) {
    int64_t d[2] = {T, n};
    return pk_new_tensor(k, nm, PK_DTYPE_BF16, 2, d, PK_IO_LOCAL);
}

/* A decisive LM head: row v = 0.05 · embed[π(v)] for a random permutation π. The residual
 * stream stays dominated by the input token's embedding (the layers' output projections are
 * small), so the next token is π⁻¹(current) by a wide margin (top-1 minus top-2 ≈ 20 logits,
 * bf16 rounding ≈ 0.1), while every layer still moves the logits measurably. */
static pk_bf16 *big_lm_head(big_model *m, int dummy, int nv, int nh) {
    if (m->replay) return m->all[m->nall++];
    if (dummy) return m->all[m->nall++] = (pk_bf16 *)(uintptr_t)16;
    const pk_bf16 *embed = m->all[0];
    pk_bf16 *p = malloc((size_t)nv * nh * sizeof *p);
    int32_t *perm = malloc((size_t)nv * sizeof *perm);
    uint64_t st = 0x5eed;
    for (int v = 0; v < nv; v++) perm[v] = v;
    for (int v = nv - 1; v > 0; v--) {
        int j = (int)(check_rand_u64(&st) % (uint64_t)(v + 1));
        int32_t t = perm[v];
        perm[v] = perm[j];
        perm[j] = t;
    }
    for (int v = 0; v < nv; v++)
        for (int i = 0; i < nh; i++)
            p[(size_t)v * nh + i] = pk_f32_to_bf16(0.05f * pk_bf16_to_f32(embed[(size_t)perm[v] * nh + i]));
    free(perm);
    return m->all[m->nall++] = p;
}

/* Builds the decode graph of a Qwen3-shaped model on k; weights drawn (or dummy pointers). */
/* PK_LM_HEAD_ARGMAX=1 in the environment: the LM head and the argmax as one layer, as model.c
 * builds it then (pk_rmsnorm_linear_argmax_layer); both backends run the same graph. */
static int big_lm_argmax(void) {
    const char *e = getenv("PK_LM_HEAD_ARGMAX");
    return e && strcmp(e, "1") == 0;
}

static pk_tensor *big_build(pk_kernel *k, const shape *sh, uint64_t seed, int dummy, big_model *m) {
    const pk_config *c = pk_kernel_config(k);
    int T = c->max_tokens_per_step;
    int Vb = sh->V, Hb = sh->H, Hq = sh->Hq, Hkv = sh->Hkv, Db = sh->D, Ib = sh->I, G2 = Hq / Hkv + 2;
    m->sh = sh;
    if (!m->replay) m->all = calloc((size_t)(16 * sh->L + 8), sizeof *m->all);
    m->nall = 0;
#define W_(n, a, off) big_next(m, &seed, (size_t)(n), (a), (off), dummy)
    char name[64];
#define ATT(nm, p, d0, d1) big_attach(k, nm, p, d0, d1)
#define ACT(nm, n) big_act(k, nm, T, n)
    /* grids: one task per worker where the dimension allows (the model builder's rule) */
#define GRID(n) big_grid((n), m->gridw)
    pk_tensor *h = ACT("h", Hb);
    pk_embedding_layer(k, pk_step_tokens(k), ATT("embed", W_((size_t)Vb * Hb, 1.0, 0), Vb, Hb), h, GRID(Hb));
    for (int l = 0; l < sh->L; l++) {
#define NM(fmt) (snprintf(name, sizeof name, fmt, l), name)
        double aq = 1.7 / sqrt((double)Hb);
        pk_tensor *qkv_in[3] = {ATT(NM("wq%d"), W_((size_t)Hq * Db * Hb, aq, 0), Hq * Db, Hb),
                                ATT(NM("wk%d"), W_((size_t)Hkv * Db * Hb, aq, 0), Hkv * Db, Hb),
                                ATT(NM("wv%d"), W_((size_t)Hkv * Db * Hb, aq, 0), Hkv * Db, Hb)};
        pk_tensor *wqkv = pk_fuse_tensors(k, NM("wqkv%d"), qkv_in, 3, 0, Hkv);
        pk_tensor *qkv = ACT(NM("qkv%d"), Hkv * G2 * Db);
        pk_rmsnorm_linear_layer(k, h, ATT(NM("attn_norm%d"), W_(Hb, 0.2, 1.0f), Hb, 0), wqkv, qkv, EPS, GRID(Hkv * G2 * Db));
        int64_t cd[4] = {c->num_pages, c->page_size, Hkv, Db};
        pk_tensor *kc = pk_new_tensor(k, NM("k_cache%d"), PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL);
        pk_tensor *vc = pk_new_tensor(k, NM("v_cache%d"), PK_DTYPE_BF16, 4, cd, PK_IO_LOCAL);
        pk_tensor *att = ACT(NM("att%d"), Hq * Db);
        pk_attention_params ap = {.num_q_heads = Hq, .num_kv_heads = Hkv, .head_dim = Db, .rope_theta = 1000000.0f,
                                  .qk_norm_eps = EPS};
        pk_tensor *qn = ATT(NM("q_norm%d"), W_(Db, 0.2, 1.0f), Db, 0);
        pk_tensor *kn = ATT(NM("k_norm%d"), W_(Db, 0.2, 1.0f), Db, 0);
        pk_attention_layer(k, qkv, kc, vc, qn, kn, att, &ap, GRID(Hkv));
        pk_tensor *h2 = ACT(NM("h_attn%d"), Hb);
        pk_linear_with_residual_layer(k, att, ATT(NM("wo%d"), W_((size_t)Hb * Hq * Db, 0.05 / sqrt((double)Hq * Db), 0), Hb, Hq * Db),
                                      h, h2, GRID(Hb));
        pk_tensor *gu_in[2] = {ATT(NM("wg%d"), W_((size_t)Ib * Hb, aq, 0), Ib, Hb), ATT(NM("wu%d"), W_((size_t)Ib * Hb, aq, 0), Ib, Hb)};
        pk_tensor *wgu = pk_fuse_tensors(k, NM("wgu%d"), gu_in, 2, 0, 1);
        pk_tensor *gu = ACT(NM("gu%d"), 2 * Ib);
        pk_rmsnorm_linear_layer(k, h2, ATT(NM("mlp_norm%d"), W_(Hb, 0.2, 1.0f), Hb, 0), wgu, gu, EPS, GRID(2 * Ib));
        pk_tensor *h3 = ACT(NM("h_mlp%d"), Hb);
        pk_silu_mul_linear_with_residual_layer(k, gu, ATT(NM("wd%d"), W_((size_t)Hb * Ib, 0.05 / sqrt((double)Ib), 0), Hb, Ib), h2,
                                               h3, GRID(Hb));
        h = h3;
#undef NM
    }
    pk_tensor *logits = ACT("logits", Vb);
    pk_tensor *fnorm = ATT("final_norm", W_(Hb, 0.2, 1.0f), Hb, 0), *head = ATT("lm_head", big_lm_head(m, dummy, Vb, Hb), Vb, Hb);
    if (big_lm_argmax()) {
        pk_rmsnorm_linear_argmax_layer(k, h, fnorm, head, logits, pk_step_output(k), EPS, GRID(Vb));
    } else {
        pk_rmsnorm_linear_layer(k, h, fnorm, head, logits, EPS, GRID(Vb));
        pk_argmax_layer(k, logits, pk_step_output(k), GRID(Vb));
    }
#undef W_
#undef ATT
#undef ACT
#undef GRID
    return logits;
}

static void big_free(big_model *m, int dummy) {
    for (int i = 0; !dummy && i < m->nall; i++) free(m->all[i]);
    free(m->all);
}

static pk_kernel *big_kernel(const shape *sh, pk_backend be, pk_sched_mode mode, int workers, int dummy, big_model *m,
                             pk_tensor **logits) { /* m->replay: over m's weights */
    pk_config c = pk_config_default();
    c.backend = be;
    c.sched_mode = mode;
    c.num_workers = workers;
    c.max_seq_length = BIG_SEQ;
    c.max_requests = BIG_NREQ;
    c.max_tokens_per_step = BIG_T;
    c.page_size = 16;
    pk_kernel *k = pk_kernel_new(&c);
    *logits = big_build(k, sh, 7, dummy, m);
    CHECK(pk_kernel_status(k) == PK_OK, "%s: building: %s", sh->name, pk_kernel_error(k));
    return k;
}

/* --big NAME: CPU (16 threads) vs CUDA static and dynamic (W workers), tokens and logits. */
static void big_check(const shape *sh, int workers, int precompile) {
    big_model m;
    memset(&m, 0, sizeof m);
    m.gridw = workers; /* the same task graph on both backends */
    pk_tensor *lt;
    if (precompile) {
        pk_kernel *k = big_kernel(sh, PK_BACKEND_CUDA, PK_SCHED_STATIC, workers, 1, &m, &lt);
        double t0 = now_ms();
        pk_status s = pk_compile(k, NULL);
        CHECK(s == PK_OK, "%s: compile: %s", sh->name, pk_kernel_error(k));
        printf("precompiled %s (%d workers) in %.1f s\n", sh->name, workers, (now_ms() - t0) / 1e3);
        pk_kernel_free(k);
        big_free(&m, 1);
        return;
    }
    int32_t pr[BIG_NREQ][32];
    uint64_t seed = 5;
    for (int i = 0; i < BIG_NREQ; i++)
        for (int j = 0; j < big_prompt_len[i]; j++) pr[i][j] = (int32_t)(check_rand_u64(&seed) % (uint64_t)sh->V);
    static int32_t out[3][BIG_NREQ][BIG_NEW];
    static pk_bf16 lg[3][BIG_T * 151936];
    double run_ms[3], compile_ms[3];
    const char *names[3] = {"cpu static 16", "cuda static", "cuda dynamic S1"};
    double tg = now_ms();
    pk_kernel *k = big_kernel(sh, PK_BACKEND_CPU, PK_SCHED_STATIC, 16, 0, &m, &lt);
    printf("%s: weights drawn in %.1f s\n", sh->name, (now_ms() - tg) / 1e3);
    for (int v = 0; v < 3; v++) {
        if (v > 0) {
            pk_kernel_free(k);
            m.replay = 1;
            k = big_kernel(sh, PK_BACKEND_CUDA, v == 1 ? PK_SCHED_STATIC : PK_SCHED_DYNAMIC, workers, 0, &m, &lt);
        }
        double t0 = now_ms();
        pk_status s = pk_compile(k, NULL);
        compile_ms[v] = now_ms() - t0;
        CHECK(s == PK_OK, "%s %s: compile: %s", sh->name, names[v], pk_kernel_error(k));
        if (s != PK_OK) break;
        pk_request req[BIG_NREQ];
        for (int i = 0; i < BIG_NREQ; i++)
            req[i] = (pk_request){.prompt = pr[i], .prompt_len = big_prompt_len[i], .max_new_tokens = BIG_NEW,
                                  .output = out[v][i]};
        t0 = now_ms();
        s = pk_run(k, req, BIG_NREQ, NULL, NULL);
        run_ms[v] = now_ms() - t0;
        CHECK(s == PK_OK, "%s %s: run: %s", sh->name, names[v], pk_kernel_error(k));
        if (s != PK_OK) break;
        s = pk_tensor_read(k, lt, lg[v], (size_t)BIG_T * sh->V * sizeof(pk_bf16));
        CHECK(s == PK_OK, "%s: read logits: %s", sh->name, pk_kernel_error(k));
        if (v == 0) {
            for (int i = 0; i < BIG_NREQ; i++) {
                printf("%s cpu request %d:", sh->name, i);
                for (int n = 0; n < BIG_NEW; n++) printf(" %d", out[0][i][n]);
                printf("\n");
            }
            /* how decisive the last step is: top-1 minus top-2 logit of the two decode rows */
            for (int r = 0; r < 2; r++) {
                float b1 = -INFINITY, b2 = -INFINITY;
                for (int j = 0; j < sh->V; j++) {
                    float x = pk_bf16_to_f32(lg[0][(size_t)r * sh->V + j]);
                    if (x > b1) b2 = b1, b1 = x;
                    else if (x > b2) b2 = x;
                }
                printf("%s last step row %d: top-1 logit %.4g, top-2 %.4g (gap %.3g)\n", sh->name, r, b1, b2, b1 - b2);
            }
            if (getenv("BIG_CPU_ONLY")) break;
            ROW("%-24s %9s %9.1f %6s %8s %12s %10s", sh->name, "-", run_ms[0], "-", "cpu ref", "-", "-");
            continue;
        }
        int same = memcmp(out[v], out[0], sizeof out[0]) == 0;
        /* bf16 tolerance as METHOD.md measures it: ||out - ref|| / ||ref|| over every logit */
        double mx = 0, d2 = 0, r2 = 0;
        for (long i = 0; i < (long)BIG_T * sh->V; i++) {
            double x = pk_bf16_to_f32(lg[v][i]), y = pk_bf16_to_f32(lg[0][i]);
            double d = fabs(x - y);
            if (d > mx || d != d) mx = d;
            d2 += d * d;
            r2 += y * y;
        }
        double rel = sqrt(d2 / (r2 > 0 ? r2 : 1));
        printf("%s %s: max |dlogit| %.4g, relative L2 error %.3g\n", sh->name, names[v], mx, rel);
        CHECK(same, "%s %s: tokens differ from the CPU backend", sh->name, names[v]);
        if (!same)
            for (int i = 0; i < BIG_NREQ; i++) {
                fprintf(stderr, "  req %d cpu/cuda:", i);
                for (int n = 0; n < BIG_NEW; n++) fprintf(stderr, " %d/%d", out[0][i][n], out[v][i][n]);
                fputc('\n', stderr);
            }
        CHECK(rel < 1e-2, "%s %s: logits' relative L2 error %g vs the CPU (bf16 tolerance 1e-2; max |d| %g)", sh->name,
              names[v], rel, mx);
        int bit = v == 2 ? memcmp(lg[2], lg[1], (size_t)BIG_T * sh->V * sizeof(pk_bf16)) == 0 : 1;
        if (v == 2) CHECK(bit, "%s: dynamic logits not bit-identical to static", sh->name);
        char nm[48];
        snprintf(nm, sizeof nm, "%s %s", sh->name + 6, names[v]);
        char dl[32];
        snprintf(dl, sizeof dl, "%.3g/%.1e", mx, rel);
        ROW("%-24s %9.1f %9.1f %6s %8s %12s %10s", nm, compile_ms[v] / 1e3, run_ms[v], "-", same ? "same" : "DIFFER", dl,
            v == 1 ? "base" : bit ? "yes" : "NO");
    }
    pk_kernel_free(k);
    big_free(&m, 0);
}

static const run_cfg gpu_cfgs[] = {
    {"cuda static  W4 ", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 0, 0},
    {"cuda dynamic W4 S1", PK_BACKEND_CUDA, PK_SCHED_DYNAMIC, 4, 1, 0, -1, NULL, 0, 0},
    {"cuda dynamic W4 S3", PK_BACKEND_CUDA, PK_SCHED_DYNAMIC, 4, 3, 0, -1, NULL, 0, 0},
    {"cuda static  W16", PK_BACKEND_CUDA, PK_SCHED_STATIC, 16, 1, 0, -1, NULL, 0, 0},
    {"cuda dynamic W16 S2", PK_BACKEND_CUDA, PK_SCHED_DYNAMIC, 16, 2, 0, -1, NULL, 0, 0},
    {"fallback static  W4", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 1, -1, NULL, 0, 0},
    {"fallback dynamic W4 S2", PK_BACKEND_CUDA, PK_SCHED_DYNAMIC, 4, 2, 1, -1, NULL, 0, 0},
};
enum { NCFG = sizeof gpu_cfgs / sizeof gpu_cfgs[0] };

static int has_gpu(void) {
    FILE *p = popen("nvidia-smi -L 2>/dev/null", "r");
    if (!p) return 0;
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, p)) n += strncmp(line, "GPU ", 4) == 0;
    pclose(p);
    return n > 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "--big") || !strcmp(mode, "--precompile-big")) {
        /* --big NAME [WORKERS]: NAME qwen3-0.6b, qwen3-1.7b or qwen3-8b; the CPU runs 16 threads */
        int pre = !strcmp(mode, "--precompile-big");
        const char *nm = argc > 2 ? argv[2] : "qwen3-0.6b";
        int workers = argc > 3 ? atoi(argv[3]) : 132;
        const shape *sh = NULL;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            if (!strcmp(shapes[i].name, nm)) sh = &shapes[i];
        CHECK(sh != NULL, "unknown shape '%s'", nm);
        if (sh && (pre || has_gpu() || getenv("BIG_CPU_ONLY"))) big_check(sh, workers, pre);
        else if (sh) printf("skipped: no CUDA GPU\n");
        printf("\n");
        for (int i = 0; i < nrows; i++) printf("%s\n", table[i]);
        return check_report(pre ? "cuda_big_precompile" : "cuda_big");
    }
    const char *outdir = getenv("OUT") && getenv("OUT")[0] ? getenv("OUT") : "/tmp";
    int precompile = strcmp(mode, "--precompile") == 0, stall = strcmp(mode, "--stall") == 0;
    int quick = strcmp(mode, "--quick") == 0; /* CPU, CUDA static and dynamic W4 only (compute-sanitizer) */
    if (stall && getenv("PK_CUDA_ARCH")) precompile = 1; /* fill the cache with the debug build only */
    if (!precompile && !has_gpu()) {
        printf("skipped: no CUDA GPU\n");
        return check_report("cuda_e2e");
    }
    weights w;
    e2e_make_weights(&w);
    uint64_t seed = 99;
    for (int i = 0; i < NREQ; i++)
        for (int j = 0; j < prompt_len[i]; j++) prompts[i][j] = (int32_t)(check_rand_u64(&seed) % V);

    if (precompile && stall) {
        run_cfg rc = {"debug stall", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 0, 0};
        pk_tensor *lt;
        double ms;
        pk_kernel_free(compile(&w, &rc, &lt, &ms));
        printf("precompiled the debug build in %.1f s\n", ms / 1e3);
        return check_report("cuda_e2e_precompile");
    }
    if (precompile) {
        /* every distinct kernel.cu of the checks (worker count and task kernels decide it) */
        static const run_cfg pre[] = {
            {"cuda W4", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 0, 0},
            {"cuda W16", PK_BACKEND_CUDA, PK_SCHED_STATIC, 16, 1, 0, -1, NULL, 0, 0},
            {"fallback W4", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 1, -1, NULL, 0, 0},
            {"cuda W16 split 2", PK_BACKEND_CUDA, PK_SCHED_STATIC, 16, 1, 0, -1, NULL, 2, 0},
            {"cuda W4 split 3", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 3, 0},
            {"fallback W4 split 2", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 1, -1, NULL, 2, 0},
            {"cuda W16 splitk", PK_BACKEND_CUDA, PK_SCHED_STATIC, 16, 1, 0, -1, NULL, 0, 1},
            {"cuda W4 splitk", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 0, 1},
            {"cuda W4 splitk split 2", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 2, 1},
            {"fallback W4 splitk", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 1, -1, NULL, 0, 1},
            {"cuda W16 mlp fused", PK_BACKEND_CUDA, PK_SCHED_STATIC, 16, 1, 0, -1, NULL, 0, 2},
            {"cuda W4 mlp fused split 2", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 2, 2},
            {"fallback W4 mlp fused", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 1, -1, NULL, 0, 2},
            {"cuda W16 lm argmax", PK_BACKEND_CUDA, PK_SCHED_STATIC, 16, 1, 0, -1, NULL, 0, E2E_LM_ARGMAX},
            {"cuda W4 lm argmax split 3", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 3, E2E_LM_ARGMAX},
            {"fallback W4 lm argmax", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 1, -1, NULL, 0, E2E_LM_ARGMAX},
            {"cuda W4 mlp fused lm argmax split 2", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 2,
             E2E_MLP_FUSED | E2E_LM_ARGMAX},
        };
        for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
            pk_tensor *lt;
            double ms;
            pk_kernel *k = compile(&w, &pre[i], &lt, &ms);
            printf("precompiled %-12s %.1f s\n", pre[i].name, ms / 1e3);
            pk_kernel_free(k);
        }
        return check_report("cuda_e2e_precompile");
    }

    if (stall) {
        /* PK_CUDA_DEBUG=1 PK_CUDA_DEBUG_STALL_TASK=N: the run must end with the stuck wait named */
        run_cfg rc = {"debug stall", PK_BACKEND_CUDA, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 0, 0};
        pk_tensor *lt;
        double ms;
        pk_kernel *k = compile(&w, &rc, &lt, &ms);
        if (k) {
            pk_request req[NREQ];
            int32_t out[NREQ][NEW];
            for (int i = 0; i < NREQ; i++)
                req[i] = (pk_request){.prompt = prompts[i], .prompt_len = prompt_len[i], .max_new_tokens = NEW,
                                      .output = out[i]};
            double t0 = now_ms();
            pk_status s = pk_run(k, req, NREQ, NULL, NULL);
            printf("stall run: %s after %.1f s: %s\n", pk_status_name(s), (now_ms() - t0) / 1e3, pk_kernel_error(k));
            /* the first wait to time out names itself: usually the stalled task, maybe one behind it */
            const char *e = pk_kernel_error(k);
            CHECK(s == PK_ERR_BACKEND && strstr(e, "timed out in task") && strstr(e, "counter") && strstr(e, "threshold"),
                  "the debug build names the stuck wait");
            pk_kernel_free(k);
        }
        return check_report("cuda_e2e_stall");
    }

    /* the CPU reference (static, 4 threads) */
    run_cfg cpu_cfg = {"cpu static W4", PK_BACKEND_CPU, PK_SCHED_STATIC, 4, 1, 0, -1, NULL, 0, 0};
    static result cpu, res[NCFG];
    pk_tensor *lt;
    double ms;
    pk_kernel *k = compile(&w, &cpu_cfg, &lt, &ms);
    run(k, lt, &cpu_cfg, &cpu);
    pk_kernel_free(k);
    ROW("%-24s %9s %9s %6s %8s %12s %10s", "run", "compile s", "run ms", "steps", "tokens", "max|dlogit|", "bitwise");
    ROW("%-24s %9s %9.2f %6lld %8s %12s %10s", cpu_cfg.name, "-", cpu.run_ms, (long long)cpu.steps, "ref", "ref", "-");

    for (int c = 0; c < (quick ? 2 : NCFG); c++) {
        const run_cfg *rc = &gpu_cfgs[c];
        result *r = &res[c];
        k = compile(&w, rc, &lt, &r->compile_ms);
        if (!k) {
            ROW("%-24s compile failed: %.120s", rc->name, "see above");
            continue;
        }
        run(k, lt, rc, r);
        if (r->ok) run(k, lt, rc, r); /* the second run is warm: time that one */
        pk_kernel_free(k);
        if (!r->ok) {
            ROW("%-24s run failed", rc->name);
            continue;
        }
        int same = same_tokens(r, &cpu), within;
        double dl = logits_diff(r, &cpu, &within);
        CHECK(same, "%s: tokens differ from the CPU backend", rc->name);
        if (!same) {
            print_tokens("cpu ", &cpu);
            print_tokens(rc->name, r);
        }
        CHECK(within, "%s: logits differ from the CPU's by %g (beyond bf16 tolerance)", rc->name, dl);
        CHECK(r->streamed == r->nout[0] + r->nout[1] + r->nout[2], "%s: %d tokens streamed, %d generated", rc->name,
              r->streamed, r->nout[0] + r->nout[1] + r->nout[2]);
        CHECK(r->steps == cpu.steps, "%s: %lld steps, the CPU took %lld", rc->name, (long long)r->steps,
              (long long)cpu.steps);
        /* the same task kernels must give the same bits in every mode and worker count */
        const result *base = rc->fallback ? &res[5] : &res[0];
        const char *bw = "base";
        if (r != base) {
            int bit = base->ok && memcmp(r->logits, base->logits, sizeof r->logits) == 0 && same_tokens(r, base);
            CHECK(bit, "%s: logits not bit-identical to '%s'", rc->name, rc->fallback ? gpu_cfgs[5].name : gpu_cfgs[0].name);
            bw = bit ? "yes" : "NO";
        }
        ROW("%-24s %9.1f %9.2f %6lld %8s %12.4g %10s", rc->name, r->compile_ms / 1e3, r->run_ms, (long long)r->steps,
            same ? "same" : "DIFFER", dl, bw);
    }

    split_check(&w, quick);

    if (quick) {
        printf("\n");
        for (int i = 0; i < nrows; i++) printf("%s\n", table[i]);
        return check_report("cuda_e2e_quick");
    }
    /* 100 generations on one kernel: bit-identical */
    {
        const run_cfg *rc = &gpu_cfgs[0];
        k = compile(&w, rc, &lt, &ms);
        int identical = 0;
        double t0 = now_ms();
        for (int i = 0; k && i < REPEATS; i++) {
            static result r;
            run(k, lt, rc, &r);
            identical += r.ok && same_tokens(&r, &res[0]) && memcmp(r.logits, res[0].logits, sizeof r.logits) == 0;
        }
        double each = (now_ms() - t0) / REPEATS;
        CHECK(identical == REPEATS, "%d of %d repeated generations bit-identical", identical, REPEATS);
        ROW("%-24s %9s %9.2f %6s %8s %12s %10s", "100 x cuda static W4", "-", each, "-", "-", "-",
            identical == REPEATS ? "100/100" : "FAIL");
        pk_kernel_free(k);
    }

    /* EOS inside the kernel: a token request 1 generates mid-way ends it (and maybe others) */
    {
        int64_t eos = cpu.out[1][4];
        run_cfg ce = cpu_cfg, ge = gpu_cfgs[0], gd = gpu_cfgs[2];
        ce.eos = ge.eos = gd.eos = eos;
        static result re_cpu, re_gpu, re_dyn;
        k = compile(&w, &ce, &lt, &ms);
        run(k, lt, &ce, &re_cpu);
        pk_kernel_free(k);
        k = compile(&w, &ge, &lt, &ms);
        run(k, lt, &ge, &re_gpu);
        pk_kernel_free(k);
        k = compile(&w, &gd, &lt, &ms);
        run(k, lt, &gd, &re_dyn);
        pk_kernel_free(k);
        int fin_eos = 0;
        for (int i = 0; i < NREQ; i++) fin_eos += re_cpu.finish[i] == PK_FINISH_EOS;
        CHECK(fin_eos >= 1, "eos %lld ends at least one request on the CPU", (long long)eos);
        int same = same_tokens(&re_gpu, &re_cpu) && same_tokens(&re_dyn, &re_cpu);
        CHECK(same, "EOS %lld: the GPU's outputs and finish reasons differ from the CPU's", (long long)eos);
        if (!same) {
            print_tokens("cpu", &re_cpu);
            print_tokens("gpu", &re_gpu);
            print_tokens("dyn", &re_dyn);
        }
        ROW("%-24s %9s %9.2f %6lld %8s %12s %10s", "eos: cuda static+dyn", "-", re_gpu.run_ms, (long long)re_gpu.steps,
            same ? "same" : "DIFFER", "-", "-");
    }

    /* the trace: one complete event per task and step */
    {
        char path[512];
        snprintf(path, sizeof path, "%s/trace_cuda.json", outdir);
        run_cfg rt = gpu_cfgs[0];
        rt.trace = path;
        static result r;
        k = compile(&w, &rt, &lt, &ms);
        run(k, lt, &rt, &r);
        pk_graph_stats st;
        pk_kernel_stats(k, &st);
        pk_kernel_free(k);
        FILE *f = fopen(path, "r");
        long events = 0, tracks = 0;
        if (f) {
            char line[4096];
            while (fgets(line, sizeof line, f)) {
                events += strstr(line, "\"ph\":\"X\"") != NULL;
                tracks += strstr(line, "\"thread_name\"") != NULL;
            }
            fclose(f);
        }
        long want = (long)(st.num_tasks - 1) * (long)r.steps;
        CHECK(events == want && tracks == 4, "trace %s: %ld task slices (want %ld), %ld tracks", path, events, want,
              tracks);
        ROW("%-24s %9s %9.2f %6lld %8s %12s %10s", "trace", "-", r.run_ms, (long long)r.steps,
            events == want ? "slices ok" : "BAD", "-", "-");
        printf("trace written to %s (%ld slices, %ld tracks)\n", path, events, tracks);
    }

    printf("\n");
    for (int i = 0; i < nrows; i++) printf("%s\n", table[i]);
    return check_report("cuda_e2e");
}
