// SPDX-License-Identifier: Apache-2.0
/* pk_abi.h — the task ABI: the plain structs both backends run, compiled by C11 and nvcc.
 *
 * The compiler (src/taskgraph) fills tables of pk_task and pk_event; the CPU runtime walks them
 * directly and the CUDA codegen bakes them into kernel.cu. Nothing here holds a pointer: a view
 * names a buffer (tensor id) and element offsets, so the same table works over host or device
 * memory. Any change to a struct bumps PK_ABI_VERSION, which generated code checks.
 *
 * Protocol (docs/DESIGN.md): a task waits until counter(dep_event) >= num_triggers(dep) · step,
 * runs, then release-adds 1 to counter(trig_event). Counters are 64-bit and never reset.
 */
#ifndef PK_ABI_H
#define PK_ABI_H

#include <stdint.h>

#define PK_ABI_VERSION 8 /* 2: pk_layer_params.kv_splits, the attention partial / combine kinds;
                           * 3: the combine folded into the partial layer (its last task per group);
                           * 4: PK_TASK_RMSNORM_LINEAR_SWIGLU, pk_layer_params.swiglu_block;
                           * 5: PK_TASK_LINEAR_SPLITK_RESIDUAL;
                           * 6: PK_TASK_RMSNORM_SWIGLU_DOWN, the accumulator views of
                           *    RMSNORM_LINEAR (PK_V_NL_ACC, PK_V_NL_SUM) and LINEAR_RESIDUAL
                           *    (PK_V_LR_CLEAR);
                           * 7: the argmax reduce folded into the partial layer (its last task),
                           *    PK_V_AMP_OUT; PK_TASK_ARGMAX_REDUCE no longer recorded;
                           * 8: PK_TASK_RMSNORM_LINEAR_ARGMAX (the LM head and the argmax in one
                           *    layer) */
#define PK_TASK_MAX_VIEWS 12
#define PK_FUSE_MAX 4
#define PK_NO_EVENT 0xffffffffu

#ifndef __cplusplus
#define PK_STATIC_ASSERT _Static_assert
#else
#define PK_STATIC_ASSERT static_assert
#endif

typedef enum pk_task_kind {
    PK_TASK_BEGIN = 0, /* the step's start: signals the BEGIN event */
    PK_TASK_EMBEDDING = 1,
    PK_TASK_RMSNORM = 2,
    PK_TASK_RMSNORM_LINEAR = 3,
    PK_TASK_LINEAR = 4,
    PK_TASK_LINEAR_RESIDUAL = 5,
    PK_TASK_SILU_MUL = 6,
    PK_TASK_SILU_MUL_LINEAR_RESIDUAL = 7,
    PK_TASK_ATTENTION = 8,
    PK_TASK_ARGMAX_PARTIAL = 9, /* argmax over one tile of the logits; the layer's last task to
                                 * finish reduces the partials into out */
    PK_TASK_ARGMAX_REDUCE = 10, /* ABI <= 6 only (a layer of its own, one hand-off more): no
                                 * layer records it; the number stays so the kinds after it keep theirs */
    PK_TASK_TERMINATE = 11, /* dynamic mode: tells a worker to exit */
    PK_TASK_ATTENTION_PARTIAL = 12, /* attention over one split of the KV length (kv_splits > 1); the
                                     * last task of each KV-head group to finish folds the group's
                                     * splits into out */
    PK_TASK_RMSNORM_LINEAR_SWIGLU = 13, /* rmsnorm_linear into gate / up rows, then silu(gate) · up of
                                         * the task's own rows (the MLP's first half in one task) */
    PK_TASK_LINEAR_SPLITK_RESIDUAL = 14, /* x · Wᵀ + residual split over K: each task adds its partial
                                          * sums to an fp32 accumulator; the layer's last task to
                                          * finish writes out and clears the accumulator */
    PK_TASK_RMSNORM_SWIGLU_DOWN = 15, /* the SwiGLU MLP as one layer: task i's gate / up rows, silu ·
                                       * mul, then down_proj's partial sums over its features for every
                                       * output, added to an int64 fixed-point accumulator (no task
                                       * writes the sum: its readers add it to their x, PK_V_NL_ACC) */
    PK_TASK_RMSNORM_LINEAR_ARGMAX = 16, /* rmsnorm_linear into the logits tile, then the argmax partial
                                         * of the task's own tile; the layer's last task to finish
                                         * reduces the partials into out (ARGMAX_PARTIAL's, without
                                         * its layer and its read of the logits) */
    PK_TASK_KIND_COUNT = 17,
} pk_task_kind;

