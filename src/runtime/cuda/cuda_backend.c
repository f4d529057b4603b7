// SPDX-License-Identifier: Apache-2.0
/* cuda_backend.c — the CUDA backend's table (backend.h): default workers, device figures,
 * compile, run, read, memory, copy bandwidth, free.
 *
 * libpk never links CUDA. The GPU (device k->device) is probed through the driver API
 * (libcuda.so.1, dlopen + dlsym): compute capability, SM count, free memory. compile generates
 * kernel.cu, builds or finds kernel.so in the cache, dlopens it, checks its ABI version and graph hash,
 * creates the device state, and streams the weights up through the object's pinned staging
 * buffers (host memory stays bounded: the tensors are read in place, memory-mapped files
 * included). With PK_CUDA_ARCH set (e.g. sm_90a) no GPU is needed: codegen and nvcc only; the
 * object is loaded at the first pk_run. run launches the persistent kernel and streams tokens to
 * on_token while it runs. The backend's state (pk_cuda_runtime) is k->backend_ctx.
 */
#include <dlfcn.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "kernels/attention_decode_layout.h"
#include "kernels/stage_layout.h" /* PK_WSTAGE_BYTES */
#include "runtime/cpu/cpu_runtime.h"
#include "runtime/cuda/cuda_internal.h"
#include "runtime/cuda/gen_api.h"
#include "runtime/runtime.h"

_Static_assert(sizeof(pk_gen_trace_rec) == sizeof(pk_trace_record), "trace records share a layout");
_Static_assert(sizeof(pk_gen_step_rec) == sizeof(pk_step_rec) && _Alignof(pk_gen_step_rec) == _Alignof(pk_step_rec),
               "step records share a layout");

#define STAGING_MAX (64ull << 20)
#define UPLOAD_CHUNK (256ull << 20)
#define CONTEXT_RESERVE (512ull << 20) /* CUDA context, module and runtime beside our buffers */
#define TRACE_BYTES_MAX (256ull << 20)
#define COPY_PROBE_BYTES (2ull << 30) /* as bench/hf_baseline.py's bw() */
#define COPY_PROBE_REPS 20

/* the driver API subset we call (CUresult is an int enum; CUdevice an int; CUcontext a pointer) */
typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_attr_fn)(int *, int, int);
typedef int (*cu_retain_fn)(void **, int);
typedef int (*cu_release_fn)(int);
typedef int (*cu_push_fn)(void *);
typedef int (*cu_pop_fn)(void **);
typedef int (*cu_meminfo_fn)(size_t *, size_t *);
enum { CU_ATTR_SM_COUNT = 16, CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76 };

typedef struct pk_cuda_runtime {
    char arch[16];
    int compile_only;  /* built for PK_CUDA_ARCH without looking at a GPU */
    pk_strbuf cu;      /* kernel.cu */
    char so_path[1200];
    /* driver */
    void *libcuda;
    int device, ctx_retained;
    cu_release_fn ctx_release;
    int major, minor, sms;
    size_t mem_free, mem_total;
    /* the loaded object */
    void *so;
    const pk_gen_info *info;
    pk_gen_create_fn create;
    pk_gen_upload_fn upload;
    pk_gen_upload_wait_fn upload_wait;
    pk_gen_run_fn run;
    pk_gen_read_fn read;
    pk_gen_copy_bandwidth_fn copy_bandwidth;
    pk_gen_destroy_fn destroy;
    void *ctx;
    pk_cuda_buffers bufs;
    uint64_t work_bytes; /* workspace on the GPU: activations, decode state, queues, staging */
} pk_cuda_runtime;

static pk_cuda_runtime *cuda_rt(const pk_kernel *k) { return k->backend_ctx; }

/* ---- the GPU, through the driver ---- */

