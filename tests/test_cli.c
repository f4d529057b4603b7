// SPDX-License-Identifier: Apache-2.0
/* test_cli.c — the pk command end to end, as a user runs it: `pk generate --prompt-ids ...
 * --print-ids` reproduces transformers' greedy tokens on the golden model directories, text
 * generation and tokenize/detokenize work on the shipped model, and every bad input ends with a
 * non-zero exit and one line on stderr naming the problem. Runs $BUILD/pk (default build/pk).
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static char pk_bin[512];

typedef struct result {
    int status; /* exit code, or -1 when killed by a signal */
    char out[1 << 16], err[1 << 14];
} result;

/* Reads up to cap - 1 bytes of path into buf, NUL-terminated; returns the count (0: no file). */
static size_t slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
    return n;
}

/* Runs `pk <args>` through the shell (arguments are the test's own, quoted by the caller). */
static void run(result *r, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s >/tmp/pk_cli_out.%d 2>/tmp/pk_cli_err.%d", pk_bin, args, (int)getpid(),
             (int)getpid());
    int st = system(cmd);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    char p[64];
    snprintf(p, sizeof p, "/tmp/pk_cli_out.%d", (int)getpid());
    slurp(p, r->out, sizeof r->out);
    unlink(p);
    snprintf(p, sizeof p, "/tmp/pk_cli_err.%d", (int)getpid());
    slurp(p, r->err, sizeof r->err);
    unlink(p);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* A failing command: exit 1 (or 2 for usage), one stderr line containing `needle`. */
static void expect_error(const char *args, int code, const char *needle) {
    static result r;
    run(&r, args);
    CHECK(r.status == code, "pk %s: exit %d, expected %d (stderr: %s)", args, r.status, code, r.err);
    if (code == 1) CHECK(count_lines(r.err) == 1, "pk %s: stderr has %d lines: %s", args, count_lines(r.err), r.err);
    CHECK(strstr(r.err, needle) != NULL, "pk %s: stderr lacks '%s': %s", args, needle, r.err);
}

/* Prompt `which` of the golden file; extra: more flags for pk generate (the tokens must not change). */
static void check_golden_cli(const char *name, const char *extra, int which) {
    char path[256];
    snprintf(path, sizeof path, "tests/data/golden/%s/golden.json", name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "missing %s", path);
    if (!f) return;
    static char text[1 << 22];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    cJSON *root = cJSON_Parse(text);
    const cJSON *prompt = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "prompts"), which);
    const cJSON *greedy = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "greedy"), which);
    char ids[2048] = "", expect[2048] = "";
    size_t a = 0, b = 0;
    for (int i = 0; i < cJSON_GetArraySize(prompt); i++)
        a += (size_t)snprintf(ids + a, sizeof ids - a, "%s%d", i ? "," : "", (int)cJSON_GetArrayItem(prompt, i)->valuedouble);
    for (int i = 0; i < cJSON_GetArraySize(greedy); i++)
        b += (size_t)snprintf(expect + b, sizeof expect - b, "%s%d", i ? " " : "", (int)cJSON_GetArrayItem(greedy, i)->valuedouble);
    char args[4096];
    snprintf(args, sizeof args, "generate --model tests/data/golden/%s --prompt-ids %s --max-tokens %d --print-ids --backend cpu %s",
             name, ids, cJSON_GetArraySize(greedy), extra);
    static result r;
    run(&r, args);
    CHECK(r.status == 0, "%s: exit %d: %s", name, r.status, r.err);
    r.out[strcspn(r.out, "\n")] = '\0';
    CHECK(strcmp(r.out, expect) == 0, "%s %s: pk printed '%s', transformers '%s'", name, extra, r.out, expect);
    CHECK(strstr(r.err, "ms/token") != NULL, "%s: no stats line on stderr: %s", name, r.err);
    cJSON_Delete(root);
}

/* --logits: the prompt's teacher-forced logits, from one prefill step or (--step-tokens 1) from
 * one one-row step per position; on the CPU the two are the same bits (its sums do not depend
 * on the step's rows). The GPU check compares the one-row dump across backends
 * (scripts/gpu_env.sh pk_tiny_logits_check). */
static void check_logits_dump(void) {
    char a[96], b[96], args[512];
    snprintf(a, sizeof a, "/tmp/pk_cli_logits_prefill.%d", (int)getpid());
    snprintf(b, sizeof b, "/tmp/pk_cli_logits_steps.%d", (int)getpid());
    static const char *prompt = "--model tests/data/golden/qwen3_untied --prompt-ids 5,17,3,99,42,8,61 --max-tokens 2";
    static result r;
    snprintf(args, sizeof args, "generate %s --logits %s", prompt, a);
    run(&r, args);
    CHECK(r.status == 0, "pk %s: %s", args, r.err);
    snprintf(args, sizeof args, "generate %s --step-tokens 1 --kv-splits 2 --logits %s", prompt, b);
    run(&r, args);
    CHECK(r.status == 0, "pk %s: %s", args, r.err);
    static char da[1 << 20], db[1 << 20];
    size_t na = slurp(a, da, sizeof da), nb = slurp(b, db, sizeof db);
    CHECK(na > 0 && na < sizeof da - 1 && na % (7 * 4) == 0 && na == nb && memcmp(da, db, na) == 0,
          "--logits: prefill %zu bytes, one-row steps %zu bytes, %s", na, nb,
          na == nb && na > 0 ? "different values" : "different sizes");
    unlink(a);
    unlink(b);
    snprintf(args, sizeof args, "generate %s --step-tokens 2 --logits %s", prompt, a);
    expect_error(args, 1, "--step-tokens 1");
    unlink(a);
}

