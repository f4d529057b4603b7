// SPDX-License-Identifier: Apache-2.0
/* session.h — a resident session (pk.h's pk_session_*): the host's side, and the memory it shares
 * with the session's step boundary (decode.c's pk_decode in session mode, which the backend's
 * runtime calls between steps on its own thread).
 *
 * Host and step boundary talk through three rings and three counters, written by one side and
 * read by the other with __atomic acquire / release (the layout a GPU would map from pinned host
 * memory):
 *   ring[cap]        requests: id's entry at id & (cap - 1). The host writes an entry, then
 *                    `submitted`; the boundary owns it from admission until the id's finish
 *                    record, after which the host may write it again (for id + cap, ...).
 *   cancel_ids[cap]  cancel notices: the host writes one, then `ncancel`; the boundary applies
 *                    them (pk_step_cancel) in order and says how far in `cancels_done`.
 *   out[out_cap]     records (pk_step_token): the boundary writes them, then `out_tail`; the
 *                    host takes them in pk_session_poll and says how far in `out_head`. A full
 *                    ring makes the boundary wait for the host's poll.
 * `closing` (host → boundary) ends the run once nothing runs or waits; `ended` (run thread →
 * host) says the runtime returned.
 */
#ifndef PK_SESSION_H
#define PK_SESSION_H

#include <pthread.h>

#include "runtime/runtime.h"

struct pk_session {
    pk_kernel *k;
    pk_token_fn on_token;
    void *user;
    /* shared: the rings, and the counters (through __atomic builtins) */
    pk_step_req *ring;    /* [cap] */
    int32_t cap;          /* a power of two */
    int32_t submitted;    /* host → boundary: ids below it are in the ring */
    int32_t *cancel_ids;  /* [cap] */
    uint32_t ncancel;     /* host → boundary: notices written */
    uint32_t cancels_done; /* boundary → host: notices applied */
    int32_t closing;      /* host → boundary */
    pk_step_token *out;   /* [out_cap] */
    uint32_t out_cap, out_tail, out_head;
    int32_t ended;        /* run thread → host */
    /* the boundary's own */
    uint32_t cancels_seen;
    /* the host's own */
    pk_request **host;    /* [cap]: the caller's request of each entry in use, NULL when free */
    int32_t *host_id;     /* [cap]: the id in each entry */
    uint8_t *cancel_wanted; /* [cap]: a cancel asked for and not yet sent (the notice ring was full) */
    int32_t next_id, running;
    pthread_t thread;
    pk_decode d;          /* the run thread's */
    pk_status run_status; /* the backend's run, once ended */
    char run_err[PK_ERR_MAX];
};

#endif /* PK_SESSION_H */
