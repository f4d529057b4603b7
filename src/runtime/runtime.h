/* runtime.h — decode state shared by the backends, and the backend entry points.
 *
 * pk_decode is the host's view of a generation: request slots, the paged KV cache's free list,
 * and the step tensors it fills. prepare_next_step (pk_decode_finish_step + pk_decode_plan_step)
 * is the one place that moves state between steps; its logic lives in decode_step.h so that the
 * CUDA kernel runs the same code on the device.
 */
#ifndef PK_RUNTIME_H
#define PK_RUNTIME_H

#include "pk_internal.h"
#include "runtime/decode_step.h"

pk_status pk_runtime_create_state_tensors(pk_kernel *k);
void pk_runtime_free(pk_kernel *k);

/* Longest run whose steps are timed: later steps are not recorded (pk_step_times.num_timed). */
#define PK_TIMED_STEPS_MAX (1 << 22)

typedef struct pk_cuda_runtime pk_cuda_runtime; /* cuda_backend.c */

/* k->runtime, created by the first pk_compile (CUDA) or pk_run: what the last run left behind
 * for pk_run_step_times, and the CUDA backend's state. Freed by pk_runtime_free. */
struct pk_runtime {
    pk_step_rec *rec;           /* [rec_alloc + 1]: the step records a run fills (decode_step.h) */
    int64_t rec_alloc;
    int64_t ntimed;             /* steps of the last run with a duration below */
    double *step_ms;            /* [rec_alloc] */
    int32_t *step_rows, *step_prompt_rows;
    pk_cuda_runtime *cuda;      /* NULL unless the CUDA backend is set up */
};

/* k->runtime, created on first use; NULL (with the error on k) when out of memory. */
pk_runtime *pk_runtime_get(pk_kernel *k);

/* The host side of a generation: the step state of decode_step.h over host arrays, plus the
 * caller's requests and callback. */
typedef struct pk_decode {
    pk_kernel *k;
    pk_request *reqs;
    int nreqs;
    pk_token_fn on_token;
    void *user;
    pk_step_state s;        /* what prepare_next_step moves (host memory of the CPU backend) */
    pk_step_req *sreqs;     /* [nreqs] */
    pk_step_token *emitted; /* [max_requests]: one step's tokens */
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
/* Runs d; fills d->s.rec (when set) with the device's step records after the kernel ends. */
pk_status pk_cuda_run(pk_kernel *k, pk_decode *d);
pk_status pk_cuda_read_tensor(pk_kernel *k, const pk_tensor *t, void *dst, size_t bytes);
/* The copy probe's buffer size: $PK_COPY_PROBE_MB MiB when set (64 .. 2^20), else def. */
uint64_t pk_copy_probe_bytes(uint64_t def);
/* Device-to-device copy bandwidth (read + write bytes per second), measured by kernel.so. */
pk_status pk_cuda_copy_bandwidth(pk_kernel *k, double *bytes_per_s);
/* Fills out with the GPU memory pk_compile allocated and returns 1, or returns 0 when the CUDA
 * backend is not loaded (compiled for PK_CUDA_ARCH only, or not compiled). */
int pk_cuda_memory(const pk_kernel *k, pk_memory_stats *out);
/* Frees the CUDA backend's state (k->runtime->cuda); the rest of k->runtime stays. */
void pk_cuda_free(pk_kernel *k);

#endif /* PK_RUNTIME_H */
