// SPDX-License-Identifier: Apache-2.0
/* embedding.c — PK_TASK_EMBEDDING: a column tile of the embedding rows of the step's tokens.
 *
 * out[t, j] = W[tokens[t], col0 + j] for t < n_tok, j < ncols: a bit-exact copy, no arithmetic.
 * W is [V, H] read through pk_rows; out [T, ncols tile] with row stride out_stride. Token ids must
 * lie in [0, V): the kernel does not know V, pk_run checks ids before they reach a step.
 * Rows t >= n_tok of out are not touched.
 */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

void pk_cpu_embedding(const int32_t *tokens, int n_tok, const pk_rows *w, int col0, int ncols,
                      pk_bf16 *out, int64_t out_stride) {
    if (ncols <= 0) return;
    for (int t = 0; t < n_tok; t++) {
        const pk_bf16 *row = pk_rows_get(w, (uint32_t)tokens[t]) + col0; /* [ncols] */
        memcpy(out + t * out_stride, row, (size_t)ncols * sizeof *out);
    }
}
