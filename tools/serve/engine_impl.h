// SPDX-License-Identifier: Apache-2.0
/* engine_impl.h — what engine.c (the queue, pk_run mode) and engine_session.c (resident-session
 * mode) share of serve_engine. */
#ifndef PK_SERVE_ENGINE_IMPL_H
#define PK_SERVE_ENGINE_IMPL_H

#include <pthread.h>

#include "engine.h"

struct serve_engine {
    pk_kernel *k;
    int capacity;
    int session; /* 1: a resident session is open on k (engine_session.c's thread) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_job *head, *tail; /* waiting for the engine's thread, in arrival order */
    serve_job *running;     /* pk_run mode: the job of the run in progress */
    int queued, stopping;
    int nrunning;           /* session mode: jobs handed to the session (under mu) */
    void *session_run;      /* session mode: engine_session.c's tables (its thread's) */
    pthread_t thread;
    serve_engine_stats stats; /* under mu; queued and running filled in by get_stats */
};

double serve_mono_s(void);
/* A token the model made for j: counts it (and the TTFT); 1 when it is one of j's stop tokens
 * (not handed out), else hands it to j->on_token and returns 1 when that ends the job. */
int serve_job_token(serve_job *j, int32_t token);
/* j has ended (its finish set): the stats, then j->on_done, outside the lock. */
void serve_job_done(serve_engine *e, serve_job *j);

/* Session mode (engine_session.c): the thread, and the session's on_token (user: the engine). */
void *serve_session_worker(void *arg);
void serve_session_token(void *user, int id, int32_t token, int row);

#endif /* PK_SERVE_ENGINE_IMPL_H */
