// SPDX-License-Identifier: Apache-2.0
/* test_session.c — the resident session (pk_session_*, pk.h) on the CPU backend, shipped model.
 *
 * The reference of every request is its own pk_run, alone (tokens and finish reason). Against it:
 * requests submitted together, and submitted while others decode (they join between steps, their
 * prompt chunks beside the others' decode rows), in both scheduling modes and with speculation;
 * on_token's order and ids; a cancel of a running request (its slot and pages come back: the
 * next request runs to its reference) and of a waiting one (no token); a full queue refused and
 * then accepted after a poll; bad requests refused with the session still serving; pk_run refused
 * while the session is open and working after it closes; close cancelling what runs; and a few
 * hundred requests with random cancels, every one ending exactly once; sampled requests whose
 * tokens depend on their seed and positions only (alone or batched, pk_run or session).
 */
#include <string.h>

#include "check.h"
#include "pk.h"

#define MODEL "models/pk-tiny"
#define NP 12      /* prompts */
#define MAXNEW 24
#define PLEN_MAX 40

static int32_t prompts[NP][PLEN_MAX];
static int plen[NP];
static int vocab;

typedef struct ref {
    int32_t tok[MAXNEW];
    int n;
    pk_finish_reason finish;
} ref;
static ref refs[NP]; /* each prompt alone, max_new_tokens MAXNEW */

static pk_config config(pk_sched_mode mode, int spec, int max_requests) {
    pk_config c = pk_config_default();
    c.max_seq_length = 128;
    c.max_requests = max_requests;
    c.max_tokens_per_step = 16;
    c.page_size = 8;
    c.num_workers = 2;
    c.sched_mode = mode;
    c.spec_length = spec;
    return c;
}

static pk_model *load(pk_config c) {
    char err[512];
    pk_model *m = pk_model_load(MODEL, &c, err, sizeof err);
    CHECK(m != NULL, "%s", err);
    if (!m) return NULL;
    if (pk_compile(pk_model_kernel(m), NULL) != PK_OK) {
        CHECK(0, "compile: %s", pk_kernel_error(pk_model_kernel(m)));
        pk_model_free(m);
        return NULL;
    }
    return m;
}

static void make_refs(void) {
    pk_model *m = load(config(PK_SCHED_STATIC, 0, 1));
    if (!m) return;
    for (int i = 0; i < NP; i++) {
        pk_request r = {.prompt = prompts[i], .prompt_len = plen[i], .max_new_tokens = MAXNEW, .output = refs[i].tok};
        CHECK(pk_run(pk_model_kernel(m), &r, 1, NULL, NULL) == PK_OK, "reference %d: %s", i,
              pk_kernel_error(pk_model_kernel(m)));
        refs[i].n = r.num_output;
        refs[i].finish = r.finish;
    }
    pk_model_free(m);
}

/* What on_token saw of each id. */
typedef struct seen {
    int32_t tok[64][MAXNEW];
    int n[64];
    int bad; /* a token of an unknown id, or past its request's room */
} seen;

static void on_token(void *user, int id, int32_t token, int row) {
    seen *s = user;
    (void)row;
    if (id < 0 || id >= 64 || s->n[id] >= MAXNEW) {
        s->bad++;
        return;
    }
    s->tok[id][s->n[id]++] = token;
}

/* Polls until nothing runs (at most ~2 min: a sanitizer build on a busy machine is slow). */
static void drain(pk_kernel *k, const char *what) {
    int running = 1;
    for (int i = 0; i < 12000 && running > 0; i++)
        if (pk_session_poll(k, 10, &running) != PK_OK) {
            CHECK(0, "%s: poll: %s", what, pk_kernel_error(k));
            return;
        }
    CHECK(running == 0, "%s: %d requests still running after 2 min", what, running);
}

static int same_as_ref(const pk_request *r, int p) {
    return r->num_output == refs[p].n && r->finish == refs[p].finish &&
           memcmp(r->output, refs[p].tok, (size_t)r->num_output * sizeof(int32_t)) == 0;
}

/* n requests (prompt i % NP), the first `first` submitted at once, the rest one by one after a
 * poll that saw tokens come: every output equals its reference, and on_token saw the same. */
