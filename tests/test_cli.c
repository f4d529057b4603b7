// SPDX-License-Identifier: Apache-2.0
/* test_cli.c — the pk command end to end, as a user runs it: `pk generate --prompt-ids ...
 * --print-ids` reproduces transformers' greedy tokens on the golden model directories, text
 * generation and tokenize/detokenize work on the shipped model, and every bad input ends with a
 * non-zero exit and one line on stderr naming the problem. Also the surface a user meets: help and
 * --version on stdout, options per command, --opt=value, output paths checked before the run, a
 * full stdout, --prompt-file, --system, the stats line and `pk chat` on piped input (SIGINT
 * included). Runs $BUILD/pk (default build/pk).
 */
#include <cjson/cJSON.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
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

/* Runs a shell command line, its stdout and stderr captured into r. */
static void run_sh(result *r, const char *cmdline) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "{ %s ; } >/tmp/pk_cli_out.%d 2>/tmp/pk_cli_err.%d", cmdline, (int)getpid(), (int)getpid());
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

/* Runs `pk <args>` through the shell (arguments are the test's own, quoted by the caller). */
static void run(result *r, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s", pk_bin, args);
    run_sh(r, cmd);
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

/* A successful command whose output goes to stdout, nothing on stderr. */
static void expect_help(const char *args, const char *needle) {
    static result r;
    run(&r, args);
    CHECK(r.status == 0 && r.err[0] == '\0' && strstr(r.out, needle), "pk %s: exit %d, stdout lacks '%s' (%s), stderr %s",
          args, r.status, needle, r.out, r.err);
}

/* pk --version, pk help, pk help CMD, pk CMD --help / -h: stdout, exit 0; every option line has
 * words after its name; each command lists only its own options. */
static void check_help(void) {
    static const char *cmds[] = {"generate", "chat", "bench", "tokenize", "detokenize", "inspect", "compile"};
    static result r;
    run(&r, "--version");
    CHECK(r.status == 0 && !strncmp(r.out, "pk ", 3) && r.out[3] >= '0' && r.out[3] <= '9', "--version: %d '%s'", r.status,
          r.out);
    run(&r, "help");
    CHECK(r.status == 0 && r.err[0] == '\0', "pk help: exit %d, stderr %s", r.status, r.err);
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char line[64], args[64];
        snprintf(line, sizeof line, "\n  %s ", cmds[i]);
        CHECK(strstr(r.out, line) != NULL, "pk help does not list %s: %s", cmds[i], r.out);
        snprintf(args, sizeof args, "help %s", cmds[i]);
        expect_help(args, "--model DIR");
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        expect_help(args, "options");
        snprintf(args, sizeof args, "%s -h", cmds[i]);
        expect_help(args, "usage: pk");
        run(&r, args);
        for (const char *p = strstr(r.out, "\n  -"); p; p = strstr(p + 1, "\n  -")) {
            const char *end = strchr(p + 1, '\n');
            int len = end ? (int)(end - p - 1) : (int)strlen(p + 1);
            CHECK(len > 28 + 10, "pk %s: the option line '%.*s' says nothing", args, len, p + 1);
        }
        run(&r, "help");
    }
    expect_help("--help", "commands:");
    expect_help("help generate", "--prompt-file FILE");
    expect_help("help generate", "--system TEXT");
    expect_help("help chat", "--max-seq N");
    expect_help("help bench", "--gen N");
    run(&r, "help tokenize");
    CHECK(r.status == 0 && !strstr(r.out, "--backend") && !strstr(r.out, "--max-tokens"), "pk help tokenize: %s", r.out);
    expect_error("help frobnicate", 1, "frobnicate");
}

