// SPDX-License-Identifier: Apache-2.0
/* cpu_backend.c — the CPU backend's table (backend.h): worker threads run the task table in the
 * tensors' host memory (cpu_runtime.c), so compiling builds nothing beyond the task graph and a
 * tensor is read where it lies. "auto" workers are the online cores. The static schedule uses the
 * GPU's cost figures: a worker thread takes its share of the memory bandwidth as an SM does, and
 * one schedule for both backends keeps the CPU run a reference of the GPU's task order.
 */
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "runtime/cpu/cpu_runtime.h"
#include "runtime/runtime.h"

static pk_status cpu_default_workers(int device, int *workers, char *err, size_t err_len) {
    (void)device, (void)err, (void)err_len; /* the host's cores, whatever the device ordinal */
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    *workers = n > 0 ? (int)n : 1;
    return PK_OK;
}

static void cpu_device_figures(const pk_kernel *k, pk_device_figures *out) {
    memset(out, 0, sizeof *out);
    out->workers = k->cfg.num_workers;
    out->stage_bytes = 0; /* the kernels read the weights in place */
    out->task_fixed_ns = 2000;
    out->bytes_per_ns = 32;
}

static int cpu_attention_reach(const pk_kernel *k, int head_dim, int q_heads_per_kv_head) {
    (void)k, (void)head_dim, (void)q_heads_per_kv_head;
    return 0; /* the attention reads the KV cache in place: no length limit */
}

static pk_status cpu_compile(pk_kernel *k, const pk_compile_options *opts) {
    (void)k, (void)opts;
    return PK_OK;
}

static pk_status cpu_read_tensor(pk_kernel *k, const pk_tensor *t, void *dst, size_t bytes) {
    (void)k;
    memcpy(dst, t->data, bytes);
    return PK_OK;
}

static pk_status cpu_memory(pk_kernel *k, pk_memory_stats *out) { return pk_graph_memory_plan(k, out); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Anonymous memory for the copy probe: transparent huge pages where the kernel gives them (far
 * fewer page faults than 4 KiB pages for 2 GiB). */
static char *probe_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* memcpy between two host buffers of 1 GiB (halved while they cannot be mapped, down to 64 MiB). */
static pk_status cpu_copy_bandwidth(pk_kernel *k, double *bytes_per_s) {
    size_t bytes = (size_t)pk_copy_probe_bytes(1ull << 30);
    char *a = NULL, *b = NULL;
    for (; bytes >= ((size_t)64 << 20); bytes /= 2) {
        a = probe_alloc(bytes);
        b = a ? probe_alloc(bytes) : NULL;
        if (a && b) break;
        if (a) munmap(a, bytes);
        a = b = NULL;
    }
    if (!a) return pk_fail(k, PK_ERR_NO_MEMORY, "pk_device_copy_bandwidth: out of memory for two 64 MiB buffers");
    memset(a, 1, bytes);
    memcpy(b, a, bytes); /* warm-up: every page of b mapped */
    const int reps = 3;
    double t0 = now_s();
    for (int i = 0; i < reps; i++) {
        memcpy(b, a, bytes);
        __asm__ __volatile__("" ::"r"(b) : "memory"); /* keep every copy */
    }
    double secs = now_s() - t0;
    munmap(a, bytes);
    munmap(b, bytes);
    *bytes_per_s = 2.0 * (double)bytes * reps / (secs > 0 ? secs : 1e-9);
    return PK_OK;
}

static void cpu_free(pk_kernel *k) { (void)k; /* the threads of a run end with it: nothing stays */ }

const pk_backend_i pk_cpu_backend = {
    .name = "cpu",
    .default_workers = cpu_default_workers,
    .default_step_tokens = 64,
    .device_figures = cpu_device_figures,
    .attention_reach = cpu_attention_reach,
    .compile = cpu_compile,
    .run = pk_cpu_run,
    .read_tensor = cpu_read_tensor,
    .memory = cpu_memory,
    .copy_bandwidth = cpu_copy_bandwidth,
    .free = cpu_free,
    .serves_sessions = 1, /* the workers run until the session's step boundary ends the run */
    .samples = 1,
    .caches_prefixes = 1,
};