static pk_status probe_gpu(pk_kernel *k, pk_cuda_runtime *rt) {
    if (!rt->libcuda) rt->libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!rt->libcuda)
        return pk_fail(k, PK_ERR_BACKEND,
                       "no CUDA GPU found: the NVIDIA driver library libcuda.so.1 cannot be loaded (%s); to "
                       "generate and compile without a GPU give the arch: pk compile --arch sm_90a "
                       "(library: PK_CUDA_ARCH=sm_90a)",
                       dlerror());
    cu_init_fn cu_init = (cu_init_fn)dlsym(rt->libcuda, "cuInit");
    cu_count_fn cu_count = (cu_count_fn)dlsym(rt->libcuda, "cuDeviceGetCount");
    cu_get_fn cu_get = (cu_get_fn)dlsym(rt->libcuda, "cuDeviceGet");
    cu_attr_fn cu_attr = (cu_attr_fn)dlsym(rt->libcuda, "cuDeviceGetAttribute");
    cu_retain_fn cu_retain = (cu_retain_fn)dlsym(rt->libcuda, "cuDevicePrimaryCtxRetain");
    cu_release_fn cu_release = (cu_release_fn)dlsym(rt->libcuda, "cuDevicePrimaryCtxRelease_v2");
    cu_push_fn cu_push = (cu_push_fn)dlsym(rt->libcuda, "cuCtxPushCurrent_v2");
    cu_pop_fn cu_pop = (cu_pop_fn)dlsym(rt->libcuda, "cuCtxPopCurrent_v2");
    cu_meminfo_fn cu_meminfo = (cu_meminfo_fn)dlsym(rt->libcuda, "cuMemGetInfo_v2");
    if (!cu_init || !cu_count || !cu_get || !cu_attr || !cu_retain || !cu_release || !cu_push || !cu_pop || !cu_meminfo)
        return pk_fail(k, PK_ERR_BACKEND, "no CUDA GPU found: libcuda.so.1 lacks the driver API pk needs (too old a driver?)");
    int rc, n = 0;
    if ((rc = cu_init(0)) != 0)
        return pk_fail(k, PK_ERR_BACKEND, "no CUDA GPU found: cuInit failed with CUDA error %d", rc);
    if ((rc = cu_count(&n)) != 0 || n < 1)
        return pk_fail(k, PK_ERR_BACKEND, "no CUDA GPU found: the driver reports %d devices (error %d)", n, rc);
    const int ord = k->device;
    if (n <= ord) return pk_fail(k, PK_ERR_BACKEND, "CUDA: no device %d: the driver reports %d devices", ord, n);
    if ((rc = cu_get(&rt->device, ord)) != 0 || (rc = cu_attr(&rt->major, CU_ATTR_CC_MAJOR, rt->device)) != 0 ||
        (rc = cu_attr(&rt->minor, CU_ATTR_CC_MINOR, rt->device)) != 0 ||
        (rc = cu_attr(&rt->sms, CU_ATTR_SM_COUNT, rt->device)) != 0)
        return pk_fail(k, PK_ERR_BACKEND, "no CUDA GPU found: cannot read the attributes of device %d (CUDA error %d)",
                       ord, rc);
    if (!rt->ctx_retained) {
        void *ctx = NULL;
        if ((rc = cu_retain(&ctx, rt->device)) != 0)
            return pk_fail(k, PK_ERR_BACKEND, "CUDA: cannot create a context on device %d (CUDA error %d)", ord, rc);
        rt->ctx_retained = 1;
        rt->ctx_release = cu_release;
        if ((rc = cu_push(ctx)) != 0)
            return pk_fail(k, PK_ERR_BACKEND, "CUDA: cannot use the context of device %d (CUDA error %d)", ord, rc);
        rc = cu_meminfo(&rt->mem_free, &rt->mem_total);
        void *popped;
        cu_pop(&popped);
        if (rc != 0)
            return pk_fail(k, PK_ERR_BACKEND, "CUDA: cannot read the free memory of device %d (CUDA error %d)", ord, rc);
    }
    if (pk_cuda_arch_name(rt->major, rt->minor, rt->arch, sizeof rt->arch) != 0)
        return pk_fail(k, PK_ERR_BACKEND, "CUDA: unexpected compute capability %d.%d", rt->major, rt->minor);
    return PK_OK;
}

/* ---- loading ---- */

static void *sym(pk_cuda_runtime *rt, const char *name, int *missing) {
    void *p = dlsym(rt->so, name);
    if (!p) *missing = 1;
    return p;
}

static uint64_t workspace_extra(const pk_kernel *k) {
    const pk_config *c = &k->cfg;
    const pk_taskgraph *g = &k->graph;
    uint64_t rings = (uint64_t)(c->num_workers + c->num_local_schedulers) * 12u *
                     (uint64_t)(g->ntasks > g->nevents ? g->ntasks + 66 : g->nevents + 66) * 2u;
    return (uint64_t)g->nevents * 8u + rings + (uint64_t)c->max_requests * (uint64_t)c->max_seq_length * 4u +
           (uint64_t)c->num_pages * 4u + (uint64_t)k->ntensors * 8u + 4096u;
}

