// SPDX-License-Identifier: Apache-2.0
/* test_bench.c — the measurement side of pk (issue 5): pk_run_step_times (one duration per step,
 * prefill and decode steps told apart, for known schedules on both scheduling modes),
 * pk_kernel_memory, pk_device_copy_bandwidth on the CPU backend, and `pk bench --json` (one request
 * and --batch) on the shipped model (runs $BUILD/pk, default build/pk). The copy probe runs with PK_COPY_PROBE_MB=64
 * here: first-touching 2 GiB of fresh memory can take seconds on a VM.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "pk.h"

enum { V = 64, H = 32 };

static uint16_t bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static uint16_t w_embed[V * H], w_norm[H], w_head[V * H];

/* embedding → rmsnorm_linear (LM head) → argmax: a complete generation graph with no EOS, so
 * every request runs to max_new_tokens and the schedule is known in advance. */
static pk_kernel *tiny_graph(int T, int R, int workers, pk_sched_mode mode) {
    pk_config c = pk_config_default();
    c.num_workers = workers;
    c.num_local_schedulers = 2;
    c.max_requests = R;
    c.max_tokens_per_step = T;
    c.max_seq_length = 64;
    c.page_size = 4;
    c.sched_mode = mode;
    pk_kernel *k = pk_kernel_new(&c);
    pk_tensor *emb = pk_attach_input(k, "embed", PK_DTYPE_BF16, 2, (int64_t[]){V, H}, NULL, w_embed);
    pk_tensor *norm = pk_attach_input(k, "norm", PK_DTYPE_BF16, 1, (int64_t[]){H}, NULL, w_norm);
    pk_tensor *head = pk_attach_input(k, "head", PK_DTYPE_BF16, 2, (int64_t[]){V, H}, NULL, w_head);
    pk_tensor *x = pk_new_tensor(k, "x", PK_DTYPE_BF16, 2, (int64_t[]){T, H}, PK_IO_LOCAL);
    pk_tensor *logits = pk_new_tensor(k, "logits", PK_DTYPE_BF16, 2, (int64_t[]){T, V}, PK_IO_LOCAL);
    pk_status s = pk_embedding_layer(k, pk_step_tokens(k), emb, x, 2);
    if (s == PK_OK) s = pk_rmsnorm_linear_layer(k, x, norm, head, logits, 1e-6f, 4);
    if (s == PK_OK) s = pk_argmax_layer(k, logits, pk_step_output(k), 4);
    CHECK(s == PK_OK, "building the graph: %s", pk_kernel_error(k));
    return k;
}

/* Runs requests (prompt lengths and max_new_tokens) and checks the step times against the
 * expected rows and prompt rows of each step. */
static void check_schedule(const char *what, pk_kernel *k, int n, const int *plen, const int *gen, int nsteps,
                           const int *rows, const int *prompt_rows) {
    int32_t prompts[4][64], outs[4][64];
    pk_request reqs[4];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < plen[i]; j++) prompts[i][j] = (int32_t)((i * 7 + j * 3) % V);
        reqs[i] = (pk_request){.prompt = prompts[i], .prompt_len = plen[i], .max_new_tokens = gen[i], .output = outs[i]};
    }
    CHECK(pk_run(k, reqs, n, NULL, NULL) == PK_OK, "%s: pk_run: %s", what, pk_kernel_error(k));
    for (int i = 0; i < n; i++)
        CHECK(reqs[i].num_output == gen[i] && reqs[i].finish == PK_FINISH_LENGTH, "%s: request %d made %d tokens", what,
              i, reqs[i].num_output);
    pk_graph_stats gs;
    pk_step_times st;
    CHECK(pk_kernel_stats(k, &gs) == PK_OK && pk_run_step_times(k, &st) == PK_OK, "%s: stats", what);
    CHECK(st.num_steps == gs.steps_run && st.num_timed == gs.steps_run, "%s: %lld timed, %lld steps, stats %lld", what,
          (long long)st.num_timed, (long long)st.num_steps, (long long)gs.steps_run);
    CHECK(gs.steps_run == nsteps, "%s: %lld steps, expected %d", what, (long long)gs.steps_run, nsteps);
    if (st.num_timed != nsteps || !st.ms || !st.rows || !st.prompt_rows) return;
    double total = 0;
    for (int i = 0; i < nsteps; i++) {
        CHECK(st.ms[i] > 0 && st.ms[i] < 10000, "%s: step %d took %g ms", what, i + 1, st.ms[i]);
        CHECK(st.rows[i] == rows[i] && st.prompt_rows[i] == prompt_rows[i],
              "%s: step %d has %d rows (%d prompt), expected %d (%d)", what, i + 1, st.rows[i], st.prompt_rows[i], rows[i],
              prompt_rows[i]);
        total += st.ms[i];
    }
    CHECK(total > 0, "%s: total %g ms", what, total);
}

