// SPDX-License-Identifier: Apache-2.0
/* cpu_runtime.c — the persistent runtime on CPU threads: the same task table, events and 64-bit
 * monotonic counters the GPU runs, with C11 acquire/release atomics.
 *
 * Static mode: worker w walks sched_tasks of w every step, waiting until the counter of each
 * task's event reaches num_triggers · step, then release-adds its trigger event. The worker
 * whose add completes END_OF_GRAPH runs prepare_next_step and release-adds the BEGIN counter.
 * Dynamic mode (MPK): the add that completes an event pushes it to a scheduler; schedulers push
 * the event's task range to the workers' queues round-robin; the END_OF_GRAPH scheduler runs
 * prepare_next_step. Queues are multi-producer single-consumer rings with sequence numbers.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "runtime/cpu/cpu_runtime.h"
#include "runtime/runtime.h"

#define TRACE_CAP (1u << 22) /* records per worker at most */

typedef struct ring_slot {
    _Atomic uint64_t seq; /* index + 1 of the item stored, 0 while empty */
    uint32_t value;
} ring_slot;

typedef struct ring {
    ring_slot *slots;
    uint64_t mask;
    _Atomic uint64_t tail; /* next index to reserve (producers) */
    _Atomic uint64_t head; /* next index to read (the consumer) */
} ring;

typedef struct cpu_run cpu_run;

typedef struct worker {
    cpu_run *run;
    int id;
    pthread_t thread;
    pk_trace_record *trace;
    size_t ntrace, trace_cap;
} worker;

