// SPDX-License-Identifier: Apache-2.0
/* pk_internal.h — what the kernel object holds: tensors, layers, the compiled task graph, its
 * backend (backend.h) and what the last run recorded. Shared by src/graph, src/taskgraph and
 * src/runtime; never installed.
 *
 * Invariants: tensor ids are indices into k->tensors and never change; a tensor is written by at
 * most one layer (t->producer); layers are stored in the order they were added, which is a
 * topological order because a layer may only read tensors written before it.
 */
#ifndef PK_INTERNAL_H
#define PK_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "pk.h"
#include "pk_abi.h"

#define PK_NAME_MAX 96
#define PK_ERR_MAX 512
#define PK_LAYER_MAX_TENSORS 10
#define PK_LAYER_MAX_OUTPUTS 4 /* rmsnorm_linear_argmax: logits, the partials val and idx, out */

/* Broken internal invariant: a bug in pk, never a user error. */
#define PK_ASSERT(cond)                                                                   \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "pk: internal error at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

typedef enum pk_storage {
    PK_STORAGE_ATTACHED = 0, /* caller's memory */
    PK_STORAGE_OWNED = 1,    /* pk's memory, zero-filled */
    PK_STORAGE_FUSED = 2,    /* rows of other tensors, see pk_fuse_tensors */
    PK_STORAGE_COLUMN_BLOCKS = 3, /* pk's copy of an attached weight's column blocks, read only as an input
                                   * of a fused tensor (pk_column_blocks) */
} pk_storage;

/* pk_new_tensor maps tensors of this many bytes or more (lazily committed zero pages). */
#define PK_TENSOR_MAP_BYTES ((size_t)1 << 20)

struct pk_tensor {
    int id;
    char name[PK_NAME_MAX];
    pk_dtype dtype;
    int ndim;
    int64_t dims[PK_MAX_DIMS];
    pk_io_category category;
    pk_storage storage;
    void *data;              /* host memory (NULL for fused) */
    size_t mapped_bytes;     /* owned and > 0: data is an anonymous mapping of this size (munmap) */
    int nfused;              /* fused: inputs and groups */
    int fused[PK_FUSE_MAX];
    int groups;
    int producer;            /* layer writing it, -1 if none */
    int device_transposed;   /* a backend may store it as its transpose [dims[1], dims[0]]: the
                              * weight of a split-K layer, whose tasks read blocks of its columns */
};

/* How a layer's task grid splits one tensor argument: along `dim` into `parts` tiles, or not at
 * all (dim -1: every task touches the whole tensor). */
typedef struct pk_split {
    int dim;
    int parts;
} pk_split;

/* Where tile i of `parts` starts in an extent E: i·E / parts (tile i ends where i + 1 starts).
 * Equal tiles when parts divides E, else tiles of ⌊E/parts⌋ and ⌈E/parts⌉ spread evenly. The
 * CUDA generated code computes the same expression (codegen.c). */
static inline int64_t pk_split_start(int64_t E, int parts, int64_t i) { return i * E / parts; }

typedef struct pk_layer {
    pk_task_kind kind;
    char name[PK_NAME_MAX];     /* "L3.attention": index and kind, for traces */
    int grid;
    int ninputs, noutputs;
    int inputs[PK_LAYER_MAX_TENSORS];  /* tensor ids (-1: optional, absent) */
    pk_split in_split[PK_LAYER_MAX_TENSORS];
    int outputs[PK_LAYER_MAX_OUTPUTS];
    pk_split out_split[PK_LAYER_MAX_OUTPUTS];
    pk_layer_params params;
    int first_task; /* filled by the task graph builder */
    /* filled by the task graph builder: the layer works on the rows from step_info's FIRST_SAMPLE
     * on (the rows that draw a token): the argmax kinds, and the LM head that only an argmax reads */
    int sampled_rows;
} pk_layer;

