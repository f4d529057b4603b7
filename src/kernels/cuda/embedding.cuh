// SPDX-License-Identifier: Apache-2.0
/* embedding.cuh — PK_TASK_EMBEDDING on the device: out[t, j] = W[tokens[t], col0 + j], a bit-exact
 * copy (pk_cpu_embedding).
 *
 * Work: the tile is cut into chunks of 8 columns per row; thread i takes chunks i, i + THREADS, ...
 * over all (row, chunk) pairs. A chunk whose source and destination are both 16-byte aligned is
 * one 16-byte load and store; any other chunk (the tile's tail, odd col0 or strides) is copied
 * element by element. tokens may come from the previous step's argmax: read through L2. No shared
 * memory, no barrier. Token ids must lie in [0, V) (pk_run checks them).
 */
#ifndef PK_CUDA_EMBEDDING_CUH
#define PK_CUDA_EMBEDDING_CUH

#include "kernels/cuda/rows.cuh"

__device__ inline void pk_dev_embedding(const int32_t *tokens, int n_tok, const pk_rows *w,
                                        int col0, int ncols, pk_bf16 *out, int64_t out_stride,
                                        char *smem) {
    (void)smem;
    if (ncols <= 0 || n_tok <= 0) return;
    const int nch = (ncols + 7) / 8; /* chunks per row */
    const int64_t total = (int64_t)n_tok * nch;
    for (int64_t e = threadIdx.x; e < total; e += PK_CUDA_THREADS) {
        int t = (int)(e / nch), c = (int)(e - (int64_t)t * nch);
        int j = 8 * c, n = ncols - j < 8 ? ncols - j : 8;
        const pk_bf16 *src = pk_dev_rows_get(w, (uint32_t)pk_dev_ldcg_i32(tokens + t)) + col0 + j;
        pk_bf16 *dst = out + t * out_stride + j;
        if (n == 8 && pk_dev_aligned16(src) && pk_dev_aligned16(dst)) {
            *(uint4 *)dst = pk_dev_ldw16(src);
        } else {
            for (int i = 0; i < n; i++) dst[i] = pk_dev_ldw_bf16(src + i);
        }
    }
}

#endif /* PK_CUDA_EMBEDDING_CUH */
