// SPDX-License-Identifier: Apache-2.0
/* build.c — layers × grids → tasks, events and the static schedule.
 *
 * Task order: the BEGIN task, then the tasks of every root layer (one reading no layer's
 * output), then the other layers in the order they were added — a topological order, so a
 * worker walking its tasks in index order can always make progress.
 *
 * Events (docs/DESIGN.md, "Task graph"): a consumer layer L waits only on its direct producers
 * that no other producer of L already covers (full dependency, below). For a producer P that
 * splits tensor X along the same dimension as L, the edge has gcd(P.grid, L.grid) events, else
 * one; L's event count E is the gcd over its edges, event j's consumers are the tasks of L's
 * j-th E-chunk and its triggers the tasks of each producer's j-th chunk. A producer feeds one
 * layer's events (a task signals one event); layers no one waits on signal END_OF_GRAPH.
 */
#include <string.h>

#include "pk_internal.h"

static int gcd(int a, int b) {
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Events of the edge P → L over tensor X (input slot `in` of L). */
static int edge_events(const pk_kernel *k, const pk_layer *P, const pk_layer *L, int in) {
    int x = L->inputs[in];
    pk_split cs = L->in_split[in];
    for (int o = 0; o < P->noutputs; o++) {
        if (P->outputs[o] != x) continue;
        pk_split ps = P->out_split[o];
        if (ps.dim >= 0 && ps.dim == cs.dim) return gcd(ps.parts, cs.parts);
        return 1;
    }
    PK_ASSERT(!"producer does not write the tensor");
    (void)k;
    return 1;
}

/* Events of all edges P → L (gcd over the inputs of L that P writes). */
static int layer_edge_events(const pk_kernel *k, int p, const pk_layer *L) {
    int e = 0;
    for (int in = 0; in < L->ninputs; in++)
        if (L->inputs[in] >= 0 && k->tensors[L->inputs[in]]->producer == p)
            e = gcd(e, edge_events(k, &k->layers[p], L, in));
    return e;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* The 2-D view (rows = dim 0, cols = the rest) of tensor `id`, tiled by `split` at index i. */
static pk_view make_view(const pk_kernel *k, int id, pk_split split, int i) {
    pk_view v;
    memset(&v, 0, sizeof v);
    if (id < 0) return v; /* absent optional tensor: nseg 0 */
    const pk_tensor *t = k->tensors[id];
    int64_t rows = t->ndim >= 2 ? t->dims[0] : 1, cols = pk_tensor_numel(t) / rows;
    v.dtype = (uint32_t)t->dtype;
    v.row_stride = (uint64_t)cols;
    if (t->storage == PK_STORAGE_FUSED) {
        v.nseg = (uint32_t)t->nfused;
        for (int s = 0; s < t->nfused; s++) {
            v.seg_buffer[s] = (uint32_t)t->fused[s];
            v.seg_rows[s] = (uint32_t)(k->tensors[t->fused[s]]->dims[0] / t->groups);
        }
    } else {
        v.nseg = 1;
        v.seg_buffer[0] = (uint32_t)id;
        v.seg_rows[0] = (uint32_t)rows;
    }
    v.rows = (uint32_t)rows;
    v.cols = (uint32_t)cols;
    if (split.dim < 0 || (split.dim > 1 && t->ndim >= 2)) return v;
    /* Tile i is [i·E / parts, (i + 1)·E / parts) of the split dimension's extent E: equal tiles
     * when parts divides E, else ⌊E/parts⌋ or ⌈E/parts⌉ (the linear family's uneven grids,
     * layers.c). Two splits of one tensor into parts p = e·a and q = e·b then agree on the e
     * chunks [j·E / e, (j + 1)·E / e): edge_events' chunks are whole. */
    const int along_rows = split.dim == 0 && t->ndim >= 2;
    const int64_t E = along_rows ? rows : cols, lo = pk_split_start(E, split.parts, i),
                  hi = pk_split_start(E, split.parts, i + 1);
    if (along_rows) {
        v.row0 = (uint32_t)lo;
        v.rows = (uint32_t)(hi - lo);
    } else {
        v.col0 = (uint32_t)lo;
        v.cols = (uint32_t)(hi - lo);
    }
    return v;
}

static uint64_t view_bytes(const pk_kernel *k, const pk_view *v, int id) {
    if (id < 0) return 0;
    const pk_tensor *t = k->tensors[id];
    return (uint64_t)v->rows * v->cols * pk_dtype_size(t->dtype);
}

/* Assigns tasks to workers by simulating one step: in task order, each task goes to the worker
 * on which it would finish first, given when that worker is free and when its dependency event
 * completes (the last finish among the event's triggers); ties go to the worker that runs the
 * event's trigger when it has one only (a split-K task after the one task that makes its input:
 * it starts there at once, with no hand-off between workers), else round-robin from a cursor. So
 * the tiles of one layer spread over distinct workers (a layer is a phase: its tasks all become
 * ready together); balancing total bytes over the whole graph instead puts several tiles of one
 * layer on one worker in turn, which then finishes the layer late. A task costs dev's fixed part
 * plus its bytes at one worker's share of the bandwidth (pk_device_figures). Every worker's list
 * stays in task order, so the static mode cannot deadlock. */
static pk_status schedule(pk_kernel *k, pk_taskgraph *g, const pk_device_figures *dev) {
    PK_ASSERT(dev->bytes_per_ns > 0);
    int W = k->cfg.num_workers;
    uint64_t *free_at = calloc((size_t)W, sizeof *free_at);
    uint64_t *ready = calloc((size_t)g->nevents, sizeof *ready);
    int *owner = malloc((size_t)g->ntasks * sizeof *owner);
    int *trigger_owner = malloc((size_t)g->nevents * sizeof *trigger_owner); /* of an event's last trigger */
    uint32_t *fill = calloc((size_t)W, sizeof *fill);
    g->sched_offset = calloc((size_t)W + 1, sizeof *g->sched_offset);
    g->sched_tasks = malloc((size_t)g->ntasks * sizeof *g->sched_tasks);
    pk_status st = PK_OK;
    if (!free_at || !ready || !owner || !trigger_owner || !fill || !g->sched_offset || !g->sched_tasks) {
        st = pk_fail(k, PK_ERR_NO_MEMORY, "pk_compile: out of memory for the schedule");
        goto out;
    }
    g->nworkers = W;
    int cursor = 0;
    for (int t = 1; t < g->ntasks; t++) { /* task 0 (BEGIN) is run by prepare_next_step */
        const pk_task *task = &g->tasks[t];
        uint64_t at = task->dep_event < (uint32_t)g->nevents ? ready[task->dep_event] : 0;
        uint64_t cost = dev->task_fixed_ns + task->cost_bytes / dev->bytes_per_ns;
        int best = -1;
        uint64_t best_end = 0;
        for (int i = 0; i < W; i++) {
            int w = (cursor + i) % W;
            uint64_t end = (free_at[w] > at ? free_at[w] : at) + cost;
            if (best < 0 || end < best_end) best = w, best_end = end;
        }
        const int own = task->dep_event < (uint32_t)g->nevents && g->events[task->dep_event].num_triggers == 1 &&
                                task->dep_event != g->begin_event
                            ? trigger_owner[task->dep_event]
                            : -1;
        if (own >= 0 && (free_at[own] > at ? free_at[own] : at) + cost == best_end) best = own;
        owner[t] = best;
        free_at[best] = best_end;
        cursor = (best + 1) % W;
        if (task->trig_event < (uint32_t)g->nevents) {
            trigger_owner[task->trig_event] = best;
            if (ready[task->trig_event] < best_end) ready[task->trig_event] = best_end;
        }
        g->sched_offset[best + 1]++;
    }
    for (int w = 0; w < W; w++) g->sched_offset[w + 1] += g->sched_offset[w];
    for (int t = 1; t < g->ntasks; t++)
        g->sched_tasks[g->sched_offset[owner[t]] + fill[owner[t]]++] = (uint32_t)t;
out:
    free(free_at);
    free(ready);
    free(owner);
    free(trigger_owner);
    free(fill);
    return st;
}

/* Marks the layers that work on the rows that draw a token only (pk_layer.sampled_rows): the
 * argmax kinds, and the linear (or rmsnorm + linear, without an accumulator) layer whose output
 * is an ARGMAX_PARTIAL layer's logits and that no other layer reads. Their other rows' logits and
 * tokens are not computed unless the run asks for every row's (pk_config.all_logits). */
static void mark_sampled_rows(pk_kernel *k) {
    for (int l = 0; l < k->nlayers; l++) {
        pk_layer *L = &k->layers[l];
        L->sampled_rows = L->kind == PK_TASK_ARGMAX_PARTIAL || L->kind == PK_TASK_RMSNORM_LINEAR_ARGMAX;
    }
    for (int l = 0; l < k->nlayers; l++) {
        const pk_layer *A = &k->layers[l];
        if (A->kind != PK_TASK_ARGMAX_PARTIAL) continue;
        const int logits = A->inputs[PK_V_AMP_LOGITS], p = k->tensors[logits]->producer;
        if (p < 0) continue;
        pk_layer *P = &k->layers[p];
        int ok = P->kind == PK_TASK_LINEAR || (P->kind == PK_TASK_RMSNORM_LINEAR && P->inputs[PK_V_NL_ACC] < 0);
        for (int r = 0; ok && r < k->nlayers; r++)
            for (int in = 0; ok && r != l && in < k->layers[r].ninputs; in++) ok = k->layers[r].inputs[in] != logits;
        if (ok) P->sampled_rows = 1; /* (an argmax kind already is) */
    }
}

pk_status pk_taskgraph_build(pk_kernel *k, const pk_device_figures *dev) {
    pk_taskgraph *g = &k->graph;
    int nl = k->nlayers;
    if (nl == 0) return pk_fail(k, PK_ERR_STATE, "pk_compile: the kernel has no layers");
    memset(g, 0, sizeof *g);
    g->nlayers = nl;
    mark_sampled_rows(k);
    g->layer_order = malloc((size_t)nl * sizeof *g->layer_order);
    g->layer_params = malloc((size_t)nl * sizeof *g->layer_params);
    unsigned char *direct = calloc((size_t)nl * nl, 1); /* direct[L·nl + P]: L waits on P */
    unsigned char *full = calloc((size_t)nl * nl, 1);   /* full[L·nl + P]: each L task follows all of P */
    unsigned char *all = calloc((size_t)nl * nl, 1);    /* all[L·nl + P]: L's tasks together follow all of P */
    int *consumer = malloc((size_t)nl * sizeof *consumer); /* the layer whose events P signals */
    int *nevents = calloc((size_t)nl, sizeof *nevents);
    int *first_event = calloc((size_t)nl, sizeof *first_event);
    pk_status st = PK_OK;
    if (!g->layer_order || !g->layer_params || !direct || !full || !all || !consumer || !nevents || !first_event) {
        st = pk_fail(k, PK_ERR_NO_MEMORY, "pk_compile: out of memory");
        goto done;
    }
    for (int l = 0; l < nl; l++) consumer[l] = -1;
    /* A fused MLP's accumulator that no layer zeroes would add up over the steps. */
    for (int l = 0; l < nl && st == PK_OK; l++) {
        if (k->layers[l].kind != PK_TASK_RMSNORM_SWIGLU_DOWN) continue;
        const int acc = k->layers[l].outputs[1];
        if (pk_accumulator_clearer(k, acc) < 0)
            st = pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                         "pk_compile: the accumulator '%s' of layer %s is never cleared: add a "
                         "pk_linear_with_residual_clear_layer after its last reader",
                         k->tensors[acc]->name, k->layers[l].name);
    }
    if (st != PK_OK) goto done;

    /* Direct producers, redundancy and the event count of every layer. */
    for (int l = 0; l < nl; l++) {
        const pk_layer *L = &k->layers[l];
        int events = 0; /* gcd over edges; 0 while none */
        for (int in = 0; in < L->ninputs; in++) {
            int x = L->inputs[in];
            if (x < 0) continue;
            int p = k->tensors[x]->producer;
            if (p < 0 || p == l) continue; /* an input, or the layer's own KV cache */
            PK_ASSERT(p < l);
            direct[l * nl + p] = 1;
        }
        for (int p = 0; p < l; p++) {
            if (!direct[l * nl + p]) continue;
            /* p is covered by another direct producer q whose every task follows all of p, or
             * whose tasks together do when l waits on all of q (a single-event edge). */
            int covered = 0;
            for (int q = 0; q < l && !covered; q++)
                covered = q != p && direct[l * nl + q] &&
                          (full[q * nl + p] || (all[q * nl + p] && layer_edge_events(k, q, L) == 1));
            if (covered) {
                direct[l * nl + p] = 0;
                continue;
            }
            events = gcd(events, layer_edge_events(k, p, L));
        }
        for (int p = 0; p < l; p++) {
            if (!direct[l * nl + p]) continue;
            if (consumer[p] >= 0) {
                st = pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                             "pk_compile: the output of layer %s is read by layers %s and %s, and "
                             "the later one does not wait on all of it through the earlier one: "
                             "a layer's output can feed one layer directly; later readers must "
                             "depend on that layer (as a residual stream does)",
                             k->layers[p].name, k->layers[consumer[p]].name, L->name);
                goto done;
            }
            consumer[p] = l;
            /* Every task of p signals one of l's events, and every event has consumers. */
            all[l * nl + p] = 1;
            for (int x = 0; x < l; x++) {
                full[l * nl + x] |= full[p * nl + x];
                all[l * nl + x] |= all[p * nl + x];
            }
        }
        nevents[l] = events; /* 0: a root layer */
        /* full[l]: each task of l waits on ≥ 1 task of every direct producer, and on all of a
         * producer whose edge has a single event — so on everything those tasks together follow. */
        if (events == 1)
            for (int p = 0; p < l; p++)
                if (direct[l * nl + p]) {
                    full[l * nl + p] = 1;
                    for (int x = 0; x < l; x++) full[l * nl + x] |= all[p * nl + x];
                }
    }

    /* Task order: BEGIN, roots, the rest. */
    int n = 0;
    for (int l = 0; l < nl; l++)
        if (nevents[l] == 0) g->layer_order[n++] = l;
    int nroots = n;
    for (int l = 0; l < nl; l++)
        if (nevents[l] != 0) g->layer_order[n++] = l;
    int64_t ntasks64 = 1; /* grids sum in 64 bits: task ids are int32 */
    for (int i = 0; i < nl; i++) ntasks64 += k->layers[g->layer_order[i]].grid;
    if (ntasks64 > INT32_MAX) {
        st = pk_fail(k, PK_ERR_LIMIT, "pk_compile: the grids of the %d layers add up to %lld tasks; at most %d",
                     nl, (long long)ntasks64, INT32_MAX);
        goto done;
    }
    int ntasks = 1;
    for (int i = 0; i < nl; i++) {
        pk_layer *L = &k->layers[g->layer_order[i]];
        L->first_task = ntasks;
        ntasks += L->grid;
    }
    /* Events: BEGIN, each non-root layer's, END_OF_GRAPH. */
    int nev = 1;
    for (int i = nroots; i < nl; i++) {
        first_event[g->layer_order[i]] = nev;
        nev += nevents[g->layer_order[i]];
    }
    g->end_event = (uint32_t)nev++;
    g->begin_event = 0;
    g->tasks = calloc((size_t)ntasks, sizeof *g->tasks);
    g->events = calloc((size_t)nev, sizeof *g->events);
    if (!g->tasks || !g->events) {
        st = pk_fail(k, PK_ERR_NO_MEMORY, "pk_compile: out of memory for %d tasks", ntasks);
        goto done;
    }
    g->ntasks = ntasks;
    g->nevents = nev;

    g->tasks[0].kind = PK_TASK_BEGIN;
    g->tasks[0].dep_event = PK_NO_EVENT;
    g->tasks[0].trig_event = g->begin_event;
    g->events[0].kind = PK_EVENT_BEGIN;
    g->events[0].num_triggers = 1;
    g->events[0].first_task = 1;
    g->events[0].last_task = nroots ? (uint32_t)k->layers[g->layer_order[nroots - 1]].first_task +
                                          (uint32_t)k->layers[g->layer_order[nroots - 1]].grid
                                    : 1;
    g->events[g->end_event].kind = PK_EVENT_END_OF_GRAPH;
    g->events[g->end_event].first_task = (uint32_t)ntasks; /* no consumer task: prepare_next_step */
    g->events[g->end_event].last_task = (uint32_t)ntasks;

    for (int i = 0; i < nl; i++) {
        int l = g->layer_order[i];
        pk_layer *L = &k->layers[l];
        g->layer_params[l] = L->params;
        int E = nevents[l];
        for (int j = 0; E > 0 && j < E; j++) {
            pk_event *ev = &g->events[first_event[l] + j];
            ev->kind = PK_EVENT_NORMAL;
            ev->first_task = (uint32_t)(L->first_task + j * (L->grid / E));
            ev->last_task = ev->first_task + (uint32_t)(L->grid / E);
        }
        for (int t = 0; t < L->grid; t++) {
            pk_task *task = &g->tasks[L->first_task + t];
            task->kind = L->kind;
            task->layer = (uint32_t)l;
            task->index = (uint32_t)t;
            task->dep_event = E == 0 ? g->begin_event : (uint32_t)(first_event[l] + t / (L->grid / E));
            int c = consumer[l];
            if (c < 0) {
                task->trig_event = g->end_event;
            } else {
                int Ec = nevents[c];
                task->trig_event = (uint32_t)(first_event[c] + (Ec == 1 ? 0 : t / (L->grid / Ec)));
            }
            g->events[task->trig_event].num_triggers++;
            int nv = 0;
            for (int in = 0; in < L->ninputs; in++) {
                task->views[nv] = make_view(k, L->inputs[in], L->in_split[in], t);
                /* The KV cache read depends on the positions: not known here. */
                int kv = (L->kind == PK_TASK_ATTENTION || L->kind == PK_TASK_ATTENTION_PARTIAL) &&
                         (in == PK_V_ATT_K_CACHE || in == PK_V_ATT_V_CACHE);
                /* A split-K layer's residual is read by its last task only: not a task's cost. */
                int last_only = L->kind == PK_TASK_LINEAR_SPLITK_RESIDUAL && in == PK_V_LSK_RES;
                if (!kv && !last_only) task->cost_bytes += view_bytes(k, &task->views[nv], L->inputs[in]);
                nv++;
            }
            for (int o = 0; o < L->noutputs; o++) {
                task->views[nv] = make_view(k, L->outputs[o], L->out_split[o], t);
                /* its accumulator and out: the adds go to L2, out is the last task's */
                if (L->kind != PK_TASK_LINEAR_SPLITK_RESIDUAL)
                    task->cost_bytes += view_bytes(k, &task->views[nv], L->outputs[o]);
                nv++;
            }
            task->nviews = (uint32_t)nv;
        }
    }
    st = schedule(k, g, dev);
    if (st != PK_OK) goto done;
    uint64_t h = 0xcbf29ce484222325ULL;
    h = fnv1a(h, g->tasks, (size_t)g->ntasks * sizeof *g->tasks);
    h = fnv1a(h, g->events, (size_t)g->nevents * sizeof *g->events);
    h = fnv1a(h, g->layer_params, (size_t)nl * sizeof *g->layer_params);
    g->hash = h;
done:
    free(direct);
    free(full);
    free(all);
    free(consumer);
    free(nevents);
    free(first_event);
    if (st != PK_OK) pk_taskgraph_free(g);
    return st;
}

void pk_taskgraph_free(pk_taskgraph *g) {
    free(g->tasks);
    free(g->events);
    free(g->layer_params);
    free(g->layer_order);
    free(g->sched_offset);
    free(g->sched_tasks);
    memset(g, 0, sizeof *g);
}
