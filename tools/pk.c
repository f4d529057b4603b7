// SPDX-License-Identifier: Apache-2.0
/* pk.c — the pk command: generate, bench, tokenize, detokenize, inspect, compile.
 *
 * Uses only pk.h. Every error ends the program with exit status 1 and one line on stderr
 * ("pk: <reason>"); usage errors exit with 2.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pk.h"

#define MAX_IDS 65536

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("pk: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void usage(void) {
    fputs("usage: pk generate [--model DIR] [--prompt TEXT | --prompt-ids 1,2,3] [--max-tokens N]\n"
          "                   [--backend cpu|cuda] [--threads N] [--chat] [--print-ids] [--trace FILE]\n"
          "                   [--step-tokens T] [--kv-splits S] [--logits FILE] [GRAPH OPTIONS]\n"
          "       pk bench [--model DIR] [--backend cpu|cuda] [--prompt-len N | --context N] [--gen N]\n"
          "                [--threads N] [--step-tokens T] [--kv-splits S] [--max-seq N] [--seed S] [--json]\n"
          "                [--trace FILE] [GRAPH OPTIONS]\n"
          "       pk tokenize [--model DIR] TEXT\n"
          "       pk detokenize [--model DIR] ID...\n"
          "       pk inspect [--model DIR] [--task-graph FILE] [--threads N] [GRAPH OPTIONS]\n"
          "       pk compile [--model DIR] --out DIR [--arch sm_90a] [--threads N] [GRAPH OPTIONS]\n"
          "Graph options (how the model's graph is built; auto: pk's rule for the shape and backend):\n"
          "  --fused-mlp auto|on|off   each MLP but the last as one layer, its sum in an accumulator\n"
          "  --lm-argmax auto|on|off   the LM head and the argmax as one layer\n"
          "Without --model, pk uses the small model that ships with it (models/pk-tiny), or $PK_MODEL.\n",
          stderr);
    exit(2);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* models/pk-tiny next to the binary's build folder, else relative to the working directory. */
static const char *default_model_dir(void) {
    static char path[PATH_MAX + 32];
    const char *env = getenv("PK_MODEL");
    if (env && *env) return env;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/../models/pk-tiny", exe);
            if (is_dir(path)) return path;
        }
    }
    return "models/pk-tiny";
}

/* auto|on|off → -1 / 1 / 0 (pk_model_options). */
static int parse_auto_on_off(const char *s, const char *what) {
    if (!strcmp(s, "auto")) return -1;
    if (!strcmp(s, "on")) return 1;
    if (!strcmp(s, "off")) return 0;
    die("%s '%s' is not auto, on or off", what, s);
}

static long parse_long(const char *s, const char *what, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) die("%s '%s' is not a number in [%ld, %ld]", what, s, lo, hi);
    return v;
}

typedef struct options {
    const char *model, *prompt, *prompt_ids, *trace, *task_graph, *out, *arch, *logits;
    const char *backend;
    int max_tokens, threads, chat, print_ids, step_tokens, kv_splits;
    int prompt_len, gen, context, max_seq, json; /* bench */
    long seed;
    pk_model_options model_opts; /* --fused-mlp, --lm-argmax */
    int nargs;
    char **args; /* positional arguments */
} options;

