// SPDX-License-Identifier: Apache-2.0
/* session.c — pk_session_* (pk.h): a resident session. The backend's `run` goes on on a thread of
 * the session's until it closes; the host hands requests and cancels to its step boundary and
 * takes records back, through session_step.h's box and rings. The step logic is decode_step.h's,
 * as in pk_run: a session only widens what a step boundary reads and writes.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "runtime/session.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- the step boundary (the run thread): session_step.h's ---- */

void pk_session_step_finished(pk_decode *d) { pk_session_push(&d->sess->link, &d->s); }

int pk_session_step_plan(pk_decode *d) { return pk_session_plan(&d->sess->link, &d->s); }

static void *run_thread(void *arg) {
    pk_session *ss = arg;
    pk_status st = ss->k->backend->run(ss->k, &ss->d);
    ss->run_status = st;
    if (st != PK_OK) snprintf(ss->run_err, sizeof ss->run_err, "%s", ss->k->err);
    STORE(&ss->ended, 1);
    return NULL;
}

/* ---- the host ---- */

static void session_free(pk_session *ss) {
    pk_decode_free(&ss->d);
    free(ss->ring);
    free(ss->cancel_ids);
    free(ss->out);
    free(ss->host);
    free(ss->host_id);
    free(ss->free_ents);
    free(ss->order);
    free(ss->cancel_wanted);
    free(ss);
}

pk_status pk_session_open(pk_kernel *k, int queue, pk_token_fn on_token, void *user) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status st = pk_enter(k);
    if (st != PK_OK) return st;
    st = pk_check_runnable(k, "pk_session_open");
    if (st != PK_OK) return st;
    if (!k->backend->serves_sessions)
        return pk_fail(k, PK_ERR_UNSUPPORTED,
                       "pk_session_open: the %s backend cannot keep its kernel resident yet; run requests with pk_run",
                       k->backend->name);
    const int R = k->cfg.max_requests;
    if (queue == 0) queue = 4 * R;
    if (queue < R || queue > (1 << 20))
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_session_open: queue %d outside [max_requests %d, 2^20]", queue,
                       R);
    int32_t cap = 1;
    while (cap < queue) cap *= 2;
    const int emitted_cap = R * (2 + k->cfg.spec_length) + cap; /* a step's tokens, cancels, skipped */
    uint32_t out_cap = 4096;
    while (out_cap < 2u * (uint32_t)emitted_cap) out_cap *= 2;
    pk_session *ss = calloc(1, sizeof *ss);
    if (!ss) return pk_fail(k, PK_ERR_NO_MEMORY, "pk_session_open: out of memory");
    ss->k = k;
    ss->on_token = on_token;
    ss->user = user;
    ss->cap = cap;
    ss->out_cap = out_cap;
    ss->link = (pk_session_link){.box = &ss->box, .cap = (uint32_t)cap, .out_cap = out_cap};
    ss->ring = calloc((size_t)cap, sizeof *ss->ring);
    ss->cancel_ids = calloc((size_t)cap, sizeof *ss->cancel_ids);
    ss->out = calloc(out_cap, sizeof *ss->out);
    ss->host = calloc((size_t)cap, sizeof *ss->host);
    ss->host_id = calloc((size_t)cap, sizeof *ss->host_id);
    ss->free_ents = calloc((size_t)cap, sizeof *ss->free_ents);
    ss->order = calloc((size_t)cap, sizeof *ss->order);
    ss->cancel_wanted = calloc((size_t)cap, 1);
    ss->link.cancel_ids = ss->cancel_ids;
    ss->link.out = ss->out;
    if (!ss->ring || !ss->cancel_ids || !ss->out || !ss->host || !ss->host_id || !ss->cancel_wanted || !ss->free_ents ||
        !ss->order) {
        session_free(ss);
        return pk_fail(k, PK_ERR_NO_MEMORY, "pk_session_open: out of memory for a queue of %d", cap);
    }
    st = pk_decode_setup(&ss->d, k, emitted_cap);
    if (st != PK_OK) {
        session_free(ss);
        return st;
    }
    ss->d.sess = ss;
    ss->d.s.reqs = ss->ring;
    ss->d.s.order = ss->order;
    ss->d.s.req_mask = cap - 1;
    for (int32_t e = 0; e < cap; e++) ss->free_ents[e] = cap - 1 - e;
    ss->nfree_ents = cap;
    ss->d.s.nreqs = 0;
    pk_step_reset(&ss->d.s);
    k->steps_run = 0;
    __atomic_store_n(&k->cancel, 0, __ATOMIC_SEQ_CST);
    if (pthread_create(&ss->thread, NULL, run_thread, ss) != 0) {
        session_free(ss);
        return pk_fail(k, PK_ERR_BACKEND, "pk_session_open: could not start the session's thread");
    }
    k->session = ss;
    k->close_session = pk_session_close;
    return PK_OK;
}

