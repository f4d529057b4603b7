// SPDX-License-Identifier: Apache-2.0
/* pk.c — the pk command: generate, chat, serve, bench, tokenize, detokenize, inspect, compile, help.
 *
 * Uses only pk.h. Each command takes the options its table row names; an option another command
 * takes, or a stray argument, is an error naming it. Every error ends the program with exit
 * status 1 and one line on stderr ("pk: <reason>"); `pk` alone prints the usage and exits 2.
 * Paths the run will write are checked before it starts; a failed write to stdout exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static int stdout_errno; /* the first failed write to stdout (0: none) */

void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fputs("pk: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void out_write(const void *p, size_t n) {
    if (stdout_errno) return;
    if ((n && fwrite(p, 1, n, stdout) != n) || fflush(stdout) != 0) stdout_errno = errno ? errno : EIO;
}

/* Flushes and closes stdout; 0, or 1 after one line naming the write error. */
static int close_stdout(void) {
    errno = 0;
    if (fflush(stdout) != 0 && !stdout_errno) stdout_errno = errno ? errno : EIO;
    if (ferror(stdout) && !stdout_errno) stdout_errno = EIO;
    if (fclose(stdout) != 0 && !stdout_errno) stdout_errno = errno ? errno : EIO;
    if (!stdout_errno) return 0;
    fprintf(stderr, "pk: cannot write to standard output: %s\n", strerror(stdout_errno));
    return 1;
}

/* ---- commands and options ---------------------------------------------------------------- */

enum {
    C_GENERATE = 1 << 0, C_CHAT = 1 << 1, C_BENCH = 1 << 2, C_TOKENIZE = 1 << 3, C_DETOKENIZE = 1 << 4,
    C_INSPECT = 1 << 5, C_COMPILE = 1 << 6, C_HELP = 1 << 7, C_SERVE = 1 << 8,
    C_ALL = 0x1ff,
    C_RUNS = C_GENERATE | C_CHAT | C_BENCH | C_SERVE,   /* run the model */
    C_GRAPH = C_RUNS | C_INSPECT | C_COMPILE,           /* build its graph */
    C_LOADS = C_RUNS | C_INSPECT,                       /* load the weights on this machine */
};

typedef enum opt_id {
    O_MODEL, O_PROMPT, O_PROMPT_FILE, O_PROMPT_IDS, O_SYSTEM, O_CHAT, O_MAX_TOKENS, O_PRINT_IDS, O_BACKEND,
    O_THREADS, O_STEP_TOKENS, O_KV_SPLITS, O_SPEC_LENGTH, O_SPEC_NGRAM, O_MAX_SEQ, O_TRACE, O_LOGITS, O_PROMPT_LEN, O_CONTEXT, O_GEN, O_BATCH, O_SEED,
    O_JSON, O_TASK_GRAPH, O_OUT, O_ARCH, O_FUSED_MLP, O_LM_ARGMAX, O_CHECK_TENSORS,
    O_HOST, O_PORT, O_API_KEY, O_MAX_REQUESTS, O_TEMPERATURE, O_TOP_K, O_TOP_P, O_MIN_P, O_STOP,
} opt_id;

typedef struct opt_spec {
    const char *name;
    opt_id id;
    const char *arg; /* the value's placeholder, NULL for a flag */
    unsigned cmds;   /* the commands that take it */
    const char *help;
} opt_spec;