int main(void) {
    const char *build = getenv("BUILD");
    snprintf(pk_bin, sizeof pk_bin, "%s/pk", build && *build ? build : "build");
    if (access(pk_bin, X_OK) != 0) {
        CHECK(0, "%s is not built", pk_bin);
        return check_report("cli");
    }
    check_golden_cli("qwen3_untied", "", 1);
    check_golden_cli("qwen3_tied", "", 1);
    check_golden_cli("llama3_scaled", "", 1);
    check_golden_cli("llama3_plain", "", 1);
    /* the attention split over the KV length: 23 + 12 positions, blocks 0 and 1 in the two splits */
    check_golden_cli("qwen3_untied", "--kv-splits 2 --step-tokens 4", 2);
    /* the graph options: other layers, the same tokens */
    check_golden_cli("qwen3_untied", "--fused-mlp on --lm-argmax off", 1);
    check_golden_cli("llama3_scaled", "--fused-mlp off --lm-argmax on", 1);

    static result r;
    run(&r, "generate --prompt 'In the beginning' --max-tokens 24 --threads 2");
    CHECK(r.status == 0 && strncmp(r.out, "In the beginning", 16) == 0 && strlen(r.out) > 40,
          "shipped model: exit %d, text '%s', stderr %s", r.status, r.out, r.err);
    run(&r, "generate --prompt 'And Jesus said' --max-tokens 8 --chat");
    CHECK(r.status == 0, "--chat: exit %d: %s", r.status, r.err);
    run(&r, "tokenize 'In the beginning God created'");
    CHECK(r.status == 0 && r.out[0] >= '0' && r.out[0] <= '9', "tokenize: exit %d, '%s'", r.status, r.out);
    char detok[512];
    r.out[strcspn(r.out, "\n")] = '\0';
    snprintf(detok, sizeof detok, "detokenize %s", r.out);
    run(&r, detok);
    CHECK(r.status == 0 && strcmp(r.out, "In the beginning God created\n") == 0, "detokenize: '%s'", r.out);
    char tg[64], inspect[128]; /* per process: concurrent runs (and other users) share /tmp */
    snprintf(tg, sizeof tg, "/tmp/pk_cli_task_graph.%d.json", (int)getpid());
    snprintf(inspect, sizeof inspect, "inspect --task-graph %s", tg);
    run(&r, inspect);
    CHECK(r.status == 0 && strstr(r.out, "Qwen3ForCausalLM") && strstr(r.out, "attention"), "inspect: %s %s", r.out,
          r.err);
    struct stat st;
    CHECK(stat(tg, &st) == 0 && st.st_size > 1000, "inspect wrote no task graph");
    /* The CPU's default graph has neither the fused MLP nor a separate argmax; the options add them. */
    CHECK(!strstr(r.out, "rmsnorm_swiglu_down") && strstr(r.out, "rmsnorm_linear_argmax") &&
              !strstr(r.out, "argmax_partial"),
          "inspect's default graph: %s", r.out);
    snprintf(inspect, sizeof inspect, "inspect --task-graph %s --fused-mlp on --lm-argmax off", tg);
    run(&r, inspect);
    CHECK(r.status == 0 && strstr(r.out, "rmsnorm_swiglu_down") && strstr(r.out, "argmax_partial") &&
              !strstr(r.out, "rmsnorm_linear_argmax"),
          "inspect --fused-mlp on --lm-argmax off: %s %s", r.out, r.err);
    unlink(tg);
    check_logits_dump();

    /* Bad input: one line, non-zero exit, the problem named. */
    expect_error("generate --model /nonexistent --prompt-ids 1,2", 1, "/nonexistent");
    expect_error("generate --model tests/data/golden/qwen3_tied --prompt-ids 1,99999 --print-ids", 1, "99999");
    expect_error("generate --model tests/data/golden/qwen3_tied --prompt 'hi'", 1, "tokenizer.json");
    expect_error("generate --prompt-ids 1,x", 1, "bad token id");
    expect_error("generate --prompt-ids 1 --max-tokens 0", 1, "--max-tokens");
    expect_error("generate --prompt-ids 1 --backend tpu", 1, "tpu");
    expect_error("generate --prompt-ids 1 --bogus", 1, "--bogus");
    expect_error("generate --prompt-ids 1 --kv-splits 5000", 1, "--kv-splits");
    expect_error("generate --prompt-ids 1 --fused-mlp yes", 1, "--fused-mlp 'yes' is not auto, on or off");
    expect_error("inspect --lm-argmax 1", 1, "--lm-argmax '1' is not auto, on or off");
    expect_error("bench --lm-argmax", 1, "--lm-argmax needs a value");
    expect_error("frobnicate", 1, "frobnicate");
    expect_error("", 2, "usage");
    expect_error("detokenize 5000000", 1, "5000000");
    /* A prompt longer than the model allows (max_position_embeddings 512). */
    char longp[4096] = "generate --prompt-ids 1";
    for (int i = 0; i < 600; i++) strcat(longp, ",5");
    expect_error(longp, 1, "at most");
    /* A model directory with an unknown architecture. */
    char dir[] = "/tmp/pk_cli_XXXXXX";
    if (mkdtemp(dir)) {
        char p[300], args[400];
        snprintf(p, sizeof p, "%s/config.json", dir);
        FILE *f = fopen(p, "w");
        fputs("{\"architectures\": [\"MambaForCausalLM\"], \"vocab_size\": 10}", f);
        fclose(f);
        snprintf(args, sizeof args, "generate --model %s --prompt-ids 1", dir);
        expect_error(args, 1, "MambaForCausalLM");
        unlink(p);
        rmdir(dir);
    }
    return check_report("cli");
}
