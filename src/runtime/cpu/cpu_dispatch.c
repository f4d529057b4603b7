// SPDX-License-Identifier: Apache-2.0
/* cpu_dispatch.c — runs one task on the CPU: resolves its views (pk_abi.h) to pointers and
 * calls the task kind's kernel (src/kernels/cpu). Stateless and thread-safe.
 */
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/sample.h"
#include "runtime/cpu/cpu_runtime.h"

/* Address of the tile's first element (plain views). */
static void *tile(const pk_kernel *k, const pk_view *v) {
    PK_ASSERT(v->nseg == 1);
    const pk_tensor *t = k->tensors[v->seg_buffer[0]];
    size_t off = ((size_t)v->row0 * v->row_stride + v->col0) * pk_dtype_size(t->dtype);
    return (char *)t->data + off;
}

/* Address of the tensor's first element, ignoring the tile. */
static void *base(const pk_kernel *k, const pk_view *v) {
    PK_ASSERT(v->nseg == 1);
    return k->tensors[v->seg_buffer[0]]->data;
}

static pk_rows rows_of(const pk_kernel *k, const pk_view *v) {
    pk_rows w;
    memset(&w, 0, sizeof w);
    w.nseg = v->nseg;
    w.row_stride = v->row_stride;
    for (uint32_t s = 0; s < v->nseg; s++) {
        w.seg[s] = (const pk_bf16 *)k->tensors[v->seg_buffer[s]]->data;
        w.seg_rows[s] = v->seg_rows[s];
    }
    return w;
}

/* Rows [row0, row0 + rows) of the tile that hold tokens this step. */
static int live_rows(const pk_view *v, int n_tok) {
    int end = (int)(v->row0 + v->rows) < n_tok ? (int)(v->row0 + v->rows) : n_tok;
    return end > (int)v->row0 ? end - (int)v->row0 : 0;
}

/* Task `index`'s share [*c0, *c1) of n columns in a layer of `grid` tasks (an accumulator's sum or
 * clear): pk_split_start's tiles, as the GPU's generated code computes them. */
static void task_share(int64_t n, int grid, uint32_t index, int64_t *c0, int64_t *c1) {
    *c0 = pk_split_start(n, grid, index);
    *c1 = pk_split_start(n, grid, index + 1);
}

/* Whether the calling task is the last of `n` to finish in this step, by its completion counter
 * (pk_graph_group_counter0; it counts every such task of every step): the acq_rel increment makes
 * every other task's writes, made before its own increment, visible to the last one. */
static int last_of(_Atomic uint64_t *counter, uint64_t n) {
    return (atomic_fetch_add_explicit(counter, 1, memory_order_acq_rel) + 1) % n == 0;
}

/* The rows of this step whose request samples (pk.sample_slot, written by the step plan) get
 * their token drawn from their whole logits row instead of the argmax (kernels/sample.h). */
static void sample_rows(const pk_kernel *k, const pk_view *logits, int f, int n, int32_t *out) {
    const int32_t *slot = (const int32_t *)k->tensors[k->t_sample_slot]->data; /* [T] */
    const int32_t *params = (const int32_t *)k->tensors[k->t_sample_params]->data; /* [R, PK_SAMPLE_PARAMS] */
    const int32_t *pos = (const int32_t *)k->tensors[k->t_token_pos]->data; /* [T] */
    const pk_tensor *lt = k->tensors[logits->seg_buffer[0]];
    for (int r = f; r < n; r++)
        if (slot[r] > 0) /* the token drawn sits at the position after the row's */
            out[r] = pk_cpu_sample_row((const pk_bf16 *)lt->data + (int64_t)r * logits->row_stride, (int)lt->dims[1],
                                       params + (int64_t)(slot[r] - 1) * PK_SAMPLE_PARAMS, pos[r] + 1, out[r]);
}

/* The argmax over the task's tile of the logits into column `index` of val / idx [T, grid]; the
 * layer's last task to finish reduces the grid partials into out (ARGMAX_PARTIAL, and
 * RMSNORM_LINEAR_ARGMAX after its GEMV), then draws the sampling rows' tokens. Rows [f, n): those
 * whose logits the step needs (pk_layer.sampled_rows). */
