// SPDX-License-Identifier: Apache-2.0
/* layers.c — one public function per layer kind: check every argument, record the layer.
 *
 * Each check names the layer, the tensor and the numbers. A recorded layer lists its tensors
 * and how its grid splits each one (pk_split), which is all the task graph builder needs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pk_internal.h"

#define TRY(expr)                          \
    do {                                   \
        pk_status s_ = (expr);             \
        if (s_ != PK_OK) return s_;        \
    } while (0)

static const pk_split WHOLE = {-1, 1}; /* every task touches the whole tensor */

typedef struct layer_builder {
    pk_kernel *k;
    const char *fn; /* public function name, for messages */
    pk_layer l;
} layer_builder;

static pk_status begin(layer_builder *b, pk_kernel *k, const char *fn, pk_task_kind kind, int grid) {
    memset(b, 0, sizeof *b);
    b->k = k;
    b->fn = fn;
    b->l.kind = kind;
    b->l.grid = grid;
    b->l.params.kind = (uint32_t)kind;
    b->l.params.grid = (uint32_t)grid;
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status s = pk_enter(k);
    if (s != PK_OK) return s;
    if (k->compiled) return pk_fail(k, PK_ERR_STATE, "%s: the kernel is compiled already", fn);
    if (grid < 1) return pk_fail(k, PK_ERR_GRID, "%s: grid %d < 1", fn, grid);
    return PK_OK;
}

static int owned_by(const pk_kernel *k, const pk_tensor *t) {
    return t && t->id >= 0 && t->id < k->ntensors && k->tensors[t->id] == t;
}

/* Checks a tensor argument: present, of this kernel, dtype, ndim and the dims given (-1: any). */
static pk_status check_tensor(layer_builder *b, const char *role, const pk_tensor *t, pk_dtype dtype,
                              int ndim, const int64_t *dims) {
    pk_kernel *k = b->k;
    if (!t) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: %s tensor is NULL", b->fn, role);
    if (!owned_by(k, t))
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: %s tensor '%s' belongs to another kernel", b->fn,
                       role, t->name);
    if (t->dtype != dtype)
        return pk_fail(k, PK_ERR_DTYPE, "%s: %s '%s' is %s, expected %s", b->fn, role, t->name,
                       pk_dtype_name(t->dtype), pk_dtype_name(dtype));
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = dims[i] < 0 || t->dims[i] == dims[i];
    if (!ok) {
        char got[96], want[96] = "[";
        size_t n = 1;
        for (int i = 0; i < ndim; i++) {
            if (dims[i] < 0)
                n += (size_t)snprintf(want + n, sizeof want - n, "%s*", i ? ", " : "");
            else
                n += (size_t)snprintf(want + n, sizeof want - n, "%s%lld", i ? ", " : "", (long long)dims[i]);
        }
        snprintf(want + n, sizeof want - n, "]");
        return pk_fail(k, PK_ERR_SHAPE, "%s: %s '%s' has shape %s, expected %s", b->fn, role, t->name,
                       pk_dims_str(t->dims, t->ndim, got, sizeof got), want);
    }
    return PK_OK;
}

/* A task sees every tensor as a 2-D view (rows = dim 0, columns = the product of the others)
 * whose extents are 32-bit and reach the kernels as int: both must fit in an int32. */
static pk_status check_view_extent(layer_builder *b, const char *role, const pk_tensor *t) {
    int64_t rows = t->ndim >= 2 ? t->dims[0] : 1, cols = pk_tensor_numel(t) / rows;
    if (rows > INT32_MAX || cols > INT32_MAX) {
        char dims[96];
        return pk_fail(b->k, PK_ERR_SHAPE,
                       "%s: %s '%s' %s is %lld rows x %lld columns (dim 0 x the others); a task "
                       "takes at most 2^31 - 1 of each",
                       b->fn, role, t->name, pk_dims_str(t->dims, t->ndim, dims, sizeof dims),
                       (long long)rows, (long long)cols);
    }
    return PK_OK;
}

static pk_status add_input(layer_builder *b, const char *role, const pk_tensor *t, pk_split split) {
    pk_kernel *k = b->k;
    TRY(check_view_extent(b, role, t));
    if (t->device_transposed && b->l.kind != PK_TASK_LINEAR_SPLITK_RESIDUAL)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: %s '%s' is the weight of a split-K layer (pk_linear_splitk_with_residual_layer), which "
                       "the GPU stores transposed: it cannot be read by another kind of layer",
                       b->fn, role, t->name);
    if (t->storage == PK_STORAGE_FUSED && split.dim != 0 && split.dim != -1)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: %s '%s' is a fused tensor: it can only be a weight split by rows (dim 0), "
                       "and here it would be split along dim %d",
                       b->fn, role, t->name, split.dim);
    PK_ASSERT(b->l.ninputs < PK_LAYER_MAX_TENSORS);
    b->l.inputs[b->l.ninputs] = t->id;
    b->l.in_split[b->l.ninputs++] = split;
    return PK_OK;
}

/* An optional input left out (its view has nseg 0): keeps the views after it at their indices. */
static void add_absent(layer_builder *b) {
    PK_ASSERT(b->l.ninputs < PK_LAYER_MAX_TENSORS);
    b->l.inputs[b->l.ninputs] = -1;
    b->l.in_split[b->l.ninputs++] = WHOLE;
}

/* The first layer that reads tensor `id` and is not of kind `except_kind` (-1: any kind), or -1. */
static int reader_of(const pk_kernel *k, int id, int except_kind) {
    for (int l = 0; l < k->nlayers; l++)
        for (int i = 0; i < k->layers[l].ninputs; i++)
            if (k->layers[l].inputs[i] == id && (int)k->layers[l].kind != except_kind) return l;
    return -1;
}

