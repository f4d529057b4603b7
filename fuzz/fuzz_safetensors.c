// SPDX-License-Identifier: Apache-2.0
/* fuzz_safetensors.c — libFuzzer target: pk_safetensors_parse over arbitrary bytes.
 * On success every tensor must lie inside the input, be found by name, and convert to bf16
 * (reading every byte, so ASan sees any out-of-range pointer); on failure the message must
 * not be empty. Build: fuzz/run.sh (clang -fsanitize=fuzzer) or with standalone_main.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    pk_safetensors *st = NULL;
    pk_status s = pk_safetensors_parse(data, size, "fuzz.safetensors", &st, err, sizeof err);
    if (s != PK_OK) {
        if (st != NULL || err[0] == '\0') abort();
        return 0;
    }
    int n = pk_safetensors_count(st);
    for (int i = 0; i < n; i++) {
        const pk_st_tensor *t = pk_safetensors_tensor(st, i);
        if (!t || pk_safetensors_find(st, t->name) != t) abort();
        if (i > 0 && strcmp(pk_safetensors_tensor(st, i - 1)->name, t->name) >= 0) abort();
        const uint8_t *p = t->data;
        if (p < data || p + t->nbytes > data + size) abort();
        if (t->ndim < 0 || t->ndim > PK_ST_MAX_DIMS) abort();
        /* With no zero dim the product is at most nbytes, so it cannot overflow. */
        int has_zero = 0;
        for (int d = 0; d < t->ndim; d++) has_zero |= t->dims[d] == 0;
        uint64_t numel = has_zero ? 0 : 1;
        for (int d = 0; d < t->ndim && !has_zero; d++) {
            if (t->dims[d] < 0 || numel > t->nbytes) abort();
            numel *= (uint64_t)t->dims[d];
        }
        if (numel != (uint64_t)t->numel || numel * pk_st_dtype_size(t->dtype) != t->nbytes)
            abort();
        pk_bf16 *out = malloc((size_t)t->numel * sizeof *out + 1);
        if (!out) abort();
        pk_status cs = pk_st_tensor_to_bf16(t, out);
        int is_float = t->dtype == PK_DTYPE_BF16 || t->dtype == PK_DTYPE_FP16 ||
                       t->dtype == PK_DTYPE_FP32;
        if ((cs == PK_OK) != is_float) abort();
        free(out);
    }
    (void)pk_safetensors_metadata(st, "format");
    pk_safetensors_close(st);
    return 0;
}
