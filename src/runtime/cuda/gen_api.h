// SPDX-License-Identifier: Apache-2.0
/* gen_api.h — the C interface between libpk and a generated kernel.so: plain structs and the
 * extern "C" entry points the generated object exports. Compiled by C11 (libpk, which dlopens
 * the object and looks the entry points up by name) and by nvcc (embedded into kernel.cu).
 *
 * Life of a loaded object: pk_gen_get_info (check ABI and graph hash) → pk_gen_create (device
 * buffers, one per tensor id that lives on the GPU) → pk_gen_upload … pk_gen_upload_wait
 * (weights) → pk_gen_run (any number of times) / pk_gen_read / pk_gen_copy_bandwidth →
 * pk_gen_destroy. Every call but
 * get_info takes the context create returned, so two kernels may share one object. Calls return
 * 0 on success, or -1 with a one-line message in err (pk_gen_run: -2 when a debug build's wait
 * timed out, with args.debug filled in).
 */
#ifndef PK_GEN_API_H
#define PK_GEN_API_H

#include <stddef.h>
#include <stdint.h>

#define PK_GEN_API_VERSION 7

/* The per-shape tuning of the device code. codegen.c's tuning_of decides it from the graph and
 * writes it into kernel.cu, before any device header, as one constexpr struct:
 *
 *   struct pk_gen_tuning {
 *       static constexpr bool lin_wst_lds;       GEMV tiles that stage whole in shared memory are
 *                                                read with ld.shared, 1 chunk per thread for the
 *                                                norm, the norm's weight kept in L2 (evict_last),
 *                                                the staged fast path (linear.cuh, rows.cuh)
 *       static constexpr int lin_pace_kb;        KB a streamed GEMV tile issues before its wait
 *                                                (linear.cuh's pre-wait stages: 48 or 64)
 *       static constexpr bool attd_bulk_rows;    the decode attention stages each KV row with one
 *                                                cp.async.bulk instead of 16-byte copies
 *                                                (attention_decode.cuh; sm_90+)
 *       static constexpr unsigned debug_spin_limit_ms;  0: off; else every wait traps / reports
 *                                                past this many ms (PK_CUDA_DEBUG=1, sync.cuh)
 *       static constexpr unsigned debug_stall_task;     with the spin limit: this task waits
 *                                                forever (the debug build's test); 0xffffffff: none
 *   };
 *
 * Device code reads it with `if constexpr` or as constants, never with the preprocessor; a
 * program that includes the task kernels on its own (tests/cuda) defines its own. */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pk_gen_info {
    uint32_t abi_version; /* PK_ABI_VERSION of the generator */
    uint32_t api_version; /* PK_GEN_API_VERSION */
    uint64_t graph_hash;  /* pk_taskgraph.hash */
    uint32_t num_tasks, num_events, num_layers, num_buffers;
    uint32_t num_workers; /* static schedule's workers */
    uint32_t threads;     /* threads per CTA */
    uint32_t smem_bytes;  /* dynamic shared memory per CTA */
    const char *pk_version;
} pk_gen_info;

typedef struct pk_gen_config {
    int device;                   /* CUDA device ordinal */
    uint32_t num_buffers;         /* = info.num_buffers */
    const uint64_t *buffer_bytes; /* [num_buffers]: bytes of each tensor id on the GPU, 0: none */
    uint32_t num_workers;         /* = info.num_workers */
    uint32_t num_schedulers;      /* scheduler queues (dynamic mode) */
    int32_t R, T, max_seq, page_size, pages_per_req, num_pages;
    int64_t eos;
    int32_t spec_len, spec_ngram; /* prompt-lookup speculation (pk_config's spec_length, spec_ngram) */
    int32_t all_logits;           /* pk_config's: the LM head over every row, not from FIRST_SAMPLE */
    /* tensor ids of the decode-state tensors */
    uint32_t step_tokens, step_output, step_info, token_pos, token_req, page_table;
    uint32_t sample_params, sample_slot; /* sampling's (decode_step.h, sample.cuh) */
    uint64_t staging_bytes;       /* each of the two pinned upload buffers */
} pk_gen_config;