/* Options a command does not take, stray arguments, --opt=value, missing values. */
static void check_arguments(void) {
    expect_error("tokenize --backend cuda hi", 1, "does not take --backend");
    expect_error("generate --prompt In the beginning", 1, "'the'");
    expect_error("generate --prompt In the beginning", 1, "quote");
    expect_error("tokenize In the beginning", 1, "'the'");
    expect_error("inspect extra", 1, "'extra'");
    expect_error("generate --prompt", 1, "--prompt needs a value");
    expect_error("generate --prompt --max-tokens 4", 1, "--prompt needs a value");
    expect_error("generate --prompt-ids=1 --chat=yes", 1, "--chat takes no value");
    expect_error("generate --prompt-ids 1 --spec-length 17", 1, "--spec-length");
    expect_error("bench --spec-ngram 0", 1, "--spec-ngram");
    expect_error("generate --prompt-ids=1 --max-tokens=0", 1, "--max-tokens");
    expect_error("generate --prompt-ids 1 --frob=2", 1, "'--frob'");
    expect_error("generate --prompt-ids 1 -x", 1, "'-x'");
    expect_error("tokenize --check-tensors hi", 1, "does not take --check-tensors");
    static result a, b;
    run(&a, "generate --model=tests/data/golden/qwen3_untied --prompt-ids=5,17,3 --max-tokens=4 --print-ids --threads=2");
    run(&b, "generate --model tests/data/golden/qwen3_untied --prompt-ids 5,17,3 --max-tokens 4 --print-ids --threads 2");
    CHECK(a.status == 0 && b.status == 0 && !strcmp(a.out, b.out) && a.out[0] >= '0' && a.out[0] <= '9',
          "--opt=value: '%s' (%s) against '%s'", a.out, a.err, b.out);
    /* --check-tensors sets pk_model_options.check_tensors; finite weights load */
    run(&a, "generate --prompt-ids 5,17,3 --max-tokens 2 --print-ids --check-tensors");
    CHECK(a.status == 0, "--check-tensors on the shipped model: exit %d: %s", a.status, a.err);
    run(&a, "inspect --check-tensors");
    CHECK(a.status == 0, "inspect --check-tensors: exit %d: %s", a.status, a.err);
    /* A text that starts with '-' after --. */
    run(&a, "tokenize -- '-x'");
    CHECK(a.status == 0 && a.out[0] >= '0' && a.out[0] <= '9', "tokenize -- -x: exit %d '%s' %s", a.status, a.out, a.err);
}

/* Errors that named the wrong problem. */
static void check_messages(void) {
    expect_error("generate --model /nonexistent --prompt hi", 1, "does not exist");
    expect_error("tokenize --model /nonexistent hi", 1, "does not exist");
    expect_error("chat --model /nonexistent", 1, "does not exist");
    expect_error("generate --model tests/data/golden/qwen3_tied --prompt hi", 1, "--prompt-ids");
    expect_error("generate --model tests/data/golden/qwen3_tied/config.json --prompt-ids 1", 1, "not a directory");
    /* compile without a GPU names --arch; it writes nothing into the current directory */
    char out[96], cmd[3 * PATH_MAX + 64];
    snprintf(out, sizeof out, "/tmp/pk_cli_compile.%d", (int)getpid());
    static result r;
    snprintf(cmd, sizeof cmd, "compile --out %s", out);
    run(&r, cmd);
    CHECK(r.status == 0 || !strstr(r.err, "libcuda.so.1 cannot be loaded") || strstr(r.err, "pk compile --arch"),
          "compile without a GPU: %s", r.err);
    snprintf(cmd, sizeof cmd, "rm -rf %s", out);
    CHECK(system(cmd) == 0, "%s", cmd);
    /* inspect writes task_graph.json only where --task-graph says */
    char dir[] = "/tmp/pk_cli_cwd_XXXXXX", bin[PATH_MAX], model[PATH_MAX], tg[PATH_MAX + 32];
    CHECK(mkdtemp(dir) && realpath(pk_bin, bin) && realpath("models/pk-tiny", model), "temp dir, paths");
    snprintf(cmd, sizeof cmd, "cd %s && %s inspect --model %s", dir, bin, model);
    run_sh(&r, cmd);
    snprintf(tg, sizeof tg, "%s/task_graph.json", dir);
    CHECK(r.status == 0 && access(tg, F_OK) != 0, "inspect: exit %d, task_graph.json in the cwd: %s", r.status,
          access(tg, F_OK) == 0 ? "written" : "not written");
    unlink(tg);
    rmdir(dir);
}

