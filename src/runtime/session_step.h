// SPDX-License-Identifier: Apache-2.0
/* session_step.h — a resident session's step boundary (pk.h's pk_session_*), written once for the
 * backends as decode_step.h is: the CPU's runtime runs it on the thread that ends a step; a GPU's
 * persistent kernel is to run it on the thread of its step boundary, over the same memory mapped
 * from pinned host memory (the CUDA backend does not yet: docs/SERVE.md).
 *
 * Host and boundary talk through three rings and a box of counters, each written by one side and
 * read by the other with acquire / release:
 *   reqs (the step state's, [cap]) and order[cap]  requests: the host writes a request into a free
 *                    entry e of reqs and e into order[id & (cap - 1)], then box.submitted; the
 *                    boundary reads order[] at admission and owns the entry until the id's
 *                    finish record, after which the host may reuse it. With fewer than cap
 *                    requests in flight, an id's order[] position is never needed by a waiting
 *                    one when the host writes it (ids are admitted in order).
 *   cancel_ids[cap]  cancel notices: the host writes one, then box.ncancel; the boundary applies
 *                    them (pk_step_cancel) in order and says how far in box.cancels_done.
 *   out[out_cap]     records (pk_step_token): the boundary writes them, then box.out_tail; the
 *                    host takes them and says how far in box.out_head. A full ring makes the
 *                    boundary wait for the host.
 * box.closing (host → boundary) ends the run once nothing runs or waits.
 */
#ifndef PK_SESSION_STEP_H
#define PK_SESSION_STEP_H

#include "runtime/decode_step.h"

/* Loads and stores of the shared counters, and a pause while waiting on the other side. */
#if defined(__CUDA_ARCH__)
PK_HD uint32_t pk_ss_load(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
PK_HD void pk_ss_store(uint32_t *p, uint32_t v) {
    __threadfence_system(); /* what came before (ring entries) lands first */
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
PK_HD void pk_ss_pause(unsigned *n) { __nanosleep(*n < 64 ? 100u * ++*n : 6400u); }
#else
#include <sched.h>
#include <time.h>
PK_HD uint32_t pk_ss_load(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
PK_HD void pk_ss_store(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
/* Yield a few times, then nap, growing to 200 us: a boundary with nothing to run should not hold
 * a core, and should notice work within a step. */
PK_HD void pk_ss_pause(unsigned *n) {
    if (++*n <= 16) {
        sched_yield();
        return;
    }
    const unsigned us = 20 * (*n - 16);
    const struct timespec nap = {0, (long)(us < 200 ? us : 200) * 1000};
    nanosleep(&nap, NULL);
}
#endif

typedef struct pk_session_box {
    uint32_t submitted;    /* host → boundary: ids below it are in the ring */
    uint32_t ncancel;      /* host → boundary: notices written */
    uint32_t closing;      /* host → boundary: end once nothing runs or waits */
    uint32_t out_head;     /* host → boundary: records taken */
    uint32_t cancels_done; /* boundary → host: notices applied */
    uint32_t out_tail;     /* boundary → host: records written */
} pk_session_box;

/* What the boundary reads and writes besides the step state: the box and rings (host memory),
 * and its own count of notices seen. */
typedef struct pk_session_link {
    pk_session_box *box;
    const int32_t *cancel_ids; /* [cap] */
    pk_step_token *out;        /* [out_cap] */
    uint32_t cap, out_cap;     /* powers of two */
    uint32_t cancels_seen;
} pk_session_link;

/* Moves the step state's records to the out ring, waiting while it is full. */
PK_HD void pk_session_push(pk_session_link *l, pk_step_state *s) {
    uint32_t tail = l->box->out_tail; /* the boundary's own counter */
    for (uint32_t i = 0; i < s->nemitted; i++) {
        unsigned n = 0;
        while (tail - pk_ss_load(&l->box->out_head) >= l->out_cap) pk_ss_pause(&n);
        l->out[tail & (l->out_cap - 1)] = s->emitted[i];
        pk_ss_store(&l->box->out_tail, ++tail);
    }
    s->nemitted = 0;
}

/* The boundary's plan: takes the host's new requests and cancels, plans the next step and pushes
 * the records that made; waits while there is nothing to run. 1: a step is planned; 0: the
 * session closed and nothing runs or waits. */
PK_HD int pk_session_plan(pk_session_link *l, pk_step_state *s) {
    for (unsigned n = 0;;) {
        /* closing before submitted: a close comes after the host's last submit */
        const uint32_t closing = pk_ss_load(&l->box->closing);
        s->nreqs = (int32_t)pk_ss_load(&l->box->submitted);
        const uint32_t nc = pk_ss_load(&l->box->ncancel);
        s->nemitted = 0;
        for (; l->cancels_seen != nc; l->cancels_seen++)
            pk_step_cancel(s, l->cancel_ids[l->cancels_seen & (l->cap - 1)]);
        pk_ss_store(&l->box->cancels_done, nc);
        const int more = pk_step_plan(s);
        pk_session_push(l, s);
        if (more) return 1;
        if (closing) return 0;
        pk_ss_pause(&n);
    }
}

#endif /* PK_SESSION_STEP_H */
