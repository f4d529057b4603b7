// SPDX-License-Identifier: Apache-2.0
/* test_sampled_rows.c — the LM head and the argmax over the rows that draw a token only
 * (pk_config.all_logits 0, the default; decode_step.h's plan puts those rows last and writes the
 * first of them to step_info's FIRST_SAMPLE), on the CPU backend and the shipped model:
 *   - one prompt in one step: only its last row's logits are computed (the rows before stay as a
 *     fresh kernel's zeros), FIRST_SAMPLE is that row; with all_logits 1 every row's are, and the
 *     last row's are the same bits;
 *   - a prompt over several steps: its middle chunks compute no logits at all;
 *   - a decoding request beside another's prompt chunk: the chunk's rows come first, the decode
 *     row after them;
 *   - tokens (greedy, sampled, with speculation, several requests over fewer slots, both
 *     schedulers) are the same with and without all_logits.
 */
#include <string.h>

#include "check.h"
#include "common/bf16.h"
#include "pk.h"

#define MODEL "models/pk-tiny"
#define T 16

typedef struct loaded {
    pk_model *m;
    pk_kernel *k;
    int vocab;
} loaded;

static int load(loaded *l, int all_logits, int max_requests, int spec, pk_sched_mode mode) {
    pk_config c = pk_config_default();
    c.max_seq_length = 128;
    c.max_requests = max_requests;
    c.max_tokens_per_step = T;
    c.page_size = 8;
    c.num_workers = 2;
    c.all_logits = all_logits;
    c.spec_length = spec;
    c.sched_mode = mode;
    char err[512];
    l->m = pk_model_load(MODEL, &c, err, sizeof err);
    CHECK(l->m != NULL, "load: %s", err);
    if (!l->m) return 0;
    l->k = pk_model_kernel(l->m);
    l->vocab = pk_model_get_info(l->m)->vocab_size;
    CHECK(pk_compile(l->k, NULL) == PK_OK, "compile: %s", pk_kernel_error(l->k));
    return 1;
}

/* logits [T, vocab] and step_info after the last run */
static void read_state(loaded *l, pk_bf16 *logits, int32_t *info) {
    CHECK(pk_tensor_read(l->k, pk_model_logits(l->m), logits, (size_t)T * l->vocab * sizeof *logits) == PK_OK,
          "read logits: %s", pk_kernel_error(l->k));
    const pk_tensor *si = pk_find_tensor(l->k, "pk.step_info");
    CHECK(si && pk_tensor_read(l->k, si, info, 4 * sizeof *info) == PK_OK, "read step_info");
}

static int row_zero(const pk_bf16 *logits, int vocab, int r) {
    for (int v = 0; v < vocab; v++)
        if (pk_bf16_to_f32(logits[(size_t)r * vocab + v]) != 0.0f) return 0;
    return 1;
}

static void prompt_ids(int32_t *ids, int n, int seed) {
    for (int i = 0; i < n; i++) ids[i] = 3 + (i * 37 + seed * 101) % 500;
}

/* One prompt of n tokens (n <= T: one step), one token out; all_logits 0 and 1. */
static void one_step(int n) {
    loaded l[2];
    pk_bf16 *lg[2] = {malloc((size_t)T * 8192 * 2), malloc((size_t)T * 8192 * 2)};
    int32_t ids[T], info[2][4], out[2][1];
    prompt_ids(ids, n, 1);
    for (int a = 0; a < 2; a++) {
        if (!load(&l[a], a, 1, 0, PK_SCHED_STATIC)) return;
        CHECK(l[a].vocab <= 8192, "vocab %d", l[a].vocab);
        pk_request r = {.prompt = ids, .prompt_len = n, .max_new_tokens = 1, .output = out[a]};
        CHECK(pk_run(l[a].k, &r, 1, NULL, NULL) == PK_OK, "run: %s", pk_kernel_error(l[a].k));
        read_state(&l[a], lg[a], info[a]);
    }
    const int V = l[0].vocab;
    CHECK(info[0][0] == n && info[0][2] == n - 1, "prompt %d: step_info rows %d, first sample %d (want %d)", n,
          info[0][0], info[0][2], n - 1);
    CHECK(info[1][0] == n && info[1][2] == 0, "prompt %d, all_logits: first sample %d (want 0)", n, info[1][2]);
    int before = 0, all = 0;
    for (int r = 0; r < n - 1; r++) before += row_zero(lg[0], V, r), all += !row_zero(lg[1], V, r);
    CHECK(before == n - 1, "prompt %d: %d of the %d rows before the last have no logits", n, before, n - 1);
    CHECK(all == n - 1, "prompt %d, all_logits: %d of the %d rows before the last have logits", n, all, n - 1);
    CHECK(!row_zero(lg[0], V, n - 1) &&
              memcmp(lg[0] + (size_t)(n - 1) * V, lg[1] + (size_t)(n - 1) * V, (size_t)V * 2) == 0,
          "prompt %d: the last row's logits are computed and the same bits either way", n);
    CHECK(out[0][0] == out[1][0], "prompt %d: token %d vs %d", n, out[0][0], out[1][0]);
    for (int a = 0; a < 2; a++) pk_model_free(l[a].m), free(lg[a]);
}