static double gb(uint64_t b) { return (double)b / 1e9; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Uploads the transpose [K, N] of the attached bf16 weight t [N, K] (a split-K layer's, which
 * pk_linear_splitk_with_residual_layer takes only in bf16: its tasks read blocks of columns, which
 * the transpose holds as contiguous rows), TRANSPOSE_CHUNK bytes of it at a time through a host
 * buffer. *done counts the bytes. */
#define TRANSPOSE_CHUNK (8ull << 20)
static pk_status upload_transposed(pk_kernel *k, pk_cuda_runtime *rt, const pk_tensor *t, uint64_t *done) {
    char err[PK_ERR_MAX];
    PK_ASSERT(t->dtype == PK_DTYPE_BF16);
    const uint64_t N = (uint64_t)t->dims[0], K = (uint64_t)t->dims[1], es = sizeof(uint16_t);
    uint64_t kb = TRANSPOSE_CHUNK / (N * es);
    if (kb < 1) kb = 1;
    if (kb > K) kb = K;
    char *buf = malloc(kb * N * es);
    if (!buf) return pk_fail(k, PK_ERR_NO_MEMORY, "pk_compile: out of memory transposing '%s'", t->name);
    uint16_t *dst = (uint16_t *)(void *)buf;
    const uint16_t *src = t->data;
    for (uint64_t k0 = 0; k0 < K; k0 += kb) {
        const uint64_t m = K - k0 < kb ? K - k0 : kb; /* rows k0 .. k0 + m - 1 of the transpose */
        for (uint64_t n = 0; n < N; n++)
            for (uint64_t j = 0; j < m; j++) dst[j * N + n] = src[n * K + k0 + j];
        if (rt->upload(rt->ctx, (uint32_t)t->id, k0 * N * es, buf, m * N * es, err, sizeof err) != 0) {
            free(buf);
            return pk_fail(k, PK_ERR_BACKEND, "pk_compile: uploading '%s' (transposed): %s", t->name, err);
        }
        *done += m * N * es;
    }
    free(buf);
    return PK_OK;
}

/* Uploads every weight buffer: attached tensors as they are (a split-K layer's weight
 * transposed), fused tensors in fused row order. */
static pk_status upload_weights(pk_kernel *k, pk_cuda_runtime *rt) {
    char err[PK_ERR_MAX];
    const pk_cuda_buffers *b = &rt->bufs;
    uint64_t done = 0, total = b->weights;
    int show = total >= (1ull << 30), tty = show && isatty(2);
    double shown_at = -1, t0 = now_s();
    if (show && !tty) fprintf(stderr, "pk: uploading weights (%.2f GB)…\n", gb(total));
    for (int id = 0; id < b->n; id++) {
        if (b->kind[id] != PK_CUDA_BUF_WEIGHT) continue;
        const pk_tensor *t = k->tensors[id];
        if (t->device_transposed) {
            pk_status s = upload_transposed(k, rt, t, &done);
            if (s != PK_OK) return s;
            continue;
        }
        /* (source, bytes) pieces in buffer order */
        int npieces = t->storage == PK_STORAGE_FUSED ? t->groups * t->nfused : 1;
        uint64_t off = 0, row_bytes = b->bytes[id] / (uint64_t)t->dims[0];
        for (int p = 0; p < npieces; p++) {
            const char *src;
            uint64_t n;
            if (t->storage == PK_STORAGE_FUSED) {
                int g = p / t->nfused, i = p % t->nfused;
                const pk_tensor *in = k->tensors[t->fused[i]];
                uint64_t rows = (uint64_t)in->dims[0] / (uint64_t)t->groups;
                src = (const char *)in->data + (uint64_t)g * rows * row_bytes;
                n = rows * row_bytes;
            } else {
                src = (const char *)t->data;
                n = b->bytes[id];
            }
            for (uint64_t o = 0; o < n; o += UPLOAD_CHUNK) {
                uint64_t m = n - o < UPLOAD_CHUNK ? n - o : UPLOAD_CHUNK;
                if (rt->upload(rt->ctx, (uint32_t)id, off + o, src + o, m, err, sizeof err) != 0)
                    return pk_fail(k, PK_ERR_BACKEND, "pk_compile: uploading '%s': %s", t->name, err);
                done += m;
                if (tty && (double)done - shown_at >= (double)UPLOAD_CHUNK) {
                    fprintf(stderr, "\rpk: uploading weights: %.2f / %.2f GB", gb(done), gb(total));
                    shown_at = (double)done;
                }
            }
            off += n;
        }
    }
    if (rt->upload_wait(rt->ctx, err, sizeof err) != 0)
        return pk_fail(k, PK_ERR_BACKEND, "pk_compile: uploading weights: %s", err);
    double secs = now_s() - t0;
    if (show)
        fprintf(stderr, "%spk: uploaded %.2f GB of weights in %.1f s (%.1f GB/s)\n", tty ? "\r" : "", gb(done), secs,
                gb(done) / (secs > 0 ? secs : 1e-9));
    return PK_OK;
}

/* dlopen kernel.so, check it, create its device state and upload the weights. */
static pk_status load(pk_kernel *k, pk_cuda_runtime *rt) {
    /* never unloaded (RTLD_NODELETE): it carries a static CUDA runtime with exit handlers */
    rt->so = dlopen(rt->so_path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!rt->so) return pk_fail(k, PK_ERR_BACKEND, "pk_compile: cannot load '%s': %s", rt->so_path, dlerror());
    int missing = 0;
    pk_gen_get_info_fn get_info = (pk_gen_get_info_fn)sym(rt, "pk_gen_get_info", &missing);
    rt->create = (pk_gen_create_fn)sym(rt, "pk_gen_create", &missing);
    rt->upload = (pk_gen_upload_fn)sym(rt, "pk_gen_upload", &missing);
    rt->upload_wait = (pk_gen_upload_wait_fn)sym(rt, "pk_gen_upload_wait", &missing);
    rt->run = (pk_gen_run_fn)sym(rt, "pk_gen_run", &missing);
    rt->read = (pk_gen_read_fn)sym(rt, "pk_gen_read", &missing);
    rt->copy_bandwidth = (pk_gen_copy_bandwidth_fn)sym(rt, "pk_gen_copy_bandwidth", &missing);
    rt->destroy = (pk_gen_destroy_fn)sym(rt, "pk_gen_destroy", &missing);
    if (missing) return pk_fail(k, PK_ERR_BACKEND, "pk_compile: '%s' lacks pk's entry points", rt->so_path);
    const pk_gen_info *info = rt->info = get_info();
    const pk_taskgraph *g = &k->graph;
    if (info->abi_version != PK_ABI_VERSION || info->api_version != PK_GEN_API_VERSION || info->graph_hash != g->hash ||
        info->num_tasks != (uint32_t)g->ntasks || info->num_events != (uint32_t)g->nevents ||
        info->num_buffers != (uint32_t)k->ntensors || info->num_workers != (uint32_t)g->nworkers)
        return pk_fail(k, PK_ERR_BACKEND,
                       "pk_compile: '%s' does not match this graph: ABI %u/%u, API %u/%u, hash %016llx/%016llx, "
                       "%u/%d tasks (theirs/ours): delete the cache directory",
                       rt->so_path, info->abi_version, PK_ABI_VERSION, info->api_version, PK_GEN_API_VERSION,
                       (unsigned long long)info->graph_hash, (unsigned long long)g->hash, info->num_tasks, g->ntasks);

    const pk_cuda_buffers *b = &rt->bufs;
    uint64_t staging = b->weights < STAGING_MAX ? b->weights : STAGING_MAX;
    staging = (staging + 0xfffff) & ~0xfffffull;
    if (staging < (1u << 20)) staging = 1u << 20;
    uint64_t work = b->work + workspace_extra(k) + 2 * staging;
    rt->work_bytes = work;
    fprintf(stderr, "pk: GPU memory: weights %.2f GB, KV cache %.2f GB, workspace %.1f MB\n", gb(b->weights), gb(b->kv),
            (double)work / 1e6);
    uint64_t need = b->weights + b->kv + work + CONTEXT_RESERVE;
    if (need > rt->mem_free)
        return pk_fail(k, PK_ERR_BACKEND,
                       "pk_compile: not enough GPU memory: need %.2f GB (weights %.2f GB, KV cache %.2f GB, workspace "
                       "%.1f MB, %.2f GB for the CUDA context) but %.2f GB of %.2f GB is free",
                       gb(need), gb(b->weights), gb(b->kv), (double)work / 1e6, gb(CONTEXT_RESERVE), gb(rt->mem_free),
                       gb(rt->mem_total));
    pk_gen_config c;
    memset(&c, 0, sizeof c);
    c.device = rt->device;
    c.num_buffers = (uint32_t)k->ntensors;
    c.buffer_bytes = b->bytes;
    c.num_workers = (uint32_t)g->nworkers;
    c.num_schedulers = (uint32_t)k->cfg.num_local_schedulers;
    c.R = k->cfg.max_requests;
    c.T = k->cfg.max_tokens_per_step;
    c.max_seq = k->cfg.max_seq_length;
    c.page_size = k->cfg.page_size;
    c.pages_per_req = k->pages_per_req;
    c.num_pages = k->cfg.num_pages;
    c.eos = k->cfg.eos_token_id;
    c.spec_len = k->cfg.spec_length;
    c.spec_ngram = k->cfg.spec_ngram;
    c.all_logits = k->cfg.all_logits;
    c.step_tokens = (uint32_t)k->t_step_tokens;
    c.step_output = (uint32_t)k->t_step_output;
    c.step_info = (uint32_t)k->t_step_info;
    c.token_pos = (uint32_t)k->t_token_pos;
    c.token_req = (uint32_t)k->t_token_req;
    c.page_table = (uint32_t)k->t_page_table;
    c.sample_params = (uint32_t)k->t_sample_params;
    c.sample_slot = (uint32_t)k->t_sample_slot;
    c.staging_bytes = staging;
    char err[PK_ERR_MAX];
    rt->ctx = rt->create(&c, err, sizeof err);
    if (!rt->ctx) return pk_fail(k, PK_ERR_BACKEND, "pk_compile: setting up the GPU: %s", err);
    return upload_weights(k, rt);
}

/* Generates and builds for rt->arch (the cache makes a repeat cheap). */
static pk_status build(pk_kernel *k, pk_cuda_runtime *rt, const pk_compile_options *opts) {
    pk_sb_free(&rt->cu);
    pk_status st = pk_cuda_codegen(k, &rt->cu);
    if (st != PK_OK) return st;
    return pk_cuda_build(k, &rt->cu, rt->arch, opts ? opts->output_dir : NULL, rt->so_path, sizeof rt->so_path);
}

static void cuda_free(pk_kernel *k);

static pk_status cuda_compile(pk_kernel *k, const pk_compile_options *opts) {
    cuda_free(k);
    pk_cuda_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) return pk_fail(k, PK_ERR_NO_MEMORY, "pk_compile: out of memory");
    k->backend_ctx = rt;
    pk_status st = pk_cuda_plan_buffers(k, &rt->bufs);
    const char *arch = getenv("PK_CUDA_ARCH");
    if (st == PK_OK && arch && arch[0]) {
        if (!pk_cuda_arch_valid(arch))
            st = pk_fail(k, PK_ERR_INVALID_ARGUMENT, "pk_compile: PK_CUDA_ARCH '%s' is not an arch like sm_90a or sm_80",
                         arch);
        else {
            snprintf(rt->arch, sizeof rt->arch, "%s", arch);
            rt->compile_only = 1;
        }
    } else if (st == PK_OK) {
        st = probe_gpu(k, rt);
    }
    if (st == PK_OK) st = build(k, rt, opts);
    if (st == PK_OK && !rt->compile_only) st = load(k, rt);
    if (st != PK_OK) {
        /* keep the message: cuda_free does not touch k->err */
        cuda_free(k);
    }
    return st;
}