/* A layer may write t only if pk owns it, no layer writes it yet, no earlier layer reads it (that
 * layer would run first and read the last step's values), and it is not decode state that
 * prepare_next_step fills (pk_step_output excepted). */
static pk_status check_writable(layer_builder *b, const char *role, const pk_tensor *t) {
    pk_kernel *k = b->k;
    if (t->storage != PK_STORAGE_OWNED)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: %s '%s' is not a pk_new_tensor (pk never writes attached or fused tensors)",
                       b->fn, role, t->name);
    if (t->producer >= 0)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: %s '%s' is written by layer %s already", b->fn,
                       role, t->name, k->layers[t->producer].name);
    if (t->id == k->t_step_tokens || t->id == k->t_step_info || t->id == k->t_token_pos ||
        t->id == k->t_token_req || t->id == k->t_page_table || t->id == k->t_sample_params ||
        t->id == k->t_sample_slot)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: %s '%s' is decode state pk fills each step; of pk's tensors only "
                       "pk_step_output(k) can be a layer's output",
                       b->fn, role, t->name);
    const int reader = reader_of(k, t->id, -1);
    if (reader >= 0)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: %s '%s' is read by layer %s, added before it: add the layer that "
                       "writes a tensor before the layers that read it",
                       b->fn, role, t->name, k->layers[reader].name);
    return PK_OK;
}

static pk_status add_output(layer_builder *b, const char *role, const pk_tensor *t, pk_split split) {
    pk_kernel *k = b->k;
    TRY(check_writable(b, role, t));
    TRY(check_view_extent(b, role, t));
    for (int i = 0; i < b->l.ninputs; i++)
        if (b->l.inputs[i] == t->id)
            return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: %s '%s' is also an input", b->fn, role, t->name);
    PK_ASSERT(b->l.noutputs < PK_LAYER_MAX_OUTPUTS);
    b->l.outputs[b->l.noutputs] = t->id;
    b->l.out_split[b->l.noutputs++] = split;
    return PK_OK;
}

/* The grid must split `extent` evenly. */
static pk_status check_grid(layer_builder *b, const char *what, int64_t extent) {
    if (extent % b->l.grid != 0)
        return pk_fail(b->k, PK_ERR_GRID, "%s: grid %d does not divide %s (%lld)", b->fn, b->l.grid, what,
                       (long long)extent);
    return PK_OK;
}

/* The linear family's N takes any grid up to N: tiles of ⌊N/grid⌋ or ⌈N/grid⌉ rows (build.c's
 * make_view), so a GEMV layer can have one task per worker (one per SM on a GPU) whatever N
 * divides into. */
static pk_status check_grid_rows(layer_builder *b, const char *what, int64_t extent) {
    if (extent < b->l.grid)
        return pk_fail(b->k, PK_ERR_GRID, "%s: grid %d exceeds %s (%lld): every task needs a row", b->fn,
                       b->l.grid, what, (long long)extent);
    return PK_OK;
}

static pk_status commit(layer_builder *b, const char *kind_name) {
    pk_kernel *k = b->k;
    if (k->nlayers == k->layers_cap) {
        int cap = k->layers_cap ? 2 * k->layers_cap : 64;
        pk_layer *p = realloc(k->layers, (size_t)cap * sizeof *p);
        if (!p) return pk_fail(k, PK_ERR_NO_MEMORY, "%s: out of memory", b->fn);
        k->layers = p;
        k->layers_cap = cap;
    }
    snprintf(b->l.name, sizeof b->l.name, "L%d.%s", k->nlayers, kind_name);
    for (int i = 0; i < b->l.noutputs; i++) k->tensors[b->l.outputs[i]]->producer = k->nlayers;
    k->layers[k->nlayers++] = b->l;
    return PK_OK;
}

static pk_split split_dim(const layer_builder *b, int dim) {
    pk_split s = {dim, b->l.grid};
    return s;
}

static int64_t T_of(const pk_kernel *k) { return k->cfg.max_tokens_per_step; }

pk_status pk_embedding_layer(pk_kernel *k, pk_tensor *tokens, pk_tensor *weight, pk_tensor *out, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_embedding_layer", PK_TASK_EMBEDDING, grid));
    int64_t T = T_of(k);
    TRY(check_tensor(&b, "tokens", tokens, PK_DTYPE_INT32, 1, (int64_t[]){T}));
    /* The kernel reads row tokens[t] unchecked: only the step's tokens, whose ids pk_run checks
     * against the vocabulary, can be looked up. */
    if (tokens->id != k->t_step_tokens)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: tokens '%s' is not pk_step_tokens(k): only the step's tokens have their "
                       "ids checked against the vocabulary",
                       b.fn, tokens->name);
    TRY(check_tensor(&b, "weight", weight, PK_DTYPE_BF16, 2, (int64_t[]){-1, -1}));
    int64_t V = weight->dims[0], H = weight->dims[1];
    TRY(check_tensor(&b, "out", out, PK_DTYPE_BF16, 2, (int64_t[]){T, H}));
    TRY(check_grid(&b, "the hidden size", H));
    if (V > INT32_MAX) return pk_fail(k, PK_ERR_SHAPE, "%s: vocabulary of %lld rows", b.fn, (long long)V);
    if (k->vocab_size && k->vocab_size != V)
        return pk_fail(k, PK_ERR_SHAPE, "%s: weight '%s' has %lld rows; an earlier embedding has %d", b.fn,
                       weight->name, (long long)V, k->vocab_size);
    TRY(add_input(&b, "tokens", tokens, WHOLE));
    TRY(add_input(&b, "weight", weight, split_dim(&b, 1)));
    TRY(add_output(&b, "out", out, split_dim(&b, 1)));
    TRY(commit(&b, "embedding"));
    k->vocab_size = (int)V;
    return PK_OK;
}

