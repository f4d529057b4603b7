// SPDX-License-Identifier: Apache-2.0
/* sync.cuh — the persistent kernel's memory-order primitives and its shared device state.
 *
 * Protocol (docs/DESIGN.md, "Runtime protocol"): producers write, __syncthreads(), then one
 * thread does an acq_rel add (gpu scope) on the 64-bit event counter; a consumer's thread 0 spins
 * with ld.acquire.gpu loads (with __nanosleep) until the counter reaches the threshold, then
 * __syncthreads(), then every thread reads. A gpu-scope acquire invalidates this SM's L1, so data
 * another SM wrote is not read stale; kernels still read activations with ld.global.cg.
 *
 * Debug builds (pk_gen_tuning::debug_spin_limit_ms, from PK_CUDA_DEBUG=1) give every wait a time
 * limit: a wait that runs past it records worker, task, event, counter and threshold in mapped host memory (pk_gen_debug) and
 * traps, so pk_run reports the stuck wait instead of hanging.
 */
#ifndef PK_CUDA_SYNC_CUH
#define PK_CUDA_SYNC_CUH

#include <stdint.h>

#include "kernels/cuda/rows.cuh" /* pk_dev_globaltimer */
#include "pk_abi.h"
#include "runtime/cuda/gen_api.h"
#include "runtime/decode_step.h"

typedef unsigned long long pk_u64;

/* A multi-producer single-consumer ring of task or event ids in global memory (the CPU
 * runtime's ring): a producer reserves index i with an atomic add on tail, waits for room,
 * stores the value, then release-stores seq[i & mask] = i + 1; the consumer acquires seq. */
typedef struct pk_dev_ring {
    pk_u64 *seq;      /* [mask + 1] */
    uint32_t *val;    /* [mask + 1] */
    pk_u64 mask;
    pk_u64 *tail;     /* next index to reserve */
    pk_u64 *head;     /* next index to read */
} pk_dev_ring;

/* Everything the persistent kernel shares, in device memory (one per pk_gen_create). */
typedef struct pk_dev_state {
    void *const *buf;        /* [num_buffers] device base of each tensor id (NULL: not on the GPU) */
    pk_u64 *counters;        /* [num_events] monotonic event counters, then the attention split's
                              * group completion counters (pk_graph_group_counter0) */
    int *terminate;          /* set by prepare_next_step when no step is left */
    int *cancel;             /* written by the host (pk_cancel): prepare_next_step plans no step */
    pk_u64 *cur_step;        /* the step running (dynamic-mode trace records) */
    pk_step_state *step;     /* prepare_next_step's state (decode_step.h) over device arrays */
    volatile uint32_t *host_nemitted; /* mapped: tokens published in step->emitted (mapped too) */
    pk_dev_ring *worker_q;   /* [W] dynamic mode */
    pk_dev_ring *sched_q;    /* [S] dynamic mode */
    pk_gen_trace_rec *trace; /* [W · trace_cap], NULL when not tracing */
    pk_u64 *trace_n;         /* [W] */
    pk_u64 trace_cap;
    pk_gen_debug *debug;     /* mapped host memory */
    uint32_t *debug_claim;   /* device memory: the first timed-out wait takes it */
    uint32_t W, S;
    uint32_t wstage_bytes;   /* static mode's weight staging area (0: none; runtime.cuh) */
} pk_dev_state;

/* u64 words between consecutive event counters in S->counters: 1 packs 16 events in a 128-byte
 * line, so the reds of one layer's event and the polls of the next layer's land on the same L2
 * line (faster than a line per event). The group counters (pk_group_ctrs) follow the last
 * event's slot, packed. */
#define PK_EVENT_STRIDE 1
#define PK_COUNTER_WORDS ((size_t)PK_GEN_NUM_EVENTS * PK_EVENT_STRIDE + PK_GEN_NUM_GROUP_COUNTERS)

__device__ __forceinline__ pk_u64 *pk_event_ctr(const pk_dev_state *S, uint32_t event) {
    return S->counters + (size_t)event * PK_EVENT_STRIDE;
}
/* The attention split's and split-K's completion counters (pk_graph_group_counter0 indexes them). */
__device__ __forceinline__ pk_u64 *pk_group_ctrs(const pk_dev_state *S) {
    return S->counters + (size_t)PK_GEN_NUM_EVENTS * PK_EVENT_STRIDE;
}

__device__ __forceinline__ pk_u64 pk_ld_acquire(const pk_u64 *p) { return pk_dev_ld_acquire_u64(p); }

__device__ __forceinline__ void pk_st_release(pk_u64 *p, pk_u64 v) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* The signal: returns the counter's value before the add. acq_rel, so the thread whose add
 * completes an event also sees every other trigger's writes (it may run prepare_next_step or
 * hand the event on to a scheduler). */
__device__ __forceinline__ pk_u64 pk_atom_add_acq_rel(pk_u64 *p, pk_u64 v) {
    pk_u64 old;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
    return old;
}

/* The signal when nobody needs the old value (static mode, every event but END_OF_GRAPH): a
 * reduction, so the signalling thread does not wait for the atomic's round trip to L2 before it
 * moves on to its next task (whose copies it then issues that much earlier). The release orders
 * the CTA's writes (published to thread 0 by the barrier before) before the add. */