static void parse(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 64;
    o->gen = 128;
    o->seed = 1234;
    o->backend = "cpu";
    o->model_opts = pk_model_options_default();
    o->args = calloc((size_t)argc + 1, sizeof *o->args);
    if (!o->args) die("out of memory");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
#define VALUE() (i + 1 < argc ? argv[++i] : (die("%s needs a value", a), ""))
        if (!strcmp(a, "--model")) o->model = VALUE();
        else if (!strcmp(a, "--prompt")) o->prompt = VALUE();
        else if (!strcmp(a, "--prompt-ids")) o->prompt_ids = VALUE();
        else if (!strcmp(a, "--max-tokens")) o->max_tokens = (int)parse_long(VALUE(), "--max-tokens", 1, 1 << 20);
        else if (!strcmp(a, "--backend")) o->backend = VALUE();
        else if (!strcmp(a, "--threads")) o->threads = (int)parse_long(VALUE(), "--threads", 1, 1024);
        else if (!strcmp(a, "--trace")) o->trace = VALUE();
        else if (!strcmp(a, "--logits")) o->logits = VALUE();
        else if (!strcmp(a, "--step-tokens")) o->step_tokens = (int)parse_long(VALUE(), "--step-tokens", 1, 65536);
        else if (!strcmp(a, "--kv-splits")) o->kv_splits = (int)parse_long(VALUE(), "--kv-splits", 0, 4096);
        else if (!strcmp(a, "--prompt-len")) o->prompt_len = (int)parse_long(VALUE(), "--prompt-len", 1, 1 << 24);
        else if (!strcmp(a, "--gen")) o->gen = (int)parse_long(VALUE(), "--gen", 2, 1 << 24);
        else if (!strcmp(a, "--context")) o->context = (int)parse_long(VALUE(), "--context", 1, 1 << 24);
        else if (!strcmp(a, "--max-seq")) o->max_seq = (int)parse_long(VALUE(), "--max-seq", 2, 1 << 24);
        else if (!strcmp(a, "--seed")) o->seed = parse_long(VALUE(), "--seed", 0, LONG_MAX);
        else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--task-graph")) o->task_graph = VALUE();
        else if (!strcmp(a, "--out")) o->out = VALUE();
        else if (!strcmp(a, "--arch")) o->arch = VALUE();
        else if (!strcmp(a, "--fused-mlp")) o->model_opts.fused_mlp = parse_auto_on_off(VALUE(), "--fused-mlp");
        else if (!strcmp(a, "--lm-argmax")) o->model_opts.lm_head_argmax = parse_auto_on_off(VALUE(), "--lm-argmax");
        else if (!strcmp(a, "--chat")) o->chat = 1;
        else if (!strcmp(a, "--print-ids")) o->print_ids = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) usage();
        else if (a[0] == '-' && a[1] == '-') die("unknown option %s (pk --help lists them)", a);
        else o->args[o->nargs++] = argv[i];
#undef VALUE
    }
    if (!o->model) o->model = default_model_dir();
}

static pk_tokenizer *load_tokenizer(const char *model_dir, int required) {
    char path[PATH_MAX + 32], err[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", model_dir);
    if (access(path, F_OK) != 0) {
        if (required) die("%s has no tokenizer.json (use --prompt-ids)", model_dir);
        return NULL;
    }
    pk_tokenizer *t = pk_tokenizer_load(path, err, sizeof err);
    if (!t) die("%s", err);
    return t;
}

/* "1,2,3" or "1 2 3" → ids. */
static int parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    const char *p = s;
    while (*p) {
        while (*p == ',' || *p == ' ') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) die("bad token id near '%.20s' in '%s'", p, s);
        if (n == cap) die("more than %d token ids", cap);
        ids[n++] = (int32_t)v;
        p = end;
        if (*p && *p != ',' && *p != ' ') die("bad token id near '%.20s' in '%s'", p, s);
    }
    if (n == 0) die("no token ids in '%s'", s);
    return n;
}

static int encode_or_die(pk_tokenizer *t, const char *text, int32_t *ids, int cap) {
    int n = pk_tokenizer_encode(t, text, strlen(text), ids, cap);
    if (n < 0) die("tokenizer: %s", pk_tokenizer_error(t));
    if (n > cap) die("the prompt has %d tokens; pk takes at most %d", n, cap);
    return n;
}

typedef struct stream {
    pk_decoder *dec;
    int print_text;
    int count;
    double t_first, t_last;
    char buf[1 << 16]; /* > 64 bytes + the longest token: pk_decoder_push never runs short */
} stream;