/* ---- running ---- */

typedef struct stream_ctx {
    pk_decode *d;
    int overflow;
} stream_ctx;

static void on_token(void *user, int32_t req, int32_t token, int32_t row) {
    stream_ctx *s = user;
    pk_decode *d = s->d;
    if (req < 0 || req >= d->nreqs) {
        s->overflow = 1;
        return;
    }
    pk_request *r = &d->reqs[req];
    if (r->num_output >= r->max_new_tokens) {
        s->overflow = 1;
        return;
    }
    r->output[r->num_output++] = token;
    if (d->on_token) d->on_token(d->user, req, token, row);
}

/* Loads the object now if pk_compile only built it (PK_CUDA_ARCH). */
static pk_status ensure_loaded(pk_kernel *k, pk_cuda_runtime *rt) {
    if (rt->ctx) return PK_OK;
    char built[16];
    snprintf(built, sizeof built, "%s", rt->arch);
    pk_status st = probe_gpu(k, rt);
    if (st != PK_OK) return st;
    if (strcmp(built, rt->arch) != 0 || !rt->so_path[0]) {
        st = build(k, rt, NULL);
        if (st != PK_OK) return st;
    }
    rt->compile_only = 0;
    return load(k, rt);
}

static pk_status cuda_run(pk_kernel *k, pk_decode *d) {
    pk_cuda_runtime *rt = cuda_rt(k);
    if (!rt) return pk_fail(k, PK_ERR_STATE, "pk_run: the CUDA backend is not set up (compile failed?)");
    if (d->nreqs == 0) return PK_OK;
    pk_status st = ensure_loaded(k, rt);
    if (st != PK_OK) return st;
    const pk_taskgraph *g = &k->graph;
    int n = d->nreqs, W = g->nworkers;
    const int32_t **prompts = calloc((size_t)n, sizeof *prompts);
    int32_t *ints = calloc((size_t)n * (4 + PK_SAMPLE_PARAMS), sizeof *ints); /* 4 per request, then the sampling's */
    pk_gen_run_args a;
    memset(&a, 0, sizeof a);
    if (k->cfg.trace_path) {
        uint64_t cap = TRACE_BYTES_MAX / sizeof(pk_gen_trace_rec) / (uint64_t)W;
        a.trace_cap = cap > (1u << 20) ? (1u << 20) : cap;
        a.trace = malloc((size_t)(a.trace_cap * (uint64_t)W) * sizeof *a.trace);
        a.trace_n = calloc((size_t)W, sizeof *a.trace_n);
    }
    if (!prompts || !ints || (k->cfg.trace_path && (!a.trace || !a.trace_n))) {
        st = pk_fail(k, PK_ERR_NO_MEMORY, "pk_run: out of memory");
        goto done;
    }
    int32_t *plen = ints, *maxnew = ints + n;
    for (int i = 0; i < n; i++) {
        memcpy(ints + 4 * n + (size_t)i * PK_SAMPLE_PARAMS, d->sreqs[i].sample, sizeof d->sreqs[i].sample);
        prompts[i] = d->reqs[i].prompt;
        plen[i] = d->reqs[i].prompt_len;
        maxnew[i] = d->reqs[i].max_new_tokens;
    }
    stream_ctx sc = {d, 0};
    a.nreqs = n;
    a.prompts = prompts;
    a.prompt_len = plen;
    a.max_new_tokens = maxnew;
    a.sample_words = ints + 4 * n;
    a.dynamic = k->cfg.sched_mode == PK_SCHED_DYNAMIC;
    a.on_token = on_token;
    a.user = &sc;
    a.cancel = &k->cancel;
    a.num_output = ints + 2 * n;
    a.finish = ints + 3 * n;
    a.step_rec_cap = d->s.rec ? d->s.rec_cap : 0;
    a.step_rec = (pk_gen_step_rec *)d->s.rec;
    char err[PK_ERR_MAX];
    int rc = rt->run(rt->ctx, &a, err, sizeof err);
    if (rc == -2) {
        const pk_gen_debug *x = &a.debug;
        if (x->task == 0xffffffffu)
            st = pk_fail(k, PK_ERR_BACKEND,
                         "pk_run: CUDA debug build: worker %u timed out waiting on its queue (position %llu); %s",
                         x->worker, (unsigned long long)x->counter, err);
        else
            st = pk_fail(k, PK_ERR_BACKEND,
                         "pk_run: CUDA debug build: worker %u timed out in task %u (%s.%u) waiting on event %u: "
                         "counter %llu < threshold %llu; %s",
                         x->worker, x->task, x->task < (uint32_t)g->ntasks && x->task > 0 ? k->layers[g->tasks[x->task].layer].name : "?",
                         x->task < (uint32_t)g->ntasks ? g->tasks[x->task].index : 0, x->event,
                         (unsigned long long)x->counter, (unsigned long long)x->threshold, err);
        goto done;
    }
    if (rc != 0) {
        st = pk_fail(k, PK_ERR_BACKEND, "pk_run: %s", err);
        goto done;
    }
    k->steps_run = a.steps;
    d->s.drafted = a.spec_drafted;
    d->s.accepted = a.spec_accepted;
    for (int i = 0; i < n; i++) {
        d->reqs[i].finish = (pk_finish_reason)a.finish[i];
        if (a.num_output[i] != d->reqs[i].num_output) sc.overflow = 1;
    }
    if (sc.overflow) {
        st = pk_fail(k, PK_ERR_BACKEND, "pk_run: the GPU's token stream does not match its request counts (a bug in pk)");
        goto done;
    }
    if (k->cfg.trace_path) {
        pk_trace_record **recs = malloc((size_t)W * sizeof *recs);
        size_t *ns = malloc((size_t)W * sizeof *ns);
        if (!recs || !ns) {
            st = pk_fail(k, PK_ERR_NO_MEMORY, "pk_run: out of memory writing the trace");
        } else {
            int dropped = 0;
            for (int w = 0; w < W; w++) {
                recs[w] = (pk_trace_record *)(a.trace + (uint64_t)w * a.trace_cap);
                ns[w] = (size_t)(a.trace_n[w] < a.trace_cap ? a.trace_n[w] : a.trace_cap);
                dropped |= a.trace_n[w] > a.trace_cap;
            }
            if (dropped)
                fprintf(stderr, "pk: trace: more than %llu tasks per worker; the rest were not recorded\n",
                        (unsigned long long)a.trace_cap);
            st = pk_trace_write(k, k->cfg.trace_path, recs, ns, W);
        }
        free(recs);
        free(ns);
    }
done:
    free(prompts);
    free(ints);
    free(a.trace);
    free(a.trace_n);
    return st;
}

