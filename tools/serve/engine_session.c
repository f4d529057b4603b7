// SPDX-License-Identifier: Apache-2.0
/* engine_session.c — serve_engine over a resident session (pk_session_*): the engine's thread
 * hands every admitted job to the session at once, so that up to max_requests of them decode in
 * the same steps (the rest wait inside the session for a slot), polls the session for tokens,
 * and ends the jobs whose requests ended. Stop tokens and cancels end a job's request through
 * pk_session_cancel, which frees its slot at the next step; the tokens that still come for it
 * are dropped here.
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine_impl.h"

typedef struct active {
    serve_job *j;
    pk_request r;
    int id;
    int ended;   /* a stop token or a cancel sent: later tokens are dropped */
    int stopped; /* ended by a stop token */
} active;

typedef struct session_run {
    serve_engine *e;
    active **by_id; /* [mask + 1]: the running jobs by session id, linear probing, at most half full */
    unsigned mask;
} session_run;

static unsigned home_of(const session_run *sr, int id) { return ((unsigned)id * 2654435761u) & sr->mask; }

/* The table position of id: its job's, or the empty one where it would go. */
static active **place_of(session_run *sr, int id) {
    unsigned i = home_of(sr, id);
    while (sr->by_id[i] && sr->by_id[i]->id != id) i = (i + 1) & sr->mask;
    return &sr->by_id[i];
}

/* Takes id's job out (backward-shift deletion: the others' probes stay whole). */
static void remove_id(session_run *sr, int id) {
    unsigned i = (unsigned)(place_of(sr, id) - sr->by_id);
    for (unsigned j = (i + 1) & sr->mask; sr->by_id[j]; j = (j + 1) & sr->mask) {
        const unsigned home = home_of(sr, sr->by_id[j]->id);
        if (((j - home) & sr->mask) >= ((j - i) & sr->mask)) {
            sr->by_id[i] = sr->by_id[j];
            i = j;
        }
    }
    sr->by_id[i] = NULL;
}

void serve_session_token(void *user, int id, int32_t token, int row) {
    serve_engine *e = user;
    session_run *sr = e->session_run; /* called from pk_session_poll, on the engine's thread */
    (void)row;
    active *a = sr ? *place_of(sr, id) : NULL;
    if (!a || a->id != id || a->ended) return;
    if (serve_job_token(a->j, token)) {
        a->ended = a->stopped = 1;
        pk_session_cancel(e->k, id);
    }
}

/* Ends a job the session does not hold (any more): its finish, the count, on_done. */
static void end_job(serve_engine *e, serve_job *j, serve_finish f) {
    j->finish = f;
    pthread_mutex_lock(&e->mu);
    e->nrunning--;
    pthread_mutex_unlock(&e->mu);
    serve_job_done(e, j);
}

/* Hands j to the session (whose queue holds the engine's capacity: it has room); NULL when that
 * failed and j ended at once (SERVE_FINISH_ERROR). */
static active *start(session_run *sr, serve_job *j) {
    serve_engine *e = sr->e;
    j->num_generated = j->num_cached = 0;
    j->ttft_s = 0;
    j->error[0] = '\0';
    active *a = calloc(1, sizeof *a);
    int32_t *out = malloc((size_t)j->max_tokens * sizeof *out);
    if (a && out) {
        a->j = j;
        a->r = (pk_request){.prompt = j->prompt, .prompt_len = j->prompt_len, .max_new_tokens = j->max_tokens,
                            .output = out, .sampling = j->sampling};
        if (pk_session_submit(e->k, &a->r, &a->id) == PK_OK) {
            *place_of(sr, a->id) = a;
            return a;
        }
        snprintf(j->error, sizeof j->error, "%s", pk_kernel_error(e->k));
    } else {
        snprintf(j->error, sizeof j->error, "out of memory for %d output tokens", j->max_tokens);
    }
    free(out);
    free(a);
    end_job(e, j, SERVE_FINISH_ERROR);
    return NULL;
}

static void finish(session_run *sr, active *a) {
    serve_job *j = a->j;
    const pk_finish_reason f = a->r.finish;
    j->finish = a->stopped || f == PK_FINISH_EOS ? SERVE_FINISH_STOP
                : f == PK_FINISH_CANCELLED      ? SERVE_FINISH_CANCELLED
                                                : SERVE_FINISH_LENGTH;
    j->num_cached = a->r.num_cached;
    remove_id(sr, a->id);
    free(a->r.output);
    free(a);
    end_job(sr->e, j, j->finish);
}

void *serve_session_worker(void *arg) {
    serve_engine *e = arg;
    session_run sr = {.e = e};
    unsigned cap = 2;
    while (cap < 2u * (unsigned)e->capacity) cap *= 2;
    sr.mask = cap - 1;
    sr.by_id = calloc((size_t)cap, sizeof *sr.by_id);
    active **live = calloc((size_t)e->capacity, sizeof *live);
    int nlive = 0;
    e->session_run = &sr;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->head && nlive == 0 && !e->stopping) pthread_cond_wait(&e->cv, &e->mu);
        serve_job *taken = e->head; /* in arrival order */
        e->nrunning += e->queued;
        e->head = e->tail = NULL;
        e->queued = 0;
        const int stopping = e->stopping;
        pthread_mutex_unlock(&e->mu);
        if (stopping && nlive == 0 && !taken) break;
        while (taken) {
            serve_job *j = taken;
            taken = j->next; /* read first: a job that ends may be freed */
            if (!sr.by_id || !live) {
                snprintf(j->error, sizeof j->error, "out of memory for the engine's tables");
                end_job(e, j, SERVE_FINISH_ERROR);
            } else if (stopping || atomic_load(&j->cancel)) {
                end_job(e, j, SERVE_FINISH_CANCELLED);
            } else {
                active *a = start(&sr, j);
                if (a) live[nlive++] = a;
            }
        }
        for (int i = 0; i < nlive; i++)
            if (!live[i]->ended && (stopping || atomic_load(&live[i]->j->cancel))) {
                live[i]->ended = 1;
                pk_session_cancel(e->k, live[i]->id);
            }
        if (nlive > 0 && pk_session_poll(e->k, 5, NULL) != PK_OK) {
            /* the session has stopped: every job it held ends with the error */
            char msg[256];
            snprintf(msg, sizeof msg, "%s", pk_kernel_error(e->k));
            fprintf(stderr, "pk: serve: %s\n", msg);
            for (int i = 0; i < nlive; i++) {
                serve_job *j = live[i]->j;
                snprintf(j->error, sizeof j->error, "%s", msg);
                remove_id(&sr, live[i]->id);
                free(live[i]->r.output);
                free(live[i]);
                end_job(e, j, SERVE_FINISH_ERROR);
            }
            nlive = 0;
            continue;
        }
        for (int i = 0; i < nlive;) {
            if (live[i]->r.finish == PK_FINISH_NONE) {
                i++;
                continue;
            }
            active *a = live[i];
            live[i] = live[--nlive];
            finish(&sr, a);
        }
    }
    pk_session_close(e->k);
    e->session_run = NULL;
    free(live);
    free(sr.by_id);
    return NULL;
}