/* Appends rows [0, nrows) of the logits tensor to f as float32. 0 on success. */
static int write_logits(pk_kernel *k, pk_tensor *logits, int nrows, FILE *f) {
    int64_t T = pk_tensor_dim(logits, 0), V = pk_tensor_dim(logits, 1);
    uint16_t *bf = malloc((size_t)(T * V) * sizeof *bf);
    float *row = malloc((size_t)V * sizeof *row);
    int err = !bf || !row || nrows > T || pk_tensor_read(k, logits, bf, (size_t)(T * V) * sizeof *bf) != PK_OK;
    for (int t = 0; !err && t < nrows; t++) {
        for (int64_t v = 0; v < V; v++) {
            uint32_t u = (uint32_t)bf[t * V + v] << 16;
            memcpy(&row[v], &u, sizeof u);
        }
        err = fwrite(row, sizeof *row, (size_t)V, f) != (size_t)V;
    }
    free(bf);
    free(row);
    return err;
}

/* --logits: the teacher-forced logits of every prompt position, float32 [n, vocab]. With
 * --step-tokens 1 each position is the last row of its own run over the prompt's prefix, so every
 * row comes from a one-token step: the decode path (on the GPU the staged decode attention);
 * otherwise from one step over the whole prompt (prefill). */
static void dump_logits(pk_kernel *k, pk_tensor *logits, const int32_t *ids, int n, int one_row_steps,
                        const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write the logits to '%s'", path);
    int err = 0;
    for (int i = one_row_steps ? 1 : n; !err && i <= n; i++) {
        int32_t first;
        pk_request one = {.prompt = ids, .prompt_len = i, .max_new_tokens = 1, .output = &first};
        if (pk_run(k, &one, 1, NULL, NULL) != PK_OK) die("%s", pk_kernel_error(k));
        err = write_logits(k, logits, one_row_steps ? 1 : n, f);
    }
    if (fclose(f) != 0) err = 1;
    if (err) die("cannot write the logits to '%s'", path);
}

static void on_token(void *user, int request, int32_t token, int row) {
    stream *s = user;
    (void)request, (void)row;
    s->t_last = now_s();
    if (s->count++ == 0) s->t_first = s->t_last;
    if (s->print_text && s->dec) {
        int n = pk_decoder_push(s->dec, token, s->buf, sizeof s->buf);
        if (n < 0) die("token id %d cannot be decoded by the tokenizer", (int)token);
        if (n > 0) {
            fwrite(s->buf, 1, (size_t)n, stdout);
            fflush(stdout);
        }
    }
}

static pk_config make_config(const options *o, int prompt_len, const pk_model_info *info) {
    pk_config c = pk_config_default();
    if (!strcmp(o->backend, "cuda")) c.backend = PK_BACKEND_CUDA;
    else if (strcmp(o->backend, "cpu")) die("unknown backend '%s' (cpu or cuda)", o->backend);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    c.num_workers = o->threads ? o->threads : (cores > 0 ? (int)cores : 1);
    if (c.backend == PK_BACKEND_CUDA && !o->threads) c.num_workers = 0; /* the backend picks one per SM */
    c.max_requests = 1;
    c.max_tokens_per_step = o->step_tokens ? o->step_tokens : 64;
    c.attention_kv_splits = o->kv_splits; /* 0: pk picks */
    int64_t need = (int64_t)prompt_len + o->max_tokens;
    if (info && need > info->max_position_embeddings) need = info->max_position_embeddings;
    c.max_seq_length = need < 2 ? 2 : (int)need;
    c.trace_path = o->trace;
    return c;
}

static pk_model_info read_info(const char *dir) {
    char err[1024];
    pk_model_info info;
    if (pk_model_read_info(dir, &info, err, sizeof err) != PK_OK) die("%s", err);
    return info;
}

static pk_model *load_model(const options *o, const pk_config *c) {
    char err[1024];
    pk_model *m = pk_model_load_with(o->model, c, &o->model_opts, err, sizeof err);
    if (!m) die("%s", err);
    return m;
}