pk_status pk_rmsnorm_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w, pk_tensor *out, float eps, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_rmsnorm_layer", PK_TASK_RMSNORM, grid));
    int64_t T = T_of(k);
    TRY(check_tensor(&b, "x", x, PK_DTYPE_BF16, 2, (int64_t[]){T, -1}));
    int64_t H = x->dims[1];
    TRY(check_tensor(&b, "weight", w, PK_DTYPE_BF16, 1, (int64_t[]){H}));
    TRY(check_tensor(&b, "out", out, PK_DTYPE_BF16, 2, (int64_t[]){T, H}));
    if (!(eps > 0.0f && isfinite(eps))) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: eps %g", b.fn, eps);
    TRY(check_grid(&b, "max_tokens_per_step", T));
    b.l.params.eps = eps;
    TRY(add_input(&b, "x", x, split_dim(&b, 0)));
    TRY(add_input(&b, "weight", w, WHOLE));
    TRY(add_output(&b, "out", out, split_dim(&b, 0)));
    return commit(&b, "rmsnorm");
}

/* Shared by the linear family: x [T, K] read whole, W [N, K] split by rows, out [T, N]. */
static pk_status linear_common_as(layer_builder *b, pk_tensor *x, int64_t K, pk_tensor *w, pk_tensor *out,
                                  const char *out_role, int64_t *N) {
    int64_t T = T_of(b->k);
    TRY(check_tensor(b, "weight", w, PK_DTYPE_BF16, 2, (int64_t[]){-1, K}));
    *N = w->dims[0];
    TRY(check_tensor(b, out_role, out, PK_DTYPE_BF16, 2, (int64_t[]){T, *N}));
    TRY(check_grid_rows(b, "the output features N", *N));
    if (x) TRY(add_input(b, "x", x, WHOLE));
    return PK_OK;
}

static pk_status linear_common(layer_builder *b, pk_tensor *x, int64_t K, pk_tensor *w, pk_tensor *out,
                               int64_t *N) {
    return linear_common_as(b, x, K, w, out, "out", N);
}

int pk_accumulator_clearer(const pk_kernel *k, int acc) {
    for (int l = 0; l < k->nlayers; l++)
        if (k->layers[l].kind == PK_TASK_LINEAR_RESIDUAL && k->layers[l].inputs[PK_V_LR_CLEAR] == acc) return l;
    return -1;
}

/* acc must be the accumulator of a RMSNORM_SWIGLU_DOWN layer, not cleared yet, of shape [T, K]. */
static pk_status check_accumulator(layer_builder *b, const char *role, const pk_tensor *acc, int64_t K) {
    pk_kernel *k = b->k;
    TRY(check_tensor(b, role, acc, PK_DTYPE_INT64, 2, (int64_t[]){T_of(k), K}));
    if (acc->producer < 0 || k->layers[acc->producer].kind != PK_TASK_RMSNORM_SWIGLU_DOWN)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: %s '%s' is not the accumulator of a pk_rmsnorm_swiglu_down_layer", b->fn, role,
                       acc->name);
    const int c = pk_accumulator_clearer(k, acc->id);
    if (c >= 0)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: %s '%s' is cleared by layer %s already: every reader of an accumulator comes "
                       "before the layer that clears it",
                       b->fn, role, acc->name, k->layers[c].name);
    return PK_OK;
}

/* The rmsnorm family's x [T, K] (bf16), its norm weight [K] and eps > 0; K into *K. */
static pk_status check_rmsnorm_input(layer_builder *b, const pk_tensor *x, const pk_tensor *norm_w, float eps,
                                     int64_t *K) {
    TRY(check_tensor(b, "x", x, PK_DTYPE_BF16, 2, (int64_t[]){T_of(b->k), -1}));
    *K = x->dims[1];
    TRY(check_tensor(b, "norm weight", norm_w, PK_DTYPE_BF16, 1, (int64_t[]){*K}));
    if (!(eps > 0.0f && isfinite(eps))) return pk_fail(b->k, PK_ERR_INVALID_ARGUMENT, "%s: eps %g", b->fn, eps);
    return PK_OK;
}

/* with_acc: pk_rmsnorm_linear_acc_layer's (x plus acc, the sum stored); else acc and sum are unused. */
static pk_status rmsnorm_linear(pk_kernel *k, const char *fn, pk_tensor *x, int with_acc, pk_tensor *acc,
                                pk_tensor *norm_w, pk_tensor *w, pk_tensor *out, pk_tensor *sum, float eps, int grid) {
    layer_builder b;
    TRY(begin(&b, k, fn, PK_TASK_RMSNORM_LINEAR, grid));
    int64_t K, N;
    TRY(check_rmsnorm_input(&b, x, norm_w, eps, &K));
    if (with_acc) {
        TRY(check_accumulator(&b, "accumulator", acc, K));
        TRY(check_tensor(&b, "sum", sum, PK_DTYPE_BF16, 2, (int64_t[]){T_of(k), K}));
        if (K % 8 != 0) /* the GPU adds the accumulator to x 8 elements at a time */
            return pk_fail(k, PK_ERR_SHAPE, "%s: x '%s' has %lld columns; with an accumulator, a multiple of 8",
                           b.fn, x->name, (long long)K);
    }
    TRY(linear_common(&b, x, K, w, out, &N));
    b.l.params.eps = eps;
    TRY(add_input(&b, "norm weight", norm_w, WHOLE));
    TRY(add_input(&b, "weight", w, split_dim(&b, 0)));
    if (with_acc)
        TRY(add_input(&b, "accumulator", acc, WHOLE));
    else
        add_absent(&b);
    TRY(add_output(&b, "out", out, split_dim(&b, 1)));
    if (with_acc) TRY(add_output(&b, "sum", sum, WHOLE)); /* task i writes its share of the columns */
    return commit(&b, "rmsnorm_linear");
}