static void argmax_tile(const pk_kernel *k, const pk_task *t, const pk_view *logits, const pk_view *val,
                        const pk_view *idx, const pk_view *out, int f, int n, uint32_t grid,
                        _Atomic uint64_t *group_counters) {
    const int64_t ls = (int64_t)logits->row_stride, ps = (int64_t)val->row_stride;
    pk_cpu_argmax_partial((pk_bf16 *)tile(k, logits) + f * ls, ls, n - f, (int)logits->col0, (int)logits->cols,
                          (float *)tile(k, val) + f * ps, (int32_t *)tile(k, idx) + f * ps, ps);
    if (last_of(group_counters + pk_graph_group_counter0(k, (int)t->layer), grid)) {
        pk_cpu_argmax_reduce((float *)base(k, val) + f * ps, (int32_t *)base(k, idx) + f * ps, ps, n - f, (int)grid,
                             (int32_t *)base(k, out) + f);
        sample_rows(k, logits, f, n, base(k, out));
    }
}

void pk_cpu_run_task(const pk_kernel *k, const pk_task *t, _Atomic uint64_t *group_counters) {
    const pk_view *v = t->views;
    const pk_layer_params *p = &k->graph.layer_params[t->layer];
    const int32_t *info = (const int32_t *)k->tensors[k->t_step_info]->data;
    int n = info[PK_STEP_INFO_NUM_TOKENS];
    /* an LM head or argmax: rows [f, n) only, the rows that draw a token (decode_step.h's plan) */
    const int f = k->layers[t->layer].sampled_rows ? info[PK_STEP_INFO_FIRST_SAMPLE] : 0;
    pk_rows w;
    switch ((pk_task_kind)t->kind) {
    case PK_TASK_EMBEDDING:
        w = rows_of(k, &v[PK_V_EMB_WEIGHT]);
        pk_cpu_embedding(base(k, &v[PK_V_EMB_TOKENS]), n, &w, (int)v[PK_V_EMB_WEIGHT].col0,
                         (int)v[PK_V_EMB_WEIGHT].cols, tile(k, &v[PK_V_EMB_OUT]),
                         (int64_t)v[PK_V_EMB_OUT].row_stride);
        break;
    case PK_TASK_RMSNORM:
        pk_cpu_rmsnorm(tile(k, &v[PK_V_NORM_X]), (int64_t)v[PK_V_NORM_X].row_stride, base(k, &v[PK_V_NORM_W]),
                       live_rows(&v[PK_V_NORM_X], n), (int)v[PK_V_NORM_X].cols, p->eps,
                       tile(k, &v[PK_V_NORM_OUT]), (int64_t)v[PK_V_NORM_OUT].row_stride);
        break;
    case PK_TASK_RMSNORM_LINEAR: {
        const pk_view *x = &v[PK_V_NL_X];
        const pk_bf16 *xp = base(k, x);
        int64_t x_stride = (int64_t)x->row_stride;
        pk_bf16 *s = NULL;
        if (v[PK_V_NL_ACC].nseg) { /* x plus the fused MLP's sum: s, and the task's share of it */
            const int K = (int)x->cols;
            s = malloc((size_t)(n > 0 ? n : 1) * (size_t)K * sizeof *s);
            PK_ASSERT(s); /* a few KB per token; no way to report it from a worker */
            pk_cpu_acc_sum(xp, x_stride, base(k, &v[PK_V_NL_ACC]), (int64_t)v[PK_V_NL_ACC].row_stride, n, K, s, K);
            int64_t c0, c1;
            task_share(K, (int)p->grid, t->index, &c0, &c1);
            pk_bf16 *sum = base(k, &v[PK_V_NL_SUM]);
            for (int r = 0; r < n; r++)
                memcpy(sum + r * (int64_t)v[PK_V_NL_SUM].row_stride + c0, s + (int64_t)r * K + c0,
                       (size_t)(c1 - c0) * sizeof *s);
            xp = s, x_stride = K;
        }
        w = rows_of(k, &v[PK_V_NL_W]);
        const int64_t os = (int64_t)v[PK_V_NL_OUT].row_stride;
        pk_cpu_rmsnorm_linear(xp + f * x_stride, x_stride, base(k, &v[PK_V_NL_NORM_W]), p->eps, n - f, (int)x->cols,
                              &w, (int)v[PK_V_NL_W].row0, (int)v[PK_V_NL_W].rows,
                              (pk_bf16 *)tile(k, &v[PK_V_NL_OUT]) + f * os, os);
        free(s);
        break;
    }
    case PK_TASK_RMSNORM_LINEAR_SWIGLU:
        w = rows_of(k, &v[PK_V_NLS_W]);
        pk_cpu_rmsnorm_linear(base(k, &v[PK_V_NLS_X]), (int64_t)v[PK_V_NLS_X].row_stride,
                              base(k, &v[PK_V_NLS_NORM_W]), p->eps, n, (int)v[PK_V_NLS_X].cols, &w,
                              (int)v[PK_V_NLS_W].row0, (int)v[PK_V_NLS_W].rows, tile(k, &v[PK_V_NLS_GU]),
                              (int64_t)v[PK_V_NLS_GU].row_stride);
        pk_cpu_swiglu_blocks(tile(k, &v[PK_V_NLS_GU]), (int64_t)v[PK_V_NLS_GU].row_stride, n,
                             (int)v[PK_V_NLS_OUT].cols, p->swiglu_block, tile(k, &v[PK_V_NLS_OUT]),
                             (int64_t)v[PK_V_NLS_OUT].row_stride);
        break;
    case PK_TASK_LINEAR: {
        const int64_t xs = (int64_t)v[PK_V_LIN_X].row_stride, os = (int64_t)v[PK_V_LIN_OUT].row_stride;
        w = rows_of(k, &v[PK_V_LIN_W]);
        pk_cpu_linear((pk_bf16 *)base(k, &v[PK_V_LIN_X]) + f * xs, xs, n - f, (int)v[PK_V_LIN_X].cols, &w,
                      (int)v[PK_V_LIN_W].row0, (int)v[PK_V_LIN_W].rows, NULL, 0,
                      (pk_bf16 *)tile(k, &v[PK_V_LIN_OUT]) + f * os, os);
        break;
    }
    case PK_TASK_LINEAR_RESIDUAL:
        w = rows_of(k, &v[PK_V_LR_W]);
        pk_cpu_linear(base(k, &v[PK_V_LR_X]), (int64_t)v[PK_V_LR_X].row_stride, n, (int)v[PK_V_LR_X].cols, &w,
                      (int)v[PK_V_LR_W].row0, (int)v[PK_V_LR_W].rows, tile(k, &v[PK_V_LR_RES]),
                      (int64_t)v[PK_V_LR_RES].row_stride, tile(k, &v[PK_V_LR_OUT]),
                      (int64_t)v[PK_V_LR_OUT].row_stride);
        if (v[PK_V_LR_CLEAR].nseg) { /* the task's share of the accumulator, zero for the next step */
            const pk_view *c = &v[PK_V_LR_CLEAR];
            int64_t c0, c1;
            task_share(c->cols, (int)p->grid, t->index, &c0, &c1);
            int64_t *acc = base(k, c);
            for (int r = 0; r < n; r++)
                for (int64_t j = c0; j < c1; j++)
                    atomic_store_explicit((_Atomic int64_t *)(acc + r * (int64_t)c->row_stride + j), 0,
                                          memory_order_relaxed);
        }
        break;
    case PK_TASK_RMSNORM_SWIGLU_DOWN: {
        /* the GEMV into the task's gu columns, silu · mul into its act columns, then down's
         * partial sums from its column block of down_proj ([N][ib]: the tile's last ib rows) */
        const pk_view *sc = &v[PK_V_MLP_SCRATCH];
        const int ib = p->swiglu_block;
        const int64_t ss = (int64_t)sc->row_stride;
        pk_bf16 *gu = tile(k, sc);
        w = rows_of(k, &v[PK_V_MLP_W]);
        PK_ASSERT(v[PK_V_MLP_W].rows == 3u * (uint32_t)ib && sc->cols == 3u * (uint32_t)ib);
        pk_cpu_rmsnorm_linear(base(k, &v[PK_V_MLP_X]), (int64_t)v[PK_V_MLP_X].row_stride, base(k, &v[PK_V_MLP_NORM_W]),
                              p->eps, n, (int)v[PK_V_MLP_X].cols, &w, (int)v[PK_V_MLP_W].row0, 2 * ib, gu, ss);
        pk_cpu_swiglu_blocks(gu, ss, n, ib, ib, gu + 2 * ib, ss);
        const pk_view *acc = &v[PK_V_MLP_ACC];
        pk_cpu_mlp_down_add(gu + 2 * ib, ss, n, ib, pk_rows_get(&w, v[PK_V_MLP_W].row0 + 2u * (uint32_t)ib),
                            (int)acc->cols, base(k, acc), (int64_t)acc->row_stride);
        break;
    }
    case PK_TASK_LINEAR_SPLITK_RESIDUAL: {
        const pk_view *acc = &v[PK_V_LSK_ACC];
        pk_cpu_linear_splitk_add(tile(k, &v[PK_V_LSK_X]), (int64_t)v[PK_V_LSK_X].row_stride, n,
                                 (int)v[PK_V_LSK_X].cols, tile(k, &v[PK_V_LSK_W]), (int64_t)v[PK_V_LSK_W].row_stride,
                                 (int)v[PK_V_LSK_W].rows, base(k, acc), (int64_t)acc->row_stride);
        /* the layer's last task to finish writes out */
        if (last_of(group_counters + pk_graph_group_counter0(k, (int)t->layer), p->grid))
            pk_cpu_linear_splitk_finish(n, (int)v[PK_V_LSK_W].rows, base(k, acc), (int64_t)acc->row_stride,
                                        base(k, &v[PK_V_LSK_RES]), (int64_t)v[PK_V_LSK_RES].row_stride,
                                        base(k, &v[PK_V_LSK_OUT]), (int64_t)v[PK_V_LSK_OUT].row_stride);
        break;
    }
    case PK_TASK_SILU_MUL:
        pk_cpu_silu_mul(base(k, &v[PK_V_SM_X]), (int64_t)v[PK_V_SM_X].row_stride, n, (int)v[PK_V_SM_X].cols / 2,
                        (int)v[PK_V_SM_OUT].col0, (int)v[PK_V_SM_OUT].cols, tile(k, &v[PK_V_SM_OUT]),
                        (int64_t)v[PK_V_SM_OUT].row_stride);
        break;
    case PK_TASK_SILU_MUL_LINEAR_RESIDUAL:
        w = rows_of(k, &v[PK_V_SML_W]);
        pk_cpu_silu_mul_linear(base(k, &v[PK_V_SML_X]), (int64_t)v[PK_V_SML_X].row_stride, n,
                               (int)v[PK_V_SML_X].cols / 2, &w, (int)v[PK_V_SML_W].row0, (int)v[PK_V_SML_W].rows,
                               tile(k, &v[PK_V_SML_RES]), (int64_t)v[PK_V_SML_RES].row_stride,
                               tile(k, &v[PK_V_SML_OUT]), (int64_t)v[PK_V_SML_OUT].row_stride);
        break;
    case PK_TASK_ATTENTION:
    case PK_TASK_ATTENTION_PARTIAL: {
        pk_attn_step s = {
            .n_tok = n,
            .token_pos = base(k, &v[PK_V_ATT_TOKEN_POS]),
            .token_req = base(k, &v[PK_V_ATT_TOKEN_REQ]),
            .page_table = base(k, &v[PK_V_ATT_PAGE_TABLE]),
            .pages_per_req = k->pages_per_req,
            .page_size = k->cfg.page_size,
        };
        const pk_bf16 *qn = v[PK_V_ATT_Q_NORM].nseg ? base(k, &v[PK_V_ATT_Q_NORM]) : NULL;
        const pk_bf16 *kn = v[PK_V_ATT_K_NORM].nseg ? base(k, &v[PK_V_ATT_K_NORM]) : NULL;
        if (t->kind == PK_TASK_ATTENTION) {
            int nkv = p->num_kv_heads / (int)p->grid;
            pk_cpu_attention(p, &s, (int)t->index * nkv, nkv, base(k, &v[PK_V_ATT_QKV]),
                             (int64_t)v[PK_V_ATT_QKV].row_stride, base(k, &v[PK_V_ATT_K_CACHE]),
                             base(k, &v[PK_V_ATT_V_CACHE]), qn, kn, base(k, &v[PK_V_ATT_OUT]),
                             (int64_t)v[PK_V_ATT_OUT].row_stride);
        } else { /* task index = KV-head group · kv_splits + split; its partial tile is its own */
            const int S = p->kv_splits, groups = (int)p->grid / S, nkv = p->num_kv_heads / groups;
            const int group = (int)t->index / S, nheads = p->num_q_heads / groups, D = p->head_dim;
            const int R = PK_ATTN_DIRECT_ROWS(S, p->num_q_heads / p->num_kv_heads);
            if (n > 1 && n >= R) {
                /* A step of many rows (pk_abi.h): the partial tensor has R rows only, so split 0
                 * takes the group alone, R rows at a time through the group's partial tiles: every
                 * split's partial, then the fold, as the split path does row by row, so a row's bits
                 * do not depend on the step's rows. The counter stays untouched. */
                if ((int)t->index % S != 0) break;
                const pk_bf16 *qkv = base(k, &v[PK_V_ATT_QKV]);
                float *part = (float *)base(k, &v[PK_V_ATT_OUT]) + (int64_t)group * S * nheads * (D + 2);
                pk_bf16 *out = (pk_bf16 *)base(k, &v[PK_V_ATTP_COMBINED]) + (int64_t)group * nheads * D;
                const int64_t qs = (int64_t)v[PK_V_ATT_QKV].row_stride, ps = (int64_t)v[PK_V_ATT_OUT].row_stride;
                const int64_t os = (int64_t)v[PK_V_ATTP_COMBINED].row_stride;
                for (int r0 = 0; r0 < n; r0 += R) {
                    pk_attn_step c = s;
                    c.n_tok = n - r0 < R ? n - r0 : R;
                    c.token_pos += r0;
                    c.token_req += r0;
                    for (int sp = 0; sp < S; sp++)
                        pk_cpu_attention_partial(p, &c, group * nkv, nkv, sp, S, qkv + r0 * qs, qs,
                                                 base(k, &v[PK_V_ATT_K_CACHE]), base(k, &v[PK_V_ATT_V_CACHE]), qn, kn,
                                                 part + (int64_t)sp * nheads * (D + 2), ps);
                    pk_cpu_attention_combine(c.n_tok, nheads, D, S, part, ps, out + r0 * os, os);
                }
                break;
            }
            pk_cpu_attention_partial(p, &s, group * nkv, nkv, (int)t->index % S, S, base(k, &v[PK_V_ATT_QKV]),
                                     (int64_t)v[PK_V_ATT_QKV].row_stride, base(k, &v[PK_V_ATT_K_CACHE]),
                                     base(k, &v[PK_V_ATT_V_CACHE]), qn, kn, tile(k, &v[PK_V_ATT_OUT]),
                                     (int64_t)v[PK_V_ATT_OUT].row_stride);
            /* the group's last task to finish folds its S partial tiles */
            if (last_of(group_counters + pk_graph_group_counter0(k, (int)t->layer) + group, (uint64_t)S)) {
                const float *part = (const float *)base(k, &v[PK_V_ATT_OUT]) + (int64_t)group * S * nheads * (D + 2);
                pk_bf16 *out = (pk_bf16 *)base(k, &v[PK_V_ATTP_COMBINED]) + (int64_t)group * nheads * D;
                pk_cpu_attention_combine(n, nheads, D, S, part, (int64_t)v[PK_V_ATT_OUT].row_stride, out,
                                         (int64_t)v[PK_V_ATTP_COMBINED].row_stride);
            }
        }
        break;
    }
    case PK_TASK_ARGMAX_PARTIAL:
        argmax_tile(k, t, &v[PK_V_AMP_LOGITS], &v[PK_V_AMP_VAL], &v[PK_V_AMP_IDX], &v[PK_V_AMP_OUT], f, n, p->grid,
                    group_counters);
        break;
    case PK_TASK_RMSNORM_LINEAR_ARGMAX: { /* the task's logits tile, then its argmax */
        const int64_t xs = (int64_t)v[PK_V_NLA_X].row_stride, ls = (int64_t)v[PK_V_NLA_LOGITS].row_stride;
        w = rows_of(k, &v[PK_V_NLA_W]);
        pk_cpu_rmsnorm_linear((pk_bf16 *)base(k, &v[PK_V_NLA_X]) + f * xs, xs, base(k, &v[PK_V_NLA_NORM_W]), p->eps,
                              n - f, (int)v[PK_V_NLA_X].cols, &w, (int)v[PK_V_NLA_W].row0, (int)v[PK_V_NLA_W].rows,
                              (pk_bf16 *)tile(k, &v[PK_V_NLA_LOGITS]) + f * ls, ls);
        argmax_tile(k, t, &v[PK_V_NLA_LOGITS], &v[PK_V_NLA_VAL], &v[PK_V_NLA_IDX], &v[PK_V_NLA_OUT], f, n, p->grid,
                    group_counters);
        break;
    }
    case PK_TASK_ARGMAX_REDUCE:
    case PK_TASK_BEGIN:
    case PK_TASK_TERMINATE:
    case PK_TASK_KIND_COUNT:
        PK_ASSERT(!"not a compute task");
    }
}
