// SPDX-License-Identifier: Apache-2.0
/* test_prefix_cache.c — the prefix cache (pk_config.prefix_cache, decode_step.h) on the CPU
 * backend, shipped model. The reference of every request is its tokens with the cache off.
 *   - requests sharing a long "system prompt" then differing: in one pk_run over one slot, every
 *     later one takes the shared whole pages (num_cached = those pages' tokens; a prompt equal to
 *     an earlier one leaves its last token to compute; a page whose tokens differ in one place is
 *     not taken), and every output equals its reference;
 *   - a session: a request after another with the same prefix takes it; two submitted together
 *     take nothing from each other (neither had computed it) and are still right;
 *   - a cache of few pages under many different prompts: pages are evicted and taken again, the
 *     outputs stay right, the numbers of pages add up (no request ever waits forever);
 *   - with speculation, both schedulers.
 */
#include <string.h>

#include "check.h"
#include "pk.h"

#define MODEL "models/pk-tiny"
#define PAGE 8
#define MAXNEW 12
#define NREQ 10

static int32_t sys_prompt[40];
static int32_t prompts[NREQ][80];
static int plen[NREQ];

static pk_model *load(int prefix_cache, int max_requests, int num_pages, int spec, pk_sched_mode mode) {
    pk_config c = pk_config_default();
    c.max_seq_length = 128;
    c.max_requests = max_requests;
    c.max_tokens_per_step = 16;
    c.page_size = PAGE;
    c.num_pages = num_pages;
    c.num_workers = 2;
    c.prefix_cache = prefix_cache;
    c.spec_length = spec;
    c.sched_mode = mode;
    char err[512];
    pk_model *m = pk_model_load(MODEL, &c, err, sizeof err);
    CHECK(m != NULL, "%s", err);
    if (m && pk_compile(pk_model_kernel(m), NULL) != PK_OK) {
        CHECK(0, "compile: %s", pk_kernel_error(pk_model_kernel(m)));
        pk_model_free(m);
        m = NULL;
    }
    return m;
}

typedef struct outs {
    int32_t tok[NREQ][MAXNEW];
    pk_request r[NREQ];
} outs;

static int run_all(pk_model *m, outs *o, int n) {
    for (int i = 0; i < n; i++)
        o->r[i] = (pk_request){.prompt = prompts[i], .prompt_len = plen[i], .max_new_tokens = MAXNEW, .output = o->tok[i]};
    pk_kernel *k = pk_model_kernel(m);
    int ok = pk_run(k, o->r, n, NULL, NULL) == PK_OK;
    CHECK(ok, "run: %s", pk_kernel_error(k));
    return ok;
}

static int same(const pk_request *a, const pk_request *b) {
    return a->num_output == b->num_output && a->finish == b->finish &&
           !memcmp(a->output, b->output, (size_t)a->num_output * sizeof(int32_t));
}

static outs ref; /* the cache off */

static void one_run_shared_prefix(int spec, pk_sched_mode mode) {
    pk_model *m = load(1, 1, 128, spec, mode); /* one slot: each request runs after the one before; room for all */
    if (!m) return;
    static outs o;
    if (run_all(m, &o, NREQ)) {
        for (int i = 0; i < NREQ; i++)
            CHECK(same(&o.r[i], &ref.r[i]), "spec %d mode %d: request %d with the cache differs from without", spec,
                  (int)mode, i);
        CHECK(o.r[0].num_cached == 0, "the first request took %d cached tokens", o.r[0].num_cached);
        /* requests 2..7 share the 40-token system prompt with request 1 before them: its 5 pages */
        CHECK(o.r[1].num_cached == 0, "the first request with the system prompt took %d cached tokens", o.r[1].num_cached);
        for (int i = 2; i < 8; i++)
            CHECK(o.r[i].num_cached == 40, "request %d took %d cached tokens, not the system prompt's 40", i,
                  o.r[i].num_cached);
        /* request 8 repeats request 1's prompt (45 tokens): 5 pages, the 6th would leave nothing to
         * compute; request 9 repeats request 0's 45 tokens and 3 more, where request 0 went on with
         * its own 3 generated tokens: the 6th page differs */
        CHECK(o.r[8].num_cached == 40, "a repeated 45-token prompt took %d cached tokens", o.r[8].num_cached);
        CHECK(o.r[9].num_cached == 40, "request 0's prompt and 3 other tokens took %d cached tokens, not 40",
              o.r[9].num_cached);
    }
    pk_model_free(m);
}

