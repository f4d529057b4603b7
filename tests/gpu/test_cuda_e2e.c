// SPDX-License-Identifier: Apache-2.0
/* test_cuda_e2e.c — the end-to-end test table on the GPU machine (scripts/gpu_check.sh), and the
 * checks only a GPU can run.
 *
 * (no flag)      the whole table of tests/e2e_table.h — its CPU and CUDA rows, each against the
 *                reference forward of tests/e2e_model.h — then 100 repeated generations on one
 *                CUDA kernel (tokens and logits bit-identical), a run pk_cancel stops and a trace
 *                (one slice per task and step, one track per worker).
 * --quick        the table's quick rows and the cancelled run (compute-sanitizer's run,
 *                bench/run_bench.sh's gate).
 * --precompile   compiles every distinct CUDA kernel of the table (run with PK_CUDA_ARCH=sm_90a; no
 *                GPU needed) to fill the kernel cache; with --stall's environment, the debug build.
 * --stall        with PK_CUDA_DEBUG=1 and PK_CUDA_DEBUG_STALL_TASK=N: a run must fail naming the
 *                stuck wait.
 * --big NAME [WORKERS]            NAME qwen3-0.6b, qwen3-1.7b or qwen3-8b: a model directory of that
 *                shape with random weights (written under $TMPDIR, removed after), loaded through
 *                pk_model_load_with on the CPU backend (16 threads, the reference) and on CUDA,
 *                static and dynamic mode, WORKERS (132) workers: tokens identical, logits within bf16
 *                tolerance, dynamic the bits of static.
 * --precompile-big NAME [WORKERS] compiles --big's CUDA kernel (sparse zero weights, no GPU).
 * Without a GPU (and not precompiling) it prints "skipped: no CUDA GPU" and counts nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "../e2e_model.h"
#include "../e2e_table.h"
#include "common/bf16.h"
#include "pk.h"

enum { REPEATS = 100 };

/* The table's first CUDA row: static mode, 4 workers, the plain graph. */
static const e2e_row *cuda_base_row(void) {
    for (int i = 0; i < E2E_NROWS; i++)
        if (e2e_rows[i].backend == PK_BACKEND_CUDA) return &e2e_rows[i];
    return NULL;
}

static pk_kernel *compile_row(const weights *w, const e2e_row *row, int64_t eos, const char *trace, pk_tensor **lt,
                              double *ms) {
    char name[96];
    e2e_row_name(row, name, sizeof name);
    pk_kernel *k = e2e_row_kernel(w, row, eos, trace, lt);
    double t0 = e2e_now_ms();
    pk_status s = pk_compile(k, NULL);
    *ms = e2e_now_ms() - t0;
    CHECK(s == PK_OK, "%s: compile: %s: %s", name, pk_status_name(s), pk_kernel_error(k));
    if (s != PK_OK) {
        pk_kernel_free(k);
        return NULL;
    }
    return k;
}

/* Every distinct kernel.cu of the table's CUDA rows: the worker count and the variant decide it (the
 * mode, the schedulers and the EOS token do not). One child process per kernel, as many at a time as
 * there are cores (nvcc compiles one kernel on one core). */
static void precompile_table(const weights *w) {
    e2e_row todo[E2E_NROWS];
    int n = 0;
    for (int i = 0; i < E2E_NROWS; i++) {
        const e2e_row *r = &e2e_rows[i];
        int seen = r->backend != PK_BACKEND_CUDA;
        for (int j = 0; j < n && !seen; j++)
            seen = todo[j].workers == r->workers && memcmp(&todo[j].v, &r->v, sizeof r->v) == 0;
        if (seen) continue;
        todo[n] = *r;
        todo[n].mode = PK_SCHED_STATIC;
        todo[n].schedulers = 1;
        todo[n++].eos = 0;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int running = 0;
    fflush(stdout);
    for (int i = 0; i <= n; i++) {
        while (running > 0 && (running >= cores || i == n)) { /* wait for a child */
            int st = 0;
            pid_t pid = wait(&st);
            if (pid < 0) break;
            running--;
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a precompile child failed (status %d)", st);
        }
        if (i == n) break;
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            char name[96];
            pk_tensor *lt;
            double ms;
            pk_kernel *k = compile_row(w, &todo[i], -1, NULL, &lt, &ms);
            printf("precompiled %-30s %.1f s\n", e2e_row_name(&todo[i], name, sizeof name), ms / 1e3);
            fflush(stdout);
            int ok = k != NULL;
            pk_kernel_free(k);
            _exit(ok ? 0 : 1);
        }
        running += pid > 0;
    }
}