struct cpu_run {
    pk_kernel *k;
    pk_decode *d;
    const pk_taskgraph *g;
    _Atomic uint64_t *counters; /* [nevents], then the attention split's group counters */
    _Atomic int terminate;
    int W, S;
    worker *workers;
    ring *worker_q; /* [W] (dynamic) */
    ring *sched_q;  /* [S] (dynamic) */
    pthread_t *schedulers;
    _Atomic uint64_t cur_step; /* for trace records of dynamic workers */
    uint32_t task_terminate, event_exit;
    int tracing;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spin briefly, then yield (there may be more threads than cores), then sleep: a resident
 * session's workers wait here while it has nothing to run, and should not hold the cores. */
static void backoff(unsigned *spins) {
    if (++*spins <= 64) return;
    if (*spins <= 64 + 4096) {
        sched_yield();
        return;
    }
    const struct timespec nap = {0, 50000}; /* 50 us */
    nanosleep(&nap, NULL);
}

static int ring_init(ring *r, uint64_t min_cap) {
    uint64_t cap = 64;
    while (cap < min_cap) cap <<= 1;
    r->slots = calloc(cap, sizeof *r->slots);
    r->mask = cap - 1;
    atomic_init(&r->tail, 0);
    atomic_init(&r->head, 0);
    if (!r->slots) return -1;
    for (uint64_t i = 0; i < cap; i++) atomic_init(&r->slots[i].seq, 0);
    return 0;
}

static void ring_push(ring *r, uint32_t v) {
    uint64_t i = atomic_fetch_add_explicit(&r->tail, 1, memory_order_relaxed);
    unsigned spins = 0;
    while (i - atomic_load_explicit(&r->head, memory_order_acquire) > r->mask) backoff(&spins);
    ring_slot *s = &r->slots[i & r->mask];
    s->value = v;
    atomic_store_explicit(&s->seq, i + 1, memory_order_release);
}

static uint32_t ring_pop(ring *r) {
    uint64_t i = atomic_load_explicit(&r->head, memory_order_relaxed);
    ring_slot *s = &r->slots[i & r->mask];
    unsigned spins = 0;
    while (atomic_load_explicit(&s->seq, memory_order_acquire) != i + 1) backoff(&spins);
    uint32_t v = s->value;
    atomic_store_explicit(&r->head, i + 1, memory_order_release);
    return v;
}

static void wait_counter(_Atomic uint64_t *c, uint64_t threshold) {
    unsigned spins = 0;
    while (atomic_load_explicit(c, memory_order_acquire) < threshold) backoff(&spins);
}

static void run_traced(worker *w, uint32_t t, uint64_t step) {
    cpu_run *r = w->run;
    uint64_t t0 = r->tracing ? now_ns() : 0;
    pk_cpu_run_task(r->k, &r->g->tasks[t], r->counters + r->g->nevents);
    if (r->tracing && w->ntrace < TRACE_CAP) {
        if (w->ntrace == w->trace_cap) { /* grow by doubling; on failure the trace stops growing */
            size_t cap = w->trace_cap ? 2 * w->trace_cap : 4096;
            pk_trace_record *p = realloc(w->trace, cap * sizeof *p);
            if (!p) return;
            w->trace = p;
            w->trace_cap = cap;
        }
        w->trace[w->ntrace++] = (pk_trace_record){t, (uint32_t)step, t0, now_ns()};
    }
}

/* prepare_next_step: returns 1 if another step was planned (pk_decode_plan_step: none after
 * pk_cancel; a session's waits here while idle). Its start ends the step that ran. */
static int next_step(cpu_run *r) {
    pk_step_mark_end(&r->d->s, now_ns());
    pk_decode_finish_step(r->d);
    r->k->steps_run++;
    return pk_decode_plan_step(r->d);
}

/* ---- static mode ---- */

static void *static_worker(void *arg) {
    worker *w = arg;
    cpu_run *r = w->run;
    const pk_taskgraph *g = r->g;
    uint32_t lo = g->sched_offset[w->id], hi = g->sched_offset[w->id + 1];
    for (uint64_t step = 1;; step++) {
        wait_counter(&r->counters[g->begin_event], step);
        if (atomic_load_explicit(&r->terminate, memory_order_acquire)) break;
        for (uint32_t i = lo; i < hi; i++) {
            uint32_t t = g->sched_tasks[i];
            const pk_task *task = &g->tasks[t];
            wait_counter(&r->counters[task->dep_event], (uint64_t)g->events[task->dep_event].num_triggers * step);
            run_traced(w, t, step);
            uint64_t target = (uint64_t)g->events[task->trig_event].num_triggers * step;
            uint64_t old = atomic_fetch_add_explicit(&r->counters[task->trig_event], 1, memory_order_acq_rel);
            if (task->trig_event == g->end_event && old + 1 == target) {
                if (!next_step(r)) atomic_store_explicit(&r->terminate, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&r->counters[g->begin_event], 1, memory_order_release);
            }
        }
    }
    return NULL;
}

/* ---- dynamic mode ---- */

/* Pushes the event's tasks to the workers round-robin; rr is the scheduler's own cursor. */
static void dispatch(cpu_run *r, uint32_t e, uint64_t *rr) {
    const pk_event *ev = &r->g->events[e];
    for (uint32_t t = ev->first_task; t < ev->last_task; t++) ring_push(&r->worker_q[(*rr)++ % (uint64_t)r->W], t);
}

static void *dynamic_worker(void *arg) {
    worker *w = arg;
    cpu_run *r = w->run;
    const pk_taskgraph *g = r->g;
    for (;;) {
        uint32_t t = ring_pop(&r->worker_q[w->id]);
        if (t == r->task_terminate) break;
        const pk_task *task = &g->tasks[t];
        run_traced(w, t, atomic_load_explicit(&r->cur_step, memory_order_relaxed));
        uint32_t e = task->trig_event;
        uint64_t old = atomic_fetch_add_explicit(&r->counters[e], 1, memory_order_acq_rel);
        if ((old + 1) % g->events[e].num_triggers == 0) ring_push(&r->sched_q[e % (uint32_t)r->S], e);
    }
    return NULL;
}

typedef struct sched_arg {
    cpu_run *run;
    int id;
} sched_arg;

static void *scheduler(void *arg) {
    sched_arg *a = arg;
    cpu_run *r = a->run;
    const pk_taskgraph *g = r->g;
    uint64_t rr = (uint64_t)a->id;
    for (;;) {
        uint32_t e = ring_pop(&r->sched_q[a->id]);
        if (e == r->event_exit) break;
        if (e == g->end_event) {
            if (!next_step(r)) {
                for (int w = 0; w < r->W; w++) ring_push(&r->worker_q[w], r->task_terminate);
                for (int s = 0; s < r->S; s++)
                    if (s != a->id) ring_push(&r->sched_q[s], r->event_exit);
                break;
            }
            atomic_fetch_add_explicit(&r->cur_step, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&r->counters[g->begin_event], 1, memory_order_release);
            e = g->begin_event;
        }
        dispatch(r, e, &rr);
    }
    return NULL;
}

static void free_run(cpu_run *r) {
    if (r->workers)
        for (int w = 0; w < r->W; w++) free(r->workers[w].trace);
    if (r->worker_q)
        for (int w = 0; w < r->W; w++) free(r->worker_q[w].slots);
    if (r->sched_q)
        for (int s = 0; s < r->S; s++) free(r->sched_q[s].slots);
    free(r->workers);
    free(r->worker_q);
    free(r->sched_q);
    free(r->schedulers);
    free((void *)r->counters);
}

pk_status pk_cpu_run(pk_kernel *k, pk_decode *d) {
    cpu_run r;
    memset(&r, 0, sizeof r);
    r.k = k;
    r.d = d;
    r.g = &k->graph;
    r.W = k->cfg.num_workers;
    r.S = k->cfg.num_local_schedulers;
    r.tracing = k->cfg.trace_path != NULL;
    r.task_terminate = (uint32_t)r.g->ntasks;
    r.event_exit = (uint32_t)r.g->nevents;
    int dynamic = k->cfg.sched_mode == PK_SCHED_DYNAMIC;
    const int ncounters = r.g->nevents + pk_graph_group_counter0(k, k->nlayers); /* events, then groups */
    r.counters = calloc((size_t)ncounters, sizeof *r.counters);
    r.workers = calloc((size_t)r.W, sizeof *r.workers);
    int ok = r.counters && r.workers;
    if (ok && dynamic) {
        r.worker_q = calloc((size_t)r.W, sizeof *r.worker_q);
        r.sched_q = calloc((size_t)r.S, sizeof *r.sched_q);
        r.schedulers = calloc((size_t)r.S, sizeof *r.schedulers);
        ok = r.worker_q && r.sched_q && r.schedulers;
        for (int w = 0; ok && w < r.W; w++) ok = ring_init(&r.worker_q[w], (uint64_t)r.g->ntasks + 2) == 0;
        for (int s = 0; ok && s < r.S; s++) ok = ring_init(&r.sched_q[s], (uint64_t)r.g->nevents + 2) == 0;
    }
    if (!ok) {
        free_run(&r);
        return pk_fail(k, PK_ERR_NO_MEMORY, "pk_run: out of memory for the CPU runtime");
    }
    for (int e = 0; e < ncounters; e++) atomic_init(&r.counters[e], 0);
    atomic_init(&r.terminate, 0);
    atomic_init(&r.cur_step, 1);
    if (!pk_decode_plan_step(d)) { /* no requests */
        free_run(&r);
        return PK_OK;
    }
    sched_arg *sargs = dynamic ? calloc((size_t)r.S, sizeof *sargs) : NULL;
    if (dynamic && !sargs) {
        free_run(&r);
        return pk_fail(k, PK_ERR_NO_MEMORY, "pk_run: out of memory for the CPU runtime");
    }
    int started_w = 0, started_s = 0;
    pk_status st = PK_OK;
    for (int w = 0; w < r.W; w++) {
        r.workers[w].run = &r;
        r.workers[w].id = w;
        if (pthread_create(&r.workers[w].thread, NULL, dynamic ? dynamic_worker : static_worker, &r.workers[w])) {
            st = pk_fail(k, PK_ERR_BACKEND, "pk_run: could not start worker thread %d", w);
            break;
        }
        started_w++;
    }
    for (int s = 0; st == PK_OK && dynamic && s < r.S; s++) {
        sargs[s].run = &r;
        sargs[s].id = s;
        if (pthread_create(&r.schedulers[s], NULL, scheduler, &sargs[s])) {
            st = pk_fail(k, PK_ERR_BACKEND, "pk_run: could not start scheduler thread %d", s);
            break;
        }
        started_s++;
    }
    if (st != PK_OK) {
        /* Stop what started: terminate before the first step. */
        atomic_store(&r.terminate, 1);
        atomic_fetch_add(&r.counters[r.g->begin_event], 1);
        for (int w = 0; dynamic && w < started_w; w++) ring_push(&r.worker_q[w], r.task_terminate);
        for (int s = 0; s < started_s; s++) ring_push(&r.sched_q[s], r.event_exit);
    } else {
        /* Step 1 starts: BEGIN fires. */
        pk_step_mark_start(&d->s, now_ns());
        atomic_fetch_add_explicit(&r.counters[r.g->begin_event], 1, memory_order_release);
        if (dynamic) ring_push(&r.sched_q[0], r.g->begin_event);
    }
    for (int w = 0; w < started_w; w++) pthread_join(r.workers[w].thread, NULL);
    for (int s = 0; s < started_s; s++) pthread_join(r.schedulers[s], NULL);
    if (st == PK_OK && r.tracing) {
        pk_trace_record **recs = malloc((size_t)r.W * sizeof *recs);
        size_t *ns = malloc((size_t)r.W * sizeof *ns);
        if (recs && ns) {
            for (int w = 0; w < r.W; w++) {
                recs[w] = r.workers[w].trace;
                ns[w] = r.workers[w].ntrace;
            }
            st = pk_trace_write(k, k->cfg.trace_path, recs, ns, r.W);
        } else {
            st = pk_fail(k, PK_ERR_NO_MEMORY, "pk_run: out of memory writing the trace");
        }
        free(recs);
        free(ns);
    }
    free(sargs);
    free_run(&r);
    return st;
}