static const opt_spec OPTS[] = {
    {"--model", O_MODEL, "DIR", C_ALL & ~C_HELP,
     "model directory (config.json, model.safetensors, tokenizer.json); default $PK_MODEL, else models/pk-tiny"},
    {"--prompt", O_PROMPT, "TEXT", C_GENERATE, "the prompt as text (quote it: --prompt 'In the beginning')"},
    {"--prompt-file", O_PROMPT_FILE, "FILE", C_GENERATE, "the prompt read from FILE (- : standard input), one final newline dropped"},
    {"--prompt-ids", O_PROMPT_IDS, "IDS", C_GENERATE, "the prompt as token ids: 1,2,3 or '1 2 3'"},
    {"--system", O_SYSTEM, "TEXT", C_GENERATE | C_CHAT, "a system prompt, first in the chat template (generate: implies --chat)"},
    {"--chat", O_CHAT, NULL, C_GENERATE, "wrap the prompt in the model's chat template as one user turn"},
    {"--max-tokens", O_MAX_TOKENS, "N", C_GENERATE | C_CHAT, "most tokens to generate (generate: 64; chat: 256 per answer)"},
    {"--print-ids", O_PRINT_IDS, NULL, C_GENERATE, "print the generated token ids instead of the text"},
    {"--backend", O_BACKEND, "cpu|cuda", C_RUNS, "where the model runs (default cpu)"},
    {"--threads", O_THREADS, "N", C_GRAPH, "workers: CPU threads (default one per core), CUDA blocks (default one per SM)"},
    {"--step-tokens", O_STEP_TOKENS, "T", C_RUNS, "most prompt tokens one step carries (default 64; 512 with --backend cuda)"},
    {"--kv-splits", O_KV_SPLITS, "S", C_RUNS, "attention splits over the KV length (default 0: pk picks)"},
    {"--spec-length", O_SPEC_LENGTH, "L", C_RUNS,
     "prompt-lookup speculation: up to L draft tokens a step, taken from earlier text (default 0: off; at most 16)"},
    {"--spec-ngram", O_SPEC_NGRAM, "N", C_RUNS, "tokens the speculation matches to find its drafts (default 3; 1 .. 8)"},
    {"--max-seq", O_MAX_SEQ, "N", C_CHAT | C_BENCH | C_SERVE,
     "positions in the KV cache: chat's and serve's context (default the model's, at most 4096), bench's (prompt + --gen)"},
    {"--trace", O_TRACE, "FILE", C_GENERATE | C_BENCH, "write a Perfetto/Chrome trace of the run's tasks to FILE"},
    {"--logits", O_LOGITS, "FILE", C_GENERATE, "write the prompt's logits to FILE, float32 [prompt tokens, vocab]"},
    {"--prompt-len", O_PROMPT_LEN, "N", C_BENCH, "tokens of the random prompt (default 32)"},
    {"--context", O_CONTEXT, "N", C_BENCH, "the same as --prompt-len: the context the timed decode starts from"},
    {"--gen", O_GEN, "N", C_BENCH, "tokens to generate and time (default 128)"},
    {"--batch", O_BATCH, "N", C_BENCH, "requests decoding together (default 1): N random prompts of the same length, timed per step of N rows"},
    {"--seed", O_SEED, "S", C_BENCH | C_GENERATE | C_CHAT,
     "bench: seed of the random prompt (default 1234); generate, chat: the sampling's (default random, printed)"},
    {"--temperature", O_TEMPERATURE, "T", C_GENERATE | C_CHAT,
     "sample from softmax(logits / T) (default 0: greedy; else 1e-4 .. 100; the CPU backend so far)"},
    {"--top-k", O_TOP_K, "K", C_GENERATE | C_CHAT, "sample among the K likeliest tokens (default 0: all)"},
    {"--top-p", O_TOP_P, "P", C_GENERATE | C_CHAT, "sample among the likeliest tokens holding P of the mass (default 1: all)"},
    {"--min-p", O_MIN_P, "P", C_GENERATE | C_CHAT, "sample among tokens at least P times as likely as the likeliest (default 0)"},
    {"--stop", O_STOP, "TEXT", C_GENERATE, "end the text before TEXT, which is not printed (up to 4 --stop)"},
    {"--json", O_JSON, NULL, C_BENCH, "print the results as one JSON object"},
    {"--task-graph", O_TASK_GRAPH, "FILE", C_INSPECT, "write the task graph as JSON to FILE"},
    {"--out", O_OUT, "DIR", C_COMPILE, "where kernel.cu, task_graph.json and the compiled kernel go (created)"},
    {"--arch", O_ARCH, "SM", C_COMPILE, "the GPU architecture, e.g. sm_90a: compiles without a GPU"},
    {"--fused-mlp", O_FUSED_MLP, "auto|on|off", C_GRAPH, "each MLP but the last as one layer, its sum in an accumulator"},
    {"--lm-argmax", O_LM_ARGMAX, "auto|on|off", C_GRAPH, "the LM head and the argmax as one layer"},
    {"--host", O_HOST, "ADDR", C_SERVE, "the address to listen on (default 127.0.0.1; 0.0.0.0 or :: for every interface)"},
    {"--port", O_PORT, "N", C_SERVE, "the TCP port (default 8000; 0: a free one, printed at start)"},
    {"--api-key", O_API_KEY, "KEY", C_SERVE, "answer 401 unless requests carry 'Authorization: Bearer KEY' (default $PK_API_KEY)"},
    {"--max-requests", O_MAX_REQUESTS, "N", C_SERVE,
     "requests admitted at once (default 16; on the CPU backend they decode together); more are answered 503"},
    {"--check-tensors", O_CHECK_TENSORS, NULL, C_LOADS,
     "read every weight at load and fail naming a tensor that holds NaN or Inf"},
};
#define NOPTS ((int)(sizeof OPTS / sizeof OPTS[0]))

static int cmd_generate(options *o);
static int cmd_bench(options *o);
static int cmd_tokenize(options *o);
static int cmd_detokenize(options *o);
static int cmd_inspect(options *o);
static int cmd_compile(options *o);

typedef struct command {
    const char *name;
    unsigned bit;
    const char *args;       /* the synopsis after the options */
    int max_args;           /* positional arguments it takes (-1: any number) */
    const char *summary;    /* one line for the global usage */
    const char *about;      /* a few lines for pk help CMD */
    int (*run)(options *o);
} command;

static const command CMDS[] = {
    {"generate", C_GENERATE, "", 0, "generate text (greedy) from a prompt",
     "Generates greedily from the prompt and streams the text to stdout; a stats line goes to stderr.\n"
     "Give exactly one of --prompt, --prompt-file and --prompt-ids.\n",
     cmd_generate},
    {"chat", C_CHAT, "", 0, "talk with the model in the terminal, turn after turn",
     "A conversation: each line on stdin is a user turn, the answer streams to stdout; the history goes\n"
     "back to the model with the chat template of generate --chat. When it outgrows the context\n"
     "(--max-seq), the oldest turns are dropped. Ctrl-C stops an answer; /exit or end of input leaves.\n",
     cmd_chat},
    {"bench", C_BENCH, "", 0, "time decoding against the memory-bandwidth floor",
     "Times one request (or --batch N together): a random prompt, then --gen decode steps, each step's\n"
     "time from the runtime; prints the prompt's time, the median, mean, min and p90 ms per decode step\n"
     "and the floor (bytes per step / copy bandwidth).\n",
     cmd_bench},
    {"tokenize", C_TOKENIZE, " TEXT", 1, "print the token ids of a text", "Prints the token ids of TEXT.\n",
     cmd_tokenize},
    {"detokenize", C_DETOKENIZE, " ID...", -1, "print the text of token ids",
     "Prints the text of the token ids (1 2 3, 1,2,3 or '1 2 3').\n", cmd_detokenize},
    {"inspect", C_INSPECT, "", 0, "describe the model and its task graph",
     "Loads the model, builds its graph for the CPU and prints the shape, the graph's layers and tasks.\n",
     cmd_inspect},
    {"compile", C_COMPILE, "", 0, "generate and compile the model's CUDA kernel",
     "Writes kernel.cu and task_graph.json to --out and compiles the kernel with nvcc. Without a GPU\n"
     "give --arch (e.g. sm_90a). When nvcc fails, what was written stays in --out to be inspected.\n",
     cmd_compile},
    {"serve", C_SERVE, "", 0, "serve the model over HTTP with the OpenAI API",
     "An OpenAI-compatible HTTP server: GET /v1/models, POST /v1/completions and /v1/chat/completions\n"
     "(stream: server-sent events), GET /health and GET /metrics (Prometheus). Greedy decoding only;\n"
     "requests run one at a time in arrival order. SIGINT or SIGTERM stops it. docs/SERVE.md.\n",
     cmd_serve},
    {"help", C_HELP, " [COMMAND]", 1, "this text, or a command's options", "Prints the usage, or COMMAND's options.\n",
     NULL},
};
#define NCMDS ((int)(sizeof CMDS / sizeof CMDS[0]))

