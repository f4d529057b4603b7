// SPDX-License-Identifier: Apache-2.0
/* pk.h — the one public header of pk, a persistent-kernel LLM decoder.
 *
 * A decode step is described as a graph of layers over tensors (the seed's PersistentKernel:
 * attach_input, new_tensor, fuse_tensors, *_layer, compile, run, finalize). pk splits each layer
 * into `grid` tasks, links tasks by events, and runs every decode step of a generation inside one
 * persistent runtime (worker threads on the CPU backend, one resident kernel on the CUDA backend).
 *
 * Errors: every call that can fail returns a pk_status (or NULL) and leaves a one-line message
 * on the kernel object (pk_kernel_error) naming the tensor and the numbers. The library never
 * aborts or exits on user input. A pk_kernel is not thread-safe: call it from one thread.
 *
 * Shapes: T = cfg.max_tokens_per_step (rows of every activation), all tensors row-major.
 */
#ifndef PK_H
#define PK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PK_VERSION_MAJOR 0
#define PK_VERSION_MINOR 1
#define PK_VERSION_STRING "0.1.0"
#define PK_MAX_DIMS 4

typedef enum pk_status {
    PK_OK = 0,
    PK_ERR_INVALID_ARGUMENT = 1, /* NULL where a value is needed, bad enum or config value */
    PK_ERR_SHAPE = 2,            /* tensor shapes do not fit the layer */
    PK_ERR_STRIDE = 3,           /* strides are not row-major */
    PK_ERR_GRID = 4,             /* grid < 1, or does not divide the dimension it splits (linear family's N: exceeds it) */
    PK_ERR_DTYPE = 5,            /* unknown dtype, or one the layer does not take */
    PK_ERR_STATE = 6,            /* call out of order: a layer after compile, run before compile */
    PK_ERR_NO_MEMORY = 7,
    PK_ERR_IO = 8,               /* a file could not be opened, read or written */
    PK_ERR_FORMAT = 9,           /* a malformed model, config or tokenizer file */
    PK_ERR_UNSUPPORTED = 10,     /* unknown architecture, backend not built in */
    PK_ERR_LIMIT = 11,           /* prompt too long, token id out of range, KV cache full */
    PK_ERR_BACKEND = 12,         /* nvcc missing or failing, no GPU, CUDA error */
} pk_status;

/* A short constant name for a status ("PK_ERR_SHAPE"). */
const char *pk_status_name(pk_status s);

typedef enum pk_dtype {
    PK_DTYPE_BF16 = 0,
    PK_DTYPE_FP16 = 1,
    PK_DTYPE_FP32 = 2,
    PK_DTYPE_INT32 = 3,
    PK_DTYPE_INT64 = 4,
} pk_dtype;

/* Bytes per element; 0 for a value outside the enum. */
size_t pk_dtype_size(pk_dtype d);
const char *pk_dtype_name(pk_dtype d);

typedef enum pk_io_category {
    PK_IO_LOCAL = 0,  /* this rank's memory */
    PK_IO_SHARED = 1, /* visible to every rank (NVSHMEM on the GPU); one rank on the CPU backend */
} pk_io_category;

typedef enum pk_sched_mode {
    PK_SCHED_STATIC = 0,  /* every task assigned to a worker at compile time (the fast path) */
    PK_SCHED_DYNAMIC = 1, /* schedulers hand fired events' tasks to workers (MPK's protocol) */
} pk_sched_mode;

typedef enum pk_backend {
    PK_BACKEND_CPU = 0,
    PK_BACKEND_CUDA = 1,
} pk_backend;