typedef enum pk_event_kind {
    PK_EVENT_BEGIN = 0,        /* fired by prepare_next_step; its tasks read only inputs */
    PK_EVENT_NORMAL = 1,       /* producer tasks → a contiguous range of consumer tasks */
    PK_EVENT_END_OF_GRAPH = 2, /* every leaf task signals it; completing it ends the step */
} pk_event_kind;

/* A tile of a tensor. Rows of the tile are rows [row0, row0 + rows) of the tensor; columns
 * [col0, col0 + cols). A tensor is a list of segments (one for a plain tensor; the inputs of a
 * pk_fuse_tensors otherwise): tensor row r lies in group g = r / Σseg_rows, at offset
 * o = r % Σseg_rows, which falls in segment i; its data is row g·seg_rows[i] + o' of buffer
 * seg_buffer[i] (o' = o minus the rows of the segments before i). row_stride is in elements. */
typedef struct pk_view {
    uint32_t nseg;                    /* 1 .. PK_FUSE_MAX */
    uint32_t dtype;                   /* pk_dtype */
    uint32_t seg_buffer[PK_FUSE_MAX]; /* tensor ids of the storage */
    uint32_t seg_rows[PK_FUSE_MAX];   /* rows of each segment per group */
    uint32_t row0, rows;
    uint32_t col0, cols;
    uint64_t row_stride;
} pk_view;

typedef struct pk_task {
    uint32_t kind;       /* pk_task_kind */
    uint32_t layer;      /* index into the layer table */
    uint32_t index;      /* position in the layer's grid */
    uint32_t dep_event;  /* waited on (PK_NO_EVENT: none) */
    uint32_t trig_event; /* signalled when done */
    uint32_t nviews;
    uint64_t cost_bytes; /* estimated bytes moved: the static schedule balances these */
    pk_view views[PK_TASK_MAX_VIEWS]; /* per kind: the PK_V_* enum below */
} pk_task;

typedef struct pk_event {
    uint32_t kind;         /* pk_event_kind */
    uint32_t num_triggers; /* tasks that signal it per step */
    uint32_t first_task;   /* consumer tasks: [first_task, last_task) */
    uint32_t last_task;
} pk_event;

/* A split attention layer (kv_splits S > 1, G query heads per KV head) runs a step of n_tok > 1
 * rows with n_tok >= PK_ATTN_DIRECT_ROWS(S, G) directly: each KV group's tasks over the whole KV
 * length, writing out (the GPU's tasks share the group's Q blocks, PK_ATTN_DIRECT_QROWS q-rows a
 * task at least, half a Q block; the CPU's split 0 takes the group alone). Fewer rows go through
 * the partials and their fold, so the partial tensor has min(T, PK_ATTN_DIRECT_ROWS) rows, not T
 * (the 8B's 2048-row graph: 2.5 GB of partials, not 19.6). */
#define PK_ATTN_DIRECT_QROWS 64
#define PK_ATTN_DIRECT_ROWS(S, G) (((S) * PK_ATTN_DIRECT_QROWS + (G) - 1) / (G))

/* Per-layer scalars a task needs besides its views. */
typedef struct pk_layer_params {
    uint32_t kind;       /* pk_task_kind of its tasks (partial for argmax) */
    uint32_t grid;
    float eps;
    /* attention */
    int32_t num_q_heads, num_kv_heads, head_dim;
    float rope_theta;
    int32_t rope_scaling;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int32_t rope_original_max_position;
    float qk_norm_eps;
    int32_t has_qk_norm;
    int32_t kv_splits; /* attention split over the KV length: splits per KV-head group (partial, combine) */
    int32_t swiglu_block; /* RMSNORM_LINEAR_SWIGLU: rows per gate (and per up) block of the weight */
} pk_layer_params;