static pk_session *open_session(pk_kernel *k, const char *who) {
    if (!k->session) pk_fail(k, PK_ERR_STATE, "%s: no session is open on this kernel (pk_session_open)", who);
    return k->session;
}

/* Sends the cancels asked for while the notice ring has room. */
static void send_cancels(pk_session *ss) {
    const uint32_t mask = (uint32_t)ss->cap - 1;
    uint32_t nc = ss->box.ncancel; /* the host's own counter */
    for (int32_t e = 0; e < ss->cap; e++) {
        if (!ss->cancel_wanted[e]) continue;
        if (nc - pk_ss_load(&ss->box.cancels_done) >= (uint32_t)ss->cap) break;
        ss->cancel_wanted[e] = 0;
        if (!ss->host[e]) continue; /* ended meanwhile */
        ss->cancel_ids[nc & mask] = ss->host_id[e];
        pk_ss_store(&ss->box.ncancel, ++nc);
    }
}

pk_status pk_session_submit(pk_kernel *k, pk_request *req, int *id) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status st = pk_enter(k);
    if (st != PK_OK) return st;
    pk_session *ss = open_session(k, "pk_session_submit");
    if (!ss) return k->status;
    if (!req || !id) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_session_submit: req or id is NULL");
    if (LOAD(&ss->ended))
        return pk_fail(k, PK_ERR_BACKEND, "pk_session_submit: the session's runtime stopped: %s",
                       ss->run_err[0] ? ss->run_err : "(no error)");
    req->num_output = 0;
    req->num_cached = 0;
    req->finish = PK_FINISH_NONE;
    st = pk_decode_check_request(k, req, "pk_session_submit: the request");
    if (st != PK_OK) return st;
    const int32_t nid = ss->next_id;
    if (ss->nfree_ents == 0)
        return pk_fail(k, PK_ERR_LIMIT,
                       "pk_session_submit: the queue is full (%d requests running or waiting, queue %d): poll, then "
                       "submit again",
                       ss->running, ss->cap);
    if (nid == INT32_MAX)
        return pk_fail(k, PK_ERR_LIMIT, "pk_session_submit: the session has taken %d requests; open a new one", nid);
    const int32_t e = ss->free_ents[--ss->nfree_ents];
    ss->ring[e] = (pk_step_req){.prompt = req->prompt,
                                .prompt_len = req->prompt_len,
                                .max_new_tokens = req->max_new_tokens,
                                .num_output = 0,
                                .finish = PK_FINISH_NONE};
    pk_decode_sample_words(&req->sampling, ss->ring[e].sample);
    ss->host[e] = req;
    ss->host_id[e] = nid;
    ss->cancel_wanted[e] = 0;
    ss->order[nid & (ss->cap - 1)] = e; /* before submitted: the boundary reads it at admission */
    ss->next_id = nid + 1;
    ss->running++;
    pk_ss_store(&ss->box.submitted, (uint32_t)ss->next_id);
    *id = nid;
    return PK_OK;
}