static const command *find_command(const char *name) {
    for (int i = 0; i < NCMDS; i++)
        if (!strcmp(CMDS[i].name, name)) return &CMDS[i];
    return NULL;
}

static const opt_spec *find_option(const char *name, size_t len) {
    for (int i = 0; i < NOPTS; i++)
        if (strlen(OPTS[i].name) == len && !strncmp(OPTS[i].name, name, len)) return &OPTS[i];
    return NULL;
}

static void print_usage(FILE *f) {
    fprintf(f, "usage: pk COMMAND [OPTIONS]   (pk %s)\n\ncommands:\n", PK_VERSION_STRING);
    for (int i = 0; i < NCMDS; i++) fprintf(f, "  %-11s %s\n", CMDS[i].name, CMDS[i].summary);
    fputs("\n'pk help COMMAND' or 'pk COMMAND --help' lists a command's options; 'pk --version' prints the version.\n"
          "Without --model, pk runs the small model that ships with it (models/pk-tiny), or $PK_MODEL.\n",
          f);
}

static void print_command_help(const command *c) {
    printf("usage: pk %s [OPTIONS]%s\n\n%s", c->name, c->args, c->about);
    if (c->bit == C_HELP) return;
    printf("\noptions (--opt VALUE or --opt=VALUE):\n");
    for (int i = 0; i < NOPTS; i++) {
        if (!(OPTS[i].cmds & c->bit)) continue;
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", OPTS[i].name, OPTS[i].arg ? " " : "", OPTS[i].arg ? OPTS[i].arg : "");
        printf("  %-26s %s\n", left, OPTS[i].help);
    }
    printf("  %-26s %s\n", "-h, --help", "print this help and exit");
}

/* auto|on|off → -1 / 1 / 0 (pk_model_options). */
static int parse_auto_on_off(const char *s, const char *what) {
    if (!strcmp(s, "auto")) return -1;
    if (!strcmp(s, "on")) return 1;
    if (!strcmp(s, "off")) return 0;
    die("%s '%s' is not auto, on or off", what, s);
}

static float parse_float(const char *s, const char *what, double lo, double hi) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) die("%s '%s' is not a number in [%g, %g]", what, s, lo, hi);
    return (float)v;
}

static long parse_long(const char *s, const char *what, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) die("%s '%s' is not a number in [%ld, %ld]", what, s, lo, hi);
    return v;
}

static void set_option(options *o, const opt_spec *s, const char *v) {
    const char *n = s->name;
    switch (s->id) {
    case O_MODEL: o->model = v; break;
    case O_PROMPT: o->prompt = v; break;
    case O_PROMPT_FILE: o->prompt_file = v; break;
    case O_PROMPT_IDS: o->prompt_ids = v; break;
    case O_SYSTEM: o->system = v; break;
    case O_CHAT: o->chat = 1; break;
    case O_MAX_TOKENS: o->max_tokens = (int)parse_long(v, n, 1, 1 << 20), o->max_tokens_set = 1; break;
    case O_PRINT_IDS: o->print_ids = 1; break;
    case O_BACKEND:
        if (strcmp(v, "cpu") && strcmp(v, "cuda")) die("unknown backend '%s' (cpu or cuda)", v);
        o->backend = v;
        break;
    case O_THREADS: o->threads = (int)parse_long(v, n, 1, 1024); break;
    case O_STEP_TOKENS: o->step_tokens = (int)parse_long(v, n, 1, 65536); break;
    case O_KV_SPLITS: o->kv_splits = (int)parse_long(v, n, 0, 4096); break;
    case O_SPEC_LENGTH: o->spec_length = (int)parse_long(v, n, 0, 16); break;
    case O_SPEC_NGRAM: o->spec_ngram = (int)parse_long(v, n, 1, 8); break;
    case O_MAX_SEQ: o->max_seq = (int)parse_long(v, n, 2, 1 << 24); break;
    case O_TRACE: o->trace = v; break;
    case O_LOGITS: o->logits = v; break;
    case O_PROMPT_LEN: o->prompt_len = (int)parse_long(v, n, 1, 1 << 24); break;
    case O_CONTEXT: o->context = (int)parse_long(v, n, 1, 1 << 24); break;
    case O_GEN: o->gen = (int)parse_long(v, n, 2, 1 << 24); break;
    case O_BATCH: o->batch = (int)parse_long(v, n, 1, 4096); break;
    case O_SEED: o->seed = parse_long(v, n, 0, LONG_MAX), o->seed_set = 1; break;
    case O_TEMPERATURE:
        o->sampling.temperature = parse_float(v, n, 0, 100);
        if (o->sampling.temperature > 0 && o->sampling.temperature < 1e-4f) die("%s '%s': 0 (greedy) or at least 1e-4", n, v);
        break;
    case O_TOP_K: o->sampling.top_k = (int)parse_long(v, n, 0, 1 << 30); break;
    case O_TOP_P:
        o->sampling.top_p = parse_float(v, n, 0, 1);
        if (o->sampling.top_p == 0) die("%s 0 keeps no token: it must be in (0, 1]", n);
        break;
    case O_MIN_P: o->sampling.min_p = parse_float(v, n, 0, 0.999999); break;
    case O_STOP:
        if (o->nstop == STOP_TEXT_MAX) die("more than %d %s", STOP_TEXT_MAX, n);
        if (!*v || strlen(v) > STOP_TEXT_MAX_LEN) die("%s '%.40s': 1 to %d bytes", n, v, STOP_TEXT_MAX_LEN);
        o->stop[o->nstop++] = v;
        break;
    case O_JSON: o->json = 1; break;
    case O_TASK_GRAPH: o->task_graph = v; break;
    case O_OUT: o->out = v; break;
    case O_ARCH: o->arch = v; break;
    case O_FUSED_MLP: o->model_opts.fused_mlp = parse_auto_on_off(v, n); break;
    case O_LM_ARGMAX: o->model_opts.lm_head_argmax = parse_auto_on_off(v, n); break;
    case O_CHECK_TENSORS: o->model_opts.check_tensors = 1; break;
    case O_HOST:
        if (!*v) die("--host needs an address");
        o->host = v;
        break;
    case O_PORT: o->port = (int)parse_long(v, n, 0, 65535); break;
    case O_API_KEY:
        if (!*v) die("--api-key needs a non-empty key");
        o->api_key = v;
        break;
    case O_MAX_REQUESTS: o->max_requests = (int)parse_long(v, n, 1, 4096); break;
    }
}