typedef struct pk_config {
    int world_size;            /* ranks (GPUs) running the graph together; 1 for now */
    int rank;                  /* this rank, 0 <= rank < world_size */
    int num_workers;           /* worker threads (CPU) / worker CTAs (CUDA); 0: one per core / SM */
    int num_local_schedulers;  /* scheduler threads / warps (dynamic mode) */
    int num_remote_schedulers; /* schedulers for events from other ranks; 0 when world_size 1 */
    int max_seq_length;        /* longest request, prompt + generated tokens */
    int max_requests;          /* requests decoded together; more wait for a free slot */
    int max_tokens_per_step;   /* T: tokens one step carries (prefill chunk + decodes); 0: the
                                * backend's (CUDA 512, CPU 64), at least max_requests */
    int page_size;             /* KV cache tokens per page */
    int num_pages;             /* KV cache pages shared by all requests */
    int64_t eos_token_id;      /* generation stops after this token; -1: never */
    pk_sched_mode sched_mode;
    pk_backend backend;
    const char *trace_path;    /* if set, pk_run writes a Perfetto/Chrome trace there */
    const char *cache_dir;     /* CUDA backend: where compiled kernels are cached; NULL: default */
    int attention_kv_splits;   /* pk_model_load: the attention layers' split over the KV length
                                * (pk_attention_params.kv_splits). 0: pk picks: where
                                * max_seq_length exceeds pk_kernel_attention_reach for the
                                * model's head shape (320 where that is -1; never where it is 0),
                                * num_workers / the attention's grid of KV heads, so every worker
                                * takes a part, at most max_seq_length's PK_ATTN_SPLIT_BLOCK
                                * blocks; else 1. 1: not split */
    /* Prompt-lookup speculative decoding (off: spec_length 0). At each step boundary a decoding
     * request's latest spec_ngram tokens (shorter when they do not occur) are looked up among its
     * earlier tokens; the up to spec_length tokens that followed the latest earlier occurrence are
     * drafted and verified in the next step (1 + drafts rows): the longest run of drafts equal to
     * the model's own choices is kept, with the model's next token. Greedy output is the same
     * tokens as without it. */
    int spec_length;           /* 0 (off) .. 16 draft tokens a step */
    int spec_ngram;            /* 1 .. 8 tokens matched; 0: 3 */
    /* The prefix cache: a request whose prompt starts with whole KV pages that an earlier request
     * of the same pk_run or session computed (a system prompt, a chat's history) takes those
     * pages instead of computing them again (pk_request.num_cached); pages no request holds stay
     * cached until a free page is wanted. The CPU backend so far (ignored by the CUDA backend). */
    int prefix_cache;          /* 1 (default): on; 0: off */
    /* Which rows of a step get logits (the LM head and argmax layers: the linear layer that only
     * an argmax reads). 0 (default): the rows that draw a token only (each request's last prompt
     * row, decode rows, drafts), so a prompt's steps skip the LM head but for their last row; the
     * logits tensor then holds those rows only. 1: every row, for reading the logits tensor with
     * pk_tensor_read after a run (teacher-forced logits of a whole prompt). */
    int all_logits;
} pk_config;

/* Defaults: 1 rank, 4 workers, 1 scheduler, max_seq_length 512, 4 requests, T = 64,
 * page 16, pages enough for max_requests full-length requests, no EOS, static mode, CPU. */
pk_config pk_config_default(void);

typedef struct pk_kernel pk_kernel;
typedef struct pk_tensor pk_tensor;

/* Creates a kernel. Returns NULL only when out of memory; an invalid config gives a kernel in
 * the error state (pk_kernel_status != PK_OK, message in pk_kernel_error), on which every other
 * call returns that error. The kernel copies cfg (trace_path and cache_dir strings too).
 * Free with pk_kernel_free. */
pk_kernel *pk_kernel_new(const pk_config *cfg);
/* Frees the kernel, its tensors and its runtime. Accepts NULL. */
void pk_kernel_free(pk_kernel *k);
/* The status of the last failed call (PK_OK if none), and its message ("" if none). The string
 * stays valid until the next call on k. */
pk_status pk_kernel_status(const pk_kernel *k);
const char *pk_kernel_error(const pk_kernel *k);
/* The kernel's config after defaults were filled in. */
const pk_config *pk_kernel_config(const pk_kernel *k);

/* What the kernel's backend offers a graph builder (pk_model_load picks grids and variants from
 * it). PK_OK, or an error on k. */
typedef struct pk_device_info {
    int workers;          /* the kernel's worker count, resolved (CPU threads / CUDA CTAs, one per SM) */
    int64_t stage_bytes;  /* largest weight tile one task stages whole on chip before computing
                           * (CUDA: in shared memory); 0: the backend stages none (CPU) */
} pk_device_info;
pk_status pk_kernel_device_info(const pk_kernel *k, pk_device_info *out);
/* The longest KV length (positions) one unsplit decode-attention task of this head shape holds on
 * chip: beyond it a builder splits the attention over the KV length. 0: no such limit (the
 * backend reads the cache in place: CPU), -1: the backend's staged path does not take the shape. */
int pk_kernel_attention_reach(const pk_kernel *k, int head_dim, int q_heads_per_kv_head);

/* ---- tensors ---------------------------------------------------------------------------- */

/* Wraps caller memory as a tensor (weights, inputs). `strides` in elements, or NULL for
 * row-major; any other strides give PK_ERR_STRIDE. The memory must stay valid and unchanged
 * until pk_kernel_free; pk never writes it. Returns a handle owned by k, or NULL on error. */
pk_tensor *pk_attach_input(pk_kernel *k, const char *name, pk_dtype dtype, int ndim,
                           const int64_t *dims, const int64_t *strides, const void *data);

/* A tensor whose memory pk owns (activations, KV cache), zero-filled, freed with k. */
pk_tensor *pk_new_tensor(pk_kernel *k, const char *name, pk_dtype dtype, int ndim,
                         const int64_t *dims, pk_io_category category);