pk_status pk_rmsnorm_linear_layer(pk_kernel *k, pk_tensor *x, pk_tensor *norm_w, pk_tensor *w,
                                  pk_tensor *out, float eps, int grid) {
    return rmsnorm_linear(k, "pk_rmsnorm_linear_layer", x, 0, NULL, norm_w, w, out, NULL, eps, grid);
}

pk_status pk_rmsnorm_linear_acc_layer(pk_kernel *k, pk_tensor *x, pk_tensor *acc, pk_tensor *norm_w, pk_tensor *w,
                                      pk_tensor *out, pk_tensor *sum, float eps, int grid) {
    return rmsnorm_linear(k, "pk_rmsnorm_linear_acc_layer", x, 1, acc, norm_w, w, out, sum, eps, grid);
}

pk_status pk_rmsnorm_linear_swiglu_layer(pk_kernel *k, pk_tensor *x, pk_tensor *norm_w, pk_tensor *w, int block,
                                         pk_tensor *out, float eps, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_rmsnorm_linear_swiglu_layer", PK_TASK_RMSNORM_LINEAR_SWIGLU, grid));
    const int64_t T = T_of(k);
    int64_t K;
    TRY(check_rmsnorm_input(&b, x, norm_w, eps, &K));
    TRY(check_tensor(&b, "out", out, PK_DTYPE_BF16, 2, (int64_t[]){T, -1}));
    const int64_t I = out->dims[1];
    TRY(check_tensor(&b, "weight", w, PK_DTYPE_BF16, 2, (int64_t[]){2 * I, K}));
    TRY(check_grid(&b, "the intermediate size I", I));
    if (block < 1 || (I / grid) % block != 0)
        return pk_fail(k, PK_ERR_GRID,
                       "%s: block %d must divide the %lld features of each task (I %lld / grid %d): a task "
                       "needs whole gate / up blocks",
                       b.fn, block, (long long)(I / grid), (long long)I, grid);
    TRY(check_writable(&b, "out", out)); /* before the projection's tensor is made */
    b.l.params.eps = eps;
    b.l.params.swiglu_block = block;
    char name[PK_NAME_MAX];
    snprintf(name, sizeof name, "pk.swiglu%d.gu", k->nlayers);
    pk_tensor *gu = pk_new_tensor(k, name, PK_DTYPE_BF16, 2, (int64_t[]){T, 2 * I}, PK_IO_LOCAL);
    if (!gu) return k->status;
    TRY(add_input(&b, "x", x, WHOLE));
    TRY(add_input(&b, "norm weight", norm_w, WHOLE));
    TRY(add_input(&b, "weight", w, split_dim(&b, 0)));
    add_absent(&b);
    TRY(add_output(&b, "projection", gu, split_dim(&b, 1)));
    TRY(add_output(&b, "out", out, split_dim(&b, 1)));
    return commit(&b, "rmsnorm_linear_swiglu");
}

pk_status pk_linear_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w, pk_tensor *out, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_linear_layer", PK_TASK_LINEAR, grid));
    TRY(check_tensor(&b, "x", x, PK_DTYPE_BF16, 2, (int64_t[]){T_of(k), -1}));
    int64_t N;
    TRY(linear_common(&b, x, x->dims[1], w, out, &N));
    TRY(add_input(&b, "weight", w, split_dim(&b, 0)));
    TRY(add_output(&b, "out", out, split_dim(&b, 1)));
    return commit(&b, "linear");
}

/* Marks in `anc` (nlayers bytes, zeroed) every layer that tensor `id`'s producer depends on,
 * itself included. */
static void mark_ancestors(const pk_kernel *k, int id, unsigned char *anc) {
    const int p = id >= 0 ? k->tensors[id]->producer : -1;
    if (p < 0 || anc[p]) return;
    anc[p] = 1;
    for (int i = 0; i < k->layers[p].ninputs; i++) mark_ancestors(k, k->layers[p].inputs[i], anc);
}

/* with_clear: pk_linear_with_residual_clear_layer's (task i zeroes its share of clear); else clear is unused. */
static pk_status linear_with_residual(pk_kernel *k, const char *fn, pk_tensor *x, pk_tensor *w, pk_tensor *residual,
                                      int with_clear, pk_tensor *clear, pk_tensor *out, int grid) {
    layer_builder b;
    TRY(begin(&b, k, fn, PK_TASK_LINEAR_RESIDUAL, grid));
    TRY(check_tensor(&b, "x", x, PK_DTYPE_BF16, 2, (int64_t[]){T_of(k), -1}));
    int64_t N;
    TRY(linear_common(&b, x, x->dims[1], w, out, &N));
    TRY(check_tensor(&b, "residual", residual, PK_DTYPE_BF16, 2, (int64_t[]){T_of(k), N}));
    if (with_clear) {
        TRY(check_tensor(&b, "accumulator", clear, PK_DTYPE_INT64, 2, (int64_t[]){T_of(k), -1}));
        TRY(check_accumulator(&b, "accumulator", clear, clear->dims[1]));
        /* every other reader of the accumulator must have finished when this layer's tasks start:
         * each must be a layer this one waits on, through x or the residual */
        unsigned char *anc = calloc((size_t)k->nlayers + 1, 1);
        if (!anc) return pk_fail(k, PK_ERR_NO_MEMORY, "%s: out of memory", b.fn);
        mark_ancestors(k, x->id, anc);
        mark_ancestors(k, residual->id, anc);
        int early = -1;
        for (int l = 0; l < k->nlayers && early < 0; l++)
            for (int i = 0; i < k->layers[l].ninputs; i++)
                if (k->layers[l].inputs[i] == clear->id && !anc[l]) early = l;
        free(anc);
        if (early >= 0)
            return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                           "%s: accumulator '%s' is read by layer %s, which this layer does not wait on (through "
                           "x or the residual): it could be cleared before that layer reads it",
                           b.fn, clear->name, k->layers[early].name);
    }
    TRY(add_input(&b, "weight", w, split_dim(&b, 0)));
    TRY(add_input(&b, "residual", residual, split_dim(&b, 1)));
    if (with_clear)
        TRY(add_input(&b, "accumulator", clear, WHOLE)); /* task i zeroes its share of the columns */
    else
        add_absent(&b);
    TRY(add_output(&b, "out", out, split_dim(&b, 1)));
    return commit(&b, "linear_with_residual");
}

