// SPDX-License-Identifier: Apache-2.0
/* test_speculation.c — prompt-lookup speculative decoding (pk_config.spec_length) on the CPU
 * backend: greedy tokens with speculation are the tokens without it, for every golden model and
 * the shipped model, with one request and with three requests over two slots (chunked prefill,
 * admission, 16-row steps that cannot hold every draft), at every draft length 1..8, three n-gram
 * sizes, both scheduling modes; on the shipped model a prompt whose continuation repeats it gets
 * drafts kept (pk_kernel_stats); out-of-range settings are refused.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pk.h"

#define NREQ 3
#define NEW 24

#define MAX_NEW 64 /* the longest run's max_new_tokens */

typedef struct outputs {
    int32_t tok[NREQ][MAX_NEW];
    int n[NREQ];
    pk_finish_reason finish[NREQ];
    pk_graph_stats stats;
} outputs;

/* Runs nreq requests (prompt i: prompts[i], len[i]) on model_dir; 0 on failure (already reported). */
static int64_t g_eos = -1; /* the eos_token_id of the runs */

static int run(const char *model_dir, int spec_length, int spec_ngram, pk_sched_mode mode, int nreq,
               int32_t *const *prompts, const int *len, int max_new, outputs *o) {
    pk_config c = pk_config_default();
    c.max_seq_length = 128; /* the golden models' max_position_embeddings */
    c.max_requests = 2;
    c.max_tokens_per_step = 16;
    c.page_size = 8;
    c.num_workers = 2;
    c.sched_mode = mode;
    c.eos_token_id = g_eos;
    c.spec_length = spec_length;
    c.spec_ngram = spec_ngram;
    char err[512];
    pk_model *m = pk_model_load(model_dir, &c, err, sizeof err);
    CHECK(m != NULL, "%s: %s", model_dir, err);
    if (!m) return 0;
    pk_kernel *k = pk_model_kernel(m);
    int ok = pk_compile(k, NULL) == PK_OK;
    CHECK(ok, "%s: compile: %s", model_dir, pk_kernel_error(k));
    pk_request req[NREQ];
    memset(o, 0, sizeof *o);
    for (int i = 0; i < nreq; i++)
        req[i] = (pk_request){.prompt = prompts[i], .prompt_len = len[i], .max_new_tokens = max_new, .output = o->tok[i]};
    if (ok) {
        ok = pk_run(k, req, nreq, NULL, NULL) == PK_OK;
        CHECK(ok, "%s: run (spec %d): %s", model_dir, spec_length, pk_kernel_error(k));
    }
    for (int i = 0; i < nreq; i++) o->n[i] = req[i].num_output, o->finish[i] = req[i].finish;
    if (ok) pk_kernel_stats(k, &o->stats);
    pk_model_free(m);
    return ok;
}

static int vocab_of(const char *dir) {
    pk_model_info info;
    char err[256];
    return pk_model_read_info(dir, &info, err, sizeof err) == PK_OK ? info.vocab_size : 0;
}

/* Prompts with repeats in them (so drafts are found): a random run, then part of it again. */
static void make_prompts(int vocab, uint64_t seed, int32_t p[NREQ][64], int len[NREQ]) {
    static const int run_len[NREQ] = {12, 30, 7};
    for (int i = 0; i < NREQ; i++) {
        int n = 0;
        for (int j = 0; j < run_len[i]; j++) p[i][n++] = (int32_t)(check_rand_u64(&seed) % (uint64_t)vocab);
        for (int j = 0; j < run_len[i] / 2; j++) p[i][n++] = p[i][j];
        len[i] = n;
    }
}

static int64_t total_drafted; /* over every model: the checks above mean something only with drafts */

static void check_model(const char *dir) {
    const int vocab = vocab_of(dir);
    CHECK(vocab > 0, "%s: no config", dir);
    if (vocab <= 0) return;
    int32_t p[NREQ][64];
    int len[NREQ];
    make_prompts(vocab, 7, p, len);
    int32_t *prompts[NREQ] = {p[0], p[1], p[2]};
    for (int nreq = 1; nreq <= NREQ; nreq += NREQ - 1) {
        static outputs base, spec;
        if (!run(dir, 0, 0, PK_SCHED_STATIC, nreq, prompts, len, NEW, &base)) return;
        int64_t drafted = 0;
        for (int L = 1; L <= 8; L++)
            for (int g = 1; g <= 3; g++) {
                if (g != 3 && L != 4) continue; /* the n-gram sizes at one length */
                const pk_sched_mode mode = L == 5 ? PK_SCHED_DYNAMIC : PK_SCHED_STATIC;
                if (!run(dir, L, g, mode, nreq, prompts, len, NEW, &spec)) return;
                int same = 1;
                for (int i = 0; i < nreq; i++)
                    same = same && spec.n[i] == base.n[i] && spec.finish[i] == base.finish[i] &&
                           !memcmp(spec.tok[i], base.tok[i], (size_t)base.n[i] * sizeof(int32_t));
                CHECK(same, "%s: %d request(s), spec length %d, n-gram %d, mode %d: tokens differ from no speculation",
                      dir, nreq, L, g, (int)mode);
                CHECK(spec.stats.spec_accepted <= spec.stats.spec_drafted, "%s: kept %lld of %lld drafts", dir,
                      (long long)spec.stats.spec_accepted, (long long)spec.stats.spec_drafted);
                drafted += spec.stats.spec_drafted;
            }
        total_drafted += drafted;
        printf("  %s, %d request(s): the same tokens at spec lengths 1..8 (%lld drafts verified)\n", dir, nreq,
               (long long)drafted);
    }
}