static void parse(const command *c, int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 64;
    o->gen = 128;
    o->seed = 1234;
    o->backend = "cpu";
    o->host = "127.0.0.1";
    o->port = 8000;
    o->max_requests = 16;
    o->model_opts = pk_model_options_default();
    o->args = calloc((size_t)argc + 1, sizeof *o->args);
    if (!o->args) die("out of memory");
    int only_args = 0, value_at = -1; /* value_at: index of the last option's value */
    const char *value_of = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!only_args && !strcmp(a, "--")) {
            only_args = 1;
            continue;
        }
        if (!only_args && a[0] == '-' && a[1]) {
            if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
                print_command_help(c);
                exit(close_stdout());
            }
            const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            const opt_spec *s = a[1] == '-' ? find_option(a, len) : NULL;
            if (!s) die("unknown option '%.*s' (pk help %s lists its options)", (int)len, a, c->name);
            if (!(s->cmds & c->bit)) die("pk %s does not take %s (pk help %s lists its options)", c->name, s->name, c->name);
            const char *v = NULL;
            if (s->arg) {
                if (eq) v = eq + 1;
                else if (i + 1 < argc) v = argv[++i];
                else die("%s needs a value (%s)", s->name, s->arg);
                if (!eq && v[0] == '-' && v[1] == '-' && find_option(v, strcspn(v, "=")))
                    die("%s needs a value (%s) before %s", s->name, s->arg, v);
                value_at = i, value_of = s->name;
            } else if (eq) {
                die("%s takes no value (%s)", s->name, a);
            }
            set_option(o, s, v);
            continue;
        }
        if (c->max_args >= 0 && o->nargs >= c->max_args) {
            if (value_at == i - 1 && value_of)
                die("unexpected argument '%s' after %s '%s': quote a value with spaces (%s '%s %s ...')", a, value_of,
                    argv[i - 1], value_of, argv[i - 1], a);
            if (c->max_args == 0) die("unexpected argument '%s': pk %s takes only options (pk help %s)", a, c->name, c->name);
            die("unexpected argument '%s': pk %s takes %d (quote a text with spaces)", a, c->name, c->max_args);
        }
        o->args[o->nargs++] = argv[i];
    }
    if (!o->model) {
        static char path[PATH_MAX + 32];
        const char *env = getenv("PK_MODEL");
        o->model = "models/pk-tiny";
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (env && *env) o->model = env;
        else if (n > 0) { /* models/pk-tiny next to the binary's build folder */
            exe[n] = '\0';
            char *slash = strrchr(exe, '/');
            struct stat st;
            if (slash) {
                *slash = '\0';
                snprintf(path, sizeof path, "%s/../models/pk-tiny", exe);
                if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) o->model = path;
            }
        }
    }
}

/* ---- checks before a run ----------------------------------------------------------------- */

static void check_model_dir(const char *dir) {
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            die("the model directory '%s' does not exist (give --model DIR, a folder with config.json, "
                "model.safetensors and tokenizer.json)", dir);
        die("cannot open the model directory '%s': %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        die("--model '%s' is not a directory (give the folder that holds config.json and model.safetensors)", dir);
}

/* The file the run will write to can be opened for writing (created, then removed, when new). */
static void check_output_file(const char *opt, const char *path) {
    struct stat st;
    if (!*path) die("%s needs a file name", opt);
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) die("%s '%s' is a directory; give a file name", opt, path);
        int fd = open(path, O_WRONLY | O_NONBLOCK);
        if (fd < 0) die("%s '%s' cannot be written: %s", opt, path, strerror(errno));
        close(fd);
        return;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) die("%s '%s' cannot be created: %s", opt, path, strerror(errno));
    close(fd);
    unlink(path);
}

/* The directory exists and takes a new file, or can be created: its nearest existing parent
 * takes a new directory. */
static void check_output_dir(const char *opt, const char *dir) {
    char probe[PATH_MAX + 32], parent[PATH_MAX];
    struct stat st;
    if (!*dir) die("%s needs a directory", opt);
    if (strlen(dir) >= sizeof parent - 16) die("%s '%s': the path is too long", opt, dir);
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) die("%s '%s' exists and is not a directory", opt, dir);
        snprintf(probe, sizeof probe, "%s/.pk_probe_XXXXXX", dir);
        int fd = mkstemp(probe);
        if (fd < 0) die("%s '%s': cannot write there: %s", opt, dir, strerror(errno));
        close(fd);
        unlink(probe);
        return;
    }
    snprintf(parent, sizeof parent, "%s", dir);
    for (;;) {
        char *slash = strrchr(parent, '/');
        while (slash && slash > parent && slash[1] == '\0') { /* trailing slashes */
            *slash = '\0';
            slash = strrchr(parent, '/');
        }
        if (!slash) {
            snprintf(parent, sizeof parent, ".");
            break;
        }
        if (slash == parent) {
            parent[1] = '\0';
            break;
        }
        *slash = '\0';
        if (stat(parent, &st) == 0) break;
    }
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
        die("%s '%s' cannot be created: '%s' is not a directory", opt, dir, parent);
    snprintf(probe, sizeof probe, "%s/.pk_probe_XXXXXX", parent);
    if (!mkdtemp(probe)) die("%s '%s' cannot be created in '%s': %s", opt, dir, parent, strerror(errno));
    rmdir(probe);
}