static void session_prefix(void) {
    pk_model *m = load(1, 4, 0, 0, PK_SCHED_STATIC);
    if (!m) return;
    pk_kernel *k = pk_model_kernel(m);
    CHECK(pk_session_open(k, 0, NULL, NULL) == PK_OK, "open: %s", pk_kernel_error(k));
    int32_t out[4][MAXNEW];
    pk_request r[4];
    int id, running = 1;
    for (int i = 0; i < 4; i++)
        r[i] = (pk_request){.prompt = prompts[i + 1], .prompt_len = plen[i + 1], .max_new_tokens = MAXNEW, .output = out[i]};
    /* two together: neither has the other's pages yet */
    CHECK(pk_session_submit(k, &r[0], &id) == PK_OK && pk_session_submit(k, &r[1], &id) == PK_OK, "submit: %s",
          pk_kernel_error(k));
    for (int t = 0; t < 12000 && running; t++) pk_session_poll(k, 10, &running);
    /* then two more: the system prompt's pages are there */
    CHECK(pk_session_submit(k, &r[2], &id) == PK_OK && pk_session_submit(k, &r[3], &id) == PK_OK, "submit: %s",
          pk_kernel_error(k));
    running = 1;
    for (int t = 0; t < 12000 && running; t++) pk_session_poll(k, 10, &running);
    for (int i = 0; i < 4; i++) CHECK(same(&r[i], &ref.r[i + 1]), "session request %d differs from its reference", i);
    CHECK(r[0].num_cached == 0 && r[1].num_cached == 0, "requests admitted together took %d and %d cached tokens",
          r[0].num_cached, r[1].num_cached);
    CHECK(r[2].num_cached == 40 && r[3].num_cached == 40, "later requests took %d and %d cached tokens, not 40",
          r[2].num_cached, r[3].num_cached);
    CHECK(pk_session_close(k) == PK_OK, "close: %s", pk_kernel_error(k));
    pk_model_free(m);
}

/* 2 slots over 16 pages (8 per full-length request): cached pages are evicted for new ones. */
static void eviction(void) {
    pk_model *m = load(1, 2, 16, 0, PK_SCHED_DYNAMIC);
    if (!m) return;
    static outs o;
    for (int round = 0; round < 3; round++) {
        if (!run_all(m, &o, NREQ)) break;
        int bad = 0;
        for (int i = 0; i < NREQ; i++) bad += !same(&o.r[i], &ref.r[i]);
        CHECK(bad == 0, "round %d: %d requests differ from their references with a 16-page cache", round, bad);
    }
    pk_model_free(m);
}

int main(void) {
    pk_model_info info;
    char err[256];
    if (pk_model_read_info(MODEL, &info, err, sizeof err) != PK_OK) {
        CHECK(0, "%s", err);
        return check_report("prefix_cache");
    }
    uint64_t seed = 99;
    for (int j = 0; j < 40; j++) sys_prompt[j] = 1 + (int32_t)(check_rand_u64(&seed) % (uint64_t)(info.vocab_size - 1));
    /* 0: 45 random tokens; 1..7: the system prompt then 5 .. 35 tokens of their own; 8: 1 again;
     * 9: 0 again, then 3 more */
    for (int i = 0; i < NREQ; i++) {
        int n = 0;
        if (i == 0) {
            for (; n < 45; n++) prompts[i][n] = 1 + (int32_t)(check_rand_u64(&seed) % (uint64_t)(info.vocab_size - 1));
        } else if (i < 8) {
            for (; n < 40; n++) prompts[i][n] = sys_prompt[n];
            for (int j = 0; j < 5 * i; j++, n++) prompts[i][n] = 1 + (int32_t)(check_rand_u64(&seed) % 4000);
        } else {
            const int src = i == 8 ? 1 : 0;
            for (; n < plen[src]; n++) prompts[i][n] = prompts[src][n];
            if (i == 9)
                for (int j = 0; j < 3; j++, n++) prompts[i][n] = 7 + j;
        }
        plen[i] = n;
    }
    pk_model *m = load(0, 1, 0, 0, PK_SCHED_STATIC);
    if (!m || !run_all(m, &ref, NREQ)) return check_report("prefix_cache");
    for (int i = 0; i < NREQ; i++) CHECK(ref.r[i].num_cached == 0, "cache off: request %d took %d", i, ref.r[i].num_cached);
    pk_model_free(m);
    one_run_shared_prefix(0, PK_SCHED_STATIC);
    if (!SANITIZED) { /* the sanitizer builds run the others once */
        one_run_shared_prefix(0, PK_SCHED_DYNAMIC);
        one_run_shared_prefix(3, PK_SCHED_STATIC);
    }
    session_prefix();
    eviction();
    return check_report("prefix_cache");
}