pk_status pk_linear_with_residual_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w, pk_tensor *residual,
                                        pk_tensor *out, int grid) {
    return linear_with_residual(k, "pk_linear_with_residual_layer", x, w, residual, 0, NULL, out, grid);
}

pk_status pk_linear_with_residual_clear_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w, pk_tensor *residual,
                                              pk_tensor *clear, pk_tensor *out, int grid) {
    return linear_with_residual(k, "pk_linear_with_residual_clear_layer", x, w, residual, 1, clear, out, grid);
}

pk_status pk_rmsnorm_swiglu_down_layer(pk_kernel *k, pk_tensor *x, pk_tensor *norm_w, pk_tensor *w_gu,
                                       pk_tensor *w_down, pk_tensor *acc, float eps, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_rmsnorm_swiglu_down_layer", PK_TASK_RMSNORM_SWIGLU_DOWN, grid));
    const int64_t T = T_of(k);
    int64_t K;
    TRY(check_rmsnorm_input(&b, x, norm_w, eps, &K));
    TRY(check_tensor(&b, "gate / up weight", w_gu, PK_DTYPE_BF16, 2, (int64_t[]){-1, K}));
    if (w_gu->storage != PK_STORAGE_FUSED || w_gu->nfused != 2 || w_gu->groups != grid)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: gate / up weight '%s' must be pk_fuse_tensors of the gate and up weights in %d groups "
                       "(one per task)",
                       b.fn, w_gu->name, grid);
    const int64_t I = w_gu->dims[0] / 2;
    TRY(check_tensor(&b, "down weight", w_down, PK_DTYPE_BF16, 2, (int64_t[]){K, I}));
    if (w_down->storage != PK_STORAGE_ATTACHED)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: down weight '%s' is not an attached input", b.fn,
                       w_down->name);
    TRY(check_tensor(&b, "accumulator", acc, PK_DTYPE_INT64, 2, (int64_t[]){T, K}));
    TRY(check_grid(&b, "the intermediate size I", I));
    if (K % 8 != 0) /* the GPU's partial sums take 8 outputs per thread, its readers 8 columns of x at a time */
        return pk_fail(k, PK_ERR_SHAPE, "%s: x '%s' has %lld columns; a multiple of 8", b.fn, x->name, (long long)K);
    TRY(check_writable(&b, "accumulator", acc)); /* before the layer's own tensors are made */
    char name[PK_NAME_MAX];
    snprintf(name, sizeof name, "pk.mlp%d.down_blocks", k->nlayers);
    pk_tensor *down_blocks = pk_column_blocks(k, name, w_down, I / grid);
    if (!down_blocks) return k->status;
    /* task i's rows, contiguous on the GPU: its gate block, its up block, its columns of down ([K][I / grid]) */
    snprintf(name, sizeof name, "pk.mlp%d.w", k->nlayers);
    pk_tensor *parts[3] = {k->tensors[w_gu->fused[0]], k->tensors[w_gu->fused[1]], down_blocks};
    pk_tensor *w = pk_fuse_tensors(k, name, parts, 3, 0, grid);
    snprintf(name, sizeof name, "pk.mlp%d.scratch", k->nlayers);
    pk_tensor *scratch = w ? pk_new_tensor(k, name, PK_DTYPE_BF16, 2, (int64_t[]){T, 3 * I}, PK_IO_LOCAL) : NULL;
    if (!scratch) return k->status;
    b.l.params.eps = eps;
    b.l.params.swiglu_block = (int32_t)(I / grid);
    TRY(add_input(&b, "x", x, WHOLE));
    TRY(add_input(&b, "norm weight", norm_w, WHOLE));
    TRY(add_input(&b, "weight", w, split_dim(&b, 0)));
    add_absent(&b);
    TRY(add_output(&b, "scratch", scratch, split_dim(&b, 1)));
    TRY(add_output(&b, "accumulator", acc, WHOLE));
    return commit(&b, "rmsnorm_swiglu_down");
}