PK_STATIC_ASSERT(sizeof(pk_view) == 64, "pk_view layout is part of the ABI");
PK_STATIC_ASSERT(sizeof(pk_event) == 16, "pk_event layout is part of the ABI");
PK_STATIC_ASSERT(sizeof(pk_task) == 32 + 64 * PK_TASK_MAX_VIEWS, "pk_task layout");
PK_STATIC_ASSERT(sizeof(pk_layer_params) == 64, "pk_layer_params layout");

/* The views of each task kind, in order (the tile each view covers in brackets). Row ranges
 * cover T rows; kernels touch only the first num_tokens (pk.step_info) of them. */
enum {
    PK_V_EMB_TOKENS = 0, PK_V_EMB_WEIGHT = 1 /* [V, col tile] */, PK_V_EMB_OUT = 2 /* [T, col tile] */,
    PK_V_NORM_X = 0 /* [row tile, H] */, PK_V_NORM_W = 1, PK_V_NORM_OUT = 2 /* [row tile, H] */,
    /* RMSNORM_LINEAR: acc (nseg 0 when absent) int64 [T, K] whole: the layer's input is then
     * s = bf16(bf16(acc · 2^-32) + x) (x plus a RMSNORM_SWIGLU_DOWN layer's sum), and task i of G
     * writes s's columns [i·K/G, (i+1)·K/G) into sum [T, K] (whole view) */
    PK_V_NL_X = 0 /* [T, K] */, PK_V_NL_NORM_W = 1, PK_V_NL_W = 2 /* [n tile, K] */, PK_V_NL_ACC = 3,
    PK_V_NL_OUT = 4 /* [T, n tile] */, PK_V_NL_SUM = 5,
    /* RMSNORM_LINEAR_SWIGLU: x, norm_w, w [2 · i tile, K] as RMSNORM_LINEAR (no acc); gu [T, 2 · i
     * tile] the projection in w's row order (blocks of swiglu_block gate rows, then the matching up
     * rows); out [T, i tile] = silu(gate) · up */
    PK_V_NLS_X = 0, PK_V_NLS_NORM_W = 1, PK_V_NLS_W = 2, PK_V_NLS_GU = 4, PK_V_NLS_OUT = 5,
    /* RMSNORM_SWIGLU_DOWN: x, norm_w as RMSNORM_LINEAR; w [3 · i tile, K]: per task (one group of
     * the fused weight) i tile gate rows, i tile up rows (swiglu_block = i tile), then down_proj's
     * column block [i·I/G, (i+1)·I/G) stored row-major as [K][i tile] (pk_column_blocks); scratch
     * [T, 3 · i tile]: gu (2 · i tile columns) then silu(gate) · up (the CPU's; the GPU keeps them
     * in shared memory in one-token steps); acc int64 [T, K] whole: each task adds
     * round(partial · 2^32) */
    PK_V_MLP_X = 0, PK_V_MLP_NORM_W = 1, PK_V_MLP_W = 2, PK_V_MLP_SCRATCH = 4, PK_V_MLP_ACC = 5,
    PK_V_LIN_X = 0, PK_V_LIN_W = 1, PK_V_LIN_OUT = 2,
    /* LINEAR_RESIDUAL: clear (nseg 0 when absent) int64 [T, N'] whole: task i of G zeroes its columns
     * [i·N'/G, (i+1)·N'/G) (a RMSNORM_SWIGLU_DOWN accumulator, after every reader of it) */
    PK_V_LR_X = 0, PK_V_LR_W = 1, PK_V_LR_RES = 2 /* [T, n tile] */, PK_V_LR_CLEAR = 3, PK_V_LR_OUT = 4,
    /* LINEAR_SPLITK_RESIDUAL: x [T, k tile], w [N, k tile]; residual, acc (fp32), out whole [T, N] */
    PK_V_LSK_X = 0, PK_V_LSK_W = 1, PK_V_LSK_RES = 2, PK_V_LSK_ACC = 3, PK_V_LSK_OUT = 4,
    PK_V_SM_X = 0 /* [T, 2I] */, PK_V_SM_OUT = 1 /* [T, i tile] */,
    PK_V_SML_X = 0 /* [T, 2I] */, PK_V_SML_W = 1, PK_V_SML_RES = 2, PK_V_SML_OUT = 3,
    PK_V_ATT_QKV = 0 /* [T, group cols of the task's KV heads] */, PK_V_ATT_K_CACHE = 1,
    PK_V_ATT_V_CACHE = 2, PK_V_ATT_Q_NORM = 3, PK_V_ATT_K_NORM = 4 /* nseg 0 when absent */,
    PK_V_ATT_TOKEN_POS = 5, PK_V_ATT_TOKEN_REQ = 6, PK_V_ATT_PAGE_TABLE = 7,
    PK_V_ATT_OUT = 8 /* [T, heads tile · D]; ATTENTION_PARTIAL: fp32 [R, heads tile · (D + 2)],
                      * R = min(T, PK_ATTN_DIRECT_ROWS) */,
    PK_V_ATTP_COMBINED = 9 /* ATTENTION_PARTIAL: out, whole [T, Hq · D] */,
    /* ARGMAX_PARTIAL: task i's (value, index) into column i of val / idx; the layer's last task
     * to finish reads every column and writes out */
    PK_V_AMP_LOGITS = 0 /* [T, v tile] */, PK_V_AMP_VAL = 1 /* fp32 [T, 1 col] of [T, grid] */,
    PK_V_AMP_IDX = 2 /* int32 [T, 1 col] of [T, grid] */, PK_V_AMP_OUT = 3 /* int32 [T], whole */,
    /* RMSNORM_LINEAR_ARGMAX: x, norm_w, w as RMSNORM_LINEAR (acc absent: nseg 0), logits [T, v tile]
     * its out; then ARGMAX_PARTIAL's val, idx (column i of [T, grid]) and out (int32 [T], whole) */
    PK_V_NLA_X = 0, PK_V_NLA_NORM_W = 1, PK_V_NLA_W = 2, PK_V_NLA_ACC = 3, PK_V_NLA_LOGITS = 4,
    PK_V_NLA_VAL = 5, PK_V_NLA_IDX = 6, PK_V_NLA_OUT = 7,
};
PK_STATIC_ASSERT(PK_V_NLS_X == PK_V_NL_X && PK_V_NLS_NORM_W == PK_V_NL_NORM_W && PK_V_NLS_W == PK_V_NL_W &&
                     PK_V_NLS_GU == PK_V_NL_OUT,
                 "RMSNORM_LINEAR_SWIGLU's GEMV views are RMSNORM_LINEAR's (codegen.c emits one call for both)");