static pk_status cuda_read_tensor(pk_kernel *k, const pk_tensor *t, void *dst, size_t bytes) {
    pk_cuda_runtime *rt = cuda_rt(k);
    if (!rt || !rt->ctx || rt->bufs.bytes[t->id] == 0) {
        memcpy(dst, t->data, bytes); /* never on the GPU (or nothing ran): pk's zero-filled memory */
        return PK_OK;
    }
    char err[PK_ERR_MAX];
    if (rt->read(rt->ctx, (uint32_t)t->id, 0, dst, bytes, err, sizeof err) != 0)
        return pk_fail(k, PK_ERR_BACKEND, "pk_tensor_read '%s': %s", t->name, err);
    return PK_OK;
}

static pk_status cuda_copy_bandwidth(pk_kernel *k, double *bytes_per_s) {
    if (!k->compiled)
        return pk_fail(k, PK_ERR_STATE, "pk_device_copy_bandwidth: compile the kernel first (the CUDA backend "
                                        "measures with its compiled object)");
    pk_cuda_runtime *rt = cuda_rt(k);
    if (!rt) return pk_fail(k, PK_ERR_STATE, "pk_device_copy_bandwidth: the CUDA backend is not set up (compile failed?)");
    pk_status st = ensure_loaded(k, rt);
    if (st != PK_OK) return st;
    char err[PK_ERR_MAX];
    uint64_t want = pk_copy_probe_bytes(COPY_PROBE_BYTES), used = 0;
    if (rt->copy_bandwidth(rt->ctx, want, COPY_PROBE_REPS, bytes_per_s, &used, err, sizeof err) != 0)
        return pk_fail(k, PK_ERR_BACKEND, "pk_device_copy_bandwidth: %s", err);
    if (used < want)
        fprintf(stderr, "pk: copy bandwidth measured with %.0f MiB buffers (not enough free GPU memory for %.0f MiB)\n",
                (double)used / (1 << 20), (double)want / (1 << 20));
    return PK_OK;
}