/* Concatenates `n` attached tensors along dim 0 in `num_groups` groups, without copying: the
 * result's rows are, for each group g, rows [g·d_i/G, (g+1)·d_i/G) of input 0, then of input 1,
 * ... Every input must have dim 0 divisible by num_groups and equal other dims and dtype.
 * Fused tensors can be read by layers as weights (up to 4 inputs). fused_dim must be 0. */
pk_tensor *pk_fuse_tensors(pk_kernel *k, const char *name, pk_tensor *const *inputs, int n,
                           int fused_dim, int num_groups);

/* Shape queries; NULL-safe (return 0 / "" / PK_DTYPE_BF16). */
int pk_tensor_ndim(const pk_tensor *t);
int64_t pk_tensor_dim(const pk_tensor *t, int i);
pk_dtype pk_tensor_dtype(const pk_tensor *t);
const char *pk_tensor_name(const pk_tensor *t);
/* Looks a tensor up by name; NULL if none. */
pk_tensor *pk_find_tensor(const pk_kernel *k, const char *name);

/* Copies a tensor's current contents (all of it, row-major) to dst of `bytes` bytes. Works on
 * both backends; after pk_run it holds the values of the last step. */
pk_status pk_tensor_read(pk_kernel *k, const pk_tensor *t, void *dst, size_t bytes);

/* Tensors pk owns for the decode state (the seed's meta tensors):
 *   pk_step_tokens:  int32 [T], the token ids fed to the model this step (embedding input);
 *   pk_step_output:  int32 [T], the token chosen for each row (argmax output). */
pk_tensor *pk_step_tokens(pk_kernel *k);
pk_tensor *pk_step_output(pk_kernel *k);

/* ---- layers ------------------------------------------------------------------------------
 * Each layer splits into `grid` tasks along the dimension its comment names; the grid must
 * divide that dimension, except the linear family's N (rmsnorm_linear, linear,
 * linear_with_residual, silu_mul_linear_with_residual), which takes any grid up to N: task i
 * gets rows [i·N / grid, (i + 1)·N / grid), ⌊N/grid⌋ or ⌈N/grid⌉ of them. A tensor may be written by one layer only, and a layer may only read
 * tensors that are inputs or written by earlier layers. Activations are [T, ·] bf16. */

/* out[t, :] = weight[tokens[t], :].  tokens must be pk_step_tokens(k) (the step's ids, which pk_run
 * checks against V), weight [V, H], out [T, H]; grid splits H. */
pk_status pk_embedding_layer(pk_kernel *k, pk_tensor *tokens, pk_tensor *weight, pk_tensor *out,
                             int grid);

/* out = rmsnorm(x) · w.  x [T, H], w [H], out [T, H]; grid splits T. */
pk_status pk_rmsnorm_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w, pk_tensor *out, float eps,
                           int grid);

/* out = (rmsnorm(x) · norm_w) · Wᵀ.  x [T, K], norm_w [K], W [N, K], out [T, N]; grid splits N. */
pk_status pk_rmsnorm_linear_layer(pk_kernel *k, pk_tensor *x, pk_tensor *norm_w, pk_tensor *w,
                                  pk_tensor *out, float eps, int grid);

/* The first half of a SwiGLU MLP in one layer: gu = (rmsnorm(x) · norm_w) · Wᵀ, then
 * out[t, i] = silu(gate_i) · up_i (gu rounded to bf16, silu as pk_silu_mul_layer). x [T, K],
 * norm_w [K], out [T, I]. W [2I, K] holds gate and up rows in blocks of `block` rows: block b of
 * gate rows (gate_proj rows [b·block, (b+1)·block)), then the same rows of up_proj; that is
 * pk_fuse_tensors of {gate_proj, up_proj} with num_groups = I / block. grid splits I; each task's
 * I / grid features must be whole blocks. Each task reads only its own gate / up rows, so the
 * activation is computed once per feature, not by every task of the layer that reads it. */
pk_status pk_rmsnorm_linear_swiglu_layer(pk_kernel *k, pk_tensor *x, pk_tensor *norm_w, pk_tensor *w, int block,
                                         pk_tensor *out, float eps, int grid);

/* A SwiGLU MLP whose sum no task writes: the MLP of pk_rmsnorm_linear_swiglu_layer and its down
 * projection as one layer, whose task i computes its I / grid features (gate / up rows, silu ·
 * mul) and then down_proj's partial sums over those features for every output, and adds them to
 * acc as fixed point: acc[t, n] += round(partial · 2^32), 64-bit integer adds, exact, so the sum
 * is the same bits in any order. x [T, K], norm_w [K]; w_gu is pk_fuse_tensors of {gate_proj,
 * up_proj} [I, K] each with num_groups = grid; w_down [K, I] (attached; pk keeps a transposed copy
 * in host memory, which the GPU reads: task i's gate, up and down rows are one contiguous range);
 * acc a pk_new_tensor int64 [T, K], zero before the first step. The layer's output
 * x + down(...) is never stored: the layers that read it take acc and x —
 * pk_rmsnorm_linear_acc_layer (which also writes the sum as bf16 for a residual) — and one
 * pk_linear_with_residual_clear_layer, after all of them, zeroes acc for the next step
 * (pk_compile fails when no layer clears it). grid divides I; K is a multiple of 8. */