/* ---- shared by the commands -------------------------------------------------------------- */

pk_tokenizer *load_tokenizer(const char *model_dir, const char *hint) {
    char path[PATH_MAX + 32], err[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", model_dir);
    if (access(path, F_OK) != 0) {
        if (hint) die("%s has no tokenizer.json (%s)", model_dir, hint);
        return NULL;
    }
    pk_tokenizer *t = pk_tokenizer_load(path, err, sizeof err);
    if (!t) die("%s", err);
    return t;
}

/* "1,2,3", "1 2 3" (or tabs, newlines) → ids. */
static int parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    const char *p = s, *sep = ", \t\n";
    while (*p) {
        while (*p && strchr(sep, *p)) p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) die("bad token id near '%.20s' in '%s'", p, s);
        if (n == cap) die("more than %d token ids", cap);
        ids[n++] = (int32_t)v;
        p = end;
        if (*p && !strchr(sep, *p)) die("bad token id near '%.20s' in '%s'", p, s);
    }
    return n;
}

int encode_or_die(pk_tokenizer *t, const char *text, int32_t *ids, int cap) {
    int n = pk_tokenizer_encode(t, text, strlen(text), ids, cap);
    if (n < 0) die("tokenizer: %s", pk_tokenizer_error(t));
    if (n > cap) die("the prompt has %d tokens; pk takes at most %d", n, cap);
    return n;
}

/* The whole file (or stdin for "-"), one final newline dropped; at most 16 MiB. */
static char *read_prompt_file(const char *path) {
    const size_t cap = (size_t)16 << 20;
    int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) die("--prompt-file '%s': %s", path, strerror(errno));
    char *buf = malloc(cap + 1);
    if (!buf) die("out of memory");
    size_t n = fread(buf, 1, cap + 1, f);
    if (ferror(f)) die("cannot read --prompt-file '%s': %s", path, strerror(errno));
    if (n > cap) die("--prompt-file '%s' is larger than 16 MiB", path);
    if (!is_stdin) fclose(f);
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) die("--prompt-file '%s' holds a NUL byte: not a text", path);
    if (n && buf[n - 1] == '\n') buf[--n] = '\0';
    if (n && buf[n - 1] == '\r') buf[--n] = '\0';
    if (!n) die("--prompt-file '%s' is empty", path);
    return buf;
}

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

typedef struct stream {
    pk_kernel *k;
    stop_text stops; /* --stop over the printed text */
    pk_decoder *dec;
    int print_text;
    int count;
    double t_first, t_last;
    char buf[1 << 16]; /* > 64 bytes + the longest token: pk_decoder_push never runs short */
} stream;

static void emit_out(void *user, const char *text, size_t n) {
    (void)user;
    out_write(text, n);
}

static void on_token(void *user, int request, int32_t token, int row) {
    stream *s = user;
    (void)request, (void)row;
    s->t_last = now_s();
    if (s->count++ == 0) s->t_first = s->t_last;
    if (s->print_text && s->dec && !s->stops.hit) {
        int n = pk_decoder_push(s->dec, token, s->buf, sizeof s->buf);
        if (n < 0) die("token id %d cannot be decoded by the tokenizer", (int)token);
        int rc = n > 0 ? stop_text_push(&s->stops, s->buf, (size_t)n, emit_out, NULL) : 0;
        if (rc < 0) die("out of memory");
        if (rc > 0) pk_cancel(s->k); /* a stop string: the run ends at this step */
    }
}

pk_sampling sampling_of(const options *o) {
    pk_sampling sp = o->sampling;
    if (sp.temperature <= 0) return (pk_sampling){0};
    if (o->seed_set) {
        sp.seed = (uint64_t)o->seed;
    } else { /* a random seed, told so that the run can be repeated */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t z = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        sp.seed = (z ^ (z >> 31)) & 0x7fffffffffffffffu; /* what --seed takes */
        fprintf(stderr, "pk: sampling with seed %llu (--seed repeats it)\n", (unsigned long long)sp.seed);
    }
    return sp;
}

pk_config make_config(const options *o, int prompt_len, const pk_model_info *info) {
    pk_config c = pk_config_default();
    if (!strcmp(o->backend, "cuda")) c.backend = PK_BACKEND_CUDA;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    c.num_workers = o->threads ? o->threads : (cores > 0 ? (int)cores : 1);
    if (c.backend == PK_BACKEND_CUDA && !o->threads) c.num_workers = 0; /* the backend picks one per SM */
    c.max_requests = 1;
    c.max_tokens_per_step = o->step_tokens; /* 0: the backend's (pk.h) */
    c.attention_kv_splits = o->kv_splits; /* 0: pk picks */
    c.spec_length = o->spec_length;
    c.spec_ngram = o->spec_ngram;
    c.all_logits = o->logits != NULL; /* --logits reads every row's */
    int64_t need = (int64_t)prompt_len + o->max_tokens;
    if (info && need > info->max_position_embeddings) need = info->max_position_embeddings;
    c.max_seq_length = need < 2 ? 2 : (int)need;
    c.trace_path = o->trace;
    return c;
}

pk_model_info read_info(const char *dir) {
    char err[1024];
    pk_model_info info;
    if (pk_model_read_info(dir, &info, err, sizeof err) != PK_OK) die("%s", err);
    return info;
}

pk_model *load_model(const options *o, const pk_config *c) {
    char err[1024];
    pk_model *m = pk_model_load_with(o->model, c, &o->model_opts, err, sizeof err);
    if (!m) die("%s", err);
    return m;
}

