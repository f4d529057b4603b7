// SPDX-License-Identifier: Apache-2.0
/* kernel.c — the kernel object: config defaults and checks, its backend (backend.h), the decode
 * state tensors, error state, status names.
 *
 * A kernel whose config is invalid is still returned (hiredis style), in an error state that
 * every later call reports; only out-of-memory gives NULL.
 */
#include <string.h>
#include <sys/mman.h>

#include "backend.h"
#include "kernels/sample.h"
#include "pk_internal.h"

const char *pk_status_name(pk_status s) {
    static const char *const names[] = {
        "PK_OK",           "PK_ERR_INVALID_ARGUMENT", "PK_ERR_SHAPE",     "PK_ERR_STRIDE",
        "PK_ERR_GRID",     "PK_ERR_DTYPE",            "PK_ERR_STATE",     "PK_ERR_NO_MEMORY",
        "PK_ERR_IO",       "PK_ERR_FORMAT",           "PK_ERR_UNSUPPORTED", "PK_ERR_LIMIT",
        "PK_ERR_BACKEND",
    };
    if ((unsigned)s < sizeof names / sizeof names[0]) return names[s];
    return "PK_ERR_UNKNOWN";
}

size_t pk_dtype_size(pk_dtype d) {
    switch (d) {
    case PK_DTYPE_BF16: case PK_DTYPE_FP16: return 2;
    case PK_DTYPE_FP32: case PK_DTYPE_INT32: return 4;
    case PK_DTYPE_INT64: return 8;
    }
    return 0;
}

const char *pk_dtype_name(pk_dtype d) {
    switch (d) {
    case PK_DTYPE_BF16: return "bf16";
    case PK_DTYPE_FP16: return "fp16";
    case PK_DTYPE_FP32: return "fp32";
    case PK_DTYPE_INT32: return "int32";
    case PK_DTYPE_INT64: return "int64";
    }
    return "unknown";
}

pk_config pk_config_default(void) {
    pk_config c;
    memset(&c, 0, sizeof c);
    c.world_size = 1;
    c.rank = 0;
    c.num_workers = 4;
    c.num_local_schedulers = 1;
    c.num_remote_schedulers = 0;
    c.max_seq_length = 512;
    c.max_requests = 4;
    c.max_tokens_per_step = 0; /* the backend's pk_backend_i.default_step_tokens */
    c.page_size = 16;
    c.num_pages = 0; /* 0: enough for max_requests full-length requests */
    c.prefix_cache = 1;
    c.eos_token_id = -1;
    c.sched_mode = PK_SCHED_STATIC;
    c.backend = PK_BACKEND_CPU;
    return c;
}

pk_status pk_fail(pk_kernel *k, pk_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->err, sizeof k->err, fmt, ap);
    va_end(ap);
    k->status = s;
    return s;
}

/* A config error is sticky: status stays, later calls repeat it. */
static int config_failed(const pk_kernel *k) { return k->cfg.world_size == 0; }

pk_status pk_enter(pk_kernel *k) {
    if (config_failed(k)) return k->status;
    k->status = PK_OK;
    k->err[0] = '\0';
    return PK_OK;
}

