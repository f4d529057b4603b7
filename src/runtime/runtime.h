/* runtime.h — decode state shared by the backends, and the backend entry points.
 *
 * pk_decode is the host's view of a generation: request slots, the paged KV cache's free list,
 * and the step tensors it fills. prepare_next_step (pk_decode_finish_step + pk_decode_plan_step)
 * is the one place that moves state between steps.
 */
#ifndef PK_RUNTIME_H
#define PK_RUNTIME_H

#include "pk_internal.h"

pk_status pk_runtime_create_state_tensors(pk_kernel *k);
void pk_runtime_free(pk_kernel *k);

typedef struct pk_slot {
    int req;        /* index into the requests, -1 when free */
    int len;        /* tokens known: prompt + generated */
    int cached;     /* tokens whose K/V are in the cache */
    int npages;     /* pages held */
    int reserved;   /* pages reserved for the request's whole life */
    int sample_row; /* row of this step whose output is the next token, -1 if none */
} pk_slot;

typedef struct pk_decode {
    pk_kernel *k;
    pk_request *reqs;
    int nreqs, next_req, ndone;
    pk_token_fn on_token;
    void *user;
    int R, T, max_seq, page_size, pages_per_req;
    int32_t *tokens;      /* [R, max_seq]: every slot's tokens */
    pk_slot *slots;       /* [R] */
    int32_t *free_pages;  /* stack of free page ids */
    int nfree, unreserved;
    int64_t step;         /* steps planned so far */
    /* the step tensors (host memory of the CPU backend, or staging for the GPU) */
    int32_t *step_tokens, *token_pos, *token_req, *page_table, *step_info, *step_output;
    pk_status error;      /* set when a step cannot be planned */
} pk_decode;

/* Validates the requests and sets up d; PK_OK or an error on k naming the request. */
pk_status pk_decode_init(pk_decode *d, pk_kernel *k, pk_request *reqs, int n, pk_token_fn on_token,
                         void *user);
void pk_decode_free(pk_decode *d);
/* Reads step_output for the rows that sample, appends tokens, retires finished requests. */
void pk_decode_finish_step(pk_decode *d);
/* Admits waiting requests and fills the step tensors for the next step. Returns 1 if there is a
 * step to run, 0 when every request is done (or d->error is set). */
int pk_decode_plan_step(pk_decode *d);

/* The CPU backend: runs the compiled graph until pk_decode_plan_step says done. */
pk_status pk_cpu_run(pk_kernel *k, pk_decode *d);

/* The CUDA backend (src/runtime/cuda). libpk never links CUDA: pk_cuda_compile generates
 * kernel.cu, runs nvcc into a cached shared object and dlopens it; the object brings the CUDA
 * runtime with it. Without a GPU, compile still works when only_codegen_and_nvcc is set. */
/* "auto" worker counts (src/runtime/device_query.c). */
int pk_cpu_core_count(void);
pk_status pk_cuda_sm_count(int *out, char *err, size_t err_len);

pk_status pk_cuda_compile(pk_kernel *k, const pk_compile_options *opts);
pk_status pk_cuda_run(pk_kernel *k, pk_decode *d);
pk_status pk_cuda_read_tensor(pk_kernel *k, const pk_tensor *t, void *dst, size_t bytes);
void pk_cuda_free(pk_kernel *k);

#endif /* PK_RUNTIME_H */