static void together_and_joining(pk_sched_mode mode, int spec, int max_requests, int n, int first) {
    pk_model *m = load(config(mode, spec, max_requests));
    if (!m) return;
    pk_kernel *k = pk_model_kernel(m);
    static seen sn;
    memset(&sn, 0, sizeof sn);
    pk_status st = pk_session_open(k, 0, on_token, &sn);
    CHECK(st == PK_OK, "open: %s", pk_kernel_error(k));
    if (st != PK_OK) {
        pk_model_free(m);
        return;
    }
    static int32_t out[64][MAXNEW];
    pk_request req[64];
    int ids[64];
    for (int i = 0; i < n; i++) {
        req[i] = (pk_request){.prompt = prompts[i % NP], .prompt_len = plen[i % NP], .max_new_tokens = MAXNEW,
                              .output = out[i]};
        if (i >= first) { /* join while the others run */
            int running = 0;
            CHECK(pk_session_poll(k, 50, &running) == PK_OK, "poll: %s", pk_kernel_error(k));
        }
        st = pk_session_submit(k, &req[i], &ids[i]);
        for (int t = 0; t < 2000 && st == PK_ERR_LIMIT; t++) { /* the queue is full: wait for one to end */
            pk_session_poll(k, 10, NULL);
            st = pk_session_submit(k, &req[i], &ids[i]);
        }
        CHECK(st == PK_OK && ids[i] == i, "submit %d: id %d, %s", i, ids[i], pk_kernel_error(k));
    }
    drain(k, "together");
    for (int i = 0; i < n; i++) {
        CHECK(same_as_ref(&req[i], i % NP), "mode %d spec %d R %d: request %d (%d tokens, finish %d) differs from "
              "its own run (%d tokens, finish %d)", (int)mode, spec, max_requests, i, req[i].num_output,
              (int)req[i].finish, refs[i % NP].n, (int)refs[i % NP].finish);
        CHECK(sn.n[i] == req[i].num_output && memcmp(sn.tok[i], req[i].output, (size_t)sn.n[i] * 4) == 0,
              "on_token of request %d: %d tokens, output %d", i, sn.n[i], req[i].num_output);
    }
    CHECK(sn.bad == 0, "%d tokens of unknown ids", sn.bad);
    CHECK(pk_session_close(k) == PK_OK, "close: %s", pk_kernel_error(k));
    pk_model_free(m);
}