pk_status pk_session_cancel(pk_kernel *k, int id) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status st = pk_enter(k);
    if (st != PK_OK) return st;
    pk_session *ss = open_session(k, "pk_session_cancel");
    if (!ss) return k->status;
    if (id < 0 || id >= ss->next_id) return PK_OK;
    int32_t e = 0; /* the entry holding id: requests in flight are few, cancels rare */
    while (e < ss->cap && !(ss->host[e] && ss->host_id[e] == id)) e++;
    if (e == ss->cap) return PK_OK; /* ended */
    ss->cancel_wanted[e] = 1;
    send_cancels(ss);
    return PK_OK;
}

/* Takes the records in the out ring: outputs, finishes, on_token. */
static pk_status deliver(pk_kernel *k, pk_session *ss) {
    const uint32_t tail = pk_ss_load(&ss->box.out_tail);
    pk_status st = PK_OK;
    for (uint32_t h = ss->box.out_head; h != tail; h++) { /* out_head: the host's own */
        const pk_step_token rec = ss->out[h & (ss->out_cap - 1)];
        const int32_t e = rec.ent >= 0 && rec.ent < ss->cap ? rec.ent : 0;
        pk_request *r = ss->host[e];
        if (!r || ss->host_id[e] != rec.req || (rec.token >= 0 && r->num_output >= r->max_new_tokens)) {
            st = pk_fail(k, PK_ERR_BACKEND, "pk_session_poll: a record of request %d that the session does not expect "
                                            "(a bug in pk)", (int)rec.req);
            continue;
        }
        if (rec.token >= 0) r->output[r->num_output++] = rec.token;
        if (rec.finish != PK_FINISH_NONE) {
            r->finish = (pk_finish_reason)rec.finish;
            r->num_cached = ss->ring[e].num_cached; /* the boundary wrote it before the record */
            ss->host[e] = NULL;
            ss->free_ents[ss->nfree_ents++] = e;
            ss->running--;
        }
        if (rec.token >= 0 && ss->on_token) ss->on_token(ss->user, rec.req, rec.token, rec.row);
    }
    pk_ss_store(&ss->box.out_head, tail);
    return st;
}

pk_status pk_session_poll(pk_kernel *k, int timeout_ms, int *running) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status st = pk_enter(k);
    if (st != PK_OK) return st;
    pk_session *ss = open_session(k, "pk_session_poll");
    if (!ss) return k->status;
    const double deadline = mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (unsigned n = 0;;) {
        send_cancels(ss);
        if (pk_ss_load(&ss->box.out_tail) != ss->box.out_head || LOAD(&ss->ended) || mono_ms() >= deadline) break;
        pk_ss_pause(&n);
    }
    const int ended = LOAD(&ss->ended); /* before the records: an ended run wrote its last ones */
    st = deliver(k, ss);
    if (running) *running = ss->running;
    if (st != PK_OK) return st;
    if (ended && ss->run_status != PK_OK)
        return pk_fail(k, ss->run_status, "pk_session_poll: the session's runtime stopped: %s", ss->run_err);
    if (ended && ss->running > 0)
        return pk_fail(k, PK_ERR_BACKEND, "pk_session_poll: the session's runtime ended with %d requests running (a "
                                          "bug in pk)", ss->running);
    return PK_OK;
}

pk_status pk_session_close(pk_kernel *k) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_session *ss = k->session;
    if (!ss) return PK_OK;
    for (int32_t e = 0; e < ss->cap; e++) ss->cancel_wanted[e] = ss->host[e] != NULL;
    pk_ss_store(&ss->box.closing, 1);
    pk_status st = PK_OK;
    char err[PK_ERR_MAX] = "";
    for (;;) { /* deliver until the run thread has ended and left nothing behind; keep the first error */
        const int ended = LOAD(&ss->ended);
        const pk_status s = pk_session_poll(k, 10, NULL);
        if (s != PK_OK && st == PK_OK) {
            st = s;
            snprintf(err, sizeof err, "%s", k->err);
        }
        if (ended && pk_ss_load(&ss->box.out_tail) == ss->box.out_head) break;
    }
    pthread_join(ss->thread, NULL);
    k->session = NULL;
    k->close_session = NULL;
    session_free(ss);
    return st == PK_OK ? PK_OK : pk_fail(k, st, "%s", err);
}
