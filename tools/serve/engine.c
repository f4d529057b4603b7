// SPDX-License-Identifier: Apache-2.0
/* engine.c — serve_engine: a FIFO of admitted jobs and one thread that runs them, over a
 * resident session where the backend keeps one (engine_session.c: every job decodes beside the
 * others), else here, one pk_run of one request each, in order.
 *
 * pk_run mode: stop tokens and cancels both end a run through pk_cancel, which only sets a flag
 * the runtime reads at the next step boundary: tokens that still come after it are dropped here.
 * A cancel that lands before pk_run starts (which clears the flag) is caught by the job's own
 * flag, read before the run and at every token.
 */
#include "engine_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double serve_mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct run_ctx {
    serve_engine *e;
    serve_job *j;
    int ended;   /* a stop token or a cancel: later tokens are dropped */
    int stopped; /* ended by a stop token */
} run_ctx;

static void on_token(void *user, int request, int32_t token, int row) {
    run_ctx *c = user;
    serve_job *j = c->j;
    (void)request, (void)row;
    if (c->ended) return;
    if (atomic_load(&j->cancel)) {
        c->ended = 1;
        pk_cancel(c->e->k);
        return;
    }
    if (serve_job_token(j, token)) {
        c->ended = c->stopped = 1;
        pk_cancel(c->e->k);
    }
}

int serve_job_token(serve_job *j, int32_t token) {
    if (j->num_generated++ == 0) j->ttft_s = serve_mono_s() - j->submitted;
    for (int i = 0; i < j->num_stop_ids; i++)
        if (token == j->stop_ids[i]) return 1;
    return j->on_token(j, token) != 0;
}

static void run_job(serve_engine *e, serve_job *j) {
    j->num_generated = j->num_cached = 0;
    j->ttft_s = 0;
    j->error[0] = '\0';
    if (atomic_load(&j->cancel)) {
        j->finish = SERVE_FINISH_CANCELLED;
        return;
    }
    int32_t *out = malloc((size_t)j->max_tokens * sizeof *out);
    if (!out) {
        j->finish = SERVE_FINISH_ERROR;
        snprintf(j->error, sizeof j->error, "out of memory for %d output tokens", j->max_tokens);
        return;
    }
    pk_request r = {.prompt = j->prompt, .prompt_len = j->prompt_len, .max_new_tokens = j->max_tokens, .output = out,
                    .sampling = j->sampling};
    run_ctx c = {.e = e, .j = j};
    pk_status s = pk_run(e->k, &r, 1, on_token, &c);
    j->num_cached = r.num_cached;
    free(out);
    if (s != PK_OK) {
        j->finish = SERVE_FINISH_ERROR;
        snprintf(j->error, sizeof j->error, "%s", pk_kernel_error(e->k));
    } else if (c.stopped || r.finish == PK_FINISH_EOS) {
        j->finish = SERVE_FINISH_STOP;
    } else if (c.ended || r.finish == PK_FINISH_CANCELLED) {
        j->finish = SERVE_FINISH_CANCELLED;
    } else {
        j->finish = SERVE_FINISH_LENGTH;
    }
}

static void *worker(void *arg) {
    serve_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->head && !e->stopping) pthread_cond_wait(&e->cv, &e->mu);
        if (e->stopping) break; /* serve_engine_free ends the waiting jobs */
        serve_job *j = e->head;
        e->head = j->next;
        if (!e->head) e->tail = NULL;
        e->queued--;
        e->running = j;
        pthread_mutex_unlock(&e->mu);
        run_job(e, j);
        pthread_mutex_lock(&e->mu);
        e->running = NULL;
        pthread_mutex_unlock(&e->mu);
        serve_job_done(e, j);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

void serve_job_done(serve_engine *e, serve_job *j) {
    pthread_mutex_lock(&e->mu);
    e->stats.jobs_done++;
    e->stats.tokens_generated += j->num_generated;
    if (j->num_generated) e->stats.ttft_sum_s += j->ttft_s, e->stats.ttft_count++;
    pthread_mutex_unlock(&e->mu);
    j->on_done(j); /* outside the lock: it may free j or call back into the engine */
}

serve_engine *serve_engine_new(pk_kernel *k, int capacity) {
    serve_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->k = k;
    e->capacity = capacity < 1 ? 1 : capacity;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    /* opened here, used from the engine's thread only from then on */
    pk_status st = pk_session_open(k, e->capacity, serve_session_token, e);
    e->session = st == PK_OK;
    if (st != PK_OK && st != PK_ERR_UNSUPPORTED) {
        fprintf(stderr, "pk: %s\n", pk_kernel_error(k));
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        free(e);
        return NULL;
    }
    if (pthread_create(&e->thread, NULL, e->session ? serve_session_worker : worker, e) != 0) {
        if (e->session) pk_session_close(k);
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        free(e);
        return NULL;
    }
    return e;
}

int serve_engine_submit(serve_engine *e, serve_job *j) {
    pthread_mutex_lock(&e->mu);
    if (e->stopping || e->queued + (e->running != NULL) + e->nrunning >= e->capacity) {
        int rc = e->stopping ? -2 : -1;
        pthread_mutex_unlock(&e->mu);
        return rc;
    }
    atomic_store(&j->cancel, 0);
    j->submitted = serve_mono_s();
    j->next = NULL;
    if (e->tail) e->tail->next = j;
    else e->head = j;
    e->tail = j;
    e->queued++;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

void serve_engine_cancel(serve_engine *e, serve_job *j) {
    pthread_mutex_lock(&e->mu);
    atomic_store(&j->cancel, 1);
    if (e->running == j) {
        pk_cancel(e->k);
        pthread_mutex_unlock(&e->mu);
        return;
    }
    serve_job **p = &e->head, *prev = NULL;
    while (*p && *p != j) prev = *p, p = &(*p)->next;
    if (!*p) { /* already done, or on_done on its way */
        pthread_mutex_unlock(&e->mu);
        return;
    }
    *p = j->next;
    if (e->tail == j) e->tail = prev;
    e->queued--;
    e->stats.jobs_done++; /* ended, as a run's end counts, so the queue's arrivals all show */
    pthread_mutex_unlock(&e->mu);
    j->finish = SERVE_FINISH_CANCELLED;
    j->num_generated = j->num_cached = 0;
    j->on_done(j);
}

void serve_engine_get_stats(serve_engine *e, serve_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    out->queued = e->queued;
    out->running = e->session ? e->nrunning : e->running != NULL;
    pthread_mutex_unlock(&e->mu);
}

void serve_engine_stop(serve_engine *e) {
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    serve_job *waiting = e->head;
    e->head = e->tail = NULL;
    e->stats.jobs_done += e->queued;
    e->queued = 0;
    if (e->running) {
        atomic_store(&e->running->cancel, 1);
        pk_cancel(e->k);
    } /* a session's jobs: its thread cancels them when it sees stopping */
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    while (waiting) {
        serve_job *next = waiting->next; /* read before on_done, which may free it */
        waiting->finish = SERVE_FINISH_CANCELLED;
        waiting->num_generated = 0;
        waiting->on_done(waiting);
        waiting = next;
    }
}

void serve_engine_free(serve_engine *e) {
    if (!e) return;
    serve_engine_stop(e);
    pthread_join(e->thread, NULL);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