static int cmd_generate(options *o) {
    if (!!o->prompt == !!o->prompt_ids) die("generate needs exactly one of --prompt TEXT and --prompt-ids 1,2,3");
    pk_tokenizer *tok = load_tokenizer(o->model, o->prompt != NULL);
    int32_t *ids = malloc(MAX_IDS * sizeof *ids);
    if (!ids) die("out of memory");
    int n;
    if (o->prompt_ids) {
        if (o->chat) die("--chat needs --prompt TEXT");
        n = parse_ids(o->prompt_ids, ids, MAX_IDS);
    } else if (o->chat) {
        char *wrapped = pk_tokenizer_chat_prompt(tok, o->prompt);
        if (!wrapped) die("--chat: %s", pk_tokenizer_error(tok));
        n = encode_or_die(tok, wrapped, ids, MAX_IDS);
        free(wrapped);
    } else {
        n = encode_or_die(tok, o->prompt, ids, MAX_IDS);
    }
    /* The model's limits come from config.json; they size the run's config. */
    pk_model_info info = read_info(o->model);
    if (o->prompt && !o->chat && !strcmp(info.architecture, "LlamaForCausalLM") && info.bos_token_id >= 0 &&
        ids[0] != info.bos_token_id) {
        if (n == MAX_IDS) die("the prompt has too many tokens");
        memmove(ids + 1, ids, (size_t)n * sizeof *ids); /* Llama-3 expects <|begin_of_text|> */
        ids[0] = (int32_t)info.bos_token_id;
        n++;
    }
    if (n >= info.max_position_embeddings)
        die("the prompt has %d tokens; the model takes at most %d (max_position_embeddings %d, one "
            "position kept for a generated token)", n, info.max_position_embeddings - 1, info.max_position_embeddings);
    pk_config c = make_config(o, n, &info);
    if (o->logits && n > c.max_tokens_per_step && c.max_tokens_per_step != 1)
        die("--logits needs the prompt in one step (%d tokens, at most %d), or --step-tokens 1", n,
            c.max_tokens_per_step);
    pk_model *m = load_model(o, &c);
    pk_kernel *k = pk_model_kernel(m);
    double t0 = now_s();
    if (pk_compile(k, NULL) != PK_OK) die("%s", pk_kernel_error(k));
    int32_t *out = malloc((size_t)o->max_tokens * sizeof *out);
    if (!out) die("out of memory");
    pk_request req = {.prompt = ids, .prompt_len = n, .max_new_tokens = o->max_tokens, .output = out};
    stream s = {.dec = tok ? pk_decoder_new(tok) : NULL, .print_text = !o->print_ids && tok != NULL};
    if (!o->print_ids && !tok) s.print_text = 0;
    if (s.print_text && o->prompt) {
        fputs(o->chat ? "" : o->prompt, stdout);
        fflush(stdout);
    }
    if (o->logits) dump_logits(k, pk_model_logits(m), ids, n, c.max_tokens_per_step == 1, o->logits);
    double t_run = now_s();
    if (pk_run(k, &req, 1, on_token, &s) != PK_OK) die("%s", pk_kernel_error(k));
    if (s.print_text) {
        int len = pk_decoder_flush(s.dec, s.buf, sizeof s.buf);
        if (len > 0) fwrite(s.buf, 1, (size_t)len, stdout);
        fputc('\n', stdout);
    }
    if (o->print_ids || !tok) {
        for (int i = 0; i < req.num_output; i++) printf("%s%d", i ? " " : "", out[i]);
        printf("\n");
    }
    fflush(stdout);
    double prefill_ms = (s.t_first - t_run) * 1e3;
    double per_tok = req.num_output > 1 ? (s.t_last - s.t_first) * 1e3 / (req.num_output - 1) : 0;
    fprintf(stderr, "pk: %s backend, %d workers: prompt %d tokens, generated %d (%s), prefill %.1f ms, %.2f ms/token, compile %.0f ms\n",
            o->backend, pk_kernel_config(k)->num_workers, n, req.num_output,
            req.finish == PK_FINISH_EOS ? "eos" : "length", prefill_ms, per_tok, (t_run - t0) * 1e3);
    pk_decoder_free(s.dec);
    pk_tokenizer_free(tok);
    pk_model_free(m);
    free(out);
    free(ids);
    return 0;
}

/* ---- pk bench ---------------------------------------------------------------------------- */

/* s as a JSON string literal: quotes, backslashes and control characters escaped. */
static void write_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