static void cancels_and_errors(void) {
    pk_model *m = load(config(PK_SCHED_STATIC, 0, 1)); /* one slot: the next waits for the first */
    if (!m) return;
    pk_kernel *k = pk_model_kernel(m);
    pk_request bad_req = {.prompt = prompts[0], .prompt_len = plen[0], .max_new_tokens = MAXNEW, .output = NULL};
    int id = -1;
    CHECK(pk_session_submit(k, &bad_req, &id) == PK_ERR_STATE && strstr(pk_kernel_error(k), "no session"),
          "submit without a session: %s", pk_kernel_error(k));
    CHECK(pk_session_open(k, 0, NULL, NULL) == PK_OK, "open: %s", pk_kernel_error(k));
    CHECK(pk_session_open(k, 0, NULL, NULL) == PK_ERR_STATE, "a second open: %s", pk_kernel_error(k));
    /* bad requests: refused, the session goes on */
    CHECK(pk_session_submit(k, &bad_req, &id) == PK_ERR_INVALID_ARGUMENT && strstr(pk_kernel_error(k), "NULL"),
          "NULL output: %s", pk_kernel_error(k));
    int32_t out[4][MAXNEW], badtok[2] = {1, vocab + 5};
    pk_request oov = {.prompt = badtok, .prompt_len = 2, .max_new_tokens = 4, .output = out[0]};
    CHECK(pk_session_submit(k, &oov, &id) == PK_ERR_LIMIT && strstr(pk_kernel_error(k), "vocabulary"),
          "token outside the vocabulary: %s", pk_kernel_error(k));
    pk_request neg = {.prompt = prompts[0], .prompt_len = plen[0], .max_new_tokens = -3, .output = out[0]};
    CHECK(pk_session_submit(k, &neg, &id) == PK_ERR_INVALID_ARGUMENT, "max_new_tokens -3: %s", pk_kernel_error(k));
    pk_request one = {.prompt = prompts[0], .prompt_len = 1, .max_new_tokens = 1, .output = out[0]};
    CHECK(pk_run(k, &one, 1, NULL, NULL) == PK_ERR_STATE && strstr(pk_kernel_error(k), "session is open"),
          "pk_run during a session: %s", pk_kernel_error(k));

    /* a running request cancelled after a few tokens: CANCELLED with a prefix of its reference;
     * the waiting one behind it then runs to its own reference */
    pk_request a = {.prompt = prompts[1], .prompt_len = plen[1], .max_new_tokens = MAXNEW, .output = out[1]};
    pk_request b = {.prompt = prompts[2], .prompt_len = plen[2], .max_new_tokens = MAXNEW, .output = out[2]};
    pk_request c = {.prompt = prompts[3], .prompt_len = plen[3], .max_new_tokens = MAXNEW, .output = out[3]};
    int ida = -1, idb = -1, idc = -1;
    CHECK(pk_session_submit(k, &a, &ida) == PK_OK && pk_session_submit(k, &b, &idb) == PK_OK &&
              pk_session_submit(k, &c, &idc) == PK_OK,
          "submit: %s", pk_kernel_error(k));
    CHECK(pk_session_cancel(k, idc) == PK_OK, "cancel of a waiting request: %s", pk_kernel_error(k));
    for (int i = 0; i < 2000 && a.num_output < 2 && a.finish == PK_FINISH_NONE; i++) pk_session_poll(k, 10, NULL);
    CHECK(pk_session_cancel(k, ida) == PK_OK && pk_session_cancel(k, 9999) == PK_OK && pk_session_cancel(k, -1) == PK_OK,
          "cancels: %s", pk_kernel_error(k));
    drain(k, "cancel");
    CHECK(a.finish == PK_FINISH_CANCELLED || (refs[1].n <= 2 && same_as_ref(&a, 1)),
          "the cancelled request ended with %d after %d tokens", (int)a.finish, a.num_output);
    CHECK(a.num_output <= refs[1].n && memcmp(a.output, refs[1].tok, (size_t)a.num_output * 4) == 0,
          "the cancelled request's %d tokens are not a prefix of its own run's", a.num_output);
    CHECK(same_as_ref(&b, 2), "the request after the cancelled one: %d tokens, finish %d (own run %d, %d)",
          b.num_output, (int)b.finish, refs[2].n, (int)refs[2].finish);
    CHECK(c.finish == PK_FINISH_CANCELLED && c.num_output == 0, "the waiting request cancelled: finish %d, %d tokens",
          (int)c.finish, c.num_output);
    CHECK(pk_session_cancel(k, ida) == PK_OK, "a second cancel of an ended request: %s", pk_kernel_error(k));

    /* close with a request running: it ends CANCELLED; then pk_run works again */
    pk_request d = {.prompt = prompts[4], .prompt_len = plen[4], .max_new_tokens = MAXNEW, .output = out[0]};
    CHECK(pk_session_submit(k, &d, &id) == PK_OK, "submit: %s", pk_kernel_error(k));
    CHECK(pk_session_close(k) == PK_OK, "close: %s", pk_kernel_error(k));
    CHECK(d.finish == PK_FINISH_CANCELLED || same_as_ref(&d, 4), "closed while running: finish %d",
          (int)d.finish);
    CHECK(pk_session_close(k) == PK_OK, "a second close: %s", pk_kernel_error(k));
    one.max_new_tokens = MAXNEW;
    one.prompt_len = plen[5];
    one.prompt = prompts[5];
    CHECK(pk_run(k, &one, 1, NULL, NULL) == PK_OK && same_as_ref(&one, 5), "pk_run after the session: %s",
          pk_kernel_error(k));
    pk_model_free(m);
}