pk_status pk_rmsnorm_swiglu_down_layer(pk_kernel *k, pk_tensor *x, pk_tensor *norm_w, pk_tensor *w_gu,
                                       pk_tensor *w_down, pk_tensor *acc, float eps, int grid);

/* pk_rmsnorm_linear_layer of s = bf16(bf16(acc · 2^-32) + x): x plus the sum a
 * pk_rmsnorm_swiglu_down_layer left in acc (int64 [T, K]). Task i of the grid also writes
 * columns [i·K/grid, (i+1)·K/grid) of s into sum (bf16 [T, K]), so that s can be a later
 * layer's residual. K must be a multiple of 8. */
pk_status pk_rmsnorm_linear_acc_layer(pk_kernel *k, pk_tensor *x, pk_tensor *acc, pk_tensor *norm_w, pk_tensor *w,
                                      pk_tensor *out, pk_tensor *sum, float eps, int grid);

/* out = x · Wᵀ.  x [T, K], W [N, K], out [T, N]; grid splits N. */
pk_status pk_linear_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w, pk_tensor *out, int grid);

/* out = x · Wᵀ + residual.  residual and out [T, N]; grid splits N. */
pk_status pk_linear_with_residual_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w,
                                        pk_tensor *residual, pk_tensor *out, int grid);

/* pk_linear_with_residual_layer that also zeroes accumulator `clear` (a
 * pk_rmsnorm_swiglu_down_layer's acc, int64 [T, M]; task i its columns [i·M/grid, (i+1)·M/grid)):
 * every other layer that reads clear must be one this layer waits on, through x or residual. */
pk_status pk_linear_with_residual_clear_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w, pk_tensor *residual,
                                              pk_tensor *clear, pk_tensor *out, int grid);

/* out = x · Wᵀ + residual as pk_linear_with_residual_layer, but grid splits K: task i takes
 * columns [i·K/grid, (i+1)·K/grid) of x and W, adds its fp32 partial sums to an accumulator
 * (a pk-owned fp32 [T, N] tensor the layer makes), and the layer's last task to finish writes
 * out = bf16(bf16(acc) + residual) and clears the accumulator. Task i waits only for the
 * producers of its columns of x: after pk_rmsnorm_linear_swiglu_layer with the same grid, task i
 * follows that layer's task i alone (the down projection needs no wait on the whole MLP
 * activation). The fp32 additions come in the order the tasks finish, so the sum's rounding
 * may differ from run to run (a bf16 ulp of out, rarely). The GPU stores W transposed, so W
 * cannot also be read by another kind of layer (PK_ERR_INVALID_ARGUMENT). */
pk_status pk_linear_splitk_with_residual_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w,
                                               pk_tensor *residual, pk_tensor *out, int grid);

/* out[t, i] = silu(x[t, i]) · x[t, I + i].  x [T, 2I] (gate then up), out [T, I]; grid splits I. */
pk_status pk_silu_mul_layer(pk_kernel *k, pk_tensor *x, pk_tensor *out, int grid);

/* out = silu_mul(x) · Wᵀ + residual.  x [T, 2I], W [N, I], residual, out [T, N]; grid splits N. */
pk_status pk_silu_mul_linear_with_residual_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w,
                                                 pk_tensor *residual, pk_tensor *out, int grid);

typedef enum pk_rope_scaling_type {
    PK_ROPE_SCALING_NONE = 0,
    PK_ROPE_SCALING_LLAMA3 = 1,
} pk_rope_scaling_type;

typedef struct pk_attention_params {
    int num_q_heads;   /* Hq */
    int num_kv_heads;  /* Hkv, divides Hq (GQA) */
    int head_dim;      /* D, even */
    float rope_theta;
    pk_rope_scaling_type rope_scaling;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor; /* llama3 scaling */
    int rope_original_max_position;                                 /* llama3 scaling */
    float qk_norm_eps; /* eps of the per-head q/k RMSNorm, when q_norm/k_norm are given */
    /* Split over the KV length (flash-decoding), 0 or 1: not split. S > 1: positions in blocks of
     * PK_ATTN_SPLIT_BLOCK go round-robin to S splits; the layer has grid · S tasks (each KV-head
     * group of the grid times each split), and the last of a group's tasks to finish folds the
     * group's splits into out, so long contexts spread over more workers. Both backends. */
    int kv_splits;
} pk_attention_params;