/* REPEATS generations on one kernel: every one the reference's tokens, the logits the first one's bits. */
static void repeats_check(const weights *w, const e2e_ref *ref) {
    const e2e_row *row = cuda_base_row();
    pk_tensor *lt;
    double ms;
    pk_kernel *k = compile_row(w, row, -1, NULL, &lt, &ms);
    if (!k) return;
    static e2e_result first, r;
    int identical = 0;
    double t0 = e2e_now_ms();
    for (int i = 0; i < REPEATS; i++) {
        char what[64];
        snprintf(what, sizeof what, "repeat %d", i);
        if (!e2e_run_once(k, lt, ref, row, what, i == 0 ? &first : &r)) break;
        identical += i == 0 || (r.tokens_ok && memcmp(r.logits, first.logits, sizeof r.logits) == 0);
    }
    double each = (e2e_now_ms() - t0) / REPEATS;
    CHECK(identical == REPEATS, "%d of %d repeated generations bit-identical", identical, REPEATS);
    printf("%d x cuda static W4: %d/%d bit-identical, %.2f ms each\n", REPEATS, identical, REPEATS, each);
    pk_kernel_free(k);
}

/* pk_cancel from the token callback at request 0's first token: the device plans no step after
 * the one it runs when the host's copy lands, so the request ends cancelled well before its
 * max_new_tokens (the whole run is ~60 steps); the next run on the kernel is the reference's. */
typedef struct cancel_probe {
    pk_kernel *k;
    int seen0;
} cancel_probe;
static void cancel_on_token(void *user, int request, int32_t token, int row) {
    cancel_probe *p = user;
    (void)token, (void)row;
    if (request == 0 && ++p->seen0 == 1) pk_cancel(p->k);
}
static void cancel_check(const weights *w, const e2e_ref *ref) {
    pk_tensor *lt;
    double ms;
    pk_kernel *k = compile_row(w, cuda_base_row(), -1, NULL, &lt, &ms);
    if (!k) return;
    const int len = e2e_prompt_len[0], max_new = MAXLEN - len;
    int32_t out[MAXLEN];
    pk_request rq = {.prompt = ref->prompts[0], .prompt_len = len, .max_new_tokens = max_new, .output = out};
    cancel_probe p = {k, 0};
    pk_status s = pk_run(k, &rq, 1, cancel_on_token, &p);
    CHECK(s == PK_OK && rq.finish == PK_FINISH_CANCELLED && rq.num_output >= 1 && rq.num_output < max_new,
          "cancel at the first token: %s, finish %d, %d of %d tokens", pk_status_name(s), (int)rq.finish,
          rq.num_output, max_new);
    printf("cancel at the first token: %d of %d tokens made\n", rq.num_output, max_new);
    rq.max_new_tokens = E2E_NEW;
    s = pk_run(k, &rq, 1, NULL, NULL);
    CHECK(s == PK_OK && rq.num_output == E2E_NEW && !memcmp(out, ref->tokens[0], sizeof ref->tokens[0]),
          "the run after a cancel: %s, %d tokens, the reference's: %d", pk_status_name(s), rq.num_output,
          s == PK_OK && !memcmp(out, ref->tokens[0], sizeof ref->tokens[0]));
    pk_kernel_free(k);
}