/* queue 2 over max_requests 2: the third submit is refused until one ends */
static void full_queue(void) {
    pk_model *m = load(config(PK_SCHED_STATIC, 0, 2));
    if (!m) return;
    pk_kernel *k = pk_model_kernel(m);
    CHECK(pk_session_open(k, 1, NULL, NULL) == PK_ERR_INVALID_ARGUMENT, "queue 1 < max_requests 2: %s",
          pk_kernel_error(k));
    CHECK(pk_session_open(k, 2, NULL, NULL) == PK_OK, "open: %s", pk_kernel_error(k));
    int32_t out[3][MAXNEW];
    pk_request r[3];
    int id[3] = {-1, -1, -1};
    for (int i = 0; i < 3; i++)
        r[i] = (pk_request){.prompt = prompts[i], .prompt_len = plen[i], .max_new_tokens = MAXNEW, .output = out[i]};
    CHECK(pk_session_submit(k, &r[0], &id[0]) == PK_OK && pk_session_submit(k, &r[1], &id[1]) == PK_OK, "submit: %s",
          pk_kernel_error(k));
    CHECK(pk_session_submit(k, &r[2], &id[2]) == PK_ERR_LIMIT && strstr(pk_kernel_error(k), "queue is full"),
          "a third in a queue of 2: %s", pk_kernel_error(k));
    int running = 2;
    for (int i = 0; i < 2000 && running == 2; i++) pk_session_poll(k, 10, &running);
    CHECK(pk_session_submit(k, &r[2], &id[2]) == PK_OK && id[2] == 2, "after one ended: %s", pk_kernel_error(k));
    drain(k, "full queue");
    for (int i = 0; i < 3; i++) CHECK(same_as_ref(&r[i], i), "request %d of the full queue", i);
    pk_model_free(m); /* closes the session */
}

/* A long request beside many short ones that come and go: its queue entry stays held while more
 * ids than the queue holds pass through the others (an id's entry is any free one). */
static void long_beside_short(void) {
    pk_model *m = load(config(PK_SCHED_STATIC, 0, 2));
    if (!m) return;
    pk_kernel *k = pk_model_kernel(m);
    CHECK(pk_session_open(k, 4, NULL, NULL) == PK_OK, "open: %s", pk_kernel_error(k));
    static int32_t long_out[100], short_out[12][2];
    const int nshort = SANITIZED ? 6 : 12; /* more than the queue's 4 either way */
    pk_request a = {.prompt = prompts[0], .prompt_len = plen[0], .max_new_tokens = SANITIZED ? 60 : 100, .output = long_out};
    int id, ok = 1, passed_while_long = 0;
    CHECK(pk_session_submit(k, &a, &id) == PK_OK, "submit the long one: %s", pk_kernel_error(k));
    for (int i = 0; i < nshort && ok; i++) {
        pk_request b = {.prompt = prompts[1 + i % 5], .prompt_len = plen[1 + i % 5], .max_new_tokens = 2, .output = short_out[i]};
        ok = pk_session_submit(k, &b, &id) == PK_OK;
        CHECK(ok, "short request %d (id %d) beside the long one: %s", i, id, pk_kernel_error(k));
        while (ok && b.finish == PK_FINISH_NONE) ok = pk_session_poll(k, 10, NULL) == PK_OK;
        passed_while_long += a.finish == PK_FINISH_NONE;
        CHECK(ok && b.num_output >= 1 && !memcmp(b.output, refs[1 + i % 5].tok, (size_t)b.num_output * 4),
              "short request %d: %d tokens", i, b.num_output);
    }
    printf("long_beside_short: %d of %d short requests passed while the long one ran (queue 4)\n", passed_while_long,
           nshort);
    CHECK(passed_while_long > 4, "only %d short requests passed while the long one ran: the test shows nothing",
          passed_while_long);
    drain(k, "long beside short");
    CHECK(a.num_output <= 100 && !memcmp(a.output, refs[0].tok, (size_t)(a.num_output < MAXNEW ? a.num_output : MAXNEW) * 4),
          "the long request's tokens differ from its own run");
    pk_model_free(m);
}

/* Many short requests, random cancels, submitted whenever the queue has room: each ends exactly
 * once, the uncancelled equal their references, the cancelled hold a prefix. */
