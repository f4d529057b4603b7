// SPDX-License-Identifier: Apache-2.0
/* runtime.h — decode state shared by the backends (their entry points are backend.h's table).
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

/* Longest run whose steps are timed: later steps are not recorded (pk_step_times.num_timed). */
#define PK_TIMED_STEPS_MAX (1 << 22)

/* The host side of a generation: the step state of decode_step.h over host arrays, plus the
 * caller's requests and callback. */
typedef struct pk_session pk_session; /* runtime/session.h */

typedef struct pk_decode {
    pk_kernel *k;
    pk_session *sess;       /* a resident session's (pk_session_open), NULL for pk_run */
    pk_request *reqs;
    int nreqs;
    pk_token_fn on_token;
    void *user;
    pk_step_state s;        /* what prepare_next_step moves (host memory of the CPU backend) */
    pk_step_req *sreqs;     /* [nreqs] (pk_run; a session's ring is its own) */
    pk_step_token *emitted; /* one step's records: [max_requests · (1 + spec_length)] for pk_run */
} pk_decode;

/* Validates the requests and sets up d; PK_OK or an error on k naming the request. */
pk_status pk_decode_init(pk_decode *d, pk_kernel *k, pk_request *reqs, int n, pk_token_fn on_token,
                         void *user);
/* The check pk_decode_init makes of request r, which `who` names in the message ("pk_run: request
 * 3"). */
pk_status pk_decode_check_request(pk_kernel *k, const pk_request *r, const char *who);
/* A request's sampling as the step state's words (kernels/sample.h); all 0 when greedy. */
void pk_decode_sample_words(const pk_sampling *sp, int32_t w[PK_SAMPLE_PARAMS]);
/* d's step state over k's config with no request yet and room for emitted_cap records a step
 * (the caller sets s.reqs, s.req_mask and s.nreqs, then pk_step_reset). */
pk_status pk_decode_setup(pk_decode *d, pk_kernel *k, int emitted_cap);
void pk_decode_free(pk_decode *d);
/* Reads step_output for the rows that sample, appends tokens, retires finished requests. */
void pk_decode_finish_step(pk_decode *d);
/* Admits waiting requests and fills the step tensors for the next step. Returns 1 if there is a
 * step to run, 0 when the run ends: every request done, or pk_cancel (pk_run); a session waits
 * here while it has nothing to run and ends once closed. */
int pk_decode_plan_step(pk_decode *d);
/* Whether k can run (pk_run, pk_session_open): compiled, no session open, an argmax into
 * pk_step_output within the vocabulary; else the error on k, named after `who`. */
pk_status pk_check_runnable(pk_kernel *k, const char *who);
/* Whether pk_cancel asked k's run to stop (pk_run: no step is planned after it). */
int pk_cancel_requested(const pk_kernel *k);

/* A session's step boundary (session.c): hands the step's records to the host; reads the host's
 * new requests and cancels and plans, waiting while there is nothing to run. */
void pk_session_step_finished(pk_decode *d);
int pk_session_step_plan(pk_decode *d);

/* The copy probe's buffer size for pk_device_copy_bandwidth: $PK_COPY_PROBE_MB MiB when set
 * (64 .. 2^20), else def. */
uint64_t pk_copy_probe_bytes(uint64_t def);

#endif /* PK_RUNTIME_H */