static void test_step_times(pk_sched_mode mode, int workers) {
    char what[64];
    const char *m = mode == PK_SCHED_STATIC ? "static" : "dynamic";
    pk_kernel *k = tiny_graph(8, 2, workers, mode);
    CHECK(pk_compile(k, NULL) == PK_OK, "compile: %s", pk_kernel_error(k));
    pk_step_times st;
    CHECK(pk_run_step_times(k, &st) == PK_OK && st.num_steps == 0 && st.num_timed == 0 && !st.ms && !st.rows &&
              !st.prompt_rows,
          "before any run: %lld steps", (long long)st.num_steps);

    /* one request: a prompt of 19 tokens in chunks of T = 8, then 4 decode steps for 5 tokens */
    snprintf(what, sizeof what, "%s W%d one request", m, workers);
    check_schedule(what, k, 1, (int[]){19}, (int[]){5}, 7, (int[]){8, 8, 3, 1, 1, 1, 1}, (int[]){8, 8, 3, 0, 0, 0, 0});

    /* two requests; the second's prompt waits for room in the step */
    snprintf(what, sizeof what, "%s W%d two requests", m, workers);
    check_schedule(what, k, 2, (int[]){10, 3}, (int[]){3, 4}, 5, (int[]){8, 5, 2, 2, 1}, (int[]){8, 5, 0, 0, 0});

    /* a step holding a decode row and a prefill chunk counts as prefill (6 prompt rows of 7) */
    snprintf(what, sizeof what, "%s W%d mixed step", m, workers);
    check_schedule(what, k, 2, (int[]){2, 12}, (int[]){5, 2}, 5, (int[]){8, 7, 2, 1, 1}, (int[]){8, 6, 0, 0, 0});

    /* random requests (more than the slots): rows add up to every token fed to the model */
    uint64_t seed = 0x5eed + (uint64_t)workers;
    for (int rep = 0; rep < 5; rep++) {
        int32_t prompts[4][40], outs[4][20];
        pk_request reqs[4];
        int n = 1 + (int)(check_rand_u64(&seed) % 4);
        int64_t want_rows = 0, want_prompt = 0;
        for (int i = 0; i < n; i++) {
            int p = 1 + (int)(check_rand_u64(&seed) % 40), g = 1 + (int)(check_rand_u64(&seed) % 20);
            for (int j = 0; j < p; j++) prompts[i][j] = (int32_t)(check_rand_u64(&seed) % V);
            reqs[i] = (pk_request){.prompt = prompts[i], .prompt_len = p, .max_new_tokens = g, .output = outs[i]};
            want_rows += p + g - 1;
            want_prompt += p;
        }
        CHECK(pk_run(k, reqs, n, NULL, NULL) == PK_OK, "random run: %s", pk_kernel_error(k));
        CHECK(pk_run_step_times(k, &st) == PK_OK && st.num_timed == st.num_steps && st.num_steps > 0, "random run: %lld",
              (long long)st.num_timed);
        int64_t sum_rows = 0, sum_prompt = 0;
        int ok = 1;
        for (int64_t i = 0; i < st.num_timed; i++) {
            sum_rows += st.rows[i];
            sum_prompt += st.prompt_rows[i];
            ok &= st.ms[i] > 0 && st.rows[i] >= 1 && st.rows[i] <= 8 && st.prompt_rows[i] <= st.rows[i];
            if (st.prompt_rows[i] == 0) ok &= st.rows[i] <= 2; /* pure decode: one row per slot */
        }
        CHECK(ok, "%s W%d random run %d: a step out of range", m, workers, rep);
        CHECK(sum_rows == want_rows && sum_prompt == want_prompt, "%s random run %d: rows %lld/%lld, prompt rows %lld/%lld",
              m, rep, (long long)sum_rows, (long long)want_rows, (long long)sum_prompt, (long long)want_prompt);
    }

    /* a run that fails leaves no times behind */
    int32_t p1[1] = {1}, o1[1];
    pk_request bad = {.prompt = p1, .prompt_len = 0, .max_new_tokens = 1, .output = o1};
    CHECK(pk_run(k, &bad, 1, NULL, NULL) == PK_ERR_INVALID_ARGUMENT, "empty prompt accepted");
    CHECK(pk_run_step_times(k, &st) == PK_OK && st.num_timed == 0 && st.num_steps == 0 && !st.ms,
          "after a failed run: %lld timed", (long long)st.num_timed);
    /* and no requests, no steps */
    CHECK(pk_run(k, NULL, 0, NULL, NULL) == PK_OK && pk_run_step_times(k, &st) == PK_OK && st.num_steps == 0 &&
              st.num_timed == 0,
          "empty run: %lld steps", (long long)st.num_steps);
    pk_kernel_free(k);
}