static void churn(int total) {
    pk_model *m = load(config(PK_SCHED_DYNAMIC, 0, 4));
    if (!m) return;
    pk_kernel *k = pk_model_kernel(m);
    CHECK(pk_session_open(k, 8, NULL, NULL) == PK_OK, "open: %s", pk_kernel_error(k));
    enum { LIVE = 8 };
    pk_request r[LIVE];
    int32_t out[LIVE][MAXNEW];
    int id[LIVE], prompt_of[LIVE], busy[LIVE] = {0}, cancel_in[LIVE]; /* polls until its cancel; -1: none */
    int submitted = 0, ended = 0, wrong = 0, cancelled = 0;
    uint64_t seed = 77;
    for (int iter = 0; iter < 100000 && ended < total; iter++) {
        for (int s = 0; s < LIVE && submitted < total; s++) {
            if (busy[s]) continue;
            prompt_of[s] = (int)(check_rand_u64(&seed) % NP);
            r[s] = (pk_request){.prompt = prompts[prompt_of[s]], .prompt_len = plen[prompt_of[s]],
                                .max_new_tokens = 1 + (int)(check_rand_u64(&seed) % MAXNEW), .output = out[s]};
            if (pk_session_submit(k, &r[s], &id[s]) != PK_OK) break;
            busy[s] = 1;
            cancel_in[s] = check_rand_u64(&seed) % 4 == 0 ? (int)(check_rand_u64(&seed) % 4) : -1; /* a quarter */
            submitted++;
        }
        for (int s = 0; s < LIVE; s++)
            if (busy[s] && cancel_in[s] >= 0 && cancel_in[s]-- == 0) pk_session_cancel(k, id[s]);
        if (pk_session_poll(k, 5, NULL) != PK_OK) {
            CHECK(0, "churn poll: %s", pk_kernel_error(k));
            break;
        }
        for (int s = 0; s < LIVE; s++) {
            if (!busy[s] || r[s].finish == PK_FINISH_NONE) continue;
            busy[s] = 0;
            ended++;
            const ref *f = &refs[prompt_of[s]];
            const int n = r[s].num_output, want = f->n < r[s].max_new_tokens ? f->n : r[s].max_new_tokens;
            const int prefix = n <= want && memcmp(r[s].output, f->tok, (size_t)n * 4) == 0;
            if (r[s].finish == PK_FINISH_CANCELLED) cancelled++;
            else if (!(prefix && n == want)) wrong++;
            if (!prefix) wrong++;
        }
    }
    CHECK(ended == total && submitted == total, "churn: %d of %d requests ended (%d submitted)", ended, total, submitted);
    CHECK(wrong == 0, "churn: %d requests with tokens other than their own run's", wrong);
    CHECK(cancelled > 0 && cancelled < total, "churn: %d of %d cancelled (the test's cancels did not land)", cancelled,
          total);
    int running = -1;
    CHECK(pk_session_poll(k, 0, &running) == PK_OK && running == 0, "churn: %d still running", running);
    CHECK(pk_session_close(k) == PK_OK, "close: %s", pk_kernel_error(k));
    pk_model_free(m);
}

/* Sampling through the kernel: a sampled request's tokens depend only on its seed and positions
 * (the same alone with pk_run, twice, and in a session beside greedy and other sampled requests);
 * another seed gives other tokens; the greedy requests beside them keep their own; bad settings
 * are refused. */