/* The compiled graph: the tables of pk_abi.h plus the static schedule. */
typedef struct pk_taskgraph {
    pk_task *tasks;
    int ntasks;
    pk_event *events;
    int nevents;
    pk_layer_params *layer_params; /* [nlayers] */
    int nlayers;
    int *layer_order;              /* layers in task order (roots first) */
    uint32_t begin_event, end_event;
    /* static schedule: worker w runs sched_tasks[sched_offset[w] .. sched_offset[w + 1]) */
    int nworkers;
    uint32_t *sched_offset;
    uint32_t *sched_tasks;
    uint64_t hash; /* FNV-1a over the tables: names the graph in generated code */
} pk_taskgraph;

/* What the last pk_run recorded for pk_run_step_times: run.c fills it, pk_kernel_free frees it. */
struct pk_step_rec; /* runtime/decode_step.h */
typedef struct pk_run_record {
    struct pk_step_rec *rec;           /* [alloc + 1]: the step boundaries a run fills */
    int64_t alloc;
    int64_t ntimed;                    /* steps of the last run with a duration below */
    double *step_ms;                   /* [alloc] */
    int32_t *step_rows, *step_prompt_rows; /* [alloc] */
} pk_run_record;

typedef struct pk_backend_i pk_backend_i; /* backend.h */

struct pk_kernel {
    pk_config cfg;
    char trace_path[1024];
    char cache_dir[1024];
    pk_status status;
    char err[PK_ERR_MAX];
    pk_tensor **tensors;
    int ntensors, tensors_cap;
    pk_layer *layers;
    int nlayers, layers_cap;
    int compiled;
    int vocab_size; /* rows of the embedding weight, 0 before one is added */
    /* pk-owned decode state tensors */
    int t_step_tokens, t_step_output, t_step_info, t_token_pos, t_token_req, t_page_table;
    int t_sample_params, t_sample_slot; /* sampling's (decode_step.h): read by the argmax's last task */
    int pages_per_req;
    pk_taskgraph graph;
    int64_t steps_run;
    int64_t spec_drafted, spec_accepted; /* the last pk_run's speculation (pk_graph_stats) */
    int cancel; /* pk_cancel's flag: set and read with __atomic builtins (a signal handler may set it) */
    struct pk_session *session; /* the open resident session (runtime/session.h), NULL when none */
    pk_status (*close_session)(pk_kernel *k); /* pk_session_close while one is open: pk_kernel_free
                                               * calls it (src/graph does not call into src/runtime) */
    pk_run_record runs;
    const pk_backend_i *backend; /* cfg.backend's table; NULL while the config is invalid */
    int device;                  /* the backend's device ordinal: cfg.rank (one device per rank) */
    void *backend_ctx;           /* what the backend built for this kernel, NULL when nothing;
                                  * released by backend->free */
};

/* The attached 2-D bf16 weight w [N, K] as column blocks of `block` columns (block divides K): a
 * tensor of dims [K, N] (w's transpose's) named `name`, whose rows [b · block, (b + 1) · block)
 * hold block b = w[:, b · block : (b + 1) · block] row-major ([N][block]: one output's `block`
 * weights contiguous). A copy in host memory (freed with k) that pk_fuse_tensors can take as an
 * input with num_groups = K / block, so that a fused weight holds each block as one contiguous
 * range (pk_rmsnorm_swiglu_down_layer); only that layer's kernels read its rows this way. NULL on
 * error (recorded on k). */
pk_tensor *pk_column_blocks(pk_kernel *k, const char *name, const pk_tensor *w, int64_t block);

/* The layer that clears accumulator `acc` (the LINEAR_RESIDUAL whose PK_V_LR_CLEAR input it is,
 * pk_linear_with_residual_clear_layer), or -1. */
int pk_accumulator_clearer(const pk_kernel *k, int acc);

