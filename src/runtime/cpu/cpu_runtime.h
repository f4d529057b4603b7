// SPDX-License-Identifier: Apache-2.0
/* cpu_runtime.h — the CPU backend's pieces: the runtime, task dispatch and the trace writer. Its
 * table, pk_cpu_backend, is cpu_backend.c's. */
#ifndef PK_CPU_RUNTIME_H
#define PK_CPU_RUNTIME_H

#include <stdatomic.h>
#include <string.h>

#include "backend.h"
#include "pk_internal.h"

/* Runs the compiled graph on worker threads until pk_decode_plan_step says done (backend.h: run). */
pk_status pk_cpu_run(pk_kernel *k, pk_decode *d);

/* Runs one compute task of k's graph on the calling thread. group_counters: the kernel's pk_graph_group_counter0(k, k->nlayers) group completion counters
 * (attention split over the KV length), zeroed at the start of the run. */
void pk_cpu_run_task(const pk_kernel *k, const pk_task *t, _Atomic uint64_t *group_counters);

/* One executed task, for the trace: which task, which step, when (ns, CLOCK_MONOTONIC). */
typedef struct pk_trace_record {
    uint32_t task;
    uint32_t step;
    uint64_t start_ns, end_ns;
} pk_trace_record;

/* Writes a Chrome/Perfetto trace: one track per worker, a slice per task named by layer and
 * kind. recs[w] holds n[w] records of worker w. */
pk_status pk_trace_write(pk_kernel *k, const char *path, pk_trace_record *const *recs, const size_t *n,
                         int nworkers);

#endif /* PK_CPU_RUNTIME_H */