/* Positions per block of the attention's split over the KV length: block b of a sequence's
 * positions goes to split b mod kv_splits (one warp's block on the GPU). More splits than a
 * sequence has blocks leave the extra ones empty. */
#define PK_ATTN_SPLIT_BLOCK 32

/* Causal attention with a paged KV cache, GQA and RoPE; appends this step's K/V to the cache.
 *   qkv      [T, Hkv·(Hq/Hkv + 2)·D], grouped by KV head g: the Hq/Hkv query heads of g, then
 *            K of g, then V of g (pk_fuse_tensors of Wq, Wk, Wv with num_groups = Hkv);
 *   k_cache, v_cache [num_pages, page_size, Hkv, D] bf16 (pk_new_tensor);
 *   q_norm, k_norm   [D] per-head RMSNorm weights applied before RoPE (Qwen3), or both NULL;
 *   out      [T, Hq·D].   grid splits the KV heads (params->kv_splits: also the KV length). */
pk_status pk_attention_layer(pk_kernel *k, pk_tensor *qkv, pk_tensor *k_cache, pk_tensor *v_cache,
                             pk_tensor *q_norm, pk_tensor *k_norm, pk_tensor *out,
                             const pk_attention_params *params, int grid);

/* out[t] = argmax_v logits[t, v] (smallest index on ties), as one layer of `grid` tasks over V:
 * each finds its tile's best, and the last of them to finish reduces the `grid` partials into out.
 * logits [T, V], out int32 [T] (pk_step_output for generation). */
pk_status pk_argmax_layer(pk_kernel *k, pk_tensor *logits, pk_tensor *out, int grid);

/* pk_rmsnorm_linear_layer into logits, then pk_argmax_layer over them, as one layer: task i
 * writes its tile of logits and the best of that tile (no second layer waits for the logits and
 * reads them back), and the last task to finish reduces the `grid` partials into out. The same
 * logits and the same ids as the two layers. x [T, K], norm_w [K], w [V, K] (any grid up to V, as
 * the linear layers), logits [T, V] bf16, out int32 [T] (pk_step_output for generation). */
pk_status pk_rmsnorm_linear_argmax_layer(pk_kernel *k, pk_tensor *x, pk_tensor *norm_w, pk_tensor *w,
                                         pk_tensor *logits, pk_tensor *out, float eps, int grid);

/* ---- compile and run ---------------------------------------------------------------------- */

typedef struct pk_compile_options {
    const char *output_dir; /* if set: task_graph.json (and kernel.cu for CUDA) are written here */
} pk_compile_options;

/* Builds the task graph (and, for CUDA, generates, compiles and loads the kernel). No layer can
 * be added afterwards. opts may be NULL. */
pk_status pk_compile(pk_kernel *k, const pk_compile_options *opts);

typedef enum pk_finish_reason {
    PK_FINISH_NONE = 0,   /* not finished (run failed) */
    PK_FINISH_EOS = 1,    /* produced eos_token_id (included in the output) */
    PK_FINISH_LENGTH = 2, /* reached max_new_tokens or max_seq_length */
    PK_FINISH_CANCELLED = 3, /* pk_cancel stopped the run first (output holds what was made) */
} pk_finish_reason;

/* How a request picks its tokens. All zero: greedy (the argmax), as pk always did. Otherwise
 * each token is drawn from softmax(logits / temperature), restricted by top_k, then top_p, then
 * min_p, with random numbers keyed by (seed, position): the same seed and logits give the same
 * token on any backend whatever else runs (the rule: src/kernels/sample.h). A request that samples
 * is not speculated on. */
typedef struct pk_sampling {
    float temperature; /* 0: greedy; else in [1e-4, 100] */
    int top_k;         /* 0: off; else >= 1 */
    float top_p;       /* 0 or 1: off; else in (0, 1) */
    float min_p;       /* 0: off; else in (0, 1) */
    uint64_t seed;
} pk_sampling;

typedef struct pk_request {
    const int32_t *prompt; /* [prompt_len] token ids, each in [0, vocab) */
    int prompt_len;        /* >= 1 and < max_seq_length */
    int max_new_tokens;    /* >= 1 */
    int32_t *output;       /* caller's buffer of max_new_tokens entries */
    int num_output;        /* out: tokens written to output */
    pk_finish_reason finish; /* out */
    pk_sampling sampling;    /* zero: greedy */
    int num_cached;          /* out: prompt tokens taken from the prefix cache, not computed */
} pk_request;

/* Called once per generated token from the runtime's step boundary (prepare_next_step), in
 * order per request. `row` is the step row whose output produced it (its logits row). */
typedef void (*pk_token_fn)(void *user, int request, int32_t token, int row);