static void sampling(void) {
    pk_model *m = load(config(PK_SCHED_STATIC, 0, 4));
    if (!m) return;
    pk_kernel *k = pk_model_kernel(m);
    const pk_sampling hot = {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = 11};
    int32_t alone[2][MAXNEW], other[MAXNEW];
    pk_request r = {.prompt = prompts[6], .prompt_len = plen[6], .max_new_tokens = MAXNEW, .output = alone[0], .sampling = hot};
    CHECK(pk_run(k, &r, 1, NULL, NULL) == PK_OK, "sampled run: %s", pk_kernel_error(k));
    const int n_alone = r.num_output;
    r.output = alone[1];
    CHECK(pk_run(k, &r, 1, NULL, NULL) == PK_OK && r.num_output == n_alone &&
              !memcmp(alone[0], alone[1], (size_t)n_alone * 4),
          "a sampled run repeated gave other tokens");
    int n_greedy_differs = n_alone != refs[6].n || memcmp(alone[0], refs[6].tok, (size_t)n_alone * 4) != 0;
    CHECK(n_greedy_differs, "temperature 0.9 gave exactly the greedy tokens (%d): sampling did not happen", n_alone);
    r.output = other;
    r.sampling.seed = 12;
    CHECK(pk_run(k, &r, 1, NULL, NULL) == PK_OK, "sampled run, seed 12: %s", pk_kernel_error(k));
    CHECK(r.num_output != n_alone || memcmp(other, alone[0], (size_t)n_alone * 4) != 0, "seeds 11 and 12 gave the same tokens");

    /* in a session, beside greedy requests and one of another seed */
    CHECK(pk_session_open(k, 0, NULL, NULL) == PK_OK, "open: %s", pk_kernel_error(k));
    int32_t out[5][MAXNEW];
    pk_request q[5];
    int id;
    for (int i = 0; i < 5; i++) {
        q[i] = (pk_request){.prompt = prompts[i < 4 ? 6 : 7], .prompt_len = plen[i < 4 ? 6 : 7], .max_new_tokens = MAXNEW,
                            .output = out[i]};
        if (i == 0 || i == 2) q[i].sampling = hot;
        if (i == 3) q[i].sampling = (pk_sampling){.temperature = 1.5f, .min_p = 0.1f, .seed = 99};
        CHECK(pk_session_submit(k, &q[i], &id) == PK_OK, "submit %d: %s", i, pk_kernel_error(k));
    }
    drain(k, "sampling");
    for (int i = 0; i < 3; i += 2)
        CHECK(q[i].num_output == n_alone && !memcmp(out[i], alone[0], (size_t)n_alone * 4),
              "sampled request %d in a batch differs from its run alone", i);
    CHECK(same_as_ref(&q[1], 6) && same_as_ref(&q[4], 7), "greedy requests beside sampled ones changed");
    const pk_sampling bad[4] = {{.temperature = -1}, {.temperature = 1, .top_p = 1.5f}, {.temperature = 1, .min_p = 1},
                                {.temperature = 1, .top_k = -2}};
    for (int i = 0; i < 4; i++) {
        pk_request b = {.prompt = prompts[0], .prompt_len = plen[0], .max_new_tokens = 4, .output = out[0], .sampling = bad[i]};
        CHECK(pk_session_submit(k, &b, &id) == PK_ERR_INVALID_ARGUMENT, "bad sampling %d accepted: %s", i,
              pk_kernel_error(k));
    }
    pk_model_free(m);
}

/* Random sessions: rounds, each its own slots (1..4), queue, KV pages (few enough to evict the
 * prefix cache) and scheduler; requests over prompts that share prefixes, greedy or sampled, with
 * random max_tokens, random cancels and a close at a random point. Every request ends exactly once
 * (its finish set by the time the session is closed) and holds a prefix of its own run alone, the
 * whole of it unless cancelled. */