static int cmd_generate(options *o) {
    double t_start = now_s();
    if ((o->prompt != NULL) + (o->prompt_file != NULL) + (o->prompt_ids != NULL) != 1)
        die("generate needs exactly one of --prompt TEXT, --prompt-file FILE and --prompt-ids 1,2,3");
    if (o->system) o->chat = 1;
    char *file_text = o->prompt_file ? read_prompt_file(o->prompt_file) : NULL;
    const char *text = o->prompt ? o->prompt : file_text;
    pk_tokenizer *tok = load_tokenizer(o->model, text ? "give the prompt as token ids: --prompt-ids 1,2,3" : NULL);
    int32_t *ids = malloc(MAX_IDS * sizeof *ids);
    if (!ids) die("out of memory");
    int n;
    if (o->prompt_ids) {
        if (o->chat) die("--chat and --system need the prompt as text (--prompt or --prompt-file)");
        n = parse_ids(o->prompt_ids, ids, MAX_IDS);
        if (n == 0) die("no token ids in --prompt-ids '%s'", o->prompt_ids);
    } else if (o->chat) {
        char *wrapped = chat_format(chat_template_for(tok), o->system, NULL, 0, text);
        n = encode_or_die(tok, wrapped, ids, MAX_IDS);
        free(wrapped);
    } else {
        n = encode_or_die(tok, text, ids, MAX_IDS);
    }
    /* The model's limits come from config.json; they size the run's config. */
    pk_model_info info = read_info(o->model);
    if (text && !o->chat && !strcmp(info.architecture, "LlamaForCausalLM") && info.bos_token_id >= 0 &&
        (n == 0 || ids[0] != info.bos_token_id)) {
        if (n == MAX_IDS) die("the prompt has too many tokens");
        memmove(ids + 1, ids, (size_t)n * sizeof *ids); /* Llama-3 expects <|begin_of_text|> */
        ids[0] = (int32_t)info.bos_token_id;
        n++;
    }
    if (n == 0) die("the prompt has no tokens");
    if (n >= info.max_position_embeddings)
        die("the prompt has %d tokens; the model takes at most %d (max_position_embeddings %d, one "
            "position kept for a generated token)", n, info.max_position_embeddings - 1, info.max_position_embeddings);
    pk_config c = make_config(o, n, &info);
    pk_model *m = load_model(o, &c);
    pk_kernel *k = pk_model_kernel(m);
    const int T = pk_kernel_config(k)->max_tokens_per_step; /* the backend's where --step-tokens is not given */
    if (o->logits && n > T && T != 1)
        die("--logits needs the prompt in one step (%d tokens, at most %d), or --step-tokens 1", n, T);
    double t0 = now_s();
    if (pk_compile(k, NULL) != PK_OK) die("%s", pk_kernel_error(k));
    int32_t *out = malloc((size_t)o->max_tokens * sizeof *out);
    if (!out) die("out of memory");
    pk_request req = {.prompt = ids, .prompt_len = n, .max_new_tokens = o->max_tokens, .output = out,
                      .sampling = sampling_of(o)};
    stream s = {.k = k, .dec = tok ? pk_decoder_new(tok) : NULL, .print_text = !o->print_ids && tok != NULL,
                .stops = {.nstops = o->nstop}};
    for (int i = 0; i < o->nstop; i++) s.stops.stops[i] = o->stop[i];
    if (o->nstop && !s.print_text) die("--stop ends the printed text: not with --print-ids or without a tokenizer");
    if (tok && !s.dec) die("out of memory");
    if (s.print_text && text && !o->chat) out_write(text, strlen(text));
    if (o->logits) dump_logits(k, pk_model_logits(m), ids, n, T == 1, o->logits);
    double t_run = now_s();
    if (pk_run(k, &req, 1, on_token, &s) != PK_OK) die("%s", pk_kernel_error(k));
    if (s.print_text) {
        int len = s.stops.hit ? 0 : pk_decoder_flush(s.dec, s.buf, sizeof s.buf);
        if (len > 0 && stop_text_push(&s.stops, s.buf, (size_t)len, emit_out, NULL) < 0) die("out of memory");
        stop_text_flush(&s.stops, emit_out, NULL);
        out_write("\n", 1);
    }
    stop_text_free(&s.stops);
    if (o->print_ids || !tok) {
        for (int i = 0; i < req.num_output; i++) {
            char num[16];
            int len = snprintf(num, sizeof num, "%s%d", i ? " " : "", out[i]);
            out_write(num, (size_t)len);
        }
        out_write("\n", 1);
    }
    /* prefill: the steps that carried prompt rows, timed by the runtime */
    pk_step_times st;
    double prefill_ms = 0;
    if (pk_run_step_times(k, &st) == PK_OK)
        for (int64_t i = 0; i < st.num_timed; i++)
            if (st.prompt_rows[i] > 0) prefill_ms += st.ms[i];
    double ttft_ms = s.count ? (s.t_first - t_run) * 1e3 : 0;
    double per_tok = req.num_output > 1 ? (s.t_last - s.t_first) * 1e3 / (req.num_output - 1) : 0;
    fprintf(stderr,
            "pk: %s backend, %d workers: prompt %d tokens, prefill %.1f ms; first token after %.1f ms; generated %d "
            "tokens (%s), %.2f ms/token, %.1f tokens/s; load %.0f ms, compile %.0f ms\n",
            o->backend, pk_kernel_config(k)->num_workers, n, prefill_ms, ttft_ms, req.num_output,
            s.stops.hit ? "stop" : req.finish == PK_FINISH_EOS ? "eos" : "length", per_tok, per_tok > 0 ? 1e3 / per_tok : 0.0,
            (t0 - t_start) * 1e3, (t_run - t0) * 1e3);
    pk_graph_stats gs;
    if (c.spec_length > 0 && pk_kernel_stats(k, &gs) == PK_OK)
        fprintf(stderr, "pk: speculation: %lld draft tokens verified, %lld kept (%.0f %%), %lld steps for %d tokens\n",
                (long long)gs.spec_drafted, (long long)gs.spec_accepted,
                gs.spec_drafted ? 100.0 * (double)gs.spec_accepted / (double)gs.spec_drafted : 0.0,
                (long long)gs.steps_run, req.num_output);
    pk_decoder_free(s.dec);
    pk_tokenizer_free(tok);
    pk_model_free(m);
    free(out);
    free(ids);
    free(file_text);
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
    const int B = o->batch > 0 ? o->batch : 1;
    pk_config c = make_config(o, P, &info);
    c.max_seq_length = o->max_seq ? o->max_seq : (int)need;
    c.max_requests = B;
    if (o->step_tokens && o->step_tokens < B) /* 0: the backend's, at least B (pk.h) */
        die("--step-tokens %d is less than --batch %d: a decode step carries one row per request", o->step_tokens, B);
    pk_model *m = load_model(o, &c);
    info = *pk_model_get_info(m); /* now with the weight bytes the loaded graph reads */
    pk_kernel *k = pk_model_kernel(m);
    double t0 = now_s();
    if (pk_compile(k, NULL) != PK_OK) die("%s", pk_kernel_error(k));
    double compile_ms = (now_s() - t0) * 1e3;

    /* request r's prompt: P random tokens from seed + r (request 0's are the one-request bench's) */
    int32_t *ids = malloc((size_t)B * P * sizeof *ids), *out = malloc((size_t)B * gen * sizeof *out);
    pk_request *reqs = calloc((size_t)B, sizeof *reqs);
    if (!ids || !out || !reqs) die("out of memory");
    for (int r = 0; r < B; r++) {
        uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)(o->seed + r);
        for (int i = 0; i < P; i++) { /* xorshift64* */
            x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
            ids[(size_t)r * P + i] = (int32_t)((x * 0x2545F4914F6CDD1Dull >> 33) % (uint64_t)info.vocab_size);
        }
        reqs[r] = (pk_request){.prompt = ids + (size_t)r * P, .prompt_len = P, .max_new_tokens = gen,
                               .output = out + (size_t)r * gen};
    }
    /* warm-up (first launch, caches, clocks) on the prompt's first 16 tokens (a full prefill of a
     * long context would double the bench's time for nothing), then the measured run */
    pk_request warm = {.prompt = ids, .prompt_len = P < 16 ? P : 16, .max_new_tokens = gen < 4 ? gen : 4, .output = out};
    if (pk_run(k, &warm, 1, NULL, NULL) != PK_OK) die("%s", pk_kernel_error(k));
    double t_run = now_s();
    if (pk_run(k, reqs, B, NULL, NULL) != PK_OK) die("%s", pk_kernel_error(k));
    double run_ms = (now_s() - t_run) * 1e3;
    const pk_request req = reqs[0];
    int generated = 0;
    for (int r = 0; r < B; r++) generated += reqs[r].num_output;

    pk_step_times st;
    if (pk_run_step_times(k, &st) != PK_OK || st.num_timed != st.num_steps)
        die("the runtime timed %lld of %lld steps", (long long)st.num_timed, (long long)st.num_steps);
    double *dec = malloc((size_t)(st.num_timed ? st.num_timed : 1) * sizeof *dec);
    if (!dec) die("out of memory");
    /* decode steps: every request's row and no prompt row (steps after a request stopped at EOS
     * are left out) */
    int ndec = 0, nprefill = 0;
    double prefill_ms = 0, sum = 0;
    for (int64_t i = 0; i < st.num_timed; i++) {
        if (st.prompt_rows[i] > 0) {
            prefill_ms += st.ms[i];
            nprefill++;
        } else if (st.rows[i] >= B) { /* more with speculation's draft rows */
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
     * up to its own of each of the B requests; decode step j of a prompt of P tokens sits at
     * position P + j. */
    double ctx = P + 1 + (ndec - 1) / 2.0;
    double kv_per_pos = (double)info.num_layers * 2 * info.num_kv_heads * info.head_dim * 2;
    double bytes = (double)info.weight_bytes + kv_per_pos * ctx * B;
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
               "\"lm_argmax\": %s, \"max_seq\": %d, \"seed\": %ld, \"batch\": %d,\n",
               cuda ? "cuda" : "cpu", workers, T, info.attention_kv_splits, fused_mlp ? "true" : "false",
               lm_argmax ? "true" : "false", c.max_seq_length, o->seed, B);
        printf(" \"prompt_len\": %d, \"gen\": %d, \"generated\": %d, \"finish\": \"%s\", \"steps\": %lld, "
               "\"prefill_steps\": %d, \"decode_steps\": %d, \"median_context\": %.1f, \"decode_tokens_per_s\": %.3f,\n",
               P, gen, generated, finish, (long long)st.num_steps, nprefill, ndec, ctx, B * 1e3 / median);
        printf(" \"decode_ms_median\": %.6f, \"decode_ms_mean\": %.6f, \"decode_ms_min\": %.6f, \"decode_ms_p90\": %.6f, "
               "\"prefill_ms\": %.6f, \"run_ms\": %.3f, \"compile_ms\": %.1f,\n",
               median, mean, mn, p90, prefill_ms, run_ms, compile_ms);
        pk_graph_stats gs;
        if (pk_kernel_stats(k, &gs) != PK_OK) die("%s", pk_kernel_error(k));
        printf(" \"spec_length\": %d, \"spec_drafted\": %lld, \"spec_accepted\": %lld, \"decode_tokens_per_step\": %.3f,\n",
               c.spec_length, (long long)gs.spec_drafted, (long long)gs.spec_accepted,
               ndec ? (double)(generated - B) / ndec : 0.0);
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
        /* the prompt's steps one by one (rows each): with --step-tokens R + 1, the cost of a step
         * of R + 1 rows of one request, as a speculative verification carries them */
        printf("],\n \"prefill_step_ms\": [");
        for (int64_t i = 0, j = 0; i < st.num_timed; i++)
            if (st.prompt_rows[i] > 0) printf("%s%.4f", j++ ? ", " : "", st.ms[i]);
        printf("], \"prefill_step_rows\": [");
        for (int64_t i = 0, j = 0; i < st.num_timed; i++)
            if (st.prompt_rows[i] > 0) printf("%s%d", j++ ? ", " : "", (int)st.rows[i]);
        printf("]}\n");
    } else {
        printf("pk bench: %s (%s), %s backend, %d workers, T = %d, attention split %d, fused MLP %s, LM head + argmax "
               "as %s\n",
               o->model, info.architecture, cuda ? "cuda" : "cpu", workers, T, info.attention_kv_splits,
               fused_mlp ? "on" : "off", lm_argmax ? "one layer" : "two layers");
        if (B == 1) {
            printf("prompt        %d random tokens (seed %ld): %d prefill step%s, %.3f ms\n", P, o->seed, nprefill,
                   nprefill == 1 ? "" : "s", prefill_ms);
            printf("generated     %d of %d tokens (%s); %d decode steps at context %d .. %d\n", req.num_output, gen,
                   finish, ndec, P + 1, P + ndec);
            printf("decode        median %.4f ms/token   mean %.4f   min %.4f   p90 %.4f\n", median, mean, mn, p90);
        } else {
            printf("prompts       %d requests of %d random tokens (seeds %ld ..): %d prefill step%s, %.3f ms\n", B, P,
                   o->seed, nprefill, nprefill == 1 ? "" : "s", prefill_ms);
            printf("generated     %d of %d tokens; %d decode steps of %d rows at context %d .. %d\n", generated, B * gen,
                   ndec, B, P + 1, P + ndec);
            printf("decode        median %.4f ms/step   mean %.4f   min %.4f   p90 %.4f; %.1f tokens/s\n", median, mean,
                   mn, p90, B * 1e3 / median);
        }
        printf("bytes/%s    %.2f MB: weights %.2f MB + KV %.2f MB (median context %.1f)\n", B == 1 ? "token" : "step ",
               bytes / 1e6, (double)info.weight_bytes / 1e6, kv_per_pos * ctx * B / 1e6, ctx);
        printf("achieved      %.1f GB/s at the median\n", gbps);
        printf("copy b/w      %.1f GB/s (%s)\n", bw / 1e9, bw_what);
        printf("floor         %.4f ms/%s; pk at %.1f %% of the floor\n", floor_ms, B == 1 ? "token" : "step",
               100 * floor_ms / median);
        printf("memory        %s: weights %.1f MB, KV cache %.1f MB, workspace %.1f MB\n",
               mem.on_device ? "GPU" : "host", (double)mem.weight_bytes / 1e6, (double)mem.kv_cache_bytes / 1e6,
               (double)mem.workspace_bytes / 1e6);
        if (c.spec_length > 0) {
            pk_graph_stats gs;
            if (pk_kernel_stats(k, &gs) != PK_OK) die("%s", pk_kernel_error(k));
            printf("speculation   %lld draft tokens verified, %lld kept; %.2f tokens per decode step (a step's\n"
                   "              time above is per step, not per token)\n",
                   (long long)gs.spec_drafted, (long long)gs.spec_accepted, ndec ? (double)(generated - B) / ndec : 0.0);
        }
        if (req.num_output < gen) printf("note          the model stopped at EOS; try another --seed for a full run\n");
    }
    fflush(stdout);
    free(sorted);
    free(dec);
    free(ids);
    free(reqs);
    free(out);
    pk_model_free(m);
    return 0;
}

