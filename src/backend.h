// SPDX-License-Identifier: Apache-2.0
/* backend.h — the table of functions through which the core (src/graph, src/taskgraph,
 * src/runtime/run.c) reaches a backend, and the registry that maps pk_config.backend to it.
 *
 * A backend is one `const pk_backend_i` (ggml's ggml_backend_i is the model): the CPU's in
 * src/runtime/cpu/cpu_backend.c, the CUDA backend's in src/runtime/cuda/cuda_backend.c. The core
 * names no backend; it calls k->backend->entry(k, ...). A kernel runs on one device of its
 * backend, k->device (pk_config.rank: one device per rank); a backend keeps what it builds for the
 * kernel in k->backend_ctx and releases it in `free`. Every entry is set.
 *
 * Errors: an entry that takes a kernel records its error on it (pk_fail) and returns the status.
 */
#ifndef PK_BACKEND_H
#define PK_BACKEND_H

#include <stddef.h>

#include "pk_internal.h"

typedef struct pk_decode pk_decode; /* runtime/runtime.h: the host side of one pk_run */

typedef struct pk_backend_i {
    const char *name; /* "cpu", "cuda": for messages */

    /* The worker count that num_workers 0 ("auto") means on device `device`: CPU cores, GPU SMs.
     * Called by pk_kernel_new before the kernel is set up, so errors go to err (err_len bytes). */
    pk_status (*default_workers)(int device, int *workers, char *err, size_t err_len);

    /* The rows a step carries where pk_config.max_tokens_per_step is 0 ("auto"): the prompt
     * chunk size the backend is fastest with (the CUDA backend's multi-row steps run on tensor
     * cores, where small chunks re-read the weights each chunk; the CPU's are row loops). */
    int default_step_tokens;

    /* The figures of k's device (k->cfg set, num_workers resolved): stage size and the static
     * schedule's cost model. Never fails: a backend that cannot probe its device gives the
     * figures it builds for. */
    void (*device_figures)(const pk_kernel *k, pk_device_figures *out);

    /* pk_kernel_attention_reach (pk.h): the longest KV length one unsplit decode-attention task
     * of this head shape holds on chip; 0: no such limit; -1: the shape is not supported there. */
    int (*attention_reach)(const pk_kernel *k, int head_dim, int q_heads_per_kv_head);

    /* After the task graph is built (k->graph): whatever the backend needs before pk_run
     * (generated code, a device, its buffers). On failure the backend's state is released. */
    pk_status (*compile)(pk_kernel *k, const pk_compile_options *opts);

    /* Runs the compiled graph for the requests of d until every one is done; fills d->s.rec
     * (when set) with the step boundaries and sets k->steps_run. */
    pk_status (*run)(pk_kernel *k, pk_decode *d);

    /* Copies pk-owned tensor t (PK_STORAGE_OWNED) of the compiled kernel into dst (exactly its
     * bytes), from wherever the backend keeps it. */
    pk_status (*read_tensor)(pk_kernel *k, const pk_tensor *t, void *dst, size_t bytes);

    /* pk_kernel_memory (pk.h) of the compiled kernel; out is zeroed by the caller. */
    pk_status (*memory)(pk_kernel *k, pk_memory_stats *out);

    /* pk_device_copy_bandwidth (pk.h): read + write bytes per second of the memory the weights
     * are read from. */
    pk_status (*copy_bandwidth)(pk_kernel *k, double *bytes_per_s);

    /* Releases k->backend_ctx (sets it NULL); the kernel stays usable for another compile.
     * Safe to call when nothing was set up. */
    void (*free)(pk_kernel *k);

    /* Whether `run` can serve a resident session (pk_session_open, runtime/session.h): called
     * with d->sess set from the session's own thread, it returns only once the session closes,
     * its step boundary being pk_decode_finish_step / pk_decode_plan_step as for pk_run (which,
     * in session mode, wait while there is nothing to run). 0: pk_session_open returns
     * PK_ERR_UNSUPPORTED. */
    int serves_sessions;

    /* Whether the argmax's last task draws the tokens of requests that sample (pk_sampling,
     * kernels/sample.h) from the sampling state tensors; 0: a request with temperature > 0 is
     * refused with PK_ERR_UNSUPPORTED. */
    int samples;

    /* Whether the step logic may keep a prefix cache (pk_config.prefix_cache): its arrays are
     * host memory the backend's step boundary reads (decode_step.h). */
    int caches_prefixes;
} pk_backend_i;

/* The table of backend b (src/backend_registry.c), NULL for an unknown value. */
const pk_backend_i *pk_backend_find(pk_backend b);

#endif /* PK_BACKEND_H */