pk_status pk_linear_splitk_with_residual_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w, pk_tensor *residual,
                                               pk_tensor *out, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_linear_splitk_with_residual_layer", PK_TASK_LINEAR_SPLITK_RESIDUAL, grid));
    const int64_t T = T_of(k);
    TRY(check_tensor(&b, "x", x, PK_DTYPE_BF16, 2, (int64_t[]){T, -1}));
    const int64_t K = x->dims[1];
    TRY(check_tensor(&b, "weight", w, PK_DTYPE_BF16, 2, (int64_t[]){-1, K}));
    const int64_t N = w->dims[0];
    TRY(check_tensor(&b, "residual", residual, PK_DTYPE_BF16, 2, (int64_t[]){T, N}));
    TRY(check_tensor(&b, "out", out, PK_DTYPE_BF16, 2, (int64_t[]){T, N}));
    TRY(check_grid(&b, "the input features K", K));
    if (w->storage == PK_STORAGE_FUSED)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: weight '%s' is a fused tensor: a split over K takes column blocks, which only a "
                       "plain weight has",
                       b.fn, w->name);
    const int other = reader_of(k, w->id, PK_TASK_LINEAR_SPLITK_RESIDUAL);
    if (other >= 0)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                       "%s: weight '%s' is read by layer %s: a split-K layer's weight is stored transposed "
                       "on the GPU, so no other kind of layer can read it",
                       b.fn, w->name, k->layers[other].name);
    TRY(check_writable(&b, "out", out)); /* before the accumulator is made */
    char name[PK_NAME_MAX];
    snprintf(name, sizeof name, "pk.splitk%d.acc", k->nlayers);
    pk_tensor *acc = pk_new_tensor(k, name, PK_DTYPE_FP32, 2, (int64_t[]){T, N}, PK_IO_LOCAL);
    if (!acc) return k->status;
    /* x and W by column blocks: task i waits only on the producers of x's block i */
    TRY(add_input(&b, "x", x, split_dim(&b, 1)));
    TRY(add_input(&b, "weight", w, split_dim(&b, 1)));
    TRY(add_input(&b, "residual", residual, WHOLE));
    TRY(add_output(&b, "accumulator", acc, WHOLE));
    TRY(add_output(&b, "out", out, WHOLE));
    TRY(commit(&b, "linear_splitk_with_residual"));
    w->device_transposed = 1; /* task i's block of columns: one contiguous range of W^T */
    return PK_OK;
}

pk_status pk_silu_mul_layer(pk_kernel *k, pk_tensor *x, pk_tensor *out, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_silu_mul_layer", PK_TASK_SILU_MUL, grid));
    int64_t T = T_of(k);
    TRY(check_tensor(&b, "x", x, PK_DTYPE_BF16, 2, (int64_t[]){T, -1}));
    if (x->dims[1] % 2) return pk_fail(k, PK_ERR_SHAPE, "%s: x '%s' has %lld columns, not 2·I", b.fn, x->name,
                                       (long long)x->dims[1]);
    int64_t I = x->dims[1] / 2;
    TRY(check_tensor(&b, "out", out, PK_DTYPE_BF16, 2, (int64_t[]){T, I}));
    TRY(check_grid(&b, "the intermediate size I", I));
    TRY(add_input(&b, "x", x, WHOLE)); /* each task reads two column ranges: wait for all of x */
    TRY(add_output(&b, "out", out, split_dim(&b, 1)));
    return commit(&b, "silu_mul");
}

pk_status pk_silu_mul_linear_with_residual_layer(pk_kernel *k, pk_tensor *x, pk_tensor *w,
                                                 pk_tensor *residual, pk_tensor *out, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_silu_mul_linear_with_residual_layer", PK_TASK_SILU_MUL_LINEAR_RESIDUAL, grid));
    TRY(check_tensor(&b, "x", x, PK_DTYPE_BF16, 2, (int64_t[]){T_of(k), -1}));
    if (x->dims[1] % 2) return pk_fail(k, PK_ERR_SHAPE, "%s: x '%s' has %lld columns, not 2·I", b.fn, x->name,
                                       (long long)x->dims[1]);
    int64_t N;
    TRY(linear_common(&b, x, x->dims[1] / 2, w, out, &N));
    TRY(check_tensor(&b, "residual", residual, PK_DTYPE_BF16, 2, (int64_t[]){T_of(k), N}));
    TRY(add_input(&b, "weight", w, split_dim(&b, 0)));
    TRY(add_input(&b, "residual", residual, split_dim(&b, 1)));
    TRY(add_output(&b, "out", out, split_dim(&b, 1)));
    return commit(&b, "silu_mul_linear_with_residual");
}