/* The trace: one complete event per task and step, one track per worker. */
static void trace_check(const weights *w, const e2e_ref *ref, const char *outdir) {
    char path[512];
    snprintf(path, sizeof path, "%s/trace_cuda.json", outdir);
    const e2e_row *row = cuda_base_row();
    pk_tensor *lt;
    double ms;
    pk_kernel *k = compile_row(w, row, -1, path, &lt, &ms);
    if (!k) return;
    static e2e_result r;
    e2e_run_once(k, lt, ref, row, "trace", &r);
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
    CHECK(events == want && tracks == row->workers, "trace %s: %ld task slices (want %ld), %ld tracks (want %d)", path,
          events, want, tracks, row->workers);
    printf("trace written to %s (%ld slices, %ld tracks)\n", path, events, tracks);
}

/* PK_CUDA_DEBUG=1 PK_CUDA_DEBUG_STALL_TASK=N: the run must end with the stuck wait named. */
static void stall_check(const weights *w, const e2e_ref *ref) {
    pk_tensor *lt;
    double ms;
    pk_kernel *k = compile_row(w, cuda_base_row(), -1, NULL, &lt, &ms);
    if (!k) return;
    int32_t out[E2E_NREQ][E2E_NEW];
    pk_request req[E2E_NREQ];
    for (int i = 0; i < E2E_NREQ; i++)
        req[i] = (pk_request){.prompt = ref->prompts[i], .prompt_len = e2e_prompt_len[i], .max_new_tokens = E2E_NEW,
                              .output = out[i]};
    double t0 = e2e_now_ms();
    pk_status s = pk_run(k, req, E2E_NREQ, NULL, NULL);
    const char *e = pk_kernel_error(k);
    printf("stall run: %s after %.1f s: %s\n", pk_status_name(s), (e2e_now_ms() - t0) / 1e3, e);
    /* the first wait to time out names itself: usually the stalled task, maybe one behind it */
    CHECK(s == PK_ERR_BACKEND && strstr(e, "timed out in task") && strstr(e, "counter") && strstr(e, "threshold"),
          "the debug build names the stuck wait");
    pk_kernel_free(k);
}

/* ---- --big: model directories of the Qwen3-0.6B / 1.7B / 8B shapes, through pk_model_load_with ---- */

typedef struct shape {
    const char *name;
    int V, H, L, Hq, Hkv, D, I;
} shape;
static const shape shapes[] = {
    {"qwen3-0.6b", 151936, 1024, 28, 16, 8, 128, 3072},
    {"qwen3-1.7b", 151936, 2048, 28, 16, 8, 128, 6144},
    {"qwen3-8b", 151936, 4096, 36, 32, 8, 128, 12288},
};
enum { BIG_T = 16, BIG_SEQ = 64, BIG_NREQ = 2, BIG_NEW = 6, BIG_V = 151936 };
static const int big_prompt_len[BIG_NREQ] = {20, 6};

/* One weight tensor of the directory: uniform in [-a, a] + offset. */
typedef struct big_tensor {
    char name[96];
    int64_t d0, d1; /* d1 0: a vector */
    double a;
    float offset;
    size_t off; /* bytes into the data section */
} big_tensor;

/* Fills p[0 .. n) by 16 threads over fixed 1M-element chunks, each chunk its own xorshift stream
 * (the values do not depend on the thread count). */
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

static void big_fill(pk_bf16 *p, size_t n, uint64_t seed, double a, float offset) {
    enum { NT = 16 };
    pthread_t th[NT];
    fill_job jobs[NT];
    for (int t = 0; t < NT; t++) {
        jobs[t] = (fill_job){p, n, seed, (float)a, offset, t, NT};
        pthread_create(&th[t], NULL, fill_chunks, &jobs[t]);
    }
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
}

/* A decisive LM head: row v = 0.05 · embed[π(v)] for a random permutation π. The residual stream
 * stays dominated by the input token's embedding (the layers' output projections are small), so the
 * next token is π⁻¹(current) by a wide margin (top-1 minus top-2 ≈ 20 logits, bf16 rounding ≈ 0.1),
 * while every layer still moves the logits measurably. */