static pk_status check_config(pk_kernel *k, const pk_config *c) {
#define REQUIRE(cond, ...) \
    if (!(cond)) return pk_fail(k, PK_ERR_INVALID_ARGUMENT, __VA_ARGS__)
    REQUIRE(c->world_size == 1, "config: world_size %d: only 1 rank is supported so far",
            c->world_size);
    REQUIRE(c->rank == 0, "config: rank %d outside [0, world_size %d)", c->rank, c->world_size);
    REQUIRE(c->num_workers >= 0 && c->num_workers <= 1024,
            "config: num_workers %d outside [0 (auto), 1024]", c->num_workers);
    REQUIRE(c->num_local_schedulers >= 1 && c->num_local_schedulers <= 64,
            "config: num_local_schedulers %d outside [1, 64]", c->num_local_schedulers);
    REQUIRE(c->num_remote_schedulers == 0,
            "config: num_remote_schedulers %d: remote schedulers need world_size > 1",
            c->num_remote_schedulers);
    REQUIRE(c->max_seq_length >= 2 && c->max_seq_length <= (1 << 24),
            "config: max_seq_length %d outside [2, 16777216]", c->max_seq_length);
    REQUIRE(c->max_requests >= 1 && c->max_requests <= 4096,
            "config: max_requests %d outside [1, 4096]", c->max_requests);
    REQUIRE(c->max_tokens_per_step >= c->max_requests && c->max_tokens_per_step <= 65536,
            "config: max_tokens_per_step %d must be in [max_requests %d, 65536] (every running "
            "request decodes one token per step)",
            c->max_tokens_per_step, c->max_requests);
    REQUIRE(c->page_size >= 1 && c->page_size <= 4096, "config: page_size %d outside [1, 4096]",
            c->page_size);
    REQUIRE(c->num_pages >= 1 && c->num_pages <= (1 << 24), "config: num_pages %d outside [1, 2^24]",
            c->num_pages);
    REQUIRE(c->eos_token_id >= -1 && c->eos_token_id < INT32_MAX,
            "config: eos_token_id %lld must be -1 (none) or a token id",
            (long long)c->eos_token_id);
    REQUIRE(c->attention_kv_splits >= 0 && c->attention_kv_splits <= 4096,
            "config: attention_kv_splits %d outside [0 (auto), 4096]", c->attention_kv_splits);
    REQUIRE(c->spec_length >= 0 && c->spec_length <= 16, "config: spec_length %d outside [0 (off), 16]",
            c->spec_length);
    REQUIRE(c->spec_ngram >= 0 && c->spec_ngram <= 8, "config: spec_ngram %d outside [0 (3), 8]", c->spec_ngram);
    REQUIRE(c->prefix_cache == 0 || c->prefix_cache == 1, "config: prefix_cache %d is not 0 (off) or 1 (on)",
            c->prefix_cache);
    REQUIRE(c->sched_mode == PK_SCHED_STATIC || c->sched_mode == PK_SCHED_DYNAMIC,
            "config: unknown sched_mode %d", (int)c->sched_mode);
    REQUIRE(pk_backend_find(c->backend) != NULL, "config: unknown backend %d", (int)c->backend);
#undef REQUIRE
    return PK_OK;
}

/* The pk-owned tensors the decode loop fills before every step (runtime/decode_step.h). */
static pk_status create_state_tensors(pk_kernel *k) {
    const pk_config *c = &k->cfg;
    int64_t T = c->max_tokens_per_step;
    k->pages_per_req = (c->max_seq_length + c->page_size - 1) / c->page_size;
    struct {
        const char *name;
        int ndim;
        int64_t dims[2];
        int *id;
    } spec[] = {
        {"pk.step_tokens", 1, {T, 0}, &k->t_step_tokens},
        {"pk.step_output", 1, {T, 0}, &k->t_step_output},
        {"pk.step_info", 1, {PK_STEP_INFO_LEN, 0}, &k->t_step_info},
        {"pk.token_pos", 1, {T, 0}, &k->t_token_pos},
        {"pk.token_req", 1, {T, 0}, &k->t_token_req},
        {"pk.page_table", 2, {c->max_requests, k->pages_per_req}, &k->t_page_table},
        {"pk.sample_params", 2, {c->max_requests, PK_SAMPLE_PARAMS}, &k->t_sample_params},
        {"pk.sample_slot", 1, {T, 0}, &k->t_sample_slot},
    };
    for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++) {
        pk_tensor *t = pk_new_tensor(k, spec[i].name, PK_DTYPE_INT32, spec[i].ndim, spec[i].dims, PK_IO_LOCAL);
        if (!t) return k->status;
        *spec[i].id = t->id;
    }
    return PK_OK;
}

static void copy_path(char *dst, size_t cap, const char **field) {
    if (*field) {
        snprintf(dst, cap, "%s", *field);
        *field = dst;
    }
}