pk_status pk_attention_layer(pk_kernel *k, pk_tensor *qkv, pk_tensor *k_cache, pk_tensor *v_cache,
                             pk_tensor *q_norm, pk_tensor *k_norm, pk_tensor *out,
                             const pk_attention_params *p, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_attention_layer", PK_TASK_ATTENTION, grid));
    if (!p) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: params is NULL", b.fn);
    int Hq = p->num_q_heads, Hkv = p->num_kv_heads, D = p->head_dim;
    if (Hq < 1 || Hkv < 1 || Hq % Hkv != 0)
        return pk_fail(k, PK_ERR_SHAPE, "%s: num_q_heads %d must be a positive multiple of num_kv_heads %d",
                       b.fn, Hq, Hkv);
    if (D < 2 || D > 512 || D % 2)
        return pk_fail(k, PK_ERR_SHAPE, "%s: head_dim %d must be even and in [2, 512]", b.fn, D);
    if (!(p->rope_theta > 0.0f && isfinite(p->rope_theta)))
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: rope_theta %g", b.fn, p->rope_theta);
    if (p->rope_scaling == PK_ROPE_SCALING_LLAMA3) {
        if (!(p->rope_factor > 0 && p->rope_low_freq_factor > 0 &&
              p->rope_high_freq_factor > p->rope_low_freq_factor && p->rope_original_max_position > 0))
            return pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                           "%s: llama3 rope scaling needs factor > 0, 0 < low_freq_factor (%g) < "
                           "high_freq_factor (%g), original_max_position > 0 (%d)",
                           b.fn, p->rope_low_freq_factor, p->rope_high_freq_factor,
                           p->rope_original_max_position);
    } else if (p->rope_scaling != PK_ROPE_SCALING_NONE) {
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: unknown rope scaling %d", b.fn, (int)p->rope_scaling);
    }
    int64_t T = T_of(k), group_cols = ((int64_t)(Hq / Hkv) + 2) * D; /* Hq / Hkv + 2 overflows int */
    TRY(check_tensor(&b, "qkv", qkv, PK_DTYPE_BF16, 2, (int64_t[]){T, Hkv * group_cols}));
    int64_t cache_dims[4] = {k->cfg.num_pages, k->cfg.page_size, Hkv, D};
    TRY(check_tensor(&b, "k_cache", k_cache, PK_DTYPE_BF16, 4, cache_dims));
    TRY(check_tensor(&b, "v_cache", v_cache, PK_DTYPE_BF16, 4, cache_dims));
    if (k_cache == v_cache) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: k_cache and v_cache are one tensor", b.fn);
    if (!q_norm != !k_norm)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: give both q_norm and k_norm, or neither", b.fn);
    if (q_norm) {
        TRY(check_tensor(&b, "q_norm", q_norm, PK_DTYPE_BF16, 1, (int64_t[]){D}));
        TRY(check_tensor(&b, "k_norm", k_norm, PK_DTYPE_BF16, 1, (int64_t[]){D}));
        if (!(p->qk_norm_eps > 0.0f && isfinite(p->qk_norm_eps)))
            return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: qk_norm_eps %g", b.fn, p->qk_norm_eps);
    }
    TRY(check_tensor(&b, "out", out, PK_DTYPE_BF16, 2, (int64_t[]){T, (int64_t)Hq * D}));
    TRY(check_grid(&b, "num_kv_heads", Hkv));
    const int S = p->kv_splits > 1 ? p->kv_splits : 1;
    if (p->kv_splits < 0 || p->kv_splits > 4096 || (int64_t)grid * S > INT32_MAX / 2)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: kv_splits %d (0 or 1: not split; at most 4096, and grid %d "
                       "times kv_splits must fit an int)", b.fn, p->kv_splits, grid);
    pk_layer_params *lp = &b.l.params;
    lp->num_q_heads = Hq;
    lp->num_kv_heads = Hkv;
    lp->head_dim = D;
    lp->rope_theta = p->rope_theta;
    lp->rope_scaling = (int32_t)p->rope_scaling;
    lp->rope_factor = p->rope_factor;
    lp->rope_low_freq_factor = p->rope_low_freq_factor;
    lp->rope_high_freq_factor = p->rope_high_freq_factor;
    lp->rope_original_max_position = p->rope_original_max_position;
    lp->qk_norm_eps = p->qk_norm_eps;
    lp->has_qk_norm = q_norm != NULL;
    lp->kv_splits = S;
    /* Input order is the view order of pk_abi.h (PK_V_ATT_*), absent norms as -1. */
    /* split: the partial layer's task i is KV-head group i / S, split i % S; its qkv columns are
     * not a grid tile, so it waits for all of qkv */
    TRY(add_input(&b, "qkv", qkv, S > 1 ? WHOLE : split_dim(&b, 1)));
    TRY(add_input(&b, "k_cache", k_cache, WHOLE));
    TRY(add_input(&b, "v_cache", v_cache, WHOLE));
    if (q_norm) {
        TRY(add_input(&b, "q_norm", q_norm, WHOLE));
        TRY(add_input(&b, "k_norm", k_norm, WHOLE));
    } else {
        b.l.inputs[b.l.ninputs] = -1;
        b.l.in_split[b.l.ninputs++] = WHOLE;
        b.l.inputs[b.l.ninputs] = -1;
        b.l.in_split[b.l.ninputs++] = WHOLE;
    }
    TRY(add_input(&b, "token_pos", k->tensors[k->t_token_pos], WHOLE));
    TRY(add_input(&b, "token_req", k->tensors[k->t_token_req], WHOLE));
    TRY(add_input(&b, "page_table", k->tensors[k->t_page_table], WHOLE));
    if (k_cache->producer >= 0 || v_cache->producer >= 0)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: the KV cache tensors are used by another attention layer",
                       b.fn);
    if (k_cache->storage != PK_STORAGE_OWNED || v_cache->storage != PK_STORAGE_OWNED)
        return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "%s: the KV caches must be pk_new_tensor tensors", b.fn);
    if (S == 1) {
        TRY(add_output(&b, "out", out, split_dim(&b, 1)));
        TRY(commit(&b, "attention"));
        /* The caches are written by this layer and read by it in later steps only. */
        k_cache->producer = v_cache->producer = k->nlayers - 1;
        return PK_OK;
    }

    /* Split: one layer of grid · S tasks writing a pk-owned fp32 tensor [R, Hkv · S · G · (D + 2)]
     * (R = min(T, PK_ATTN_DIRECT_ROWS): steps of more rows run directly, pk_abi.h)
     * laid out [head group][split][its heads][D + 2], so task i's tile is column block i; the last
     * task of group g to finish (a per-group counter, pk_graph_group_counter0) folds the group's S
     * blocks into out's columns of group g. out is "written whole": its readers wait for every
     * task of the layer, which is what the fold needs (no reader can see a group before it). */
    TRY(check_writable(&b, "out", out)); /* before the partial tensor is added */
    const int G = Hq / Hkv;
    char name[PK_NAME_MAX];
    snprintf(name, sizeof name, "pk.attn%d.part", k->nlayers);
    const int64_t R = T < PK_ATTN_DIRECT_ROWS(S, G) ? T : PK_ATTN_DIRECT_ROWS(S, G); /* the rows that take it */
    pk_tensor *part = pk_new_tensor(k, name, PK_DTYPE_FP32, 2, (int64_t[]){R, (int64_t)Hkv * S * G * (D + 2)},
                                    PK_IO_LOCAL);
    if (!part) return k->status;
    b.l.kind = PK_TASK_ATTENTION_PARTIAL;
    b.l.params.kind = PK_TASK_ATTENTION_PARTIAL;
    b.l.grid = grid * S;
    b.l.params.grid = (uint32_t)(grid * S);
    TRY(add_output(&b, "partial", part, split_dim(&b, 1)));
    TRY(add_output(&b, "out", out, WHOLE));
    TRY(commit(&b, "attention_partial"));
    k_cache->producer = v_cache->producer = k->nlayers - 1;
    return PK_OK;
}

