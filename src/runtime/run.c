// SPDX-License-Identifier: Apache-2.0
/* run.c — pk_compile and pk_run: the backend-independent part of compiling and running, which
 * reaches the backend only through its table (backend.h); what the device is and what a run
 * records (device info, step times, memory, copy bandwidth). */
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "runtime/runtime.h"

/* Room for `steps` step records (and their durations) in rt. */
static int reserve_step_records(pk_run_record *rt, int64_t steps) {
    if (steps <= rt->alloc) return 0;
    free(rt->rec);
    free(rt->step_ms);
    free(rt->step_rows);
    free(rt->step_prompt_rows);
    rt->rec = malloc((size_t)(steps + 1) * sizeof *rt->rec);
    rt->step_ms = malloc((size_t)steps * sizeof *rt->step_ms);
    rt->step_rows = malloc((size_t)steps * sizeof *rt->step_rows);
    rt->step_prompt_rows = malloc((size_t)steps * sizeof *rt->step_prompt_rows);
    if (!rt->rec || !rt->step_ms || !rt->step_rows || !rt->step_prompt_rows) {
        free(rt->rec);
        free(rt->step_ms);
        free(rt->step_rows);
        free(rt->step_prompt_rows);
        rt->rec = NULL;
        rt->step_ms = NULL;
        rt->step_rows = rt->step_prompt_rows = NULL;
        rt->alloc = 0;
        return -1;
    }
    rt->alloc = steps;
    return 0;
}

/* Durations from the boundaries a successful run recorded. */
static void finish_step_times(pk_kernel *k, pk_run_record *rt, int64_t cap) {
    int64_t n = k->steps_run < cap ? k->steps_run : cap;
    for (int64_t i = 0; i < n; i++) {
        const pk_step_rec *a = &rt->rec[i], *b = &rt->rec[i + 1];
        rt->step_ms[i] = b->ns >= a->ns ? (double)(b->ns - a->ns) / 1e6 : 0.0;
        rt->step_rows[i] = b->rows;
        rt->step_prompt_rows[i] = b->prompt_rows;
    }
    rt->ntimed = n;
}

pk_status pk_compile(pk_kernel *k, const pk_compile_options *opts) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status s = pk_enter(k);
    if (s != PK_OK) return s;
    if (k->compiled) return pk_fail(k, PK_ERR_STATE, "pk_compile: the kernel is compiled already");
    pk_device_figures dev;
    k->backend->device_figures(k, &dev);
    s = pk_taskgraph_build(k, &dev);
    if (s != PK_OK) return s;
    /* Outputs first, the backend next; any failure leaves the kernel uncompiled. */
    if (opts && opts->output_dir) {
        struct stat st;
        if (mkdir(opts->output_dir, 0755) != 0 && (stat(opts->output_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
            s = pk_fail(k, PK_ERR_IO, "pk_compile: cannot create output directory '%s'", opts->output_dir);
        char path[1200];
        if (s == PK_OK && (size_t)snprintf(path, sizeof path, "%s/task_graph.json", opts->output_dir) >= sizeof path)
            s = pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_compile: output directory path of %zu bytes is too long",
                        strlen(opts->output_dir));
        if (s == PK_OK) s = pk_taskgraph_write_json(k, path);
    }
    if (s == PK_OK) s = k->backend->compile(k, opts);
    if (s != PK_OK) {
        pk_taskgraph_free(&k->graph);
        return s;
    }
    k->compiled = 1;
    return PK_OK;
}

pk_status pk_write_task_graph(pk_kernel *k, const char *path) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status s = pk_enter(k);
    if (s != PK_OK) return s;
    if (!path) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_write_task_graph: path is NULL");
    if (!k->compiled) return pk_fail(k, PK_ERR_STATE, "pk_write_task_graph: compile the kernel first");
    return pk_taskgraph_write_json(k, path);
}

pk_status pk_check_runnable(pk_kernel *k, const char *who) {
    if (!k->compiled) return pk_fail(k, PK_ERR_STATE, "%s: compile the kernel first", who);
    if (k->session) return pk_fail(k, PK_ERR_STATE, "%s: a session is open on this kernel (pk_session_close first)", who);
    pk_tensor *out = k->tensors[k->t_step_output];
    if (out->producer < 0)
        return pk_fail(k, PK_ERR_STATE, "%s: no layer writes pk_step_output(k): add pk_argmax_layer(k, logits, "
                                        "pk_step_output(k), grid) or pk_rmsnorm_linear_argmax_layer", who);
    /* Generated ids are fed back to the embedding: the argmax must not pick ids past its rows.
     * pk_argmax_layer's layer reads the logits and writes pk_step_output;
     * pk_rmsnorm_linear_argmax_layer's writes both. */
    const pk_layer *am = &k->layers[out->producer];
    PK_ASSERT(am->kind == PK_TASK_ARGMAX_PARTIAL || am->kind == PK_TASK_RMSNORM_LINEAR_ARGMAX);
    const pk_tensor *logits = k->tensors[am->kind == PK_TASK_ARGMAX_PARTIAL ? am->inputs[PK_V_AMP_LOGITS]
                                                                             : am->outputs[0]];
    if (k->vocab_size > 0 && logits->dims[1] > k->vocab_size)
        return pk_fail(k, PK_ERR_SHAPE,
                       "%s: the argmax into pk_step_output reads logits '%s' of %lld columns, more than "
                       "the %d rows of the embedding: generated ids would index past it",
                       who, logits->name, (long long)logits->dims[1], k->vocab_size);
    return PK_OK;
}

