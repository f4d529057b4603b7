// SPDX-License-Identifier: Apache-2.0
/* backend_registry.c — pk_config.backend → its table (backend.h). It lives above src/graph,
 * src/taskgraph and src/runtime: the core finds a backend here and never links a backend's
 * symbols itself (tests/test_layering.c checks that).
 */
#include "backend.h"

extern const pk_backend_i pk_cpu_backend;  /* src/runtime/cpu/cpu_backend.c */
extern const pk_backend_i pk_cuda_backend; /* src/runtime/cuda/cuda_backend.c */

const pk_backend_i *pk_backend_find(pk_backend b) {
    switch (b) {
    case PK_BACKEND_CPU: return &pk_cpu_backend;
    case PK_BACKEND_CUDA: return &pk_cuda_backend;
    }
    return NULL;
}
