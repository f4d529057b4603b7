// SPDX-License-Identifier: Apache-2.0
/* cuda_internal.h — the pieces of the CUDA backend's host side (libpk, C11, no CUDA headers):
 * code generation (codegen.c), nvcc and the kernel cache (nvcc.c), the driver probe, loading and
 * running the generated object (cuda_backend.c), and the embedded device headers
 * (build/gen/cuda_embedded.c, made by scripts/embed_files.sh).
 */
#ifndef PK_CUDA_INTERNAL_H
#define PK_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pk_internal.h"

/* A growable text buffer; `oom` sticks once an append fails. */
typedef struct pk_strbuf {
    char *p;
    size_t n, cap;
    int oom;
} pk_strbuf;

void pk_sb_append(pk_strbuf *b, const char *s, size_t n);
void pk_sb_printf(pk_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pk_sb_free(pk_strbuf *b);

/* The device headers kernel.cu includes, paths relative to src/ (the -I directory). */
typedef struct pk_embedded_file {
    const char *path;
    const char *text;
} pk_embedded_file;
extern const pk_embedded_file pk_cuda_embedded[];
extern const int pk_cuda_embedded_count;

/* What lives on the GPU: one buffer per tensor id that a layer names (fused tensors as one
 * buffer in fused row order; inputs used only through a fusion stay on the host) plus the
 * decode-state tensors. kind: 0 none, 1 weight (uploaded), 2 KV cache, 3 workspace. */
enum {
    PK_CUDA_BUF_NONE = PK_BUFFER_NONE,
    PK_CUDA_BUF_WEIGHT = PK_BUFFER_WEIGHT,
    PK_CUDA_BUF_KV = PK_BUFFER_KV,
    PK_CUDA_BUF_WORK = PK_BUFFER_WORK
};
typedef struct pk_cuda_buffers {
    int n;            /* = k->ntensors */
    uint64_t *bytes;  /* [n] */
    uint8_t *kind;    /* [n] */
    uint64_t weights, kv, work; /* byte totals */
} pk_cuda_buffers;
pk_status pk_cuda_plan_buffers(pk_kernel *k, pk_cuda_buffers *b);
void pk_cuda_buffers_free(pk_cuda_buffers *b);

/* The tensor a task's view v names: the layer's argument (a fused tensor itself, not its
 * inputs), -1 for an absent optional one. */
int pk_cuda_view_tensor(const pk_kernel *k, const pk_layer *L, int v);

/* The per-shape tuning codegen writes into kernel.cu (gen_api.h's pk_gen_tuning). */
typedef struct pk_gen_tuning_values {
    int lin_wst_lds, lin_pace_kb, attd_bulk_rows;
    unsigned debug_spin_limit_ms, debug_stall_task;
} pk_gen_tuning_values;
pk_gen_tuning_values pk_cuda_tuning_of(const pk_kernel *k);

/* Writes kernel.cu for k's compiled graph into out. */
pk_status pk_cuda_codegen(pk_kernel *k, pk_strbuf *out);

/* Compiles kernel.cu (with the embedded headers) for `arch` ("sm_90a") into the kernel cache,
 * or finds it there; so_path receives the shared object's path, dir its cache directory. When
 * output_dir is set, kernel.cu, the headers and kernel.so are also copied there. */
pk_status pk_cuda_build(pk_kernel *k, const pk_strbuf *cu, const char *arch, const char *output_dir,
                        char *so_path, size_t so_len);

/* "sm_90a" from a compute capability (9.0 → sm_90a; others sm_XY), or checks a user's arch
 * string; 0 on success. */
int pk_cuda_arch_name(int major, int minor, char *out, size_t len);
int pk_cuda_arch_valid(const char *arch);

#endif /* PK_CUDA_INTERNAL_H */