pk_kernel *pk_kernel_new(const pk_config *cfg) {
    pk_kernel *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    if (!cfg) {
        pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_kernel_new: config is NULL");
        return k;
    }
    pk_config c = *cfg;
    if (c.num_pages == 0 && c.page_size >= 1 && c.max_requests >= 1 && c.max_seq_length >= 1) {
        /* In 64 bits: out-of-range values are checked below, after this. */
        int64_t pages = (int64_t)c.max_requests * (((int64_t)c.max_seq_length + c.page_size - 1) / c.page_size);
        c.num_pages = pages > INT32_MAX ? INT32_MAX : (int)pages;
    }
    const pk_backend_i *backend = pk_backend_find(c.backend); /* NULL: check_config says so */
    if (c.max_tokens_per_step == 0 && backend) { /* auto: at least one row per request */
        const int t = backend->default_step_tokens;
        c.max_tokens_per_step = t > c.max_requests ? t : c.max_requests;
    }
    if (check_config(k, &c) != PK_OK) return k; /* cfg.world_size stays 0: sticky */
    if (c.num_workers == 0) {
        pk_status s = backend->default_workers(c.rank, &c.num_workers, k->err, sizeof k->err);
        if (s != PK_OK) {
            k->status = s;
            return k;
        }
    }
    if ((int64_t)c.num_pages * c.page_size > (int64_t)INT32_MAX) {
        pk_fail(k, PK_ERR_INVALID_ARGUMENT, "config: num_pages %d x page_size %d is too large",
                c.num_pages, c.page_size);
        return k;
    }
    int64_t table = (int64_t)c.max_requests * (((int64_t)c.max_seq_length + c.page_size - 1) / c.page_size);
    if (table > ((int64_t)1 << 26)) {
        pk_fail(k, PK_ERR_INVALID_ARGUMENT,
                "config: the page table would hold %lld entries (max_requests %d x max_seq_length %d / page_size %d); "
                "the limit is 2^26",
                (long long)table, c.max_requests, c.max_seq_length, c.page_size);
        return k;
    }
    if ((c.trace_path && strlen(c.trace_path) >= sizeof k->trace_path) ||
        (c.cache_dir && strlen(c.cache_dir) >= sizeof k->cache_dir)) {
        pk_fail(k, PK_ERR_INVALID_ARGUMENT, "config: %s is longer than %zu bytes (it would be cut)",
                c.trace_path && strlen(c.trace_path) >= sizeof k->trace_path ? "trace_path" : "cache_dir",
                sizeof k->trace_path - 1);
        return k;
    }
    k->cfg = c;
    k->backend = backend;
    k->device = c.rank;
    copy_path(k->trace_path, sizeof k->trace_path, &k->cfg.trace_path);
    copy_path(k->cache_dir, sizeof k->cache_dir, &k->cfg.cache_dir);
    if (create_state_tensors(k) != PK_OK) {
        k->cfg.world_size = 0; /* keep the error sticky */
    }
    return k;
}

void pk_kernel_free(pk_kernel *k) {
    if (!k) return;
    if (k->close_session) k->close_session(k); /* an open session's runtime uses everything below */
    if (k->backend) k->backend->free(k);
    free(k->runs.rec);
    free(k->runs.step_ms);
    free(k->runs.step_rows);
    free(k->runs.step_prompt_rows);
    pk_taskgraph_free(&k->graph);
    for (int i = 0; i < k->ntensors; i++) {
        pk_tensor *t = k->tensors[i];
        if (t->mapped_bytes)
            munmap(t->data, t->mapped_bytes);
        else if (t->storage == PK_STORAGE_OWNED || t->storage == PK_STORAGE_COLUMN_BLOCKS)
            free(t->data);
        free(t);
    }
    free(k->tensors);
    free(k->layers);
    free(k);
}

pk_status pk_kernel_status(const pk_kernel *k) { return k ? k->status : PK_ERR_INVALID_ARGUMENT; }

const char *pk_kernel_error(const pk_kernel *k) { return k ? k->err : "kernel is NULL"; }

const pk_config *pk_kernel_config(const pk_kernel *k) { return k ? &k->cfg : NULL; }

pk_status pk_kernel_stats(const pk_kernel *k, pk_graph_stats *out) {
    if (!k || !out) return PK_ERR_INVALID_ARGUMENT;
    if (config_failed(k)) return k->status;
    memset(out, 0, sizeof *out);
    out->num_layers = k->nlayers;
    out->num_tasks = k->graph.ntasks;
    out->num_events = k->graph.nevents;
    out->num_workers = k->cfg.num_workers;
    out->steps_run = k->steps_run;
    out->spec_drafted = k->spec_drafted;
    out->spec_accepted = k->spec_accepted;
    return PK_OK;
}

pk_status pk_kernel_layer(const pk_kernel *k, int i, pk_layer_info *out) {
    if (!k || !out || i < 0 || i >= k->nlayers) return PK_ERR_INVALID_ARGUMENT;
    const pk_layer *l = &k->layers[i];
    out->name = l->name;
    out->kind = pk_task_kind_names[l->kind];
    out->grid = l->grid;
    out->first_task = k->compiled ? l->first_task : 0;
    return PK_OK;
}

const char *pk_dims_str(const int64_t *dims, int ndim, char *buf, size_t len) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, len - n, "[");
    for (int i = 0; i < ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (n < len) snprintf(buf + n, len - n, "]");
    return buf;
}