/* Runs requests to completion: each is prefilled in chunks of up to T tokens, then decodes one
 * token per step until EOS, max_new_tokens or max_seq_length. At most max_requests run at once;
 * the rest wait for a slot. on_token may be NULL. Can be called again with new requests. */
pk_status pk_run(pk_kernel *k, pk_request *reqs, int n, pk_token_fn on_token, void *user);

/* Stops the pk_run in progress on k at the end of the step it is running (the CUDA backend: of
 * the step the device runs when the request reaches it, a few steps at most): pk_run then returns
 * PK_OK, with PK_FINISH_CANCELLED on every request not finished, whose output holds the tokens
 * made so far. Only sets a flag, so it may be called from on_token, from another thread or from a
 * signal handler. Without a run in progress it does nothing (pk_run starts with the flag clear). */
void pk_cancel(pk_kernel *k);

/* ---- A resident session: the compiled kernel keeps running between requests ----
 *
 * pk_session_open starts the runtime once; requests then join and leave it between steps: a new
 * request's prompt chunks share steps with the decode rows of those already running, up to
 * max_requests at once, the rest waiting in order (each waits, too, until the KV pages its whole
 * life may need are free). Tokens come back through pk_session_poll, which calls on_token from
 * the polling thread. Every pk_session_* call on a kernel comes from one thread at a time, as
 * every pk call on a kernel does; the runtime's own threads do the rest. pk_run refuses to run
 * while a session is open. A backend that cannot keep its kernel resident returns
 * PK_ERR_UNSUPPORTED from pk_session_open (the CUDA backend so far). */

/* Starts the session over a compiled kernel. queue: requests at once, running or waiting (at
 * least max_requests; 0: 4 · max_requests), rounded up to a power of two. on_token may be NULL;
 * its `request` is the id pk_session_submit gave. */
pk_status pk_session_open(pk_kernel *k, int queue, pk_token_fn on_token, void *user);

/* Hands req to the session and returns at once with its id (ids count up from 0). req, its prompt
 * and its output belong to the session until pk_session_poll sets req->finish; the session writes
 * req->output, req->num_output and req->finish from pk_session_poll's thread. The request is
 * checked as pk_run checks it; PK_ERR_LIMIT when the queue is full (try again after a poll). */
pk_status pk_session_submit(pk_kernel *k, pk_request *req, int *id);

/* Ends request id at the next step boundary (PK_FINISH_CANCELLED, output holds what was made);
 * its pages come back then. One that ended already, or an unknown id, is left alone. */
pk_status pk_session_cancel(pk_kernel *k, int id);

/* Delivers the tokens made since the last poll (on_token, in order per request) and sets
 * req->finish of the requests that ended; waits up to timeout_ms for the first (0: does not
 * wait). *running (may be NULL): requests submitted and not yet ended. */
pk_status pk_session_poll(pk_kernel *k, int timeout_ms, int *running);

/* Cancels every request still running or waiting, delivers what remains (as pk_session_poll
 * would), stops the runtime and returns; the kernel can run again (pk_run or a new session).
 * Without an open session it does nothing. pk_kernel_free closes an open session. */
pk_status pk_session_close(pk_kernel *k);

typedef struct pk_graph_stats {
    int num_layers;
    int num_tasks;  /* including the BEGIN task */
    int num_events;
    int num_workers;
    int64_t steps_run; /* decode steps of the last pk_run */
    int64_t spec_drafted, spec_accepted; /* the last pk_run's draft tokens verified, and kept */
} pk_graph_stats;

pk_status pk_kernel_stats(const pk_kernel *k, pk_graph_stats *out);

typedef struct pk_layer_info {
    const char *name; /* "L3.attention": index and kind; valid while k lives */
    const char *kind; /* "attention", "rmsnorm_linear", ... */
    int grid;         /* tasks the layer splits into */
    int first_task;   /* its first task in the compiled graph (0 before pk_compile) */
} pk_layer_info;

/* Layer i (0 <= i < pk_graph_stats.num_layers) in the order added. */
pk_status pk_kernel_layer(const pk_kernel *k, int i, pk_layer_info *out);

/* Writes the compiled task graph as JSON (tasks, events, layers, schedule). */
pk_status pk_write_task_graph(pk_kernel *k, const char *path);

/* ---- measurement ---------------------------------------------------------------------------- */

/* The steps of the last pk_run, timed where they run: on the CPU backend with CLOCK_MONOTONIC by
 * the thread that runs prepare_next_step, on the CUDA backend with %globaltimer by the GPU thread
 * that runs it (one store per step, copied back after the kernel ends). Step i lasts from the
 * boundary before it to the one after it; a boundary is the start of prepare_next_step (so a
 * step's time includes planning it and handing its tokens out), and step 1 starts when it is
 * released: on the CPU after the host planned it, on the GPU before the kernel plans it. */