/* Whether the model's graph has a layer of this kind: what the graph options' auto resolved to. */
static int has_layer_kind(const pk_kernel *k, const char *kind) {
    pk_graph_stats st;
    if (pk_kernel_stats(k, &st) != PK_OK) return 0;
    for (int l = 0; l < st.num_layers; l++) {
        pk_layer_info li;
        if (pk_kernel_layer(k, l, &li) == PK_OK && !strcmp(li.kind, kind)) return 1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Decode latency of one request: a seeded random prompt of --context (or --prompt-len) tokens,
 * a warm-up run, then --gen tokens. Per-step times come from the runtime (pk_run_step_times:
 * CLOCK_MONOTONIC on the CPU, %globaltimer inside the GPU kernel), and only steps without prompt
 * rows count as decode. The floor is the bytes one decode step must read (weights + the KV cache
 * at the median decode context) over the copy bandwidth measured in this process. */
static int cmd_bench(options *o) {
    if (o->context && o->prompt_len && o->context != o->prompt_len)
        die("--context N is the bench's prompt length (the decode then reads N + 1 ... positions): give "
            "--prompt-len or --context, not both");
    int P = o->context ? o->context : o->prompt_len ? o->prompt_len : 32, gen = o->gen;
    pk_model_info info = read_info(o->model);
    int64_t need = (int64_t)P + gen;
    if (need > info.max_position_embeddings)
        die("a prompt of %d tokens plus --gen %d needs %lld positions; the model takes %d (max_position_embeddings)", P,
            gen, (long long)need, info.max_position_embeddings);
    if (o->max_seq && o->max_seq < need) die("--max-seq %d is less than the prompt plus --gen (%lld)", o->max_seq, (long long)need);
    if (o->max_seq > info.max_position_embeddings)
        die("--max-seq %d exceeds the model's max_position_embeddings %d", o->max_seq, info.max_position_embeddings);
    o->max_tokens = gen;
    pk_config c = make_config(o, P, &info);
    c.max_seq_length = o->max_seq ? o->max_seq : (int)need;
    pk_model *m = load_model(o, &c);
    info = *pk_model_get_info(m); /* now with the weight bytes the loaded graph reads */
    pk_kernel *k = pk_model_kernel(m);
    double t0 = now_s();
    if (pk_compile(k, NULL) != PK_OK) die("%s", pk_kernel_error(k));
    double compile_ms = (now_s() - t0) * 1e3;

    int32_t *ids = malloc((size_t)P * sizeof *ids), *out = malloc((size_t)gen * sizeof *out);
    if (!ids || !out) die("out of memory");
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)o->seed;
    for (int i = 0; i < P; i++) { /* xorshift64* */
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        ids[i] = (int32_t)((x * 0x2545F4914F6CDD1Dull >> 33) % (uint64_t)info.vocab_size);
    }
    /* warm-up (first launch, caches, clocks) on the prompt's first 16 tokens (a full prefill of a
     * long context would double the bench's time for nothing), then the measured run */
    pk_request warm = {.prompt = ids, .prompt_len = P < 16 ? P : 16, .max_new_tokens = gen < 4 ? gen : 4, .output = out};
    if (pk_run(k, &warm, 1, NULL, NULL) != PK_OK) die("%s", pk_kernel_error(k));
    pk_request req = {.prompt = ids, .prompt_len = P, .max_new_tokens = gen, .output = out};
    double t_run = now_s();
    if (pk_run(k, &req, 1, NULL, NULL) != PK_OK) die("%s", pk_kernel_error(k));
    double run_ms = (now_s() - t_run) * 1e3;

    pk_step_times st;
    if (pk_run_step_times(k, &st) != PK_OK || st.num_timed != st.num_steps)
        die("the runtime timed %lld of %lld steps", (long long)st.num_timed, (long long)st.num_steps);
    double *dec = malloc((size_t)(st.num_timed ? st.num_timed : 1) * sizeof *dec);
    if (!dec) die("out of memory");
    int ndec = 0, nprefill = 0;
    double prefill_ms = 0, sum = 0;
    for (int64_t i = 0; i < st.num_timed; i++) {
        if (st.prompt_rows[i] > 0) {
            prefill_ms += st.ms[i];
            nprefill++;
        } else {
            dec[ndec++] = st.ms[i];
            sum += st.ms[i];
        }
    }
    if (ndec == 0)
        die("no decode step to time: the model produced %d token(s) and stopped (%s); try another --seed", req.num_output,
            req.finish == PK_FINISH_EOS ? "EOS" : "length");
    double *sorted = malloc((size_t)ndec * sizeof *sorted);
    if (!sorted) die("out of memory");
    memcpy(sorted, dec, (size_t)ndec * sizeof *sorted);
    qsort(sorted, (size_t)ndec, sizeof *sorted, cmp_double);
    double median = ndec % 2 ? sorted[ndec / 2] : (sorted[ndec / 2 - 1] + sorted[ndec / 2]) / 2;
    double mean = sum / ndec, mn = sorted[0], p90 = sorted[(ndec * 9 + 9) / 10 - 1]; /* nearest rank */

    /* Bytes a decode step must move: the weights it reads, and K and V (bf16) of every position
     * up to its own; decode step j of the prompt of P tokens sits at position P + j. */
    double ctx = P + 1 + (ndec - 1) / 2.0;
    double kv_per_pos = (double)info.num_layers * 2 * info.num_kv_heads * info.head_dim * 2;
    double bytes = (double)info.weight_bytes + kv_per_pos * ctx;
    pk_memory_stats mem;
    if (pk_kernel_memory(k, &mem) != PK_OK) die("%s", pk_kernel_error(k));
    double bw = 0;
    if (pk_device_copy_bandwidth(k, &bw) != PK_OK) die("%s", pk_kernel_error(k));
    int cuda = pk_kernel_config(k)->backend == PK_BACKEND_CUDA;
    char bw_what[160], size[32];
    const char *probe_mb = getenv("PK_COPY_PROBE_MB"); /* pk.h: the probe's buffer size */
    if (probe_mb && *probe_mb) snprintf(size, sizeof size, "%s MiB", probe_mb);
    else snprintf(size, sizeof size, "%s", cuda ? "2 GiB" : "1 GiB");
    snprintf(bw_what, sizeof bw_what,
             cuda ? "GPU device-to-device cudaMemcpy of %s, read + write"
                  : "CPU memcpy of %s between host buffers, one thread, read + write",
             size);
    double floor_ms = bytes / bw * 1e3, gbps = bytes / (median / 1e3) / 1e9;
    const char *finish = req.finish == PK_FINISH_EOS ? "eos" : "length";
    int workers = pk_kernel_config(k)->num_workers, T = pk_kernel_config(k)->max_tokens_per_step;
    const int fused_mlp = has_layer_kind(k, "rmsnorm_swiglu_down");
    const int lm_argmax = has_layer_kind(k, "rmsnorm_linear_argmax");

    if (o->json) {
        printf("{\"model\": ");
        write_json_string(stdout, o->model);
        printf(", \"architecture\": ");
        write_json_string(stdout, info.architecture);
        printf(", \"backend\": \"%s\", \"workers\": %d, \"step_tokens\": %d, \"kv_splits\": %d, \"fused_mlp\": %s, "
               "\"lm_argmax\": %s, \"max_seq\": %d, \"seed\": %ld,\n",
               cuda ? "cuda" : "cpu", workers, T, info.attention_kv_splits, fused_mlp ? "true" : "false",
               lm_argmax ? "true" : "false", c.max_seq_length, o->seed);
        printf(" \"prompt_len\": %d, \"gen\": %d, \"generated\": %d, \"finish\": \"%s\", \"steps\": %lld, "
               "\"prefill_steps\": %d, \"decode_steps\": %d, \"median_context\": %.1f,\n",
               P, gen, req.num_output, finish, (long long)st.num_steps, nprefill, ndec, ctx);
        printf(" \"decode_ms_median\": %.6f, \"decode_ms_mean\": %.6f, \"decode_ms_min\": %.6f, \"decode_ms_p90\": %.6f, "
               "\"prefill_ms\": %.6f, \"run_ms\": %.3f, \"compile_ms\": %.1f,\n",
               median, mean, mn, p90, prefill_ms, run_ms, compile_ms);
        printf(" \"weight_bytes\": %lld, \"kv_bytes_per_position\": %.0f, \"bytes_per_token\": %.0f, "
               "\"achieved_GBps\": %.3f,\n",
               (long long)info.weight_bytes, kv_per_pos, bytes, gbps);
        printf(" \"copy_bandwidth_GBps\": %.3f, \"copy_bandwidth_source\": \"%s\", \"floor_ms\": %.6f, "
               "\"pct_of_floor\": %.2f,\n",
               bw / 1e9, bw_what, floor_ms, 100 * floor_ms / median);
        printf(" \"memory\": {\"on_device\": %s, \"weights_bytes\": %lld, \"kv_cache_bytes\": %lld, \"workspace_bytes\": %lld},\n",
               mem.on_device ? "true" : "false", (long long)mem.weight_bytes, (long long)mem.kv_cache_bytes,
               (long long)mem.workspace_bytes);
        printf(" \"decode_step_ms\": [");
        for (int i = 0; i < ndec; i++) printf("%s%.4f", i ? ", " : "", dec[i]);
        printf("]}\n");
    } else {
        printf("pk bench: %s (%s), %s backend, %d workers, T = %d, attention split %d, fused MLP %s, LM head + argmax "
               "as %s\n",
               o->model, info.architecture, cuda ? "cuda" : "cpu", workers, T, info.attention_kv_splits,
               fused_mlp ? "on" : "off", lm_argmax ? "one layer" : "two layers");
        printf("prompt        %d random tokens (seed %ld): %d prefill step%s, %.3f ms\n", P, o->seed, nprefill,
               nprefill == 1 ? "" : "s", prefill_ms);
        printf("generated     %d of %d tokens (%s); %d decode steps at context %d .. %d\n", req.num_output, gen, finish,
               ndec, P + 1, P + ndec);
        printf("decode        median %.4f ms/token   mean %.4f   min %.4f   p90 %.4f\n", median, mean, mn, p90);
        printf("bytes/token   %.2f MB: weights %.2f MB + KV %.2f MB (median context %.1f)\n", bytes / 1e6,
               (double)info.weight_bytes / 1e6, kv_per_pos * ctx / 1e6, ctx);
        printf("achieved      %.1f GB/s at the median\n", gbps);
        printf("copy b/w      %.1f GB/s (%s)\n", bw / 1e9, bw_what);
        printf("floor         %.4f ms/token; pk at %.1f %% of the floor\n", floor_ms, 100 * floor_ms / median);
        printf("memory        %s: weights %.1f MB, KV cache %.1f MB, workspace %.1f MB\n",
               mem.on_device ? "GPU" : "host", (double)mem.weight_bytes / 1e6, (double)mem.kv_cache_bytes / 1e6,
               (double)mem.workspace_bytes / 1e6);
        if (req.num_output < gen) printf("note          the model stopped at EOS; try another --seed for a full run\n");
    }
    fflush(stdout);
    free(sorted);
    free(dec);
    free(ids);
    free(out);
    pk_model_free(m);
    return 0;
}

static int cmd_tokenize(options *o) {
    if (o->nargs != 1) die("tokenize takes one TEXT argument");
    pk_tokenizer *t = load_tokenizer(o->model, 1);
    int32_t *ids = malloc(MAX_IDS * sizeof *ids);
    if (!ids) die("out of memory");
    int n = encode_or_die(t, o->args[0], ids, MAX_IDS);
    for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
    free(ids);
    pk_tokenizer_free(t);
    return 0;
}

static int cmd_detokenize(options *o) {
    if (o->nargs < 1) die("detokenize takes token ids");
    pk_tokenizer *t = load_tokenizer(o->model, 1);
    pk_decoder *d = pk_decoder_new(t);
    if (!d) die("out of memory");
    char buf[1 << 16];
    for (int i = 0; i < o->nargs; i++) {
        long id = parse_long(o->args[i], "token id", 0, INT32_MAX);
        int n = pk_decoder_push(d, (int32_t)id, buf, sizeof buf);
        if (n < 0) die("token id %ld is outside the vocabulary [0, %d)", id, pk_tokenizer_vocab_size(t));
        fwrite(buf, 1, (size_t)n, stdout);
    }
    int n = pk_decoder_flush(d, buf, sizeof buf);
    if (n > 0) fwrite(buf, 1, (size_t)n, stdout);
    printf("\n");
    pk_decoder_free(d);
    pk_tokenizer_free(t);
    return 0;
}

static int cmd_inspect(options *o) {
    pk_config c = make_config(o, 1, NULL);
    c.max_seq_length = 2;
    c.backend = PK_BACKEND_CPU;
    pk_model *m = load_model(o, &c);
    const pk_model_info *i = pk_model_get_info(m);
    pk_kernel *k = pk_model_kernel(m);
    if (pk_compile(k, NULL) != PK_OK) die("%s", pk_kernel_error(k));
    const char *path = o->task_graph ? o->task_graph : "task_graph.json";
    if (pk_write_task_graph(k, path) != PK_OK) die("%s", pk_kernel_error(k));
    pk_graph_stats st;
    pk_kernel_stats(k, &st);
    printf("model        %s\n", o->model);
    printf("architecture %s\n", i->architecture);
    printf("layers       %d decoder layers, hidden %d, intermediate %d, vocab %d\n", i->num_layers, i->hidden_size,
           i->intermediate_size, i->vocab_size);
    printf("attention    %d query heads, %d KV heads, head_dim %d%s\n", i->num_q_heads, i->num_kv_heads, i->head_dim,
           i->has_qk_norm ? ", q/k norm" : "");
    printf("embeddings   %s\n", i->tie_word_embeddings ? "tied" : "untied");
    printf("weights read %.1f MB per decode step\n", (double)i->weight_bytes / 1e6);
    printf("graph        fused MLP %s, LM head + argmax as %s, attention split %d\n",
           has_layer_kind(k, "rmsnorm_swiglu_down") ? "on" : "off",
           has_layer_kind(k, "rmsnorm_linear_argmax") ? "one layer" : "two layers", i->attention_kv_splits);
    printf("task graph   %d graph layers, %d tasks, %d events, %d workers (written to %s)\n", st.num_layers,
           st.num_tasks, st.num_events, st.num_workers, path);
    printf("\n%-8s %-32s %6s %10s\n", "layer", "kind", "grid", "first task");
    for (int l = 0; l < st.num_layers; l++) {
        pk_layer_info li;
        if (pk_kernel_layer(k, l, &li) == PK_OK)
            printf("%-8.*s %-32s %6d %10d\n", (int)strcspn(li.name, "."), li.name, li.kind, li.grid, li.first_task);
    }
    pk_model_free(m);
    return 0;
}

static int cmd_compile(options *o) {
    if (!o->out) die("compile needs --out DIR");
    if (o->arch) setenv("PK_CUDA_ARCH", o->arch, 1);
    pk_config c = make_config(o, 1, NULL);
    c.backend = PK_BACKEND_CUDA;
    c.max_seq_length = 2;
    if (!c.num_workers) c.num_workers = 132;
    pk_model *m = load_model(o, &c);
    pk_kernel *k = pk_model_kernel(m);
    pk_compile_options opts = {.output_dir = o->out};
    if (pk_compile(k, &opts) != PK_OK) die("%s", pk_kernel_error(k));
    printf("wrote %s/kernel.cu, %s/task_graph.json and the compiled kernel\n", o->out, o->out);
    pk_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    options o;
    parse(argc - 2, argv + 2, &o);
    const char *cmd = argv[1];
    int rc;
    if (!strcmp(cmd, "generate")) rc = cmd_generate(&o);
    else if (!strcmp(cmd, "bench")) rc = cmd_bench(&o);
    else if (!strcmp(cmd, "tokenize")) rc = cmd_tokenize(&o);
    else if (!strcmp(cmd, "detokenize")) rc = cmd_detokenize(&o);
    else if (!strcmp(cmd, "inspect")) rc = cmd_inspect(&o);
    else if (!strcmp(cmd, "compile")) rc = cmd_compile(&o);
    else if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) usage();
    else die("unknown command '%s' (generate, bench, tokenize, detokenize, inspect, compile)", cmd);
    free(o.args);
    return rc;
}