/* The GPU buffers once loaded; before (compiled for PK_CUDA_ARCH only) the same plan in host
 * terms. */
static pk_status cuda_memory(pk_kernel *k, pk_memory_stats *out) {
    const pk_cuda_runtime *rt = cuda_rt(k);
    if (!rt || !rt->ctx) return pk_graph_memory_plan(k, out);
    out->weight_bytes = (int64_t)rt->bufs.weights;
    out->kv_cache_bytes = (int64_t)rt->bufs.kv;
    out->workspace_bytes = (int64_t)rt->work_bytes;
    out->on_device = 1;
    return PK_OK;
}

static void cuda_free(pk_kernel *k) {
    pk_cuda_runtime *rt = cuda_rt(k);
    if (!rt) return;
    if (rt->ctx) rt->destroy(rt->ctx);
    if (rt->so) dlclose(rt->so);
    if (rt->ctx_retained) rt->ctx_release(rt->device);
    if (rt->libcuda) dlclose(rt->libcuda);
    pk_cuda_buffers_free(&rt->bufs);
    pk_sb_free(&rt->cu);
    free(rt);
    k->backend_ctx = NULL;
}

/* ---- the device, before any state ---- */

/* One worker CTA per SM of device `device`, asked of the driver. */
static pk_status cuda_default_workers(int device, int *workers, char *err, size_t err_len) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, err_len, "no CUDA GPU found: the NVIDIA driver library libcuda.so.1 is not installed");
        return PK_ERR_BACKEND;
    }
    cu_init_fn cu_init = (cu_init_fn)dlsym(lib, "cuInit");
    cu_count_fn cu_count = (cu_count_fn)dlsym(lib, "cuDeviceGetCount");
    cu_get_fn cu_get = (cu_get_fn)dlsym(lib, "cuDeviceGet");
    cu_attr_fn cu_attr = (cu_attr_fn)dlsym(lib, "cuDeviceGetAttribute");
    int n = 0, dev = 0, sms = 0, rc;
    pk_status st = PK_OK;
    if (!cu_init || !cu_count || !cu_get || !cu_attr) {
        snprintf(err, err_len, "no CUDA GPU found: libcuda.so.1 lacks the driver API");
        st = PK_ERR_BACKEND;
    } else if ((rc = cu_init(0)) != 0) {
        snprintf(err, err_len, "no CUDA GPU found: cuInit failed with CUDA error %d", rc);
        st = PK_ERR_BACKEND;
    } else if (cu_count(&n) != 0 || n < 1) {
        snprintf(err, err_len, "no CUDA GPU found: the driver reports %d devices", n);
        st = PK_ERR_BACKEND;
    } else if (n <= device) {
        snprintf(err, err_len, "CUDA: no device %d: the driver reports %d devices", device, n);
        st = PK_ERR_BACKEND;
    } else if (cu_get(&dev, device) != 0 || cu_attr(&sms, CU_ATTR_SM_COUNT, dev) != 0 || sms < 1) {
        snprintf(err, err_len, "no CUDA GPU found: cannot read the multiprocessor count of device %d", device);
        st = PK_ERR_BACKEND;
    }
    dlclose(lib);
    if (st == PK_OK) *workers = sms;
    return st;
}

