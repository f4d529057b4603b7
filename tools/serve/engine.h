// SPDX-License-Identifier: Apache-2.0
/* engine.h — what pk serve asks of the model: admit a job (or refuse it when the queue is full),
 * hand out its tokens as they are made, cancel it, say when it is done. The HTTP side knows only
 * this interface.
 *
 * Behind it: a resident session where the kernel's backend keeps one (the CPU backend;
 * engine_session.c), whose jobs all decode together, up to the kernel's max_requests; else
 * (the CUDA backend so far) one pk_run of one request at a time (engine.c): pk_cancel stops a
 * whole run, so one request per run is what keeps a cancel or a long answer to its own job.
 *
 * Threads: submit, cancel and stats from any thread; on_token and on_done run on the engine's
 * thread. After on_done the engine never touches the job again; until then the job must live.
 */
#ifndef PK_SERVE_ENGINE_H
#define PK_SERVE_ENGINE_H

#include <stdatomic.h>
#include <stdint.h>

#include "pk.h"

typedef enum serve_finish {
    SERVE_FINISH_STOP = 1,      /* a stop token (not handed out) */
    SERVE_FINISH_LENGTH = 2,    /* max_tokens or the context's end */
    SERVE_FINISH_CANCELLED = 3, /* serve_engine_cancel */
    SERVE_FINISH_ERROR = 4,     /* the run failed: serve_job.error says why */
} serve_finish;

typedef struct serve_job serve_job;
struct serve_job {
    /* set by the caller before serve_engine_submit; prompt stays valid until on_done */
    const int32_t *prompt;
    int prompt_len, max_tokens;
    int32_t stop_ids[4]; /* tokens that end the job; not handed out, counted in num_generated */
    pk_sampling sampling; /* zero: greedy */
    int num_stop_ids;
    int (*on_token)(serve_job *j, int32_t token); /* nonzero: the job ends here, as at a stop token */
    void (*on_done)(serve_job *j);
    void *user;
    /* set by the engine before on_done */
    serve_finish finish;
    int num_generated;     /* tokens the model made for it, a stop token included */
    int num_cached;        /* prompt tokens taken from the prefix cache */
    double ttft_s;         /* from submit to the first token (0 if none) */
    char error[256];
    /* the engine's */
    atomic_int cancel;
    double submitted;
    serve_job *next;
};

typedef struct serve_engine serve_engine;

typedef struct serve_engine_stats {
    int64_t jobs_done, tokens_generated, ttft_count;
    double ttft_sum_s;
    int queued, running; /* waiting jobs; jobs running (pk_run mode: 0 or 1) */
} serve_engine_stats;

/* Starts the worker thread over a compiled kernel it then owns the use of (k is used from that
 * thread only, and pk_cancel from others), opening a resident session on k when its backend has
 * them. capacity: jobs admitted at once, running or waiting. NULL when it cannot start (the
 * reason on stderr). */
serve_engine *serve_engine_new(pk_kernel *k, int capacity);
/* 0: queued; -1: capacity reached, -2: stopping (both 503); the job untouched. */
int serve_engine_submit(serve_engine *e, serve_job *j);
/* Asks the job to end; on_done still comes (at once from this thread when it was waiting, else
 * from the engine's thread when its run stops, within a step). */
void serve_engine_cancel(serve_engine *e, serve_job *j);
void serve_engine_get_stats(serve_engine *e, serve_engine_stats *out);
/* Refuses new jobs and cancels every one it holds (the waiting get on_done from this thread, the
 * running one from the engine's); returns without waiting. Cancel and stats stay valid after it. */
void serve_engine_stop(serve_engine *e);
/* serve_engine_stop, then waits for the thread to end and frees e. Accepts NULL. */
void serve_engine_free(serve_engine *e);

#endif /* PK_SERVE_ENGINE_H */