__device__ __forceinline__ void pk_red_add_release(pk_u64 *p, pk_u64 v) {
    asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Whether the calling CTA's task is the last of `n` to finish in this step, by a completion
 * counter that counts every such task of every step (pk_graph_group_counter0: the split
 * attention's groups, a split-K layer). Ordering as the event signal: the CTA's writes, a
 * barrier, thread 0's acq_rel increment; the last task's thread 0 has acquired every other
 * task's increment before the barrier after it, so the whole CTA then sees their writes (read
 * them through L2). Every thread calls it and gets the same answer. */
__shared__ int pk_sh_last_of; /* pk_last_of's answer, which the static worker reads after the task */
__device__ __forceinline__ bool pk_last_of(pk_u64 *counter, pk_u64 n) {
    pk_cta_sync(); /* every thread's writes are issued */
    if (threadIdx.x == 0) pk_sh_last_of = (pk_atom_add_acq_rel(counter, 1) + 1) % n == 0;
    pk_cta_sync();
    return pk_sh_last_of != 0;
}

__device__ __forceinline__ int pk_ld_volatile_int(const int *p) { return *(const volatile int *)p; }

/* Records the stuck wait (first one only) and traps (debug builds). */
__device__ __noinline__ void pk_debug_timeout(const pk_dev_state *S, uint32_t task, uint32_t event,
                                              pk_u64 counter, pk_u64 threshold) {
    pk_gen_debug *d = S->debug;
    if (atomicCAS(S->debug_claim, 0u, 1u) == 0u) { /* device memory: mapped memory may lack atomics */
        d->worker = blockIdx.x;
        d->task = task;
        d->event = event;
        d->counter = counter;
        d->threshold = threshold;
        __threadfence_system();
        *(volatile uint32_t *)&d->flag = 1u;
        __threadfence_system();
    }
    __trap();
}
/* A spin loop's time limit in debug builds; nothing otherwise. */
#define PK_SPIN_BEGIN const pk_u64 pk_spin_t0_ = pk_gen_tuning::debug_spin_limit_ms ? pk_dev_globaltimer() : 0;
#define PK_SPIN_CHECK(S, task, event, counter, threshold)                                                    \
    if constexpr (pk_gen_tuning::debug_spin_limit_ms != 0) {                                                 \
        if (pk_dev_globaltimer() - pk_spin_t0_ > (pk_u64)pk_gen_tuning::debug_spin_limit_ms * 1000000ull)  \
            pk_debug_timeout(S, task, event, counter, threshold);                                            \
    }

/* One thread waits until counters[event] >= threshold (acquire; rows.cuh's pk_dev_spin_until:
 * the poll and its sleeps; with the debug build's time limit). */
__device__ __forceinline__ void pk_wait_event_thread(const pk_dev_state *S, uint32_t event, pk_u64 threshold,
                                                     uint32_t task) {
    if constexpr (pk_gen_tuning::debug_spin_limit_ms != 0) {
        pk_u64 c = pk_ld_acquire(pk_event_ctr(S, event));
        if (c < threshold) {
            PK_SPIN_BEGIN
            unsigned ns = PK_SPIN_SLEEP_NS;
            do {
                __nanosleep(ns);
                ns = 2 * ns < PK_SPIN_SLEEP_MAX_NS ? 2 * ns : PK_SPIN_SLEEP_MAX_NS;
                c = pk_ld_acquire(pk_event_ctr(S, event));
                PK_SPIN_CHECK(S, task, event, c, threshold)
            } while (c < threshold);
        }
    } else {
        (void)task;
        pk_dev_spin_until(pk_event_ctr(S, event), threshold);
    }
}

/* Thread 0 waits (pk_wait_event_thread); then the CTA syncs. Every thread of the CTA must call it. */
__device__ __forceinline__ void pk_wait_event(const pk_dev_state *S, uint32_t event, pk_u64 threshold,
                                              uint32_t task) {
    if (threadIdx.x == 0) pk_wait_event_thread(S, event, threshold, task);
    pk_cta_sync();
}

/* ---- rings (one thread calls these) ---- */

__device__ __forceinline__ void pk_ring_push(const pk_dev_state *S, pk_dev_ring *r, uint32_t v) {
    pk_u64 i = atomicAdd(r->tail, 1ull);
    if (i - pk_ld_acquire(r->head) > r->mask) {
        PK_SPIN_BEGIN
        while (i - pk_ld_acquire(r->head) > r->mask) {
            __nanosleep(64);
            PK_SPIN_CHECK(S, 0xffffffffu, 0xffffffffu, i, *r->head + r->mask)
        }
    }
    *(volatile uint32_t *)&r->val[i & r->mask] = v;
    pk_st_release(&r->seq[i & r->mask], i + 1);
}

/* Takes the next value if there is one: returns 1 and sets *v, or 0. */
__device__ __forceinline__ int pk_ring_try_pop(pk_dev_ring *r, uint32_t *v) {
    pk_u64 i = *(volatile pk_u64 *)r->head; /* only this consumer writes head */
    if (pk_ld_acquire(&r->seq[i & r->mask]) != i + 1) return 0;
    *v = *(volatile uint32_t *)&r->val[i & r->mask];
    pk_st_release(r->head, i + 1);
    return 1;
}

__device__ __forceinline__ uint32_t pk_ring_pop(const pk_dev_state *S, pk_dev_ring *r) {
    uint32_t v;
    if (pk_ring_try_pop(r, &v)) return v;
    PK_SPIN_BEGIN
    while (!pk_ring_try_pop(r, &v)) {
        __nanosleep(32);
        PK_SPIN_CHECK(S, 0xffffffffu, 0xffffffffu, *r->head, *r->head + 1)
    }
    (void)S;
    return v;
}

#endif /* PK_CUDA_SYNC_CUH */