static void test_api(void) {
    pk_step_times st;
    pk_memory_stats mem;
    double bw = 0;
    CHECK(pk_run_step_times(NULL, &st) == PK_ERR_INVALID_ARGUMENT, "NULL kernel");
    CHECK(pk_kernel_memory(NULL, &mem) == PK_ERR_INVALID_ARGUMENT, "NULL kernel");
    CHECK(pk_device_copy_bandwidth(NULL, &bw) == PK_ERR_INVALID_ARGUMENT, "NULL kernel");
    pk_kernel *k = tiny_graph(8, 2, 2, PK_SCHED_STATIC);
    CHECK(pk_run_step_times(k, NULL) == PK_ERR_INVALID_ARGUMENT, "NULL out");
    CHECK(pk_kernel_memory(k, &mem) == PK_ERR_STATE, "memory before compile");
    CHECK(strstr(pk_kernel_error(k), "compile") != NULL, "message: %s", pk_kernel_error(k));
    CHECK(pk_compile(k, NULL) == PK_OK, "compile: %s", pk_kernel_error(k));
    CHECK(pk_kernel_memory(k, NULL) == PK_ERR_INVALID_ARGUMENT, "NULL out");
    CHECK(pk_kernel_memory(k, &mem) == PK_OK, "memory: %s", pk_kernel_error(k));
    CHECK(mem.weight_bytes == (int64_t)(2 * V * H + H) * 2 && mem.kv_cache_bytes == 0 && mem.workspace_bytes > 0 &&
              mem.on_device == 0,
          "memory: weights %lld, kv %lld, workspace %lld, on device %d", (long long)mem.weight_bytes,
          (long long)mem.kv_cache_bytes, (long long)mem.workspace_bytes, mem.on_device);
    CHECK(pk_device_copy_bandwidth(k, NULL) == PK_ERR_INVALID_ARGUMENT, "NULL bandwidth");
    CHECK(pk_device_copy_bandwidth(k, &bw) == PK_OK && bw > 1e8 && bw < 1e13, "host copy bandwidth %g B/s: %s", bw,
          pk_kernel_error(k));
    pk_kernel_free(k);
}

/* ---- pk bench ---- */

static char pk_bin[512];

/* Runs the shell command `command`, its stdout and stderr into out; system()'s status. */
static int run_captured(const char *command, char *out, size_t cap) {
    char cmd[1200], path[64];
    snprintf(path, sizeof path, "/tmp/pk_bench_out.%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s >%s 2>&1", command, path);
    int st = system(cmd);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
    unlink(path);
    return st;
}