PK_STATIC_ASSERT(PK_V_MLP_X == PK_V_NL_X && PK_V_MLP_NORM_W == PK_V_NL_NORM_W && PK_V_MLP_W == PK_V_NL_W &&
                     PK_V_MLP_SCRATCH == PK_V_NL_OUT,
                 "RMSNORM_SWIGLU_DOWN's GEMV views are RMSNORM_LINEAR's");
PK_STATIC_ASSERT(PK_V_NLA_X == PK_V_NL_X && PK_V_NLA_NORM_W == PK_V_NL_NORM_W && PK_V_NLA_W == PK_V_NL_W &&
                     PK_V_NLA_ACC == PK_V_NL_ACC && PK_V_NLA_LOGITS == PK_V_NL_OUT,
                 "RMSNORM_LINEAR_ARGMAX's GEMV views are RMSNORM_LINEAR's");

/* The step's decode metadata, in the pk-owned int32 tensor "pk.step_info". */
enum {
    PK_STEP_INFO_NUM_TOKENS = 0, /* rows of this step holding a token */
    PK_STEP_INFO_STEP = 1,       /* 1-based step number */
    PK_STEP_INFO_FIRST_SAMPLE = 2, /* the first row whose logits are needed (decode_step.h's
                                    * pk_step_plan: every row after it too); NUM_TOKENS: none */
    PK_STEP_INFO_LEN = 4,
};

#endif /* PK_ABI_H */
