// SPDX-License-Identifier: Apache-2.0
/* codegen.c — kernel.cu from the compiled task graph.
 *
 * The generated file is meant to be read: a header naming pk's version, the task ABI and the
 * graph hash, the buffer list, the task / event / schedule / layer tables as global constant
 * arrays, and one dispatch `case` per layer (a comment names it) that calls the layer kind's
 * device function with its shapes as literals. A task's tile offset is linear in its index
 * (build.c's make_view), so the table holds only (layer, index, events). Views are resolved
 * here: every buffer is a tensor id (a fused tensor is one buffer in fused row order), so weights
 * are plain one-segment rows on the GPU. Calls go through dispatch.cuh's per-kind call-throughs,
 * so nvcc compiles each kind's kernel once (its time does not grow with the model's depth).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention_decode_layout.h" /* PK_ATTD_G_MAX */
#include "kernels/stage_layout.h" /* PK_WSTAGE_BYTES */
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/cuda/cuda_internal.h"
#include "runtime/runtime.h"

/* ---- text buffer ---- */

void pk_sb_append(pk_strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void pk_sb_printf(pk_strbuf *b, const char *fmt, ...) {
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        pk_sb_append(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    pk_sb_append(b, big, (size_t)n);
    free(big);
}

void pk_sb_free(pk_strbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- buffers ---- */

int pk_cuda_view_tensor(const pk_kernel *k, const pk_layer *L, int v) {
    (void)k;
    if (v < L->ninputs) return L->inputs[v];
    v -= L->ninputs;
    return v < L->noutputs ? L->outputs[v] : -1;
}

pk_status pk_cuda_plan_buffers(pk_kernel *k, pk_cuda_buffers *b) {
    memset(b, 0, sizeof *b);
    b->n = k->ntensors;
    b->bytes = calloc((size_t)b->n, sizeof *b->bytes);
    b->kind = calloc((size_t)b->n, sizeof *b->kind);
    if (!b->bytes || !b->kind) {
        pk_cuda_buffers_free(b);
        return pk_fail(k, PK_ERR_NO_MEMORY, "pk_compile: out of memory planning GPU buffers");
    }
    pk_graph_buffer_kinds(k, b->kind); /* the graph's plan: PK_BUFFER_* are PK_CUDA_BUF_*'s values */
    for (int id = 0; id < b->n; id++) {
        if (b->kind[id] == PK_CUDA_BUF_NONE) continue;
        const pk_tensor *t = k->tensors[id];
        b->bytes[id] = (uint64_t)pk_tensor_numel(t) * pk_dtype_size(t->dtype);
        if (b->kind[id] == PK_CUDA_BUF_WEIGHT) b->weights += b->bytes[id];
        else if (b->kind[id] == PK_CUDA_BUF_KV) b->kv += b->bytes[id];
        else b->work += b->bytes[id];
    }
    return PK_OK;
}

void pk_cuda_buffers_free(pk_cuda_buffers *b) {
    free(b->bytes);
    free(b->kind);
    memset(b, 0, sizeof *b);
}

/* ---- views of one layer ---- */

typedef struct gview {
    int id;              /* buffer (tensor id), -1: absent */
    const char *ctype;   /* element type */
    uint64_t rs;         /* row stride, elements */
    uint32_t rows, cols; /* tile */
    uint32_t trows;      /* rows of the whole tensor */
    int64_t row0, col0;  /* task 0's */
    int64_t drow0, dcol0; /* per task index (equal tiles) */
    /* Uneven tiles (the linear family's grids that do not divide N: build.c's make_view): task
     * idx's rows (split_rows) or columns start at idx · split_ext / split_parts, and its extent
     * is the next task's start less its own; rows / cols above are then the largest tile's. */
    int split_rows, split_cols;
    int64_t split_ext;
    int split_parts;
} gview;

static const char *ctype_of(pk_dtype d) {
    switch (d) {
    case PK_DTYPE_BF16: return "pk_bf16";
    case PK_DTYPE_FP16: return "uint16_t";
    case PK_DTYPE_FP32: return "float";
    case PK_DTYPE_INT32: return "int32_t";
    case PK_DTYPE_INT64: return "int64_t";
    }
    return "char";
}

static gview layer_view(const pk_kernel *k, const pk_layer *L, int v) {
    gview g;
    memset(&g, 0, sizeof g);
    g.id = pk_cuda_view_tensor(k, L, v);
    if (g.id < 0) return g;
    const pk_taskgraph *G = &k->graph;
    const pk_view *v0 = &G->tasks[L->first_task].views[v];
    const pk_tensor *t = k->tensors[g.id];
    g.ctype = ctype_of(t->dtype);
    g.rs = v0->row_stride;
    g.rows = v0->rows;
    g.cols = v0->cols;
    g.trows = (uint32_t)(t->ndim >= 2 ? t->dims[0] : 1);
    g.row0 = v0->row0;
    g.col0 = v0->col0;
    const pk_split sp = v < L->ninputs ? L->in_split[v] : L->out_split[v - L->ninputs];
    const int64_t ext = sp.dim == 0 && t->ndim >= 2 ? (int64_t)g.trows : (int64_t)v0->row_stride; /* 1-D: numel */
    if (L->grid > 1 && sp.dim >= 0 && sp.dim <= 1 && ext % sp.parts != 0) {
        /* build.c tiles by pk_split_start: check every tile against the expression emitted */
        g.split_rows = sp.dim == 0 && t->ndim >= 2, g.split_cols = !g.split_rows;
        g.split_ext = ext, g.split_parts = sp.parts;
        for (int i = 0; i < L->grid; i++) {
            const pk_view *vi = &G->tasks[L->first_task + i].views[v];
            const int64_t lo = pk_split_start(ext, sp.parts, i), n = pk_split_start(ext, sp.parts, i + 1) - lo;
            PK_ASSERT(g.split_rows ? (vi->row0 == lo && vi->rows == n && vi->col0 == g.col0 && vi->cols == g.cols)
                                   : (vi->col0 == lo && vi->cols == n && vi->row0 == g.row0 && vi->rows == g.rows));
            if (g.split_rows && vi->rows > g.rows) g.rows = vi->rows;
            if (g.split_cols && vi->cols > g.cols) g.cols = vi->cols;
        }
        return g;
    }
    if (L->grid > 1) {
        const pk_view *v1 = &G->tasks[L->first_task + 1].views[v];
        g.drow0 = (int64_t)v1->row0 - g.row0;
        g.dcol0 = (int64_t)v1->col0 - g.col0;
    }
    /* build.c tiles by index: offsets are linear in it, and every tile has the same shape. */
    for (int i = 0; i < L->grid; i++) {
        const pk_view *vi = &G->tasks[L->first_task + i].views[v];
        PK_ASSERT((int64_t)vi->row0 == g.row0 + i * g.drow0 && (int64_t)vi->col0 == g.col0 + i * g.dcol0);
        PK_ASSERT(vi->rows == g.rows && vi->cols == g.cols && vi->row_stride == g.rs);
    }
    return g;
}

/* Whether g's tiles are uneven (their offsets and extents are the split's expressions). */
static int uneven(const gview *g) { return g->split_rows || g->split_cols; }

/* "(const T *)B[id]" */
static const char *base_expr(const gview *g, int is_const, char *buf, size_t len) {
    if (g->id < 0) {
        snprintf(buf, len, "nullptr");
        return buf;
    }
    snprintf(buf, len, "(%s%s *)B[%d]", is_const ? "const " : "", g->ctype, g->id);
    return buf;
}

/* "(T *)B[id] + off + idx * step", or for uneven tiles "(T *)B[id] + off + idx * E / G * rs" (rows;
 * columns: without "* rs"): the task's first element. */
static const char *tile_expr(const gview *g, int is_const, char *buf, size_t len) {
    int64_t off = g->row0 * (int64_t)g->rs + g->col0, step = g->drow0 * (int64_t)g->rs + g->dcol0;
    int n = snprintf(buf, len, "((%s%s *)B[%d]", is_const ? "const " : "", g->ctype, g->id);
    if (uneven(g)) off = g->split_rows ? g->col0 : g->row0 * (int64_t)g->rs;
    if (off) n += snprintf(buf + n, len - (size_t)n, " + %" PRId64, off);
    if (uneven(g)) {
        n += snprintf(buf + n, len - (size_t)n, " + idx * %" PRId64 " / %d", g->split_ext, g->split_parts);
        if (g->split_rows) n += snprintf(buf + n, len - (size_t)n, " * %" PRIu64, g->rs);
    } else if (step) {
        n += snprintf(buf + n, len - (size_t)n, " + idx * %" PRId64, step);
    }
    snprintf(buf + n, len - (size_t)n, ")");
    return buf;
}

/* "(int)(r0 + idx * d)" for a task's row0 or col0 */
static const char *index_expr(int64_t first, int64_t step, char *buf, size_t len) {
    if (step == 0)
        snprintf(buf, len, "%" PRId64, first);
    else if (first == 0)
        snprintf(buf, len, "(int)(idx * %" PRId64 ")", step);
    else
        snprintf(buf, len, "(int)(%" PRId64 " + idx * %" PRId64 ")", first, step);
    return buf;
}

/* A task's first index along one dimension of g: index_expr's (first + idx · step), or
 * "(int)(idx * E / G)" when that dimension is split unevenly (pk_split_start's expression). */
static const char *start_expr(const gview *g, int split, int64_t first, int64_t step, char *buf, size_t len) {
    if (split) {
        snprintf(buf, len, "(int)(idx * %" PRId64 " / %d)", g->split_ext, g->split_parts);
        return buf;
    }
    return index_expr(first, step, buf, len);
}

/* A task's extent along one dimension of g: the literal n, or "(int)((idx + 1) * E / G - idx * E / G)"
 * when that dimension is split unevenly. */
static const char *extent_expr(const gview *g, int split, uint32_t n, char *buf, size_t len) {
    if (split)
        snprintf(buf, len, "(int)((idx + 1) * %" PRId64 " / %d - idx * %" PRId64 " / %d)", g->split_ext,
                 g->split_parts, g->split_ext, g->split_parts);
    else
        snprintf(buf, len, "%u", n);
    return buf;
}

/* A task's first row / its rows of g; its first column / its columns. */
static const char *row0_expr(const gview *g, char *buf, size_t len) {
    return start_expr(g, g->split_rows, g->row0, g->drow0, buf, len);
}
static const char *rows_expr(const gview *g, char *buf, size_t len) {
    return extent_expr(g, g->split_rows, g->rows, buf, len);
}
static const char *col0_expr(const gview *g, char *buf, size_t len) {
    return start_expr(g, g->split_cols, g->col0, g->dcol0, buf, len);
}
static const char *cols_expr(const gview *g, char *buf, size_t len) {
    return extent_expr(g, g->split_cols, g->cols, buf, len);
}

/* "(int)(idx * n / grid), (int)((idx + 1) * n / grid)": task idx's share [c0, c1) of n columns
 * (pk_split_start's expression: an accumulator's sum or clear, in the tasks' shares). */
static const char *share_args(uint32_t n, int grid, char *buf, size_t len) {
    snprintf(buf, len, "(int)((long long)idx * %u / %d), (int)((long long)(idx + 1) * %u / %d)", n, grid, n, grid);
    return buf;
}

/* A float literal that nvcc reads back to the same bits. */
static const char *float_lit(float f, char *buf, size_t len) {
    if (isnan(f))
        snprintf(buf, len, "__builtin_nanf(\"\")");
    else if (isinf(f))
        snprintf(buf, len, "%s__builtin_huge_valf()", f < 0 ? "-" : "");
    else
        snprintf(buf, len, "%af /* %g */", (double)f, (double)f);
    return buf;
}

/* The cases fill one `w` (and one `s`, below) declared at the top of the dispatch function: nvcc
 * gave every case's own local its own stack slot (their addresses go to the __noinline__
 * call-throughs): a 10.8 KB stack frame per thread for the 36 layers of Qwen3-8B (ptxas; 144
 * bytes now). The driver sizes local memory for every thread the GPU can hold, so that frame
 * would hold ~2.9 GB on an H200 (inferred from the sizes, not measured). */
static void emit_rows(pk_strbuf *o, const gview *w) {
    pk_sb_printf(o, "        w = pk_gen_rows(B[%d], %uu, %" PRIu64 "ull);\n", w->id, w->trows, w->rs);
}

/* The comment naming a layer: "L3.rmsnorm_linear (grid 4): h0, attn_norm0, wqkv0 → qkv0". */
static void emit_layer_comment(pk_strbuf *o, const pk_kernel *k, const pk_layer *L) {
    pk_sb_printf(o, "    case %d: { /* %s (grid %d): ", (int)(L - k->layers), L->name, L->grid);
    int first = 1;
    for (int i = 0; i < L->ninputs; i++) {
        if (L->inputs[i] < 0) continue;
        const pk_tensor *t = k->tensors[L->inputs[i]];
        char dims[96];
        pk_sb_printf(o, "%s%s %s", first ? "" : ", ", t->name, pk_dims_str(t->dims, t->ndim, dims, sizeof dims));
        first = 0;
    }
    pk_sb_printf(o, " -> ");
    for (int i = 0; i < L->noutputs; i++)
        pk_sb_printf(o, "%s%s", i ? ", " : "", k->tensors[L->outputs[i]]->name);
    pk_sb_printf(o, " */\n");
}

/* RoPE pairs per lane for the layer's head size: attention.cuh's pk_att_pairs. */
static int attn_pairs(const pk_layer_params *p) {
    int D = p->head_dim;
    return D <= 64 ? 1 : D <= 128 ? 2 : D <= 256 ? 4 : 8;
}

/* Query heads per KV head as a compile-time argument of the decode attention (0: unknown, decided
 * at run time): the staged path then compiles only the code its group size takes (the tensor-core
 * or the scalar block loop, attention_decode.cuh), not both in one function: less code, and at
 * the 128-register cap (dynamic mode's kernel) both loops together spill. */
static int attn_group(const pk_layer_params *p) {
    const int Hq = p->num_q_heads, Hkv = p->num_kv_heads;
    return Hkv > 0 && Hq % Hkv == 0 && Hq / Hkv <= PK_ATTD_G_MAX ? Hq / Hkv : 0;
}

/* Splits of an attention layer's KV length (1: not split). */
static int attn_splits(const pk_layer *L) {
    return L->kind == PK_TASK_ATTENTION_PARTIAL && L->params.kv_splits > 1 ? L->params.kv_splits : 1;
}

/* "(int)(idx / S * nkv), nkv, (int)(idx % S), S": the KV heads and split of a task (task index =
 * KV-head group · S + split). */
static const char *attn_task_expr(const pk_layer *L, int nkv, char *buf, size_t len) {
    int S = attn_splits(L);
    snprintf(buf, len, "(int)(idx / %d * %d), %d, (int)(idx %% %d), %d", S, nkv, nkv, S, S);
    return buf;
}

/* The attention call's pk_attn_step `s`; returns the KV heads per task. */
static int emit_attn_step(pk_strbuf *o, const pk_kernel *k, const pk_layer *L, const gview *v) {
    char a[160];
    pk_sb_printf(o, "        s.n_tok = n_tok;\n");
    pk_sb_printf(o, "        s.token_pos = %s;\n", base_expr(&v[PK_V_ATT_TOKEN_POS], 1, a, sizeof a));
    pk_sb_printf(o, "        s.token_req = %s;\n", base_expr(&v[PK_V_ATT_TOKEN_REQ], 1, a, sizeof a));
    pk_sb_printf(o, "        s.page_table = %s;\n", base_expr(&v[PK_V_ATT_PAGE_TABLE], 1, a, sizeof a));
    pk_sb_printf(o, "        s.pages_per_req = %d;\n        s.page_size = %d;\n", k->pages_per_req, k->cfg.page_size);
    return L->params.num_kv_heads / (L->grid / attn_splits(L));
}

/* An attention case's shared memory: where its stage put the layout (wst_off: at smem, or above
 * the task before's bytes when that task's iteration staged it, runtime.cuh pk_att_early), or
 * smem for the general kernel (wst_rows 0). */
#define ATT_OFF "(wst_rows > 0 ? wst_off : 0u)"
#define ATT_SMEM "smem + " ATT_OFF

/* The pre-wait case of an attention layer (pk_gen_stage_task): stage a decode row's KV cache. */
static void emit_stage_case(pk_strbuf *o, const pk_kernel *k, int l) {
    const pk_layer *L = &k->layers[l];
    gview v[PK_TASK_MAX_VIEWS];
    for (int i = 0; i < L->ninputs + L->noutputs; i++) v[i] = layer_view(k, L, i);
    char a[160], b[160], t[96];
    pk_sb_printf(o, "    case %d: { /* %s */\n", l, L->name);
    /* n_tok is read here, not for every task that reaches pk_gen_stage_task */
    pk_sb_printf(o, "        const int n_tok = __ldcg((const int *)B[%d] + PK_STEP_INFO_NUM_TOKENS);\n", k->t_step_info);
    int nkv = emit_attn_step(o, k, L, v);
    pk_sb_printf(o, "        return pk_gen_call_attention_stage<%d>(&pk_gen_layers[%d], pk_gen_inv_freq_%d, &s, %s, ",
                 attn_pairs(&L->params), l, l, attn_task_expr(L, nkv, t, sizeof t));
    pk_sb_printf(o, "%s, %s, ", base_expr(&v[PK_V_ATT_K_CACHE], 0, a, sizeof a),
                 base_expr(&v[PK_V_ATT_V_CACHE], 0, b, sizeof b));
    pk_sb_printf(o, "%s, %s, smem, smem_bytes);\n    }\n", base_expr(&v[PK_V_ATT_Q_NORM], 1, a, sizeof a),
                 base_expr(&v[PK_V_ATT_K_NORM], 1, b, sizeof b));
}

/* What schedule entry i's next entry on its worker is, for what the worker stages during entry
 * i: 1 (PK_NEXT_ATT) an attention task that waits on the layer of entry i's task (the qkv tile
 * before it: runtime.cuh pk_att_early stages that attention's KV cache during the tile), 3
 * (PK_NEXT_ATT_SPLIT) the same with the attention split over the KV length (staged early only
 * with PK_ATT_EARLY_SPLIT); 2
 * (PK_NEXT_MLP) a RMSNORM_SWIGLU_DOWN task after a task of another kind (runtime.cuh
 * pk_stage_mlp_next); 0 anything else. A table beside pk_gen_sched_tasks, read with it, so the
 * worker loop adds no dependent load (a load of the next task's entry and its layer's kind cost
 * ~0.6 us per GEMV layer on the Qwen3-0.6B shape: the worker whose task ends a layer runs that
 * code on the critical path). */
static void emit_sched_next(pk_strbuf *o, const pk_kernel *k) {
    const pk_taskgraph *g = &k->graph;
    pk_sb_printf(o, "__device__ const uint8_t pk_gen_sched_next[%d] = {", g->ntasks > 1 ? g->ntasks - 1 : 1);
    if (g->ntasks <= 1) pk_sb_printf(o, "0");
    /* the workers' ranges are consecutive and in order: entries come out in index order */
    for (int w = 0; w < g->nworkers && g->ntasks > 1; w++)
        for (uint32_t i = g->sched_offset[w]; i < g->sched_offset[w + 1]; i++) {
            int flag = 0;
            if (i + 1 < g->sched_offset[w + 1]) {
                const pk_task *t = &g->tasks[g->sched_tasks[i]], *next = &g->tasks[g->sched_tasks[i + 1]];
                const int kind = k->layers[next->layer].kind;
                if ((kind == PK_TASK_ATTENTION || kind == PK_TASK_ATTENTION_PARTIAL) &&
                    t->trig_event < (uint32_t)g->nevents) {
                    const pk_event *e = &g->events[t->trig_event];
                    flag = e->first_task < e->last_task && g->tasks[e->first_task].layer == next->layer;
                    /* only an unsplit attention stages early (runtime.cuh's pk_att_early) */
                    if (flag && attn_splits(&k->layers[next->layer]) > 1) flag = 0;
                } else if (kind == PK_TASK_RMSNORM_SWIGLU_DOWN && t->layer < (uint32_t)k->nlayers &&
                           k->layers[t->layer].kind != PK_TASK_RMSNORM_SWIGLU_DOWN) {
                    flag = 2;
                }
            }
            pk_sb_printf(o, "%s%s%d", i ? "," : "", i % 32 == 0 ? "\n    " : " ", flag);
        }
    pk_sb_printf(o, "\n};\n\n");
}

/* The argmax over the task's logits tile into column idx of val / idx, then the layer's completion
 * counter: its last task reduces the partials into out (ARGMAX_PARTIAL; RMSNORM_LINEAR_ARGMAX after
 * its GEMV wrote the tile). */
static void emit_argmax_call(pk_strbuf *o, const pk_kernel *k, int l, const gview *logits, const gview *val,
                             const gview *idx, const gview *out) {
    char a[160], b[160], c[160], d[160];
    /* the tile's first vocabulary index and its width (uneven tiles: the task's own, which the
     * linear family's grids allow: tiles of ⌊V/grid⌋ or ⌈V/grid⌉ logits) */
    pk_sb_printf(o, "        pk_gen_call_argmax_partial(%s, %" PRIu64 ", n_tok, %s, ", tile_expr(logits, 1, a, sizeof a),
                 logits->rs, col0_expr(logits, b, sizeof b));
    pk_sb_printf(o, "%s, ", cols_expr(logits, b, sizeof b));
    pk_sb_printf(o, "%s, %s, %" PRIu64 ", idx, %d, ", base_expr(val, 0, c, sizeof c), base_expr(idx, 0, d, sizeof d),
                 val->rs, k->layers[l].grid);
    pk_sb_printf(o, "%s, pk_group_ctrs(S) + %d, f, ", base_expr(out, 0, a, sizeof a), pk_graph_group_counter0(k, l));
    /* the sampling rows' draw (sample.cuh): the logits' first column and width, the state tensors */
    pk_sb_printf(o, "%s, %" PRId64 ", (const int32_t *)B[%d], (const int32_t *)B[%d], (const int32_t *)B[%d], smem);\n",
                 base_expr(logits, 1, b, sizeof b), k->tensors[logits->id]->dims[1], k->t_sample_slot, k->t_sample_params,
                 k->t_token_pos);
}

/* The pk_lin_chunk argument of a linear-family layer of N output columns (linear.cuh): in steps of
 * more rows the m tasks that signal one event share that chunk's outputs as 2-D tiles. Only where
 * every task of the layer waits on the same event (each then has every input a tile of its chunk
 * reads), the chunks are runs of m > 1 consecutive tasks and `ok` (the kind's own conditions);
 * else each task keeps its own tile. */
static const char *chunk_arg(const pk_kernel *k, const pk_layer *L, int64_t N, int ok, int unit, char *buf,
                             size_t len) {
    const pk_task *t = &k->graph.tasks[L->first_task];
    int m = 1;
    while (m < L->grid && t[m].trig_event == t[0].trig_event) m++;
    ok = ok && m > 1 && L->grid % m == 0;
    for (int i = 0; ok && i < L->grid; i++)
        ok = t[i].dep_event == t[0].dep_event && t[i].trig_event == t[i - i % m].trig_event &&
             (i % m != 0 || i == 0 || t[i].trig_event != t[i - 1].trig_event);
    if (ok)
        snprintf(buf, len, "pk_lin_chunk_of(idx, %" PRId64 ", %d, %d, %d)", N, L->grid, m, unit);
    else
        snprintf(buf, len, "PK_LIN_OWN_TILE");
    return buf;
}

/* A sampled-rows layer's (pk_layer.sampled_rows) row-indexed operand: expr moved down f rows of
 * stride rs; other layers' as is. */
static const char *from_f(const pk_layer *L, const char *expr, uint64_t rs, char *buf, size_t len) {
    if (!L->sampled_rows) return expr;
    snprintf(buf, len, "(%s + (int64_t)f * %" PRIu64 ")", expr, rs);
    return buf;
}

static void emit_case(pk_strbuf *o, const pk_kernel *k, int l) {
    const pk_layer *L = &k->layers[l];
    const pk_layer_params *p = &L->params;
    gview v[PK_TASK_MAX_VIEWS];
    for (int i = 0; i < L->ninputs + L->noutputs; i++) v[i] = layer_view(k, L, i);
    char a[160], b[160], c[160], d[160], e[96], g[96], fa[200], fd[200];
    emit_layer_comment(o, k, L);
    /* the LM head and the argmax: rows [f, n_tok), those that draw a token (decode_step.h) */
    const char *nt = L->sampled_rows ? "n_tok - f" : "n_tok";
    if (L->sampled_rows)
        pk_sb_printf(o, "        const int f = __ldcg((const int *)B[%d] + PK_STEP_INFO_FIRST_SAMPLE);\n", k->t_step_info);
    switch (L->kind) {
    case PK_TASK_EMBEDDING:
        emit_rows(o, &v[PK_V_EMB_WEIGHT]);
        pk_sb_printf(o, "        pk_gen_call_embedding(%s, n_tok, &w, %s, %u, %s, %" PRIu64 ", smem);\n",
                     base_expr(&v[PK_V_EMB_TOKENS], 1, a, sizeof a),
                     index_expr(v[PK_V_EMB_WEIGHT].col0, v[PK_V_EMB_WEIGHT].dcol0, b, sizeof b),
                     v[PK_V_EMB_WEIGHT].cols, tile_expr(&v[PK_V_EMB_OUT], 0, c, sizeof c), v[PK_V_EMB_OUT].rs);
        break;
    case PK_TASK_RMSNORM:
        pk_sb_printf(o,
                     "        pk_gen_call_rmsnorm(%s, %" PRIu64 ", %s, pk_gen_live_rows(%s, %u, n_tok), %u, %s, %s, %" PRIu64
                     ", smem);\n",
                     tile_expr(&v[PK_V_NORM_X], 1, a, sizeof a), v[PK_V_NORM_X].rs,
                     base_expr(&v[PK_V_NORM_W], 1, b, sizeof b),
                     index_expr(v[PK_V_NORM_X].row0, v[PK_V_NORM_X].drow0, c, sizeof c), v[PK_V_NORM_X].rows,
                     v[PK_V_NORM_X].cols, float_lit(p->eps, e, sizeof e), tile_expr(&v[PK_V_NORM_OUT], 0, d, sizeof d),
                     v[PK_V_NORM_OUT].rs);
        break;
    case PK_TASK_RMSNORM_LINEAR:
    case PK_TASK_RMSNORM_LINEAR_SWIGLU: /* its first views are rmsnorm_linear's: the GEMV into gu */
    case PK_TASK_RMSNORM_LINEAR_ARGMAX:  /* the same, into the logits tile */
    case PK_TASK_RMSNORM_SWIGLU_DOWN: { /* the same, into the first 2 · ib columns of its scratch */
        const int mlp = L->kind == PK_TASK_RMSNORM_SWIGLU_DOWN, ib = p->swiglu_block;
        emit_rows(o, &v[PK_V_NL_W]);
        if (mlp) { /* its gu: above the staged tile in a one-token step, else the scratch tile */
            const gview *sc = &v[PK_V_MLP_SCRATCH], *w = &v[PK_V_MLP_W];
            PK_ASSERT(!uneven(sc) && !uneven(w) && sc->cols == 3u * (uint32_t)ib && w->rows == 3u * (uint32_t)ib);
            pk_sb_printf(o, "        {\n        pk_bf16 *gu = pk_gen_mlp_gu(%s, wst, wst_rows, n_tok, %d, %u);\n",
                         tile_expr(sc, 0, a, sizeof a), 3 * ib, v[PK_V_NL_X].cols);
        }
        pk_sb_printf(o, "        pk_gen_call_rmsnorm_linear<PK_GEN_K(%u)>(%s, %" PRIu64 ", %s, %s, %s, %u, &w, ", v[PK_V_NL_X].cols,
                     from_f(L, base_expr(&v[PK_V_NL_X], 1, a, sizeof a), v[PK_V_NL_X].rs, fa, sizeof fa), v[PK_V_NL_X].rs,
                     base_expr(&v[PK_V_NL_NORM_W], 1, b, sizeof b), float_lit(p->eps, e, sizeof e), nt, v[PK_V_NL_X].cols);
        if (mlp) snprintf(g, sizeof g, "%d", 2 * ib);
        pk_sb_printf(o, "%s, %s, %s, %" PRIu64 ", smem, wst, wst_rows,\n            ", row0_expr(&v[PK_V_NL_W], c, sizeof c),
                     mlp ? g : rows_expr(&v[PK_V_NL_W], g, sizeof g),
                     mlp ? "gu" : from_f(L, tile_expr(&v[PK_V_NL_OUT], 0, d, sizeof d), v[PK_V_NL_OUT].rs, fd, sizeof fd),
                     v[PK_V_NL_OUT].rs);
        /* chunks: plain rmsnorm_linear without an accumulator, and the SwiGLU, whose tiles then
         * hold whole gate / up pairs (up to 64 columns a pair: the narrower mma block's) */
        char ch[96];
        const int has_acc = L->kind == PK_TASK_RMSNORM_LINEAR && v[PK_V_NL_ACC].id >= 0;
        const int swiglu = L->kind == PK_TASK_RMSNORM_LINEAR_SWIGLU;
        chunk_arg(k, L, k->tensors[v[PK_V_NL_OUT].id]->dims[1],
                  (L->kind == PK_TASK_RMSNORM_LINEAR && !has_acc) || (swiglu && 2 * p->swiglu_block <= 64),
                  swiglu ? 2 * p->swiglu_block : 0, ch, sizeof ch);
        if (has_acc) { /* x + acc; the task's share of it into sum */
            pk_sb_printf(o, "%s, %" PRIu64 ", %s, %" PRIu64 ", %s, %s);\n", base_expr(&v[PK_V_NL_ACC], 1, a, sizeof a),
                         v[PK_V_NL_ACC].rs, base_expr(&v[PK_V_NL_SUM], 0, b, sizeof b), v[PK_V_NL_SUM].rs,
                         share_args(v[PK_V_NL_X].cols, L->grid, c, sizeof c), ch);
        } else {
            pk_sb_printf(o, "nullptr, 0, nullptr, 0, 0, 0, %s);\n", ch);
        }
        if (L->kind == PK_TASK_RMSNORM_LINEAR_SWIGLU) {
            pk_sb_printf(o, "        pk_gen_call_swiglu(%s, %" PRIu64 ", n_tok, %u, %d, ", tile_expr(&v[PK_V_NLS_GU], 1, a, sizeof a),
                         v[PK_V_NLS_GU].rs, v[PK_V_NLS_OUT].cols, p->swiglu_block);
            pk_sb_printf(o, "%s, %" PRIu64 ", %s);\n", tile_expr(&v[PK_V_NLS_OUT], 0, b, sizeof b), v[PK_V_NLS_OUT].rs,
                         ch);
        }
        if (L->kind == PK_TASK_RMSNORM_LINEAR_ARGMAX) { /* the argmax of the tile every thread wrote */
            pk_sb_printf(o, "        pk_cta_sync();\n");
            emit_argmax_call(o, k, l, &v[PK_V_NLA_LOGITS], &v[PK_V_NLA_VAL], &v[PK_V_NLA_IDX], &v[PK_V_NLA_OUT]);
        }
        if (mlp) { /* silu · mul and down's partial sums (gu: pk_gen_mlp_gu's, declared above) */
            pk_sb_printf(o, "        pk_gen_call_mlp_down(gu, %" PRIu64 ", n_tok, %d, &w, %s + %d, %d, %u, ", v[PK_V_MLP_SCRATCH].rs,
                         ib, row0_expr(&v[PK_V_MLP_W], c, sizeof c), 2 * ib, 3 * ib, v[PK_V_MLP_ACC].cols);
            pk_sb_printf(o, "%s, %" PRIu64 ", smem, PK_CUDA_SMEM_BYTES + S->wstage_bytes, wst, wst_rows);\n        }\n",
                         base_expr(&v[PK_V_MLP_ACC], 0, b, sizeof b),
                         v[PK_V_MLP_ACC].rs);
        }
        break;
    }
    case PK_TASK_LINEAR: {
        char ch[96];
        emit_rows(o, &v[PK_V_LIN_W]);
        pk_sb_printf(o, "        pk_gen_call_linear<PK_GEN_K(%u)>(%s, %" PRIu64 ", %s, %u, &w, %s, %s, nullptr, 0, %s, %" PRIu64 ", smem, wst, wst_rows, %s);\n",
                     v[PK_V_LIN_X].cols, from_f(L, base_expr(&v[PK_V_LIN_X], 1, a, sizeof a), v[PK_V_LIN_X].rs, fa, sizeof fa),
                     v[PK_V_LIN_X].rs, nt, v[PK_V_LIN_X].cols, row0_expr(&v[PK_V_LIN_W], b, sizeof b),
                     rows_expr(&v[PK_V_LIN_W], g, sizeof g),
                     from_f(L, tile_expr(&v[PK_V_LIN_OUT], 0, c, sizeof c), v[PK_V_LIN_OUT].rs, fd, sizeof fd), v[PK_V_LIN_OUT].rs,
                     chunk_arg(k, L, k->tensors[v[PK_V_LIN_OUT].id]->dims[1], 1, 0, ch, sizeof ch));
        break;
    }
    case PK_TASK_LINEAR_RESIDUAL:
        emit_rows(o, &v[PK_V_LR_W]);
        pk_sb_printf(o, "        pk_gen_call_linear<PK_GEN_K(%u)>(%s, %" PRIu64 ", n_tok, %u, &w, %s, %s, ", v[PK_V_LR_X].cols,
                     base_expr(&v[PK_V_LR_X], 1, a, sizeof a), v[PK_V_LR_X].rs, v[PK_V_LR_X].cols, row0_expr(&v[PK_V_LR_W], b, sizeof b),
                     rows_expr(&v[PK_V_LR_W], g, sizeof g));
        pk_sb_printf(o, "%s, %" PRIu64 ", %s, %" PRIu64 ", smem, wst, wst_rows, %s);\n", tile_expr(&v[PK_V_LR_RES], 1, c, sizeof c),
                     v[PK_V_LR_RES].rs, tile_expr(&v[PK_V_LR_OUT], 0, d, sizeof d), v[PK_V_LR_OUT].rs,
                     chunk_arg(k, L, k->tensors[v[PK_V_LR_OUT].id]->dims[1], 1, 0, e, sizeof e));
        if (v[PK_V_LR_CLEAR].id >= 0) { /* after the GEMV, which waited for the event */
            pk_sb_printf(o, "        pk_gen_call_acc_clear(%s, %" PRIu64 ", n_tok, %s);\n",
                         base_expr(&v[PK_V_LR_CLEAR], 0, a, sizeof a), v[PK_V_LR_CLEAR].rs,
                         share_args(v[PK_V_LR_CLEAR].cols, L->grid, b, sizeof b));
        }
        break;
    case PK_TASK_LINEAR_SPLITK_RESIDUAL: /* the weight is on the GPU transposed: task idx's block is rows
                                          * [idx · kc, (idx + 1) · kc) of W^T [K, N] */
        PK_ASSERT(v[PK_V_LSK_W].row0 == 0 && v[PK_V_LSK_W].dcol0 == (int64_t)v[PK_V_LSK_X].cols);
        pk_sb_printf(o, "        pk_gen_call_linear_splitk(%s, %" PRIu64 ", n_tok, %u, %s + idx * %" PRIu64 "ull, %u, ",
                     tile_expr(&v[PK_V_LSK_X], 1, a, sizeof a), v[PK_V_LSK_X].rs, v[PK_V_LSK_X].cols,
                     base_expr(&v[PK_V_LSK_W], 1, b, sizeof b), (uint64_t)v[PK_V_LSK_X].cols * v[PK_V_LSK_W].rows,
                     v[PK_V_LSK_W].rows);
        pk_sb_printf(o, "%s, %" PRIu64 ", %s, %" PRIu64 ", ", base_expr(&v[PK_V_LSK_ACC], 0, c, sizeof c),
                     v[PK_V_LSK_ACC].rs, base_expr(&v[PK_V_LSK_RES], 1, d, sizeof d), v[PK_V_LSK_RES].rs);
        pk_sb_printf(o, "%s, %" PRIu64 ", %d, pk_group_ctrs(S) + %d, smem, wst, wst_rows);\n",
                     base_expr(&v[PK_V_LSK_OUT], 0, a, sizeof a), v[PK_V_LSK_OUT].rs, L->grid,
                     pk_graph_group_counter0(k, l));
        break;
    case PK_TASK_SILU_MUL:
        pk_sb_printf(o, "        pk_gen_call_silu_mul(%s, %" PRIu64 ", n_tok, %u, %s, %u, %s, %" PRIu64 ", smem);\n",
                     base_expr(&v[PK_V_SM_X], 1, a, sizeof a), v[PK_V_SM_X].rs, v[PK_V_SM_X].cols / 2,
                     index_expr(v[PK_V_SM_OUT].col0, v[PK_V_SM_OUT].dcol0, b, sizeof b), v[PK_V_SM_OUT].cols,
                     tile_expr(&v[PK_V_SM_OUT], 0, c, sizeof c), v[PK_V_SM_OUT].rs);
        break;
    case PK_TASK_SILU_MUL_LINEAR_RESIDUAL:
        emit_rows(o, &v[PK_V_SML_W]);
        pk_sb_printf(o, "        pk_gen_call_silu_mul_linear<PK_GEN_K(%u)>(%s, %" PRIu64 ", n_tok, %u, &w, %s, %s, ", v[PK_V_SML_X].cols / 2,
                     base_expr(&v[PK_V_SML_X], 1, a, sizeof a), v[PK_V_SML_X].rs, v[PK_V_SML_X].cols / 2,
                     row0_expr(&v[PK_V_SML_W], b, sizeof b), rows_expr(&v[PK_V_SML_W], g, sizeof g));
        pk_sb_printf(o, "%s, %" PRIu64 ", %s, %" PRIu64 ", smem, wst, wst_rows, %s);\n", tile_expr(&v[PK_V_SML_RES], 1, c, sizeof c),
                     v[PK_V_SML_RES].rs, tile_expr(&v[PK_V_SML_OUT], 0, d, sizeof d), v[PK_V_SML_OUT].rs,
                     chunk_arg(k, L, k->tensors[v[PK_V_SML_OUT].id]->dims[1], 1, 0, e, sizeof e));
        break;
    case PK_TASK_ATTENTION: {
        int nkv = emit_attn_step(o, k, L, v);
        pk_sb_printf(o, "        pk_gen_call_attention<%d, %d>(&pk_gen_layers[%d], pk_gen_inv_freq_%d, &s, (int)(idx * %d), %d, %s, %" PRIu64 ", ",
                     attn_pairs(p), attn_group(p), l, l, nkv, nkv, base_expr(&v[PK_V_ATT_QKV], 1, a, sizeof a), v[PK_V_ATT_QKV].rs);
        pk_sb_printf(o, "%s, %s, ", base_expr(&v[PK_V_ATT_K_CACHE], 0, a, sizeof a),
                     base_expr(&v[PK_V_ATT_V_CACHE], 0, b, sizeof b));
        pk_sb_printf(o, "%s, %s, %s, %" PRIu64 ", %s, wst_rows);\n", base_expr(&v[PK_V_ATT_Q_NORM], 1, a, sizeof a),
                     base_expr(&v[PK_V_ATT_K_NORM], 1, b, sizeof b), base_expr(&v[PK_V_ATT_OUT], 0, c, sizeof c),
                     v[PK_V_ATT_OUT].rs, ATT_SMEM);
        break;
    }
    case PK_TASK_ARGMAX_PARTIAL:
        emit_argmax_call(o, k, l, &v[PK_V_AMP_LOGITS], &v[PK_V_AMP_VAL], &v[PK_V_AMP_IDX], &v[PK_V_AMP_OUT]);
        break;
    case PK_TASK_ATTENTION_PARTIAL: {
        int nkv = emit_attn_step(o, k, L, v);
        pk_sb_printf(o, "        pk_gen_call_attention_partial<%d, %d>(&pk_gen_layers[%d], pk_gen_inv_freq_%d, &s, %s, %s, %" PRIu64 ", ",
                     attn_pairs(p), attn_group(p), l, l, attn_task_expr(L, nkv, e, sizeof e), base_expr(&v[PK_V_ATT_QKV], 1, a, sizeof a),
                     v[PK_V_ATT_QKV].rs);
        pk_sb_printf(o, "%s, %s, ", base_expr(&v[PK_V_ATT_K_CACHE], 0, a, sizeof a),
                     base_expr(&v[PK_V_ATT_V_CACHE], 0, b, sizeof b));
        /* the staged layout at smem + the offset; the fold (pk_dev_attention_combine) from smem */
        pk_sb_printf(o, "%s, %s, %s, %" PRIu64 ", smem, %s, wst_rows, ", base_expr(&v[PK_V_ATT_Q_NORM], 1, a, sizeof a),
                     base_expr(&v[PK_V_ATT_K_NORM], 1, b, sizeof b), tile_expr(&v[PK_V_ATT_OUT], 0, c, sizeof c),
                     v[PK_V_ATT_OUT].rs, ATT_OFF);
        /* the group's partial tiles, its columns of out, its completion counter (after the events) */
        const int S = p->kv_splits, nheads = p->num_q_heads / (L->grid / S), D = p->head_dim;
        pk_sb_printf(o, "\n            %s + (idx / %d) * %" PRId64 ", ", base_expr(&v[PK_V_ATT_OUT], 1, a, sizeof a), S,
                     (int64_t)S * nheads * (D + 2));
        pk_sb_printf(o, "%s + (idx / %d) * %" PRId64 ", %" PRIu64 ", %d, ", base_expr(&v[PK_V_ATTP_COMBINED], 0, b, sizeof b),
                     S, (int64_t)nheads * D, v[PK_V_ATTP_COMBINED].rs, nheads);
        pk_sb_printf(o, "pk_group_ctrs(S) + %d + idx / %d * %d, %d);\n", pk_graph_group_counter0(k, l), S,
                     pk_graph_attn_group_counters(k, l), pk_graph_attn_kv_fold(k, l));
        break;
    }
    case PK_TASK_ARGMAX_REDUCE:
    case PK_TASK_BEGIN:
    case PK_TASK_TERMINATE:
    case PK_TASK_KIND_COUNT:
        PK_ASSERT(!"not a compute layer of the CUDA backend");
    }
    pk_sb_printf(o, "        break;\n    }\n");
}

/* The view holding a layer kind's weight tile, or -1 (no weight read as rows). */
static int weight_view(pk_task_kind kind) {
    switch (kind) {
    case PK_TASK_RMSNORM_LINEAR: return PK_V_NL_W;
    case PK_TASK_RMSNORM_LINEAR_SWIGLU: return PK_V_NLS_W;
    case PK_TASK_RMSNORM_LINEAR_ARGMAX: return PK_V_NLA_W;
    case PK_TASK_RMSNORM_SWIGLU_DOWN: return PK_V_MLP_W;
    case PK_TASK_LINEAR: return PK_V_LIN_W;
    case PK_TASK_LINEAR_RESIDUAL: return PK_V_LR_W;
    case PK_TASK_SILU_MUL_LINEAR_RESIDUAL: return PK_V_SML_W;
    default: return -1;
    }
}

/* Layer L's GEMV weight tile as one contiguous range (whole rows of a plain or fused weight, tiles
 * that follow each other): its view in *w, bytes, first offset and step per index (bytes); 0 when
 * it has none (no weight, or rows not a multiple of 16 bytes, which neither the staging copy nor
 * the bulk prefetch can take). Uneven tiles: bytes is the largest tile's, the step UINT64_MAX
 * (emitted as PK_GEN_STEP_UNEVEN: the device computes each task's rows from pk_gen_splits). */
static int gemv_tile(const pk_kernel *k, const pk_layer *L, gview *w, uint64_t *bytes, uint64_t *off,
                     uint64_t *step) {
    const int v = weight_view(L->kind);
    if (v < 0) return 0;
    *w = layer_view(k, L, v);
    if (w->id < 0) return 0;
    const uint64_t es = pk_dtype_size(k->tensors[w->id]->dtype);
    *bytes = (uint64_t)w->rows * w->rs * es, *off = (uint64_t)w->row0 * w->rs * es;
    *step = (uint64_t)w->drow0 * w->rs * es;
    if (uneven(w)) { /* the device computes each task's rows in 32 bits (pk_task_tile_uneven) */
        *off = 0, *step = UINT64_MAX;
        if (!w->split_rows || (uint64_t)w->split_ext * (uint64_t)w->split_parts > UINT32_MAX) return 0;
    }
    return w->col0 == 0 && w->cols == w->rs && w->drow0 >= 0 && (w->rs * es) % 16 == 0 && *off % 16 == 0 &&
           (*step % 16 == 0 || uneven(w)) && *bytes <= 0xffffffffu;
}

/* Whether some GEMV layer's tile stages whole (<= PK_WSTAGE_BYTES: runtime.cuh pk_stage_weights). */
static int stages_whole(const pk_kernel *k) {
    for (int l = 0; l < k->nlayers; l++) {
        gview w;
        uint64_t bytes, off, step;
        if (gemv_tile(k, &k->layers[l], &w, &bytes, &off, &step) && bytes <= PK_WSTAGE_BYTES) return 1;
    }
    return 0;
}

/* GEMV layers whose tiles stream (larger than PK_WSTAGE_BYTES: linear.cuh's streamed path; the
 * fused MLP's tiles have their own staging, runtime.cuh pk_stage_mlp). */
static int streamed_layers(const pk_kernel *k) {
    int n = 0;
    for (int l = 0; l < k->nlayers; l++) {
        gview w;
        uint64_t bytes, off, step;
        n += k->layers[l].kind != PK_TASK_RMSNORM_SWIGLU_DOWN && gemv_tile(k, &k->layers[l], &w, &bytes, &off, &step) &&
             bytes > PK_WSTAGE_BYTES;
    }
    return n;
}

/* Whether some attention layer is split over the KV length (long contexts: attention_partial). */
static int has_split_attention(const pk_kernel *k) {
    for (int l = 0; l < k->nlayers; l++)
        if (attn_splits(&k->layers[l]) > 1) return 1;
    return 0;
}

/* Whether some GEMV layer's weight tiles are uneven and staged (its prefetch entry's step is
 * PK_GEN_STEP_UNEVEN). */
static int has_uneven_tiles(const pk_kernel *k) {
    for (int l = 0; l < k->nlayers; l++) {
        gview w;
        uint64_t bytes, off, step;
        if (gemv_tile(k, &k->layers[l], &w, &bytes, &off, &step) && uneven(&w)) return 1;
    }
    return 0;
}

/* Layer l's weight tile entry {buffer, bytes, row bytes, offset of tile 0, offset step per index}: a
 * task's weight tile is rows [row0, row0 + rows) of its weight, whole rows, so one contiguous
 * range (bytes 0: none — no weight, or rows not a multiple of 16 bytes, which the staging copy
 * cannot take). */
static void emit_prefetch_entry(pk_strbuf *o, const pk_kernel *k, int l) {
    const pk_layer *L = &k->layers[l];
    if (L->kind == PK_TASK_LINEAR_SPLITK_RESIDUAL) { /* task idx's rows of the transposed weight [K, N] */
        const gview w = layer_view(k, L, PK_V_LSK_W);
        const uint64_t es = pk_dtype_size(k->tensors[w.id]->dtype), row_bytes = (uint64_t)w.rows * es;
        const uint64_t bytes = (uint64_t)w.cols * row_bytes;
        if (row_bytes % 16 == 0 && bytes <= 0xffffffffu) {
            pk_sb_printf(o, "    {%d, %" PRIu64 "u, %" PRIu64 "u, 0ull, %" PRIu64 "ull}, /* %s (transposed) */\n",
                         w.id, bytes, row_bytes, bytes, L->name);
            return;
        }
    }
    gview w;
    uint64_t bytes, off, step;
    if (gemv_tile(k, L, &w, &bytes, &off, &step)) {
        const uint64_t row_bytes = (uint64_t)w.rs * pk_dtype_size(k->tensors[w.id]->dtype);
        char st[32];
        snprintf(st, sizeof st, uneven(&w) ? "PK_GEN_STEP_UNEVEN" : "%" PRIu64 "ull", step);
        pk_sb_printf(o, "    {%d, %" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "ull, %s}, /* %s */\n", w.id, bytes, row_bytes,
                     off, st, L->name);
        return;
    }
    pk_sb_printf(o, "    {0, 0, 0, 0, 0}, /* %s */\n", L->name);
}

static const char *buffer_kind_name(int kind) {
    switch (kind) {
    case PK_CUDA_BUF_WEIGHT: return "weight";
    case PK_CUDA_BUF_KV: return "KV cache";
    case PK_CUDA_BUF_WORK: return "workspace";
    }
    return "host only";
}

/* The per-shape choices (gen_api.h's pk_gen_tuning), one rule each:
 *   lin_wst_lds: a graph with a GEMV tile that stages whole is a small model's, whose layers are
 *     chains of short tasks (latency), where the larger models' tiles stream: its staged rows are
 *     read with ld.shared and the dispatch switch is inlined into the workers (faster on the
 *     Qwen3-0.6B and 1.7B shapes);
 *   lin_pace_kb: where tiles stage whole and more than one layer streams (the Qwen3-1.7B shape; the
 *     0.6B streams only its LM head, the 8B stages nothing whole) a streamed tile issues 64 KB
 *     before its wait, elsewhere 48;
 *   attd_bulk_rows: that same shape with its attention split (long contexts) stages each KV row
 *     with one bulk copy (faster there, slower for the other shapes);
 *   debug_spin_limit_ms / debug_stall_task: PK_CUDA_DEBUG=1 (PK_CUDA_SPIN_LIMIT_MS, default 5000;
 *     PK_CUDA_DEBUG_STALL_TASK): every wait reports and traps past the limit instead of hanging.
 * Each rule is the faster choice on the H100 / H200 for the shapes it names (git log has the
 * measurements). */
pk_gen_tuning_values pk_cuda_tuning_of(const pk_kernel *k) {
    pk_gen_tuning_values t = {0, 48, 0, 0, 0xffffffffu};
    const int small_model = stages_whole(k), paced_shape = small_model && streamed_layers(k) > 1;
    t.lin_wst_lds = small_model;
    t.lin_pace_kb = paced_shape ? 64 : 48;
    t.attd_bulk_rows = paced_shape && has_split_attention(k);
    const char *dbg = getenv("PK_CUDA_DEBUG");
    if (dbg && dbg[0] && strcmp(dbg, "0") != 0) {
        const char *ms = getenv("PK_CUDA_SPIN_LIMIT_MS"), *stall = getenv("PK_CUDA_DEBUG_STALL_TASK");
        t.debug_spin_limit_ms = ms && atol(ms) > 0 ? (unsigned)atol(ms) : 5000u;
        if (stall && stall[0]) t.debug_stall_task = (unsigned)atol(stall);
    }
    return t;
}

pk_status pk_cuda_codegen(pk_kernel *k, pk_strbuf *o) {
    const pk_taskgraph *g = &k->graph;
    pk_cuda_buffers bufs;
    pk_status st = pk_cuda_plan_buffers(k, &bufs);
    if (st != PK_OK) return st;
    char e[64];

    pk_sb_printf(o,
                 "/* kernel.cu — generated by pk %s (task ABI %d, generator API %d) for task graph %016" PRIx64 ".\n"
                 " * Do not edit: pk writes it from the task graph (task_graph.json lists the same tables).\n"
                 " *\n"
                 " * %d layers, %d tasks, %d events; %d workers (static schedule below);\n"
                 " * T = %d tokens per step, %d requests, max_seq_length %d, KV pages %d x %d tokens.\n"
                 " * Task kernels: %s.\n"
                 " *\n"
                 " * Buffers: one per tensor id on the GPU (weights uploaded once; a fused tensor as one buffer in\n"
                 " * fused row order), B[id] in the dispatch below:\n",
                 PK_VERSION_STRING, PK_ABI_VERSION, 1, g->hash, g->nlayers, g->ntasks, g->nevents, g->nworkers,
                 k->cfg.max_tokens_per_step, k->cfg.max_requests, k->cfg.max_seq_length,
                 k->cfg.num_pages, k->cfg.page_size,
                 "src/kernels/cuda (kernels/cuda/cuda_kernels.cuh)");
    for (int id = 0; id < k->ntensors; id++) {
        const pk_tensor *t = k->tensors[id];
        char dims[96];
        pk_sb_printf(o, " *   %3d %-28s %-16s %-5s %s\n", id, t->name, pk_dims_str(t->dims, t->ndim, dims, sizeof dims),
                     pk_dtype_name(t->dtype), buffer_kind_name(bufs.kind[id]));
    }
    pk_sb_printf(o, " */\n\n");
    pk_sb_printf(o, "#define PK_GEN_PK_VERSION \"%s\"\n", PK_VERSION_STRING);
    pk_sb_printf(o, "#define PK_GEN_GRAPH_HASH 0x%016" PRIx64 "ull\n", g->hash);
    pk_sb_printf(o, "#define PK_GEN_NUM_TASKS %du\n#define PK_GEN_NUM_EVENTS %du\n#define PK_GEN_NUM_LAYERS %du\n",
                 g->ntasks, g->nevents, g->nlayers);
    pk_sb_printf(o, "#define PK_GEN_NUM_BUFFERS %du\n#define PK_GEN_NUM_WORKERS %du\n", k->ntensors, g->nworkers);
    pk_sb_printf(o, "#define PK_GEN_NUM_GROUP_COUNTERS %du /* after the events in S->counters */\n",
                 pk_graph_group_counter0(k, k->nlayers));
    pk_sb_printf(o, "#define PK_GEN_BEGIN_EVENT %uu\n#define PK_GEN_END_EVENT %uu\n", g->begin_event, g->end_event);
    pk_sb_printf(o, "#define PK_GEN_STEP_INFO_BUF %du /* the step info tensor's buffer */\n", k->t_step_info);
    /* Only a graph with uneven weight tiles compiles runtime.cuh's branch for them: with it in
     * pk_task_tile every kernel is slower. */
    const int uneven_tiles = has_uneven_tiles(k);
    pk_sb_printf(o, "#define PK_GEN_UNEVEN %d /* uneven weight tiles: pk_gen_splits */\n", uneven_tiles);
    /* Every END_OF_GRAPH trigger a task of one argmax layer: that layer's last task to finish (its
     * completion counter) ends the step itself, with no END adds (runtime.cuh). */
    int end_layer = -1, end_by_counter = 1;
    for (int t = 0; t < g->ntasks && end_by_counter; t++) {
        if (g->tasks[t].trig_event != g->end_event) continue;
        const int l = (int)g->tasks[t].layer;
        if (end_layer < 0) end_layer = l;
        end_by_counter = l == end_layer && (k->layers[l].kind == PK_TASK_ARGMAX_PARTIAL ||
                                             k->layers[l].kind == PK_TASK_RMSNORM_LINEAR_ARGMAX);
    }
    end_by_counter = end_by_counter && end_layer >= 0 &&
                     g->events[g->end_event].num_triggers == (uint32_t)k->layers[end_layer].grid;
    pk_sb_printf(o, "#define PK_GEN_END_BY_COUNTER %d /* END's triggers: one argmax layer's tasks */\n", end_by_counter);
    int mlp_fused = 0;
    for (int l = 0; l < k->nlayers; l++) mlp_fused |= k->layers[l].kind == PK_TASK_RMSNORM_SWIGLU_DOWN;
    pk_sb_printf(o, "#define PK_GEN_MLP_FUSED %d /* a RMSNORM_SWIGLU_DOWN layer: its tiles may stage low */\n",
                 mlp_fused);
    /* The decode attention layout's first bytes, written only by the task after its wait
     * (attention_decode_layout.h's hdr offset): a stage issued during the task before it may lie
     * that much lower, over that task's dead bytes (runtime.cuh's pk_att_early). A constant, so
     * that the worker loads nothing for it; 0 (no shift) unless every attention layer agrees. */
    int att_head = -1;
    for (int l = 0; l < k->nlayers; l++) {
        const pk_layer_params *ap = &k->layers[l].params;
        if (k->layers[l].kind != PK_TASK_ATTENTION && k->layers[l].kind != PK_TASK_ATTENTION_PARTIAL) continue;
        const int head = ap->num_kv_heads > 0 && ap->num_q_heads % ap->num_kv_heads == 0
                             ? pk_attd_layout_of(ap->head_dim, ap->num_q_heads / ap->num_kv_heads, 0).hdr
                             : 0;
        att_head = att_head < 0 || att_head == head ? head : 0;
    }
    pk_sb_printf(o, "#define PK_GEN_ATT_HEAD %du /* the decode attention's [0, hdr): pk_att_early */\n\n",
                 att_head > 0 ? att_head : 0);
    const pk_gen_tuning_values tune = pk_cuda_tuning_of(k);
    pk_sb_printf(o,
                 "/* The per-shape tuning (codegen.c's pk_cuda_tuning_of; gen_api.h says what each field does). */\n"
                 "struct pk_gen_tuning {\n"
                 "    static constexpr bool lin_wst_lds = %s;\n"
                 "    static constexpr int lin_pace_kb = %d;\n"
                 "    static constexpr bool attd_bulk_rows = %s;\n"
                 "    static constexpr unsigned debug_spin_limit_ms = %uu;\n"
                 "    static constexpr unsigned debug_stall_task = %uu;\n"
                 "};\n\n",
                 tune.lin_wst_lds ? "true" : "false", tune.lin_pace_kb, tune.attd_bulk_rows ? "true" : "false",
                 tune.debug_spin_limit_ms, tune.debug_stall_task);
    pk_sb_printf(o, "#include \"runtime/cuda/device/sync.cuh\"\n");
    pk_sb_printf(o, "#include \"kernels/cuda/cuda_kernels.cuh\"\n#include \"kernels/cpu/cpu_kernels.h\"\n");
    pk_sb_printf(o, "#include \"runtime/cuda/device/dispatch.cuh\"\n\n");

    /* tables */
    pk_sb_printf(o, "/* Tasks: {layer, index in the layer's grid, event waited on, event signalled}. */\n");
    pk_sb_printf(o, "__device__ const pk_gen_task pk_gen_tasks[%d] = {\n", g->ntasks);
    for (int t = 0; t < g->ntasks; t++) {
        const pk_task *task = &g->tasks[t];
        if (t == 0)
            pk_sb_printf(o, "    {0xffffffffu, 0, 0xffffffffu, %uu}, /* 0 begin */\n", task->trig_event);
        else
            pk_sb_printf(o, "    {%u, %u, %u, %u}, /* %d %s.%u */\n", task->layer, task->index, task->dep_event,
                         task->trig_event, t, k->layers[task->layer].name, task->index);
    }
    pk_sb_printf(o, "};\n\n/* Events: {kind (0 begin, 1 normal, 2 end of graph), triggers per step, consumer tasks [first, last)}. */\n");
    pk_sb_printf(o, "__device__ const pk_event pk_gen_events[%d] = {\n", g->nevents);
    for (int ev = 0; ev < g->nevents; ev++) {
        const pk_event *x = &g->events[ev];
        pk_sb_printf(o, "    {%u, %u, %u, %u}, /* %d */\n", x->kind, x->num_triggers, x->first_task, x->last_task, ev);
    }
    pk_sb_printf(o, "};\n\n/* Static schedule: worker w runs pk_gen_sched_tasks[pk_gen_sched_offset[w] .. [w + 1]) each step. */\n");
    pk_sb_printf(o, "__device__ const uint32_t pk_gen_sched_offset[%d] = {", g->nworkers + 1);
    for (int w = 0; w <= g->nworkers; w++) pk_sb_printf(o, "%s%u", w ? ", " : "", g->sched_offset[w]);
    pk_sb_printf(o, "};\n__device__ const uint32_t pk_gen_sched_tasks[%d] = {", g->ntasks > 1 ? g->ntasks - 1 : 1);
    for (int i = 0; i < g->ntasks - 1; i++)
        pk_sb_printf(o, "%s%s%u", i ? "," : "", i % 16 == 0 ? "\n    " : " ", g->sched_tasks[i]);
    if (g->ntasks <= 1) pk_sb_printf(o, "0");
    pk_sb_printf(o, "\n};\n");
    emit_sched_next(o, k);
    pk_sb_printf(o, "/* Layer parameters: {kind, grid, eps, Hq, Hkv, D, rope_theta, rope_scaling, rope_factor, low_freq,\n"
                    " * high_freq, original_max_position, qk_norm_eps, has_qk_norm}. */\n");
    pk_sb_printf(o, "__device__ const pk_layer_params pk_gen_layers[%d] = {\n", g->nlayers);
    for (int l = 0; l < g->nlayers; l++) {
        const pk_layer_params *p = &g->layer_params[l];
        char f1[64], f2[64], f3[64], f4[64], f5[64], f6[64];
        pk_sb_printf(o, "    {%u, %u, %s, %d, %d, %d, %s, %d, %s, %s, %s, %d, %s, %d}, /* %s */\n", p->kind, p->grid,
                     float_lit(p->eps, f1, sizeof f1), p->num_q_heads, p->num_kv_heads, p->head_dim,
                     float_lit(p->rope_theta, f2, sizeof f2), p->rope_scaling, float_lit(p->rope_factor, f3, sizeof f3),
                     float_lit(p->rope_low_freq_factor, f4, sizeof f4), float_lit(p->rope_high_freq_factor, f5, sizeof f5),
                     p->rope_original_max_position, float_lit(p->qk_norm_eps, f6, sizeof f6), p->has_qk_norm,
                     k->layers[l].name);
    }
    pk_sb_printf(o, "};\n\n");
    /* RoPE inverse frequencies of each attention layer: the CPU's own function (rope.c), so the
     * device uses bit for bit the CPU's values without computing pow() in every task. */
    for (int l = 0; l < g->nlayers; l++) {
        const pk_layer_params *p = &g->layer_params[l];
        if (k->layers[l].kind != PK_TASK_ATTENTION && k->layers[l].kind != PK_TASK_ATTENTION_PARTIAL) continue;
        if (p->head_dim < 2 || p->head_dim > PK_CPU_ATTN_MAX_HEAD_DIM) { /* the kernel writes nothing */
            pk_sb_printf(o, "__device__ const float pk_gen_inv_freq_%d[1] = {0};\n", l);
            continue;
        }
        float inv[PK_CPU_ATTN_MAX_HEAD_DIM / 2];
        pk_rope_inv_freq(p, inv);
        pk_sb_printf(o, "__device__ const float pk_gen_inv_freq_%d[%d] = {", l, p->head_dim / 2);
        for (int i = 0; i < p->head_dim / 2; i++)
            pk_sb_printf(o, "%s%a", i ? (i % 8 ? ", " : ",\n    ") : "\n    ", (double)inv[i]);
        pk_sb_printf(o, "};\n");
    }
    pk_sb_printf(o, "\n");
    pk_sb_printf(o, "/* Weight tiles (runtime.cuh's staging): {buffer, tile bytes, row bytes, offset of tile 0, offset step\n"
                    " * per task index}. An uneven layer's step is PK_GEN_STEP_UNEVEN, its rows and grid in pk_gen_splits. */\n");
    pk_sb_printf(o, "__device__ const pk_gen_prefetch pk_gen_prefetches[%d] = {\n", g->nlayers);
    for (int l = 0; l < g->nlayers; l++) emit_prefetch_entry(o, k, l);
    pk_sb_printf(o, "};\n\n");
    if (uneven_tiles) {
        pk_sb_printf(o, "/* Uneven layers' splits {weight rows, grid} (pk_task_tile_uneven); {0, 1} for the others. */\n");
        pk_sb_printf(o, "__device__ const pk_gen_split pk_gen_splits[%d] = {", g->nlayers);
        for (int l = 0; l < g->nlayers; l++) {
            gview w;
            uint64_t bytes, off, step; /* the layers whose prefetch entry says PK_GEN_STEP_UNEVEN */
            if (gemv_tile(k, &k->layers[l], &w, &bytes, &off, &step) && uneven(&w))
                pk_sb_printf(o, "%s{%" PRId64 "u, %du}", l ? ", " : "", w.split_ext, w.split_parts);
            else
                pk_sb_printf(o, "%s{0, 1}", l ? ", " : "");
        }
        pk_sb_printf(o, "};\n\n");
    }

    (void)e;

    /* dispatch */
    pk_sb_printf(o,
                 "/* Runs task t on the calling CTA (every thread calls it). Shapes are literals; a task's tile is its\n"
                 " * layer's first tile plus idx times the tile step. n_tok: rows holding a token this step (the\n"
                 " * step's; the caller reads it once per step). task: pk_gen_tasks[t]. */\n"
                 "__device__ %s void pk_gen_run_task(const pk_dev_state *S, uint32_t t, const pk_gen_task task,\n"
                 "                                         char *smem, int wst_rows, uint32_t wst_off, int n_tok) {\n"
                 "    void *const *B = PK_GEN_BUFS(S);\n"
                 "    /* staged weight rows at smem + wst_off (wst_rows > 0) */\n"
                 "    const pk_bf16 *wst = (const pk_bf16 *)(smem + (wst_rows < 0 ? 0u : wst_off));\n"
                 "    (void)wst;\n"
                 "    const int64_t idx = task.index;\n"
                 "    pk_rows w;        /* the case's weight rows (one object for all cases: emit_rows) */\n"
                 "    pk_attn_step s;   /* an attention case's step tensors */\n"
                 "    (void)t, (void)idx, (void)w, (void)s;\n"
                 "    switch (task.layer) {\n",
                 /* inlined into the workers where tiles stage whole (lin_wst_lds: short tasks), else a
                  * call of its own (the call-throughs it calls stay out of line either way) */
                 tune.lin_wst_lds ? "__forceinline__" : "__noinline__");
    for (int i = 0; i < g->nlayers; i++) emit_case(o, k, g->layer_order[i]);
    pk_sb_printf(o, "    default:\n        break;\n    }\n}\n\n");
    pk_sb_printf(o,
                 "/* Static mode, before task t's dependency wait: starts copying what the task will read and\n"
                 " * does not depend on the wait (a decode row's KV cache) into shared memory; returns what\n"
                 " * pk_gen_run_task takes as wst_rows (0: nothing). Every thread calls it. */\n"
                 "__device__ __noinline__ int pk_gen_stage_task(const pk_dev_state *S, uint32_t t, char *smem, int smem_bytes) {\n"
                 "    void *const *B = PK_GEN_BUFS(S);\n"
                 "    const pk_gen_task task = pk_gen_tasks[t];\n"
                 "    const int64_t idx = task.index;\n"
                 "    pk_attn_step s;\n"
                 "    (void)B, (void)idx, (void)smem, (void)smem_bytes, (void)s;\n"
                 "    switch (task.layer) {\n");
    for (int i = 0; i < g->nlayers; i++)
        if (k->layers[g->layer_order[i]].kind == PK_TASK_ATTENTION ||
            k->layers[g->layer_order[i]].kind == PK_TASK_ATTENTION_PARTIAL)
            emit_stage_case(o, k, g->layer_order[i]);
    pk_sb_printf(o, "    default:\n        return 0;\n    }\n}\n\n");
    pk_sb_printf(o, "#include \"runtime/cuda/device/runtime.cuh\"\n");
    pk_cuda_buffers_free(&bufs);
    if (o->oom) return pk_fail(k, PK_ERR_NO_MEMORY, "pk_compile: out of memory generating kernel.cu");
    return PK_OK;
}