static void random_sessions(int rounds) {
    enum { NPFX = 6, NEW = 16, MAXQ = 16 };
    static int32_t px[NPFX][48];
    static int pl[NPFX];
    static ref solo[NPFX][2]; /* [prompt][greedy, sampled] */
    const pk_sampling hot = {.temperature = 1.1f, .top_p = 0.9f, .seed = 3};
    for (int i = 0; i < NPFX; i++) { /* 0..2 share 24 tokens (3 pages of 8), 3..5 share 17 with them */
        pl[i] = 26 + 3 * i;
        for (int j = 0; j < pl[i]; j++) px[i][j] = j < (i < 3 ? 24 : 17) ? prompts[0][j % plen[0]] : 2 + ((i * 37 + j * 11) % 900);
    }
    pk_model *m = load(config(PK_SCHED_STATIC, 0, 1));
    if (!m) return;
    for (int i = 0; i < NPFX; i++)
        for (int smp = 0; smp < 2; smp++) {
            pk_request r = {.prompt = px[i], .prompt_len = pl[i], .max_new_tokens = NEW, .output = solo[i][smp].tok};
            if (smp) r.sampling = hot;
            CHECK(pk_run(pk_model_kernel(m), &r, 1, NULL, NULL) == PK_OK, "solo: %s", pk_kernel_error(pk_model_kernel(m)));
            solo[i][smp].n = r.num_output;
            solo[i][smp].finish = r.finish;
        }
    pk_model_free(m);
    uint64_t seed = 2024;
    for (int round = 0; round < rounds; round++) {
        pk_config c = config(round % 2 ? PK_SCHED_DYNAMIC : PK_SCHED_STATIC, 0, 1 + (int)(check_rand_u64(&seed) % 4));
        c.num_pages = c.max_requests * 8 + (int)(check_rand_u64(&seed) % 8); /* 8: one full-length request */
        m = load(c);
        if (!m) return;
        pk_kernel *k = pk_model_kernel(m);
        const int queue = c.max_requests + (int)(check_rand_u64(&seed) % (MAXQ - c.max_requests + 1));
        CHECK(pk_session_open(k, queue, NULL, NULL) == PK_OK, "open: %s", pk_kernel_error(k));
        static pk_request r[200];
        static int32_t out[200][NEW];
        int who[200], smp[200], n = 0, wrong = 0, unended = 0;
        const int close_at = 40 + (int)(check_rand_u64(&seed) % 40);
        for (int it = 0; it < close_at; it++) {
            if (n < 200 && check_rand_u64(&seed) % 3 != 0) {
                who[n] = (int)(check_rand_u64(&seed) % NPFX);
                smp[n] = (int)(check_rand_u64(&seed) % 2);
                r[n] = (pk_request){.prompt = px[who[n]], .prompt_len = pl[who[n]],
                                    .max_new_tokens = 1 + (int)(check_rand_u64(&seed) % NEW), .output = out[n]};
                if (smp[n]) r[n].sampling = hot;
                int id;
                if (pk_session_submit(k, &r[n], &id) == PK_OK) n++;
            }
            if (n && check_rand_u64(&seed) % 5 == 0) pk_session_cancel(k, (int)(check_rand_u64(&seed) % (uint64_t)n));
            if (pk_session_poll(k, (int)(check_rand_u64(&seed) % 3), NULL) != PK_OK) {
                CHECK(0, "round %d poll: %s", round, pk_kernel_error(k));
                break;
            }
        }
        CHECK(pk_session_close(k) == PK_OK, "round %d close: %s", round, pk_kernel_error(k));
        for (int i = 0; i < n; i++) {
            const ref *f = &solo[who[i]][smp[i]];
            const int want = f->n < r[i].max_new_tokens ? f->n : r[i].max_new_tokens;
            unended += r[i].finish == PK_FINISH_NONE;
            if (r[i].num_output > want || memcmp(r[i].output, f->tok, (size_t)r[i].num_output * 4) != 0 ||
                (r[i].finish != PK_FINISH_CANCELLED && r[i].num_output != want))
                wrong++;
        }
        CHECK(unended == 0 && wrong == 0, "round %d (R %d, %d pages, queue %d): %d requests, %d never ended, %d wrong",
              round, c.max_requests, c.num_pages, queue, n, unended, wrong);
        pk_model_free(m);
    }
}

int main(void) {
    pk_model_info info;
    char err[256];
    if (pk_model_read_info(MODEL, &info, err, sizeof err) != PK_OK) {
        CHECK(0, "%s", err);
        return check_report("session");
    }
    vocab = info.vocab_size;
    uint64_t seed = 1234;
    for (int i = 0; i < NP; i++) {
        plen[i] = 1 + (int)(check_rand_u64(&seed) % PLEN_MAX);
        for (int j = 0; j < plen[i]; j++) prompts[i][j] = 1 + (int32_t)(check_rand_u64(&seed) % (uint64_t)(vocab - 1));
    }
    make_refs();
    together_and_joining(PK_SCHED_DYNAMIC, 0, 3, NP, 3);    /* joining while others decode */
    if (!SANITIZED) { /* the sanitizer passes keep to the threads' hand-offs: ~10x slower */
        together_and_joining(PK_SCHED_STATIC, 0, 4, NP, NP); /* all at once, more than fit */
        together_and_joining(PK_SCHED_STATIC, 0, 4, 2 * NP, 2);
        together_and_joining(PK_SCHED_STATIC, 4, 4, NP, 4); /* speculation's drafts beside */
    }
    cancels_and_errors();
    full_queue();
    long_beside_short();
    churn(SANITIZED ? 30 : 300);
    sampling();
    if (!SANITIZED) random_sessions(4); /* single-threaded logic mostly: the normal pass covers it */
    return check_report("session");
}