/* Output paths fail before the run, in one line; a write error on stdout exits non-zero. */
static void check_output_paths(void) {
    expect_error("generate --prompt-ids 1 --trace /nonexistent/dir/trace.json", 1, "--trace");
    expect_error("generate --prompt-ids 1 --logits /nonexistent/dir/l.bin", 1, "--logits");
    expect_error("generate --prompt-ids 1 --logits /tmp", 1, "is a directory");
    expect_error("bench --gen 2 --trace /nonexistent/t.json", 1, "--trace");
    expect_error("inspect --task-graph /nonexistent/dir/tg.json", 1, "--task-graph");
    expect_error("compile --out /dev/null/kernel", 1, "--out");
    static result r;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s generate --prompt-ids 1 --max-tokens 400 --trace /nonexistent/t.json", pk_bin);
    run_sh(&r, cmd);
    CHECK(r.status == 1 && !strstr(r.err, "ms/token"), "--trace checked after the run: %s", r.err);
    snprintf(cmd, sizeof cmd, "%s generate --prompt hi --max-tokens 4 >/dev/full", pk_bin);
    run_sh(&r, cmd);
    CHECK(r.status == 1 && strstr(r.err, "standard output"), ">/dev/full: exit %d, %s", r.status, r.err);
    snprintf(cmd, sizeof cmd, "%s tokenize hi >/dev/full", pk_bin);
    run_sh(&r, cmd);
    CHECK(r.status == 1 && strstr(r.err, "standard output"), "tokenize >/dev/full: exit %d, %s", r.status, r.err);
    snprintf(cmd, sizeof cmd, "%s help >/dev/full", pk_bin);
    run_sh(&r, cmd);
    CHECK(r.status == 1 && strstr(r.err, "standard output"), "help >/dev/full: exit %d, %s", r.status, r.err);
}

/* detokenize takes 1,2,3 as --prompt-ids does, and '1 2 3', and 1 2 3. */
static void check_detokenize_forms(void) {
    static result a, b, c;
    run(&a, "detokenize 400,401,402");
    run(&b, "detokenize 400 401 402");
    run(&c, "detokenize '400 401 402'");
    CHECK(a.status == 0 && a.out[0] && !strcmp(a.out, b.out) && !strcmp(a.out, c.out),
          "detokenize 1,2,3: '%s' '%s' '%s' (%s)", a.out, b.out, c.out, a.err);
    expect_error("detokenize 1,x", 1, "bad token id");
}