typedef struct pk_step_times {
    int64_t num_steps;          /* steps of the last pk_run (pk_graph_stats.steps_run) */
    int64_t num_timed;          /* entries below: num_steps, 0 after a failed run, at most 4194304 */
    const double *ms;           /* [num_timed] duration of step i, milliseconds */
    const int32_t *rows;        /* [num_timed] rows (tokens) step i carried */
    const int32_t *prompt_rows; /* [num_timed] of them, prompt tokens: > 0 prefill, 0 pure decode */
} pk_step_times;

/* Fills out for the last pk_run (all zero / NULL before the first). The arrays belong to k and
 * stay valid until the next pk_run or pk_kernel_free. */
pk_status pk_run_step_times(const pk_kernel *k, pk_step_times *out);

/* Memory the compiled kernel uses, by kind. CUDA backend (once loaded by pk_compile): the GPU
 * buffers pk_compile allocated, the numbers of its "pk: GPU memory" line, on_device = 1. CPU
 * backend (or CUDA compiled for PK_CUDA_ARCH without a GPU): the same plan in host memory
 * (weights are the caller's or memory-mapped), on_device = 0. */
typedef struct pk_memory_stats {
    int64_t weight_bytes;    /* weight buffers (a fused weight once, in fused order) */
    int64_t kv_cache_bytes;  /* every layer's K and V caches */
    int64_t workspace_bytes; /* activations and decode state; on the GPU also queues, counters,
                                per-run state and the upload staging buffers */
    int on_device;
} pk_memory_stats;

/* After pk_compile. */
pk_status pk_kernel_memory(pk_kernel *k, pk_memory_stats *out);

/* Measures the copy bandwidth of the memory the backend reads its weights from, in bytes read
 * plus bytes written per second (as bench/hf_baseline.py's bw()): the floor of a decode step is
 * the bytes it must move divided by this. CUDA backend (after pk_compile; loads the kernel if
 * only built): a device-to-device cudaMemcpy of 2 GiB (halved while the GPU lacks the memory),
 * 3 warm-up copies, then 20 timed with CUDA events. CPU backend: memcpy between two 1 GiB host
 * buffers on the calling thread (one core, so not a bound for many threads), 1 warm-up, 3 timed.
 * Takes about a second; allocates the two buffers for the duration. $PK_COPY_PROBE_MB (at least
 * 64) sets another buffer size (tests use a small one: first-touching 2 GiB can take seconds). */
pk_status pk_device_copy_bandwidth(pk_kernel *k, double *bytes_per_s);

/* ---- Hugging Face model directories --------------------------------------------------------
 * config.json + model.safetensors (or sharded, with model.safetensors.index.json); bf16, fp16 or
 * fp32 weights, memory-mapped (copied only when converted to bf16). Qwen3ForCausalLM and
 * LlamaForCausalLM (Llama-3.x, incl. rope_scaling "llama3"). A pk_model, like its kernel, is used
 * from one thread. */

typedef struct pk_model pk_model;

typedef struct pk_model_info {
    char architecture[64];
    int vocab_size, hidden_size, intermediate_size, num_layers;
    int num_q_heads, num_kv_heads, head_dim;
    int max_position_embeddings;
    int tie_word_embeddings;
    int has_qk_norm;
    int64_t bos_token_id, eos_token_id; /* -1 when config.json names none */
    int64_t weight_bytes;               /* bytes of the weights the decode step reads */
    int attention_kv_splits;            /* the attention layers' split over the KV length (1: none;
                                         * 0 from pk_model_read_info: not built yet) */
} pk_model_info;

/* Model-builder choices that change the graph, each -1 (pk's rule for the shape and backend, the
 * default), 0 (off) or 1 (on). Every choice is exact on either backend: the rules only pick the
 * faster graph. The attention's split over the KV length is pk_config.attention_kv_splits. */
typedef struct pk_model_options {
    int fused_mlp;      /* every MLP but the last as one layer (pk_rmsnorm_swiglu_down_layer), its sum
                         * in an int64 accumulator. Rule: on the CUDA backend where a task's gate, up
                         * and down rows stage whole in shared memory; never on the CPU */
    int lm_head_argmax; /* the LM head and the argmax as one layer (pk_rmsnorm_linear_argmax_layer)
                         * instead of pk_rmsnorm_linear_layer + pk_argmax_layer. Rule: always on the
                         * CPU; on CUDA where the fused MLP's rule holds and the attention is unsplit */
    int check_tensors;  /* 1: pk_model_load_with reads every weight it attaches once, as the bf16 the
                         * kernel gets, and fails naming the first tensor that holds a NaN or an
                         * infinity (or an F32 value that rounds to one), its file and the element
                         * (a full read of the weights: off by default, which keeps loading lazy and
                         * memory-mapped); 0: nothing is read. Only 0 or 1: -1 is an error here */
} pk_model_options;