static void big_lm_head(pk_bf16 *head, const pk_bf16 *embed, int nv, int nh) {
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
            head[(size_t)v * nh + i] = pk_f32_to_bf16(0.05f * pk_bf16_to_f32(embed[(size_t)perm[v] * nh + i]));
    free(perm);
}

/* Writes dir/config.json and dir/model.safetensors (bf16, untied LM head) for shape sh: random weights,
 * or (zeros) a sparse file of zeros that only compiles. 0 on success, else -1 with a message printed. */
static int big_write_model(const shape *sh, const char *dir, int zeros) {
    if (mkdir(dir, 0700) != 0) {
        perror(dir);
        return -1;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    fprintf(f,
            "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": %d, "
            "\"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
            "\"num_key_value_heads\": %d, \"head_dim\": %d, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, "
            "\"max_position_embeddings\": 40960, \"hidden_act\": \"silu\", \"attention_bias\": false, "
            "\"rope_scaling\": null, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}\n",
            sh->V, sh->H, sh->I, sh->L, sh->Hq, sh->Hkv, sh->D);
    fclose(f);
    /* the tensors in the order transformers saves them (bench/shape_model.py), with their draws */
    int n = 0, cap = 11 * sh->L + 3;
    big_tensor *t = calloc((size_t)cap, sizeof *t);
    double aq = 1.7 / sqrt((double)sh->H);
#define ADD(nm, a0, a1, amp, off)                                                                   \
    (snprintf(t[n].name, sizeof t[n].name, "%s", nm), t[n].d0 = (a0), t[n].d1 = (a1), t[n].a = (amp), \
     t[n].offset = (off), n++)
    ADD("model.embed_tokens.weight", sh->V, sh->H, 1.0, 0);
    for (int l = 0; l < sh->L; l++) {
        char p[96];
#define L_(s) (snprintf(p, sizeof p, "model.layers.%d.%s", l, s), p)
        ADD(L_("input_layernorm.weight"), sh->H, 0, 0.2, 1.0f);
        ADD(L_("self_attn.q_proj.weight"), sh->Hq * sh->D, sh->H, aq, 0);
        ADD(L_("self_attn.k_proj.weight"), sh->Hkv * sh->D, sh->H, aq, 0);
        ADD(L_("self_attn.v_proj.weight"), sh->Hkv * sh->D, sh->H, aq, 0);
        ADD(L_("self_attn.o_proj.weight"), sh->H, sh->Hq * sh->D, 0.05 / sqrt((double)sh->Hq * sh->D), 0);
        ADD(L_("self_attn.q_norm.weight"), sh->D, 0, 0.2, 1.0f);
        ADD(L_("self_attn.k_norm.weight"), sh->D, 0, 0.2, 1.0f);
        ADD(L_("post_attention_layernorm.weight"), sh->H, 0, 0.2, 1.0f);
        ADD(L_("mlp.gate_proj.weight"), sh->I, sh->H, aq, 0);
        ADD(L_("mlp.up_proj.weight"), sh->I, sh->H, aq, 0);
        ADD(L_("mlp.down_proj.weight"), sh->H, sh->I, 0.05 / sqrt((double)sh->I), 0);
#undef L_
    }
    ADD("model.norm.weight", sh->H, 0, 0.2, 1.0f);
    ADD("lm_head.weight", sh->V, sh->H, 0, 0); /* big_lm_head */
#undef ADD
    size_t hcap = (size_t)n * 256 + 16, hlen = 0, data = 0;
    char *hdr = malloc(hcap);
    hlen += (size_t)snprintf(hdr + hlen, hcap - hlen, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)t[i].d0 * (size_t)(t[i].d1 ? t[i].d1 : 1) * sizeof(pk_bf16);
        t[i].off = data;
        char shp[48];
        if (t[i].d1) snprintf(shp, sizeof shp, "%lld,%lld", (long long)t[i].d0, (long long)t[i].d1);
        else snprintf(shp, sizeof shp, "%lld", (long long)t[i].d0);
        hlen += (size_t)snprintf(hdr + hlen, hcap - hlen, "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                                 i ? "," : "", t[i].name, shp, data, data + bytes);
        data += bytes;
    }
    hlen += (size_t)snprintf(hdr + hlen, hcap - hlen, "}");
    while (hlen % 8) hdr[hlen++] = ' ';
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    uint64_t hl = hlen; /* little-endian, as the GPU machine is */
    int ok = fd >= 0 && write(fd, &hl, 8) == 8 && write(fd, hdr, hlen) == (ssize_t)hlen &&
             ftruncate(fd, (off_t)(8 + hlen + data)) == 0;
    free(hdr);
    if (ok && !zeros) {
        uint8_t *map = mmap(NULL, 8 + hlen + data, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ok = map != MAP_FAILED;
        for (int i = 0; ok && i < n; i++) {
            pk_bf16 *p = (pk_bf16 *)(map + 8 + hlen + t[i].off);
            size_t cnt = (size_t)t[i].d0 * (size_t)(t[i].d1 ? t[i].d1 : 1);
            if (i == n - 1)
                big_lm_head(p, (const pk_bf16 *)(map + 8 + hlen + t[0].off), sh->V, sh->H);
            else
                big_fill(p, cnt, 7 + 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1), t[i].a, t[i].offset);
        }
        if (ok) munmap(map, 8 + hlen + data);
    }
    if (fd >= 0) close(fd);
    free(t);
    if (!ok) perror(path);
    return ok ? 0 : -1;
}

static void big_remove(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

/* --big's rows: the CPU backend is the reference (its graph checked against the reference forward
 * by the table); the model builder's options are pk's rules (-1) on each backend. */
typedef struct big_row {
    const char *name;
    pk_backend backend;
    pk_sched_mode mode;
} big_row;
static const big_row big_rows[] = {
    {"cpu static 16", PK_BACKEND_CPU, PK_SCHED_STATIC},
    {"cuda static", PK_BACKEND_CUDA, PK_SCHED_STATIC},
    {"cuda dynamic S1", PK_BACKEND_CUDA, PK_SCHED_DYNAMIC},
};
enum { BIG_ROWS = sizeof big_rows / sizeof big_rows[0] };

static pk_model *big_load(const char *dir, const shape *sh, const big_row *r, int workers) {
    pk_config c = pk_config_default();
    c.backend = r->backend;
    c.sched_mode = r->mode;
    c.num_workers = r->backend == PK_BACKEND_CPU ? 16 : workers;
    c.max_seq_length = BIG_SEQ;
    c.max_requests = BIG_NREQ;
    c.max_tokens_per_step = BIG_T;
    c.page_size = 16;
    pk_model_options o = pk_model_options_default();
    char err[256] = "";
    pk_model *m = pk_model_load_with(dir, &c, &o, err, sizeof err);
    CHECK(m != NULL, "%s %s: pk_model_load_with: %s", sh->name, r->name, err);
    return m;
}

static void big_check(const shape *sh, int workers, int precompile) {
    char dir[512];
    const char *tmp = getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/pk-e2e-%s-%ld", tmp, sh->name, (long)getpid());
    double t0 = e2e_now_ms();
    int wrote = big_write_model(sh, dir, precompile) == 0;
    CHECK(wrote, "%s: writing the model directory %s", sh->name, dir);
    if (!wrote) {
        big_remove(dir);
        return;
    }
    printf("%s: %s written in %.1f s\n", sh->name, dir, (e2e_now_ms() - t0) / 1e3);
    if (precompile) {
        pk_model *m = big_load(dir, sh, &big_rows[1], workers);
        if (m) {
            t0 = e2e_now_ms();
            pk_status s = pk_compile(pk_model_kernel(m), NULL);
            CHECK(s == PK_OK, "%s: compile: %s", sh->name, pk_kernel_error(pk_model_kernel(m)));
            printf("precompiled %s (%d workers) in %.1f s\n", sh->name, workers, (e2e_now_ms() - t0) / 1e3);
        }
        pk_model_free(m);
        big_remove(dir);
        return;
    }
    int32_t pr[BIG_NREQ][32];
    uint64_t seed = 5;
    for (int i = 0; i < BIG_NREQ; i++)
        for (int j = 0; j < big_prompt_len[i]; j++) pr[i][j] = (int32_t)(check_rand_u64(&seed) % (uint64_t)sh->V);
    static int32_t out[BIG_ROWS][BIG_NREQ][BIG_NEW];
    static pk_bf16 lg[BIG_ROWS][BIG_T * BIG_V];
    static float ref_row[BIG_V];
    int ran[BIG_ROWS] = {0};
    printf("%-24s %9s %9s %8s %22s %9s %10s\n", "run", "compile s", "run ms", "tokens", "max|dlogit| / rel L2",
           "decisive", "bitwise");
    for (int v = 0; v < BIG_ROWS; v++) {
        pk_model *m = big_load(dir, sh, &big_rows[v], workers);
        if (!m) continue;
        pk_kernel *k = pk_model_kernel(m);
        t0 = e2e_now_ms();
        pk_status s = pk_compile(k, NULL);
        double compile_ms = e2e_now_ms() - t0;
        CHECK(s == PK_OK, "%s %s: compile: %s", sh->name, big_rows[v].name, pk_kernel_error(k));
        pk_request req[BIG_NREQ];
        for (int i = 0; i < BIG_NREQ; i++)
            req[i] = (pk_request){.prompt = pr[i], .prompt_len = big_prompt_len[i], .max_new_tokens = BIG_NEW,
                                  .output = out[v][i]};
        t0 = e2e_now_ms();
        if (s == PK_OK) s = pk_run(k, req, BIG_NREQ, NULL, NULL);
        double run_ms = e2e_now_ms() - t0;
        CHECK(s == PK_OK, "%s %s: run: %s", sh->name, big_rows[v].name, pk_kernel_error(k));
        if (s == PK_OK) s = pk_tensor_read(k, pk_model_logits(m), lg[v], (size_t)BIG_T * sh->V * sizeof(pk_bf16));
        CHECK(s == PK_OK, "%s: read logits: %s", sh->name, pk_kernel_error(k));
        pk_model_free(m);
        ran[v] = s == PK_OK;
        if (!ran[v]) continue;
        if (v == 0) {
            for (int i = 0; i < BIG_NREQ; i++) {
                printf("%s cpu request %d:", sh->name, i);
                for (int n = 0; n < BIG_NEW; n++) printf(" %d", out[0][i][n]);
                printf("\n");
            }
            for (int r = 0; r < 2; r++) { /* how decisive the last step is: its two decode rows */
                float b1 = -INFINITY, b2 = -INFINITY;
                for (int j = 0; j < sh->V; j++) {
                    float x = pk_bf16_to_f32(lg[0][(size_t)r * sh->V + j]);
                    if (x > b1) b2 = b1, b1 = x;
                    else if (x > b2) b2 = x;
                }
                printf("%s last step row %d: top-1 logit %.4g, top-2 %.4g (gap %.3g)\n", sh->name, r, b1, b2, b1 - b2);
            }
            printf("%-24s %9.1f %9.1f %8s %22s %9s %10s\n", big_rows[v].name, compile_ms / 1e3, run_ms, "ref", "-",
                   "-", "-");
            continue;
        }
        if (!ran[0]) continue;
        int same = memcmp(out[v], out[0], sizeof out[0]) == 0;
        if (!same)
            for (int i = 0; i < BIG_NREQ; i++) {
                fprintf(stderr, "  req %d cpu/%s:", i, big_rows[v].name);
                for (int n = 0; n < BIG_NEW; n++) fprintf(stderr, " %d/%d", out[0][i][n], out[v][i][n]);
                fputc('\n', stderr);
            }
        CHECK(same, "%s %s: tokens differ from the CPU backend", sh->name, big_rows[v].name);
        /* bf16 tolerance: relative L2 over every logit of the last step, argmax where decisive */
        e2e_cmp c = {0};
        for (int r = 0; r < BIG_T; r++) {
            for (int j = 0; j < sh->V; j++) ref_row[j] = pk_bf16_to_f32(lg[0][(size_t)r * sh->V + j]);
            e2e_cmp_row(&c, lg[v] + (size_t)r * sh->V, ref_row, sh->V);
        }
        double rel = e2e_cmp_rel(&c);
        printf("%s %s: max |dlogit| %.4g, relative L2 error %.3g\n", sh->name, big_rows[v].name, c.max_abs, rel);
        CHECK(rel <= 1e-2 && c.agree == c.decisive,
              "%s %s: logits' relative L2 error %g vs the CPU (bf16 tolerance 1e-2; max |d| %g), argmax equal at %d of "
              "%d decisive rows",
              sh->name, big_rows[v].name, rel, c.max_abs, c.agree, c.decisive);
        const char *bw = "base";
        if (v > 1 && ran[1]) { /* one graph on the GPU in both modes */
            int bit = memcmp(lg[v], lg[1], (size_t)BIG_T * sh->V * sizeof(pk_bf16)) == 0;
            CHECK(bit, "%s %s: logits not bit-identical to %s", sh->name, big_rows[v].name, big_rows[1].name);
            bw = bit ? "yes" : "NO";
        }
        char dl[48], dec[16], nm[48];
        snprintf(dl, sizeof dl, "%.3g / %.1e", c.max_abs, rel);
        snprintf(dec, sizeof dec, "%d/%d", c.agree, c.decisive);
        snprintf(nm, sizeof nm, "%s %s", sh->name + 6, big_rows[v].name);
        printf("%-24s %9.1f %9.1f %8s %22s %9s %10s\n", nm, compile_ms / 1e3, run_ms, same ? "same" : "DIFFER", dl, dec,
               bw);
    }
    big_remove(dir);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "--big") || !strcmp(mode, "--precompile-big")) {
        int pre = !strcmp(mode, "--precompile-big");
        const char *nm = argc > 2 ? argv[2] : "qwen3-0.6b";
        int workers = argc > 3 ? atoi(argv[3]) : 132;
        const shape *sh = NULL;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            if (!strcmp(shapes[i].name, nm)) sh = &shapes[i];
        CHECK(sh != NULL, "unknown shape '%s'", nm);
        if (sh && (pre || e2e_has_gpu())) big_check(sh, workers, pre);
        else if (sh) printf("skipped: no CUDA GPU\n");
        return check_report(pre ? "cuda_big_precompile" : "cuda_big");
    }
    const char *outdir = getenv("OUT") && getenv("OUT")[0] ? getenv("OUT") : "/tmp";
    int precompile = strcmp(mode, "--precompile") == 0, stall = strcmp(mode, "--stall") == 0;
    int quick = strcmp(mode, "--quick") == 0;
    if (stall && getenv("PK_CUDA_ARCH")) precompile = 1; /* fill the cache with the debug build only */
    if (!precompile && !e2e_has_gpu()) {
        printf("skipped: no CUDA GPU\n");
        return check_report("cuda_e2e");
    }
    weights w;
    e2e_make_weights(&w);
    static e2e_ref ref;
    e2e_ref_init(&ref, &w);
    const char *name = "cuda_e2e";
    if (precompile && stall) {
        pk_tensor *lt;
        double ms;
        pk_kernel_free(compile_row(&w, cuda_base_row(), -1, NULL, &lt, &ms));
        printf("precompiled the debug build in %.1f s\n", ms / 1e3);
        name = "cuda_e2e_precompile";
    } else if (precompile) {
        precompile_table(&w);
        name = "cuda_e2e_precompile";
    } else if (stall) {
        stall_check(&w, &ref);
        name = "cuda_e2e_stall";
    } else if (quick) {
        e2e_run_table(&w, &ref, E2E_TABLE_QUICK, 1);
        cancel_check(&w, &ref);
        name = "cuda_e2e_quick";
    } else {
        e2e_run_table(&w, &ref, 0, 1);
        repeats_check(&w, &ref);
        cancel_check(&w, &ref);
        trace_check(&w, &ref, outdir);
    }
    e2e_free_weights(&w);
    return check_report(name);
}