/* The figures the generated code is built for. The schedule's cost: a task's fixed part (the
 * hand-off between CTAs, the first memory round trip, the reductions) and 32 bytes per ns, one
 * SM's share of about 4.2 TB/s over 132 SMs. They do not come from the probed GPU: compile for
 * PK_CUDA_ARCH probes none, and the schedule (so kernel.cu and the kernel cache key) must not
 * depend on which card compiled it. */
static void cuda_device_figures(const pk_kernel *k, pk_device_figures *out) {
    memset(out, 0, sizeof *out);
    out->workers = k->cfg.num_workers;
    out->stage_bytes = (int64_t)PK_WSTAGE_BYTES;
    out->task_fixed_ns = 2000;
    out->bytes_per_ns = 32;
}

/* How many positions the staged decode attention holds in shared memory for this head shape. */
static int cuda_attention_reach(const pk_kernel *k, int head_dim, int q_heads_per_kv_head) {
    (void)k;
    if (!pk_attd_shape_ok(head_dim, q_heads_per_kv_head)) return -1;
    return pk_attd_max_positions(head_dim, q_heads_per_kv_head, PK_ATTD_STATIC_SMEM_BYTES);
}

const pk_backend_i pk_cuda_backend = {
    .name = "cuda",
    .default_workers = cuda_default_workers,
    .default_step_tokens = 512, /* a one-row decode step costs the same at 64 and 512 rows */
    .device_figures = cuda_device_figures,
    .attention_reach = cuda_attention_reach,
    .compile = cuda_compile,
    .run = cuda_run,
    .read_tensor = cuda_read_tensor,
    .memory = cuda_memory,
    .copy_bandwidth = cuda_copy_bandwidth,
    .free = cuda_free,
    .serves_sessions = 0, /* the device's step boundary reads no session mailbox yet */
    .samples = 1,         /* the argmax's last task draws the sampling rows (sample.cuh) */
    .caches_prefixes = 0, /* the device's step state has no prefix cache arrays yet */
};