/* Records an error on k and returns it; the message is formatted like printf. */
pk_status pk_fail(pk_kernel *k, pk_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* PK_OK, or the status a kernel in the error state carries (checked on entry of every call
 * that needs a valid kernel: a config error sticks). Clears a previous user error. */
pk_status pk_enter(pk_kernel *k);

/* The attention split over the KV length folds each KV-head group's splits in the last of the
 * group's tasks to finish, which it learns from a per-group completion counter (64-bit,
 * monotonic, zeroed at the start of every run like the event counters; a task is the last of
 * its step when its increment makes the count a multiple of kv_splits). The counters of layer l
 * are [pk_graph_group_counter0(k, l), + grid / kv_splits · pk_graph_attn_group_counters(k, l))
 * of the kernel's pk_graph_group_counter0(k, k->nlayers) counters, after the events in the
 * backends' arrays: per group its completion counter, then (CUDA, kv fold 2) one per Q block.
 * A split-K layer (LINEAR_SPLITK_RESIDUAL) has one such counter: its last task per step (count a
 * multiple of grid) writes out from the accumulator. */
int pk_graph_group_counter0(const pk_kernel *k, int layer);

/* A split attention layer's direct steps on the GPU (pk_abi.h PK_ATTN_DIRECT_ROWS) with each Q
 * block over two tasks, folded per Q block (attention_prefill.cuh pk_att_fold): 2 where a full
 * step's Q blocks fill at most half of a group's kv_splits tasks (the rest would be idle), S is
 * even and the partial tensor holds two partials per row; else 1. */
int pk_graph_attn_kv_fold(const pk_kernel *k, int layer);
/* Counters per KV-head group of layer `layer` (pk_graph_group_counter0): 1, plus one per
 * possible Q block of a step (T: a Q block has at least one row) where the kv fold is 2. */
int pk_graph_attn_group_counters(const pk_kernel *k, int layer);

/* "[2, 3, 4]" into buf. */
const char *pk_dims_str(const int64_t *dims, int ndim, char *buf, size_t len);
int64_t pk_tensor_numel(const pk_tensor *t);

/* What a backend tells the core of its device (backend.h: device_figures). */
typedef struct pk_device_figures {
    int workers;          /* the kernel's worker count: CPU threads / GPU CTAs, one per SM */
    int64_t stage_bytes;  /* largest weight tile one task stages whole on chip; 0: none */
    /* The static schedule's cost of a task, in ns: task_fixed_ns + cost_bytes / bytes_per_ns.
     * Only the ratios between tasks matter: they decide which worker is free first. */
    uint64_t task_fixed_ns; /* the hand-off, the first memory round trip, the reductions */
    uint64_t bytes_per_ns;  /* one worker's share of the memory bandwidth (> 0) */
} pk_device_figures;

/* Where a tensor lives while a backend runs the graph: every tensor a layer names (a fused
 * tensor as one buffer in fused row order; inputs read only through a fusion are none) and the
 * decode-state tensors. Weights are what is not pk-owned, the KV cache what an attention layer
 * reads as its caches, the workspace the other pk-owned tensors. */
typedef enum pk_buffer_kind {
    PK_BUFFER_NONE = 0,
    PK_BUFFER_WEIGHT = 1,
    PK_BUFFER_KV = 2,
    PK_BUFFER_WORK = 3,
} pk_buffer_kind;
/* kind[id] for every tensor id (k->ntensors entries). */
void pk_graph_buffer_kinds(const pk_kernel *k, uint8_t *kind);
/* The byte totals of pk_graph_buffer_kinds' plan into out (on_device 0): pk_kernel_memory of a
 * backend that runs in host memory. PK_ERR_NO_MEMORY recorded on k. */
pk_status pk_graph_memory_plan(pk_kernel *k, pk_memory_stats *out);

/* Task graph (src/taskgraph). */
extern const char *const pk_task_kind_names[PK_TASK_KIND_COUNT];
/* Builds k->graph and its static schedule for k->cfg.num_workers workers of the device dev. */
pk_status pk_taskgraph_build(pk_kernel *k, const pk_device_figures *dev);
void pk_taskgraph_free(pk_taskgraph *g);
pk_status pk_taskgraph_write_json(const pk_kernel *k, const char *path);

/* Base pointer of a tensor id's host storage (the buffer table of the CPU backend). */
static inline void *pk_buffer(const pk_kernel *k, uint32_t id) { return k->tensors[id]->data; }

#endif /* PK_INTERNAL_H */