/* The shipped model copies a passage it has just read: its drafts are kept, in fewer steps. */
static void check_kept(void) {
    char err[256];
    pk_tokenizer *t = pk_tokenizer_load("models/pk-tiny/tokenizer.json", err, sizeof err);
    CHECK(t != NULL, "tokenizer: %s", err);
    if (!t) return;
    static const char text[] =
        "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
        "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "
        "said, Let there be light: and there was light. In the beginning God created";
    int32_t ids[128];
    int n = pk_tokenizer_encode(t, text, strlen(text), ids, 128);
    pk_tokenizer_free(t);
    CHECK(n > 10 && n < 128, "encode: %d ids", n);
    if (n <= 10 || n >= 128) return;
    int32_t *prompts[1] = {ids};
    static outputs base, spec;
    if (!run("models/pk-tiny", 0, 0, PK_SCHED_STATIC, 1, prompts, &n, 60, &base) ||
        !run("models/pk-tiny", 4, 3, PK_SCHED_STATIC, 1, prompts, &n, 60, &spec))
        return;
    CHECK(spec.n[0] == base.n[0] && !memcmp(spec.tok[0], base.tok[0], (size_t)base.n[0] * sizeof(int32_t)),
          "pk-tiny, the copied passage: tokens differ with speculation");
    CHECK(spec.stats.spec_accepted > 0 && spec.stats.steps_run < base.stats.steps_run,
          "pk-tiny, the copied passage: %lld of %lld drafts kept, %lld steps against %lld",
          (long long)spec.stats.spec_accepted, (long long)spec.stats.spec_drafted, (long long)spec.stats.steps_run,
          (long long)base.stats.steps_run);
    printf("  pk-tiny copying a passage: %lld of %lld drafts kept, %lld steps instead of %lld\n",
           (long long)spec.stats.spec_accepted, (long long)spec.stats.spec_drafted, (long long)spec.stats.steps_run,
           (long long)base.stats.steps_run);
    /* an EOS inside a run of kept drafts ends the request there, as without speculation: the
     * token at each position of the output in turn is made the EOS */
    int stops = 0;
    for (int at = 1; at < base.n[0]; at += 3) {
        g_eos = base.tok[0][at];
        static outputs b2, s2;
        if (!run("models/pk-tiny", 0, 0, PK_SCHED_STATIC, 1, prompts, &n, 60, &b2) ||
            !run("models/pk-tiny", 4, 3, PK_SCHED_STATIC, 1, prompts, &n, 60, &s2))
            break;
        CHECK(b2.finish[0] == PK_FINISH_EOS && s2.finish[0] == PK_FINISH_EOS && s2.n[0] == b2.n[0] &&
                  !memcmp(s2.tok[0], b2.tok[0], (size_t)b2.n[0] * sizeof(int32_t)),
              "pk-tiny with EOS %lld: %d tokens (finish %d) with speculation, %d (finish %d) without", (long long)g_eos,
              s2.n[0], (int)s2.finish[0], b2.n[0], (int)b2.finish[0]);
        stops++;
    }
    g_eos = -1;
    CHECK(stops >= 10, "EOS checks: %d", stops);
}

static void check_config(void) {
    pk_config c = pk_config_default();
    c.spec_length = 17;
    pk_kernel *k = pk_kernel_new(&c);
    CHECK(k && pk_kernel_status(k) == PK_ERR_INVALID_ARGUMENT && strstr(pk_kernel_error(k), "spec_length 17"),
          "spec_length 17: %s", k ? pk_kernel_error(k) : "no kernel");
    pk_kernel_free(k);
    c.spec_length = 4;
    c.spec_ngram = 9;
    k = pk_kernel_new(&c);
    CHECK(k && pk_kernel_status(k) == PK_ERR_INVALID_ARGUMENT && strstr(pk_kernel_error(k), "spec_ngram 9"),
          "spec_ngram 9: %s", k ? pk_kernel_error(k) : "no kernel");
    pk_kernel_free(k);
}

int main(void) {
    check_config();
    DIR *d = opendir("tests/data/golden");
    CHECK(d != NULL, "tests/data/golden");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || strchr(e->d_name, '.')) continue;
        char dir[512];
        snprintf(dir, sizeof dir, "tests/data/golden/%s", e->d_name);
        check_model(dir);
    }
    if (d) closedir(d);
    check_model("models/pk-tiny");
    CHECK(total_drafted > 1000, "%lld drafts verified over every model and run", (long long)total_drafted);
    check_kept();
    return check_report("speculation");
}