/* --prompt-file FILE and -, --system, the stats line. */
static void check_prompts(void) {
    char path[96], cmd[1024];
    snprintf(path, sizeof path, "/tmp/pk_cli_prompt.%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs("In the beginning\n", f);
    fclose(f);
    static result a, b, c;
    run(&a, "generate --prompt 'In the beginning' --max-tokens 12 --threads 2");
    snprintf(cmd, sizeof cmd, "generate --prompt-file %s --max-tokens 12 --threads 2", path);
    run(&b, cmd);
    snprintf(cmd, sizeof cmd, "printf 'In the beginning' | %s generate --prompt-file - --max-tokens 12 --threads 2", pk_bin);
    run_sh(&c, cmd);
    CHECK(a.status == 0 && b.status == 0 && c.status == 0 && !strcmp(a.out, b.out) && !strcmp(a.out, c.out),
          "--prompt-file: '%s' / '%s' / '%s' (%s %s)", a.out, b.out, c.out, b.err, c.err);
    /* the stats line */
    CHECK(strstr(a.err, "prompt 3 tokens") && strstr(a.err, "prefill") && strstr(a.err, "first token") &&
              strstr(a.err, "generated 12 tokens") && strstr(a.err, "ms/token") && strstr(a.err, "tokens/s") &&
              strstr(a.err, "load") && count_lines(a.err) == 1,
          "stats line: %s", a.err);
    unlink(path);
    snprintf(cmd, sizeof cmd, "generate --prompt-file %s", path);
    expect_error(cmd, 1, path);
    expect_error("generate --prompt hi --prompt-file -", 1, "exactly one");
    expect_error("generate --prompt-ids 1 --system hi", 1, "--system");
    /* --system goes first in the chat template: more prompt tokens, and --chat's answer changes */
    run(&a, "generate --chat --prompt hello --max-tokens 8 --threads 2");
    run(&b, "generate --system 'You answer in verse.' --prompt hello --max-tokens 8 --threads 2");
    CHECK(a.status == 0 && b.status == 0, "--system: %s %s", a.err, b.err);
    int na = 0, nb = 0;
    const char *pa = strstr(a.err, "prompt "), *pb = strstr(b.err, "prompt ");
    CHECK(pa && pb && sscanf(pa, "prompt %d", &na) == 1 && sscanf(pb, "prompt %d", &nb) == 1 && nb > na + 4,
          "--system: prompt %d tokens, without %d", nb, na);
}

/* pk chat with piped stdin: answers stream, the template is generate --chat's, /exit and the end
 * of input leave, the oldest turns go when the context is full, SIGINT stops an answer only. */
static void check_chat(void) {
    static result r, g;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "printf 'hello\\n' | %s chat --max-tokens 12 --threads 2", pk_bin);
    run_sh(&r, cmd);
    run(&g, "generate --chat --prompt hello --max-tokens 12 --threads 2");
    size_t n = strlen(r.out);
    CHECK(r.status == 0 && n > 1 && r.out[n - 1] == '\n' && !strncmp(g.out, r.out, n - 1) && !strstr(r.out, "> "),
          "chat's answer '%s' (exit %d, %s) is not generate --chat's '%s'", r.out, r.status, r.err, g.out);
    snprintf(cmd, sizeof cmd, "printf 'hello\\nwho are you\\n/exit\\nnot read\\n' | %s chat --max-tokens 16 --threads 2",
             pk_bin);
    run_sh(&r, cmd);
    CHECK(r.status == 0 && count_lines(r.out) >= 2 && r.err[0] == '\0', "chat, two turns: exit %d '%s' %s", r.status,
          r.out, r.err);
    snprintf(cmd, sizeof cmd,
             "printf 'In the beginning\\nAnd God said\\nLet there be light\\nhello\\n' | %s chat --max-seq 96 "
             "--max-tokens 30 --system 'Be brief.' --threads 2",
             pk_bin);
    run_sh(&r, cmd);
    CHECK(r.status == 0 && strstr(r.err, "dropped the") && strstr(r.err, "oldest turn"),
          "chat over the context: exit %d, stderr %s", r.status, r.err);
    snprintf(cmd, sizeof cmd, "printf 'hello\\n' | %s chat --max-seq 32 --max-tokens 30", pk_bin);
    run_sh(&r, cmd);
    CHECK(r.status == 0 && strstr(r.err, "does not fit"), "chat, a message over the context: %d %s", r.status, r.err);
    expect_error("chat --max-seq 64 --max-tokens 63 </dev/null", 1, "--max-tokens");
    expect_error("chat --prompt hi", 1, "does not take --prompt");
    expect_error("serve --port 99999", 1, "--port '99999' is not a number in [0, 65535]");
    expect_error("serve --max-requests 0", 1, "--max-requests");
    expect_error("serve --api-key ''", 1, "--api-key needs");
    expect_error("serve --prompt hi", 1, "does not take --prompt");
    expect_error("serve --backend tpu", 1, "unknown backend");
    run(&r, "help serve");
    CHECK(r.status == 0 && strstr(r.out, "--api-key") && strstr(r.out, "--max-requests"), "help serve: %s", r.out);

    /* SIGINT during an answer (400 tokens, long enough to be hit): the answer and its run stop,
     * the next turn still runs, exit 0. */
    int in[2], out[2];
    CHECK(pipe(in) == 0 && pipe(out) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0), dup2(out[1], 1);
        char errp[64];
        snprintf(errp, sizeof errp, "/tmp/pk_cli_sigint.%d", (int)getppid());
        if (!freopen(errp, "w", stderr)) _exit(126);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execl(pk_bin, pk_bin, "chat", "--max-tokens", "400", "--threads", "2", (char *)NULL);
        _exit(127);
    }
    close(in[0]), close(out[1]);
    static const char first[] = "In the beginning\n", second[] = "hello\n/exit\n";
    CHECK(write(in[1], first, sizeof first - 1) == (ssize_t)(sizeof first - 1), "write");
    char buf[4096];
    ssize_t got = read(out[0], buf, sizeof buf); /* the answer has started */
    kill(pid, SIGINT);
    CHECK(write(in[1], second, sizeof second - 1) == (ssize_t)(sizeof second - 1), "write");
    close(in[1]);
    size_t total = got > 0 ? (size_t)got : 0;
    while ((got = read(out[0], buf, sizeof buf)) > 0) total += (size_t)got;
    close(out[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    char errp[64], err[4096];
    snprintf(errp, sizeof errp, "/tmp/pk_cli_sigint.%d", (int)getpid());
    slurp(errp, err, sizeof err);
    unlink(errp);
    /* the run stopped too (pk_cancel), not only the printing: fewer than the 400 tokens were made */
    const char *after = strstr(err, "answer stopped (Ctrl-C) after ");
    int made = after ? atoi(after + strlen("answer stopped (Ctrl-C) after ")) : -1;
    CHECK(after && made >= 1 && made < 400, "chat and SIGINT: the stopped answer made %d tokens (of 400): %s", made, err);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(err, "answer stopped") && total > 0,
          "chat and SIGINT: %s %d, %zu bytes out, stderr %s", WIFEXITED(st) ? "exit" : "signal",
          WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), total, err);
}

