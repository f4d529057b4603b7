// SPDX-License-Identifier: Apache-2.0
/* session.h — a resident session (pk.h's pk_session_*): the host's side of it. What the host
 * shares with the session's step boundary — the request ring (the step state's reqs), the box
 * of counters, the cancel and record rings — and the boundary's logic are session_step.h's.
 */
#ifndef PK_SESSION_H
#define PK_SESSION_H

#include <pthread.h>

#include "runtime/runtime.h"
#include "runtime/session_step.h"

struct pk_session {
    pk_kernel *k;
    pk_token_fn on_token;
    void *user;
    /* shared with the boundary (session_step.h) */
    pk_step_req *ring;     /* [cap]: the step state's reqs, an entry per request in flight */
    int32_t *order;        /* [cap]: the entry of id at id & (cap - 1), until it is admitted */
    int32_t cap;           /* a power of two */
    pk_session_box box;
    int32_t *cancel_ids;   /* [cap] */
    pk_step_token *out;    /* [out_cap] */
    uint32_t out_cap;
    pk_session_link link;  /* the boundary's view of the above */
    int32_t ended;         /* run thread → host: the runtime returned (__atomic) */
    /* the host's own */
    pk_request **host;     /* [cap]: the caller's request of each entry in use, NULL when free */
    int32_t *host_id;      /* [cap]: the id in each entry */
    int32_t *free_ents;    /* [cap]: a stack of the free entries */
    int32_t nfree_ents;
    uint8_t *cancel_wanted; /* [cap]: a cancel asked for and not yet sent (the notice ring was full) */
    int32_t next_id, running;
    pthread_t thread;
    pk_decode d;           /* the run thread's */
    pk_status run_status;  /* the backend's run, once ended */
    char run_err[PK_ERR_MAX];
};

#endif /* PK_SESSION_H */