static int run_pk(const char *args, char *out, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s", pk_bin, args);
    int st = run_captured(cmd, out, cap);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* python3 bench/SCRIPT TRACE --steps 3, its output into out; system()'s status. */
static int run_script(const char *script, const char *trace, char *out, size_t cap) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 bench/%s %s --steps 3", script, trace);
    return run_captured(cmd, out, cap);
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void test_bench_cli(void) {
    static char out[1 << 16];
    int rc = run_pk("bench --model models/pk-tiny --gen 16 --json", out, sizeof out);
    CHECK(rc == 0, "pk bench exit %d: %s", rc, out);
    /* the JSON object is the last line that starts with '{' (stderr may hold progress lines) */
    char *json = strstr(out, "{\"model\"");
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    CHECK(j != NULL, "pk bench --json printed no JSON object: %s", out);
    if (!j) return;
    const char *keys[] = {"prompt_len",     "gen",           "generated",         "steps",         "prefill_steps",
                          "decode_steps",   "median_context",      "decode_ms_median",  "decode_ms_mean", "decode_ms_min",
                          "decode_ms_p90",  "prefill_ms",    "weight_bytes",      "bytes_per_token", "achieved_GBps",
                          "copy_bandwidth_GBps", "floor_ms", "pct_of_floor",      "workers"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK(num(j, keys[i]) >= 0, "pk bench --json: '%s' missing or negative", keys[i]);
    double med = num(j, "decode_ms_median");
    CHECK(med > 0 && num(j, "floor_ms") > 0 && num(j, "copy_bandwidth_GBps") > 0 && num(j, "achieved_GBps") > 0,
          "median %g ms, floor %g ms", med, num(j, "floor_ms"));
    CHECK(num(j, "decode_ms_min") <= med && med <= num(j, "decode_ms_p90") && num(j, "decode_ms_mean") > 0,
          "min %g, median %g, p90 %g", num(j, "decode_ms_min"), med, num(j, "decode_ms_p90"));
    CHECK(num(j, "prompt_len") == 32 && num(j, "gen") == 16 && num(j, "prefill_steps") == 1 && num(j, "prefill_ms") > 0,
          "prompt %g, prefill steps %g", num(j, "prompt_len"), num(j, "prefill_steps"));
    CHECK(num(j, "decode_steps") == num(j, "generated") - 1 && num(j, "steps") == num(j, "generated"),
          "%g decode steps for %g tokens in %g steps", num(j, "decode_steps"), num(j, "generated"), num(j, "steps"));
    CHECK(num(j, "bytes_per_token") > num(j, "weight_bytes") && num(j, "weight_bytes") > 1e6, "bytes %g, weights %g",
          num(j, "bytes_per_token"), num(j, "weight_bytes"));
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(j, "memory");
    CHECK(cJSON_IsObject(mem) && num(mem, "weights_bytes") > 0 && num(mem, "kv_cache_bytes") > 0 &&
              cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(mem, "on_device")),
          "memory object");
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "decode_step_ms");
    CHECK(cJSON_IsArray(steps) && cJSON_GetArraySize(steps) == (int)num(j, "decode_steps"), "decode_step_ms");
    const cJSON *psteps = cJSON_GetObjectItemCaseSensitive(j, "prefill_step_ms");
    const cJSON *prows = cJSON_GetObjectItemCaseSensitive(j, "prefill_step_rows");
    CHECK(cJSON_IsArray(psteps) && cJSON_GetArraySize(psteps) == (int)num(j, "prefill_steps") && cJSON_IsArray(prows) &&
              cJSON_GetArraySize(prows) == (int)num(j, "prefill_steps") &&
              cJSON_GetArrayItem(prows, 0)->valueint == 32,
          "prefill_step_ms / prefill_step_rows");
    const cJSON *be = cJSON_GetObjectItemCaseSensitive(j, "backend");
    CHECK(cJSON_IsString(be) && !strcmp(be->valuestring, "cpu"), "backend");
    cJSON_Delete(j);

    /* --trace: the measured run's tasks (the warm-up's trace is overwritten), each naming its
     * layer's output; bench/trace_summary.py reads it when python3 is there */
    char trace[64], cmd[256];
    snprintf(trace, sizeof trace, "/tmp/pk_bench_trace.%d.json", (int)getpid());
    snprintf(cmd, sizeof cmd, "bench --model models/pk-tiny --gen 6 --context 20 --threads 2 --trace %s", trace);
    rc = run_pk(cmd, out, sizeof out);
    CHECK(rc == 0, "pk bench --trace (exit %d): %s", rc, out);
    FILE *tf = fopen(trace, "rb");
    static char ttext[1 << 22];
    size_t tn = tf ? fread(ttext, 1, sizeof ttext - 1, tf) : 0;
    ttext[tn] = '\0';
    if (tf) fclose(tf);
    cJSON *tj = cJSON_Parse(ttext);
    int max_step = 0, named = 0, events = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(tj, "traceEvents")) {
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
        if (!args) continue;
        events++;
        int st = (int)num(args, "step");
        if (st > max_step) max_step = st;
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(args, "out");
        named += cJSON_IsString(o) && strstr(o->valuestring, "qkv") != NULL;
    }
    /* 20 prompt tokens in one step, then 6 tokens: 6 steps; the warm-up ran 4 */
    CHECK(tj && events > 0 && max_step == 6 && named > 0, "trace of the measured run: %d events, last step %d, %d naming qkv",
          events, max_step, named);
    cJSON_Delete(tj);
    if (system("python3 -c 'import json' >/dev/null 2>&1") == 0) {
        int st = run_script("trace_summary.py", trace, out, sizeof out);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "attention>") && strstr(out, "step (first start") &&
                  strstr(out, "end+") && strstr(out, "step to step over all"),
              "trace_summary.py: %s", out);
        st = run_script("trace_ends.py", trace, out, sizeof out);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "attention>") && strstr(out, "2nd") &&
                  strstr(out, "steps 4..6"),
              "trace_ends.py: %s", out);
    }
    unlink(trace);

    /* the table, --context, and errors (one line each) */
    rc = run_pk("bench --model models/pk-tiny --gen 4 --context 40 --threads 2", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "median") && strstr(out, "floor") && strstr(out, "prompt        40 random tokens"),
          "pk bench table (exit %d): %s", rc, out);
    rc = run_pk("bench --model models/pk-tiny --context 40 --prompt-len 32", out, sizeof out);
    CHECK(rc == 1 && strstr(out, "not both"), "--context with --prompt-len (exit %d): %s", rc, out);
    /* --batch: N requests of the same prompt length decode together; the timed steps carry N rows */
    rc = run_pk("bench --model models/pk-tiny --gen 6 --context 20 --batch 3 --threads 2 --json", out, sizeof out);
    json = strstr(out, "{\"model\"");
    j = json && rc == 0 ? cJSON_Parse(json) : NULL;
    CHECK(j && num(j, "batch") == 3 && num(j, "generated") == 18 && num(j, "decode_steps") >= 1 &&
              /* both printed with 3 and 6 decimals: the rounding, not timing, bounds the difference */
              fabs(num(j, "decode_tokens_per_s") - 3e3 / num(j, "decode_ms_median")) < 1e-3 + 1e-4 * num(j, "decode_tokens_per_s"),
          "pk bench --batch 3 (exit %d): %s", rc, out);
    if (j) {
        /* the floor counts the KV of all three requests */
        const double kv = num(j, "kv_bytes_per_position") * num(j, "median_context") * 3;
        CHECK(fabs(num(j, "bytes_per_token") - num(j, "weight_bytes") - kv) < 1e-6 * kv + 1, "batch bytes %g, weights %g, kv %g",
              num(j, "bytes_per_token"), num(j, "weight_bytes"), kv);
        cJSON_Delete(j);
    }
    rc = run_pk("bench --model models/pk-tiny --batch 9 --step-tokens 8", out, sizeof out);
    CHECK(rc == 1 && strstr(out, "--step-tokens 8 is less than --batch 9"), "--batch over --step-tokens (exit %d): %s", rc, out);
    rc = run_pk("bench --model models/pk-tiny --gen 1", out, sizeof out);
    CHECK(rc == 1 && strstr(out, "--gen"), "--gen 1 (exit %d): %s", rc, out);
    rc = run_pk("bench --model models/pk-tiny --context 500 --gen 64", out, sizeof out);
    CHECK(rc == 1 && strstr(out, "max_position_embeddings"), "past the model's positions (exit %d): %s", rc, out);
}

int main(void) {
    setenv("PK_COPY_PROBE_MB", "64", 1);
    const char *b = getenv("BUILD");
    snprintf(pk_bin, sizeof pk_bin, "%s/pk", b && *b ? b : "build");
    uint64_t seed = 42;
    for (int i = 0; i < V * H; i++) {
        w_embed[i] = bf16(check_rand_f32(&seed));
        w_head[i] = bf16(check_rand_f32(&seed));
    }
    for (int i = 0; i < H; i++) w_norm[i] = bf16(1.0f);
    test_api();
    test_step_times(PK_SCHED_STATIC, 1);
    test_step_times(PK_SCHED_STATIC, 3);
    test_step_times(PK_SCHED_DYNAMIC, 3);
    test_bench_cli();
    return check_report("bench");
}
