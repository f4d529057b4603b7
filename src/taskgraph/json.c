// SPDX-License-Identifier: Apache-2.0
/* json.c — task_graph.json: the compiled graph for people and tools (pk inspect, tests).
 *
 * {"pk_version", "abi_version", "hash", "layers": [{name, kind, grid, first_task}],
 *  "tasks": [{id, kind, layer, index, dep_event, trig_event, cost_bytes,
 *             views: [{tensors: [names], seg_rows, row0, rows, col0, cols, row_stride}]}],
 *  "events": [{id, kind, num_triggers, first_task, last_task}],
 *  "schedule": [[task ids of worker 0], ...]}
 */
#include <cjson/cJSON.h>
#include <inttypes.h>

#include "pk_internal.h"

const char *const pk_task_kind_names[PK_TASK_KIND_COUNT] = {
    "begin", "embedding", "rmsnorm", "rmsnorm_linear", "linear", "linear_with_residual",
    "silu_mul", "silu_mul_linear_with_residual", "attention", "argmax_partial", "argmax_reduce",
    "terminate", "attention_partial", "rmsnorm_linear_swiglu", "linear_splitk_with_residual", "rmsnorm_swiglu_down",
    "rmsnorm_linear_argmax",
};
static const char *const event_kind_names[] = {"begin", "normal", "end_of_graph"};

static cJSON *view_json(const pk_kernel *k, const pk_view *v) {
    cJSON *o = cJSON_CreateObject();
    cJSON *names = cJSON_AddArrayToObject(o, "tensors");
    cJSON *rows = cJSON_AddArrayToObject(o, "seg_rows");
    for (uint32_t s = 0; s < v->nseg; s++) {
        cJSON_AddItemToArray(names, cJSON_CreateString(k->tensors[v->seg_buffer[s]]->name));
        cJSON_AddItemToArray(rows, cJSON_CreateNumber(v->seg_rows[s]));
    }
    cJSON_AddNumberToObject(o, "row0", v->row0);
    cJSON_AddNumberToObject(o, "rows", v->rows);
    cJSON_AddNumberToObject(o, "col0", v->col0);
    cJSON_AddNumberToObject(o, "cols", v->cols);
    cJSON_AddNumberToObject(o, "row_stride", (double)v->row_stride);
    return o;
}

pk_status pk_taskgraph_write_json(const pk_kernel *kc, const char *path) {
    pk_kernel *k = (pk_kernel *)kc; /* for the error message only */
    const pk_taskgraph *g = &k->graph;
    cJSON *root = cJSON_CreateObject();
    if (!root) return pk_fail(k, PK_ERR_NO_MEMORY, "task graph JSON: out of memory");
    char hash[32];
    snprintf(hash, sizeof hash, "%016" PRIx64, g->hash);
    cJSON_AddStringToObject(root, "pk_version", PK_VERSION_STRING);
    cJSON_AddNumberToObject(root, "abi_version", PK_ABI_VERSION);
    cJSON_AddStringToObject(root, "hash", hash);
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    for (int l = 0; l < k->nlayers; l++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", k->layers[l].name);
        cJSON_AddStringToObject(o, "kind", pk_task_kind_names[k->layers[l].kind]);
        cJSON_AddNumberToObject(o, "grid", k->layers[l].grid);
        cJSON_AddNumberToObject(o, "first_task", k->layers[l].first_task);
        cJSON_AddItemToArray(layers, o);
    }
    cJSON *tasks = cJSON_AddArrayToObject(root, "tasks");
    for (int t = 0; t < g->ntasks; t++) {
        const pk_task *task = &g->tasks[t];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", t);
        cJSON_AddStringToObject(o, "kind", pk_task_kind_names[task->kind]);
        cJSON_AddStringToObject(o, "layer", t == 0 ? "begin" : k->layers[task->layer].name);
        cJSON_AddNumberToObject(o, "index", task->index);
        cJSON_AddNumberToObject(o, "dep_event", task->dep_event == PK_NO_EVENT ? -1 : (double)task->dep_event);
        cJSON_AddNumberToObject(o, "trig_event", task->trig_event);
        cJSON_AddNumberToObject(o, "cost_bytes", (double)task->cost_bytes);
        cJSON *views = cJSON_AddArrayToObject(o, "views");
        for (uint32_t v = 0; v < task->nviews; v++) cJSON_AddItemToArray(views, view_json(k, &task->views[v]));
        cJSON_AddItemToArray(tasks, o);
    }
    cJSON *events = cJSON_AddArrayToObject(root, "events");
    for (int e = 0; e < g->nevents; e++) {
        const pk_event *ev = &g->events[e];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", e);
        cJSON_AddStringToObject(o, "kind", event_kind_names[ev->kind]);
        cJSON_AddNumberToObject(o, "num_triggers", ev->num_triggers);
        cJSON_AddNumberToObject(o, "first_task", ev->first_task);
        cJSON_AddNumberToObject(o, "last_task", ev->last_task);
        cJSON_AddItemToArray(events, o);
    }
    cJSON *sched = cJSON_AddArrayToObject(root, "schedule");
    for (int w = 0; w < g->nworkers; w++) {
        cJSON *list = cJSON_CreateArray();
        for (uint32_t i = g->sched_offset[w]; i < g->sched_offset[w + 1]; i++)
            cJSON_AddItemToArray(list, cJSON_CreateNumber(g->sched_tasks[i]));
        cJSON_AddItemToArray(sched, list);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return pk_fail(k, PK_ERR_NO_MEMORY, "task graph JSON: out of memory");
    FILE *f = fopen(path, "w");
    pk_status st = PK_OK;
    if (!f) {
        st = pk_fail(k, PK_ERR_IO, "cannot write task graph '%s'", path);
    } else {
        fputs(text, f);
        fputc('\n', f);
        if (fclose(f) != 0) st = pk_fail(k, PK_ERR_IO, "error writing task graph '%s'", path);
    }
    free(text);
    return st;
}