/* One executed task (the layout of pk_trace_record). */
typedef struct pk_gen_trace_rec {
    uint32_t task, step;
    uint64_t start_ns, end_ns; /* %globaltimer */
} pk_gen_trace_rec;

/* A step boundary (the layout of decode_step.h's pk_step_rec): see pk_gen_run_args.step_rec. */
typedef struct pk_gen_step_rec {
    uint64_t ns; /* %globaltimer */
    int32_t rows, prompt_rows;
} pk_gen_step_rec;

/* What a wait that ran past the debug spin limit saw (PK_DEBUG_SPIN_LIMIT builds). */
typedef struct pk_gen_debug {
    uint32_t flag;      /* 1 once a wait timed out */
    uint32_t worker;    /* CTA */
    uint32_t task;      /* task waiting; 0xffffffff: a queue (push or pop) */
    uint32_t event;     /* event waited on; 0xffffffff: a queue */
    uint64_t counter;   /* value seen */
    uint64_t threshold; /* value awaited */
} pk_gen_debug;

typedef void (*pk_gen_token_fn)(void *user, int32_t req, int32_t token, int32_t row);

typedef struct pk_gen_run_args {
    int32_t nreqs;
    const int32_t *const *prompts; /* [nreqs] host pointers */
    const int32_t *prompt_len;     /* [nreqs] */
    const int32_t *max_new_tokens; /* [nreqs] */
    const int32_t *sample_words;   /* [nreqs, PK_SAMPLE_PARAMS]: each request's sampling (sample.h) */
    int dynamic;                   /* 0: static schedule, 1: schedulers */
    pk_gen_token_fn on_token;      /* called from the calling thread while the kernel runs */
    void *user;
    const int *cancel;             /* host flag (pk_cancel, read with __atomic_load_n) or NULL: once
                                    * nonzero, the device plans no step after the one it is running */
    /* trace (trace_cap 0: off): worker w's records go to trace[w · trace_cap ...] */
    uint64_t trace_cap;
    pk_gen_trace_rec *trace;       /* [num_workers · trace_cap] host memory */
    uint64_t *trace_n;             /* out: [num_workers] records taken (may exceed trace_cap) */
    /* step times (step_rec_cap 0: off): [step_rec_cap + 1] host memory, filled after the kernel
     * ends: [0].ns when step 1 started, [i] step i's rows and the %globaltimer at its end, as the
     * device-side prepare_next_step wrote them (steps past step_rec_cap are not recorded) */
    int64_t step_rec_cap;
    pk_gen_step_rec *step_rec;
    /* out */
    int32_t *num_output;           /* [nreqs] */
    int32_t *finish;               /* [nreqs] pk_finish_reason */
    int64_t steps;
    int64_t spec_drafted, spec_accepted; /* out: speculation's draft tokens verified, kept */
    pk_gen_debug debug;            /* out: the stuck wait, when pk_gen_run returns -2 */
} pk_gen_run_args;


typedef const pk_gen_info *(*pk_gen_get_info_fn)(void);
typedef void *(*pk_gen_create_fn)(const pk_gen_config *c, char *err, size_t err_len);
typedef int (*pk_gen_upload_fn)(void *ctx, uint32_t buffer, uint64_t offset, const void *src, uint64_t bytes,
                                char *err, size_t err_len);
typedef int (*pk_gen_upload_wait_fn)(void *ctx, char *err, size_t err_len);
typedef int (*pk_gen_run_fn)(void *ctx, pk_gen_run_args *a, char *err, size_t err_len);
typedef int (*pk_gen_read_fn)(void *ctx, uint32_t buffer, uint64_t offset, void *dst, uint64_t bytes, char *err,
                              size_t err_len);
/* Device-to-device copy bandwidth: cudaMemcpy between two buffers of `bytes` (halved while
 * cudaMalloc fails, down to 64 MiB; bytes_used says what was used), 3 warm-up copies, then
 * `reps` timed with events on the object's stream. Read + write bytes per second. */
typedef int (*pk_gen_copy_bandwidth_fn)(void *ctx, uint64_t bytes, int reps, double *bytes_per_s, uint64_t *bytes_used,
                                        char *err, size_t err_len);
typedef void (*pk_gen_destroy_fn)(void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* PK_GEN_API_H */