/* fused_mlp and lm_head_argmax -1 (auto), check_tensors 0. */
pk_model_options pk_model_options_default(void);

/* Opens a model directory, checks every tensor against config.json, creates a kernel with cfg
 * and builds the decode graph through the layer API; the kernel is not compiled yet. cfg NULL:
 * pk_config_default() with max_seq_length capped at the model's max_position_embeddings; an
 * eos_token_id of -1 takes the model's; a max_seq_length beyond max_position_embeddings is an
 * error. opts NULL: pk_model_options_default(); an option outside its values (-1 .. 1; check_tensors
 * 0 or 1) is an error naming it. Every file it reads must be a regular file (a FIFO or a device
 * is refused, never waited on) within its size cap.
 * dir, cfg and opts are not kept. Returns a model the caller frees with pk_model_free, or NULL
 * with a one-line reason naming the file, tensor or number in err (err_len bytes, may be 0;
 * "" on success). */
pk_model *pk_model_load_with(const char *dir, const pk_config *cfg, const pk_model_options *opts, char *err,
                             size_t err_len);
/* pk_model_load_with(dir, cfg, NULL, err, err_len). */
pk_model *pk_model_load(const char *dir, const pk_config *cfg, char *err, size_t err_len);
/* Reads only DIR/config.json into out (weight_bytes is -1: the weights are not opened), to size
 * a config before pk_model_load. PK_OK, or an error with a one-line reason in err. */
pk_status pk_model_read_info(const char *dir, pk_model_info *out, char *err, size_t err_len);
/* Frees the model, its kernel and its mapped weights. Accepts NULL. */
void pk_model_free(pk_model *m);
/* The model's kernel, to compile and run; owned by m (do not pk_kernel_free it), valid until
 * pk_model_free. NULL for a NULL m. */
pk_kernel *pk_model_kernel(pk_model *m);
/* The model's shape and what the built graph reads; owned by m, valid until pk_model_free. */
const pk_model_info *pk_model_get_info(const pk_model *m);
/* The LM head's output: bf16 [T, vocab] logits of the last step; owned by m's kernel. */
pk_tensor *pk_model_logits(pk_model *m);

/* ---- tokenizer (Hugging Face tokenizer.json, byte-level BPE) -------------------------------- */

typedef struct pk_tokenizer pk_tokenizer;

/* Loads tokenizer.json (a regular file of at most 256 MiB). On error returns NULL with a one-line
 * reason in err. */
pk_tokenizer *pk_tokenizer_load(const char *path, char *err, size_t err_len);
void pk_tokenizer_free(pk_tokenizer *t); /* accepts NULL */
/* Ids are in [0, vocab_size): the largest id of the vocabulary and added tokens, plus one. */
int pk_tokenizer_vocab_size(const pk_tokenizer *t);
/* The id of a token string (an added/special token like "<|im_end|>" or a vocabulary entry), or
 * -1 if there is none. */
int32_t pk_tokenizer_token_id(const pk_tokenizer *t, const char *token);

/* Encodes `len` bytes of UTF-8 text; added/special tokens written in the text are matched as
 * such. Writes at most cap ids and returns how many the text needs (call again with a larger
 * buffer if that is more than cap), or -1 on error (then pk_tokenizer_error says why). */
int pk_tokenizer_encode(pk_tokenizer *t, const char *text, size_t len, int32_t *ids, int cap);
const char *pk_tokenizer_error(const pk_tokenizer *t);

/* Streaming decode: bytes are released only when they complete UTF-8 characters, so text
 * printed token by token is never cut inside a character. */
typedef struct pk_decoder pk_decoder;
pk_decoder *pk_decoder_new(const pk_tokenizer *t); /* NULL when out of memory */
void pk_decoder_free(pk_decoder *d);               /* accepts NULL */
/* Adds one id; writes the newly complete text to out (NUL-terminated, at most cap - 1 bytes)
 * and returns its length, or -1 if the id is out of range or cap is too small (cap >= 64 plus
 * the longest token is always enough). */
int pk_decoder_push(pk_decoder *d, int32_t id, char *out, size_t cap);
/* Ends the stream: bytes of an incomplete character come out as U+FFFD. Returns the length. */
int pk_decoder_flush(pk_decoder *d, char *out, size_t cap);

/* The prompt wrapped in the chat template of the tokenizer's family (Qwen/ChatML or Llama-3,
 * told by their special tokens), as one user turn and the assistant's header. Returns a malloc'd
 * string the caller frees, or NULL (with pk_tokenizer_error) when no template is known. */
char *pk_tokenizer_chat_prompt(pk_tokenizer *t, const char *prompt);

#ifdef __cplusplus
}
#endif
#endif /* PK_H */