/* A prompt of 40 tokens in steps of 16, 16, 8: the logits rows 8 .. 15, which only the middle
 * chunks' steps had, were never computed. */
static void middle_chunks(void) {
    loaded l;
    if (!load(&l, 0, 1, 0, PK_SCHED_STATIC)) return;
    int32_t ids[40], out[1], info[4];
    prompt_ids(ids, 40, 2);
    pk_request r = {.prompt = ids, .prompt_len = 40, .max_new_tokens = 1, .output = out};
    CHECK(pk_run(l.k, &r, 1, NULL, NULL) == PK_OK, "run: %s", pk_kernel_error(l.k));
    pk_bf16 *lg = malloc((size_t)T * l.vocab * 2);
    read_state(&l, lg, info);
    int zero = 0;
    for (int row = 0; row < T; row++) zero += row != 7 && row_zero(lg, l.vocab, row);
    CHECK(info[0] == 8 && info[2] == 7 && zero == T - 1 && !row_zero(lg, l.vocab, 7),
          "40-token prompt: last step rows %d, first sample %d; rows without logits %d of %d", info[0], info[2], zero,
          T - 1);
    free(lg);
    pk_model_free(l.m);
}

typedef struct rows_seen {
    int n;
    int req[256], row[256];
} rows_seen;

static void on_token(void *user, int request, int32_t token, int row) {
    rows_seen *s = user;
    (void)token;
    if (s->n < 256) s->req[s->n] = request, s->row[s->n++] = row;
}

/* A (3-token prompt, 6 new) decodes while B's 40-token prompt goes in chunks: step 1 is A's prompt
 * then B's first 13 rows; in step 2 B's 15 rows come first and A's decode row is row 15. */
static void decode_after_chunk(void) {
    loaded l;
    if (!load(&l, 0, 2, 0, PK_SCHED_STATIC)) return;
    int32_t a[3], b[40], oa[6], ob[2];
    prompt_ids(a, 3, 3);
    prompt_ids(b, 40, 4);
    pk_request r[2] = {{.prompt = a, .prompt_len = 3, .max_new_tokens = 6, .output = oa},
                       {.prompt = b, .prompt_len = 40, .max_new_tokens = 2, .output = ob}};
    rows_seen s = {0};
    CHECK(pk_run(l.k, r, 2, on_token, &s) == PK_OK, "run: %s", pk_kernel_error(l.k));
    int a_rows[6], na = 0;
    for (int i = 0; i < s.n; i++)
        if (s.req[i] == 0 && na < 6) a_rows[na++] = s.row[i];
    CHECK(na == 6 && a_rows[0] == 2 && a_rows[1] == 15, "A's tokens came from rows %d, %d (want 2, 15)",
          na > 0 ? a_rows[0] : -1, na > 1 ? a_rows[1] : -1);
    pk_model_free(l.m);
}

/* Tokens of a mixed workload, all_logits 0 against 1. */
static void same_tokens(int spec, pk_sched_mode mode, int sampled) {
    enum { NR = 5, MAXNEW = 10 };
    int32_t prompts[NR][60], out[2][NR][MAXNEW];
    int plen[NR] = {3, 40, 17, 1, 55};
    for (int i = 0; i < NR; i++) {
        prompt_ids(prompts[i], plen[i], 10 + i);
        if (i == 4) /* a repeated passage: prompt lookup has drafts to verify */
            for (int j = 20; j < plen[i]; j++) prompts[i][j] = prompts[i][j - 20];
    }
    int nout[2][NR];
    for (int a = 0; a < 2; a++) {
        loaded l;
        if (!load(&l, a, 2, spec, mode)) return;
        pk_request r[NR];
        for (int i = 0; i < NR; i++) {
            r[i] = (pk_request){.prompt = prompts[i], .prompt_len = plen[i], .max_new_tokens = MAXNEW,
                                .output = out[a][i]};
            if (sampled && i % 2) r[i].sampling = (pk_sampling){.temperature = 0.9f, .top_p = 0.9f, .seed = 7 + i};
        }
        CHECK(pk_run(l.k, r, NR, NULL, NULL) == PK_OK, "run: %s", pk_kernel_error(l.k));
        for (int i = 0; i < NR; i++) nout[a][i] = r[i].num_output;
        pk_model_free(l.m);
    }
    for (int i = 0; i < NR; i++)
        CHECK(nout[0][i] == nout[1][i] && memcmp(out[0][i], out[1][i], (size_t)nout[0][i] * 4) == 0,
              "spec %d mode %d sampled %d request %d: tokens differ with all_logits", spec, (int)mode, sampled, i);
}

int main(void) {
    one_step(10);
    one_step(1);
    one_step(T);
    middle_chunks();
    decode_after_chunk();
    same_tokens(0, PK_SCHED_STATIC, 0);
    same_tokens(0, PK_SCHED_DYNAMIC, 1);
    same_tokens(4, PK_SCHED_STATIC, 0);
    same_tokens(4, PK_SCHED_DYNAMIC, 1);
    return check_report("sampled_rows");
}