int pk_graph_attn_kv_fold(const pk_kernel *k, int layer) {
    const pk_layer *L = &k->layers[layer];
    const int64_t S = L->params.kv_splits, Hq = L->params.num_q_heads, Hkv = L->params.num_kv_heads;
    if (L->kind != PK_TASK_ATTENTION_PARTIAL || S < 2 || S % 2 != 0 || Hkv <= 0 || Hq % Hkv != 0) return 1;
    const int64_t G = Hq / Hkv, T = T_of(k), direct = PK_ATTN_DIRECT_ROWS(S, G);
    const int64_t R = T < direct ? T : direct; /* the partial tensor's rows */
    const int64_t qblocks = (T * G + 2 * PK_ATTN_DIRECT_QROWS - 1) / (2 * PK_ATTN_DIRECT_QROWS); /* of a full step */
    return T >= direct && 2 * qblocks <= S && 2 * T <= R * S ? 2 : 1;
}

int pk_graph_attn_group_counters(const pk_kernel *k, int layer) {
    return 1 + (pk_graph_attn_kv_fold(k, layer) == 2 ? (int)T_of(k) : 0);
}

int pk_graph_group_counter0(const pk_kernel *k, int layer) {
    int n = 0;
    for (int l = 0; l < layer && l < k->nlayers; l++)
        if (k->layers[l].kind == PK_TASK_ATTENTION_PARTIAL)
            n += k->layers[l].grid / k->layers[l].params.kv_splits * pk_graph_attn_group_counters(k, l);
        else if (k->layers[l].kind == PK_TASK_LINEAR_SPLITK_RESIDUAL || k->layers[l].kind == PK_TASK_ARGMAX_PARTIAL ||
                 k->layers[l].kind == PK_TASK_RMSNORM_LINEAR_ARGMAX)
            n += 1; /* one counter: the layer's last task writes out */
    return n;
}

/* The argmax's outputs after the layer's other tensors: its partials in two pk-owned tensors
 * [T, grid] (task i's in column i), then out. The layer's last task to finish (its completion
 * counter, pk_graph_group_counter0) reads every partial and writes out: no layer and no hand-off
 * of its own. out is written whole, so a reader would wait for every task (prepare_next_step
 * reads it after END_OF_GRAPH). */
static pk_status add_argmax_outputs(layer_builder *b, pk_tensor *out) {
    pk_kernel *k = b->k;
    const int64_t T = T_of(k), grid = b->l.grid;
    char name[PK_NAME_MAX];
    const int idx = k->nlayers;
    snprintf(name, sizeof name, "pk.argmax%d.val", idx);
    pk_tensor *val = pk_new_tensor(k, name, PK_DTYPE_FP32, 2, (int64_t[]){T, grid}, PK_IO_LOCAL);
    snprintf(name, sizeof name, "pk.argmax%d.idx", idx);
    pk_tensor *ids = val ? pk_new_tensor(k, name, PK_DTYPE_INT32, 2, (int64_t[]){T, grid}, PK_IO_LOCAL) : NULL;
    if (!val || !ids) return k->status;
    TRY(add_output(b, "partial values", val, split_dim(b, 1)));
    TRY(add_output(b, "partial indices", ids, split_dim(b, 1)));
    return add_output(b, "out", out, WHOLE);
}

pk_status pk_argmax_layer(pk_kernel *k, pk_tensor *logits, pk_tensor *out, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_argmax_layer", PK_TASK_ARGMAX_PARTIAL, grid));
    int64_t T = T_of(k);
    TRY(check_tensor(&b, "logits", logits, PK_DTYPE_BF16, 2, (int64_t[]){T, -1}));
    TRY(check_tensor(&b, "out", out, PK_DTYPE_INT32, 1, (int64_t[]){T}));
    TRY(check_grid(&b, "the vocabulary size", logits->dims[1]));
    TRY(check_writable(&b, "out", out)); /* before the partial tensors are added */
    TRY(add_input(&b, "logits", logits, split_dim(&b, 1)));
    TRY(add_argmax_outputs(&b, out));
    return commit(&b, "argmax");
}

pk_status pk_rmsnorm_linear_argmax_layer(pk_kernel *k, pk_tensor *x, pk_tensor *norm_w, pk_tensor *w,
                                         pk_tensor *logits, pk_tensor *out, float eps, int grid) {
    layer_builder b;
    TRY(begin(&b, k, "pk_rmsnorm_linear_argmax_layer", PK_TASK_RMSNORM_LINEAR_ARGMAX, grid));
    int64_t K, N;
    TRY(check_rmsnorm_input(&b, x, norm_w, eps, &K));
    TRY(check_tensor(&b, "out", out, PK_DTYPE_INT32, 1, (int64_t[]){T_of(k)}));
    TRY(check_writable(&b, "out", out)); /* before the partial tensors are added */
    TRY(linear_common_as(&b, x, K, w, logits, "logits", &N)); /* the GEMV's out [T, N], tiles of its rows */
    b.l.params.eps = eps;
    TRY(add_input(&b, "norm weight", norm_w, WHOLE));
    TRY(add_input(&b, "weight", w, split_dim(&b, 0)));
    add_absent(&b); /* rmsnorm_linear's accumulator: the views after it keep their indices */
    TRY(add_output(&b, "logits", logits, split_dim(&b, 1)));
    TRY(add_argmax_outputs(&b, out));
    return commit(&b, "rmsnorm_linear_argmax");
}