pk_status pk_run(pk_kernel *k, pk_request *reqs, int n, pk_token_fn on_token, void *user) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status s = pk_enter(k);
    if (s != PK_OK) return s;
    s = pk_check_runnable(k, "pk_run");
    if (s != PK_OK) return s;
    pk_run_record *rt = &k->runs;
    rt->ntimed = 0;
    k->steps_run = 0;
    k->spec_drafted = k->spec_accepted = 0;
    pk_decode d;
    __atomic_store_n(&k->cancel, 0, __ATOMIC_SEQ_CST);
    s = pk_decode_init(&d, k, reqs, n, on_token, user);
    if (s != PK_OK) return s;
    /* Every step carries at least one row of some request: a bound on the steps. */
    int64_t max_steps = 0;
    for (int i = 0; i < n; i++) max_steps += (int64_t)reqs[i].prompt_len + reqs[i].max_new_tokens;
    if (max_steps > PK_TIMED_STEPS_MAX) max_steps = PK_TIMED_STEPS_MAX;
    if (reserve_step_records(rt, max_steps) != 0) {
        pk_decode_free(&d);
        return pk_fail(k, PK_ERR_NO_MEMORY, "pk_run: out of memory for %lld step records", (long long)max_steps);
    }
    if (rt->rec) memset(rt->rec, 0, (size_t)(max_steps + 1) * sizeof *rt->rec);
    d.s.rec = rt->rec;
    d.s.rec_cap = rt->rec ? max_steps : 0;
    s = k->backend->run(k, &d);
    k->spec_drafted = d.s.drafted;
    k->spec_accepted = d.s.accepted;
    if (s == PK_OK && rt->rec) finish_step_times(k, rt, max_steps);
    if (s == PK_OK && pk_cancel_requested(k))
        for (int i = 0; i < n; i++)
            if (reqs[i].finish == PK_FINISH_NONE) reqs[i].finish = PK_FINISH_CANCELLED;
    for (int i = 0; i < n; i++) reqs[i].num_cached = d.sreqs[i].num_cached; /* 0 where it is off */
    pk_decode_free(&d);
    return s;
}

void pk_cancel(pk_kernel *k) {
    if (k) __atomic_store_n(&k->cancel, 1, __ATOMIC_RELEASE);
}

/* Whether pk_cancel asked the run to stop (the backends' step boundary reads it). */
int pk_cancel_requested(const pk_kernel *k) { return __atomic_load_n(&k->cancel, __ATOMIC_ACQUIRE); }

pk_status pk_run_step_times(const pk_kernel *k, pk_step_times *out) {
    if (!k || !out) return PK_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    out->num_steps = k->steps_run;
    const pk_run_record *rt = &k->runs;
    if (rt->ntimed > 0) {
        out->num_timed = rt->ntimed;
        out->ms = rt->step_ms;
        out->rows = rt->step_rows;
        out->prompt_rows = rt->step_prompt_rows;
    }
    return PK_OK;
}

pk_status pk_kernel_memory(pk_kernel *k, pk_memory_stats *out) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status s = pk_enter(k);
    if (s != PK_OK) return s;
    if (!out) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_kernel_memory: out is NULL");
    memset(out, 0, sizeof *out);
    if (!k->compiled) return pk_fail(k, PK_ERR_STATE, "pk_kernel_memory: compile the kernel first");
    return k->backend->memory(k, out);
}

/* $PK_COPY_PROBE_MB (MiB, at least 64), else def. */
uint64_t pk_copy_probe_bytes(uint64_t def) {
    const char *e = getenv("PK_COPY_PROBE_MB");
    if (!e || !*e) return def;
    char *end;
    unsigned long long mb = strtoull(e, &end, 10);
    if (*end || mb < 64 || mb > (1ull << 20)) return def;
    return (uint64_t)mb << 20;
}

pk_status pk_device_copy_bandwidth(pk_kernel *k, double *bytes_per_s) {
    if (!k) return PK_ERR_INVALID_ARGUMENT;
    pk_status s = pk_enter(k);
    if (s != PK_OK) return s;
    if (!bytes_per_s) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_device_copy_bandwidth: bytes_per_s is NULL");
    *bytes_per_s = 0;
    return k->backend->copy_bandwidth(k, bytes_per_s);
}

pk_status pk_kernel_device_info(const pk_kernel *k, pk_device_info *out) {
    if (!k || !out) return PK_ERR_INVALID_ARGUMENT;
    if (!k->backend) return k->status; /* the config failed: no device */
    pk_device_figures dev;
    k->backend->device_figures(k, &dev);
    out->workers = dev.workers;
    out->stage_bytes = dev.stage_bytes;
    return PK_OK;
}

int pk_kernel_attention_reach(const pk_kernel *k, int head_dim, int q_heads_per_kv_head) {
    if (!k || !k->backend) return 0;
    return k->backend->attention_reach(k, head_dim, q_heads_per_kv_head);
}