int main(void) {
    if (!check_pk_bin(pk_bin, sizeof pk_bin)) return check_report("cli");
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
    { /* sampling: --seed repeats the text; without one a seed is printed, and it repeats that run */
        static result s1, s2, s3, g;
        run(&s1, "generate --prompt 'In the beginning' --max-tokens 24 --temperature 0.9 --top-p 0.95 --seed 7 --print-ids");
        run(&s2, "generate --prompt 'In the beginning' --max-tokens 24 --temperature 0.9 --top-p 0.95 --seed 7 --print-ids");
        run(&s3, "generate --prompt 'In the beginning' --max-tokens 24 --temperature 0.9 --top-p 0.95 --print-ids");
        run(&g, "generate --prompt 'In the beginning' --max-tokens 24 --print-ids");
        CHECK(s1.status == 0 && s2.status == 0 && s1.out[0] && !strcmp(s1.out, s2.out), "--seed 7 twice: '%s' then '%s' (%s)",
              s1.out, s2.out, s1.err);
        CHECK(strcmp(s1.out, g.out) != 0, "--temperature 0.9 gave the greedy tokens '%s'", g.out);
        const char *seed = strstr(s3.err, "sampling with seed ");
        CHECK(s3.status == 0 && seed, "no seed printed without --seed: %s", s3.err);
        if (seed) {
            char args[256];
            snprintf(args, sizeof args, "generate --prompt 'In the beginning' --max-tokens 24 --temperature 0.9 --top-p 0.95 "
                     "--print-ids --seed %lld", atoll(seed + 19));
            run(&s2, args);
            CHECK(s2.status == 0 && !strcmp(s2.out, s3.out), "the printed seed does not repeat its run: '%s' vs '%s'", s2.out,
                  s3.out);
        }
        expect_error("generate --prompt-ids 1 --temperature -1", 1, "--temperature");
        expect_error("generate --prompt-ids 1 --temperature 0.00001", 1, "at least 1e-4");
        expect_error("generate --prompt-ids 1 --top-p 0", 1, "keeps no token");
        expect_error("generate --prompt-ids 1 --min-p 1", 1, "--min-p");
        expect_error("tokenize --temperature 1 hi", 1, "does not take --temperature");
        /* --stop: the greedy text up to the stop string, which is not printed */
        run(&g, "generate --prompt 'In the beginning' --max-tokens 24 --threads 2");
        run(&s1, "generate --prompt 'In the beginning' --max-tokens 24 --threads 2 --stop sayings --stop ZZZ");
        const char *at = strstr(g.out, "sayings");
        CHECK(g.status == 0 && s1.status == 0 && at && strlen(s1.out) == (size_t)(at - g.out) + 1 &&
                  !strncmp(s1.out, g.out, (size_t)(at - g.out)) && strstr(s1.err, "(stop)"),
              "--stop sayings: '%s' of '%s' (%s)", s1.out, g.out, s1.err);
        expect_error("generate --prompt-ids 1 --print-ids --stop x", 1, "not with --print-ids");
        expect_error("generate --prompt-ids 1 --stop a --stop b --stop c --stop d --stop e", 1, "more than 4");
    }
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
    check_help();
    check_arguments();
    check_messages();
    check_output_paths();
    check_detokenize_forms();
    check_prompts();
    check_chat();
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