static int cmd_tokenize(options *o) {
    if (o->nargs != 1) die("tokenize takes one TEXT argument (quote a text with spaces)");
    pk_tokenizer *t = load_tokenizer(o->model, "tokenize needs the model's tokenizer");
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
    if (o->nargs < 1) die("detokenize takes token ids (1 2 3 or 1,2,3)");
    pk_tokenizer *t = load_tokenizer(o->model, "detokenize needs the model's tokenizer");
    pk_decoder *d = pk_decoder_new(t);
    int32_t *ids = malloc(MAX_IDS * sizeof *ids);
    if (!d || !ids) die("out of memory");
    char buf[1 << 16];
    for (int a = 0; a < o->nargs; a++) {
        int n = parse_ids(o->args[a], ids, MAX_IDS);
        for (int i = 0; i < n; i++) {
            int len = pk_decoder_push(d, ids[i], buf, sizeof buf);
            if (len < 0) die("token id %d is outside the vocabulary [0, %d)", (int)ids[i], pk_tokenizer_vocab_size(t));
            fwrite(buf, 1, (size_t)len, stdout);
        }
    }
    int n = pk_decoder_flush(d, buf, sizeof buf);
    if (n > 0) fwrite(buf, 1, (size_t)n, stdout);
    printf("\n");
    free(ids);
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
    if (o->task_graph && pk_write_task_graph(k, o->task_graph) != PK_OK) die("%s", pk_kernel_error(k));
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
    printf("task graph   %d graph layers, %d tasks, %d events, %d workers (%s%s)\n", st.num_layers, st.num_tasks,
           st.num_events, st.num_workers, o->task_graph ? "written to " : "--task-graph FILE writes it",
           o->task_graph ? o->task_graph : "");
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
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--version") || !strcmp(name, "-V")) {
        printf("pk %s\n", PK_VERSION_STRING);
        return close_stdout();
    }
    if (!strcmp(name, "--help") || !strcmp(name, "-h")) name = "help";
    const command *c = find_command(name);
    if (!c) {
        if (name[0] == '-') die("'%s' is not a command: give one first (pk help lists them)", name);
        die("unknown command '%s' (pk help lists the commands: generate, chat, bench, tokenize, detokenize, inspect, "
            "compile)", name);
    }
    options o;
    parse(c, argc - 2, argv + 2, &o);
    int rc = 0;
    if (c->bit == C_HELP) {
        const command *about = o.nargs ? find_command(o.args[0]) : NULL;
        if (o.nargs && !about) die("unknown command '%s' (pk help lists the commands)", o.args[0]);
        if (about) print_command_help(about);
        else print_usage(stdout);
    } else {
        check_model_dir(o.model);
        if (o.trace) check_output_file("--trace", o.trace);
        if (o.logits) check_output_file("--logits", o.logits);
        if (o.task_graph) check_output_file("--task-graph", o.task_graph);
        if (o.out) check_output_dir("--out", o.out);
        rc = c->run(&o);
    }
    free(o.args);
    if (close_stdout() != 0 && rc == 0) rc = 1;
    return rc;
}
