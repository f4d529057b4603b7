// SPDX-License-Identifier: Apache-2.0
/* test_attention_direct.c — a split attention layer's steps of many rows (pk_abi.h's
 * PK_ATTN_DIRECT_ROWS) on the CPU backend and the shipped model (pk-tiny: D 64, G 2):
 *   - the partial tensor has min(T, PK_ATTN_DIRECT_ROWS(S, G)) rows, not T;
 *   - a prompt of at least that many rows in one step runs directly (split 0 alone, through the
 *     partial tiles R rows at a time): its last row's logits are the same bits as when the prompt
 *     runs in steps of fewer rows through the partials, and so are the tokens that follow (a
 *     row's result does not depend on the step's rows).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/bf16.h"
#include "pk.h"
#include "pk_abi.h"

#define MODEL "models/pk-tiny"
#define T 128
#define S 2

static pk_model *load(int splits, int step_tokens) {
    pk_config c = pk_config_default();
    c.max_seq_length = 256;
    c.max_requests = 1;
    c.max_tokens_per_step = step_tokens;
    c.page_size = 8;
    c.num_workers = 3;
    c.all_logits = 1;
    c.attention_kv_splits = splits;
    char err[512];
    pk_model *m = pk_model_load(MODEL, &c, err, sizeof err);
    CHECK(m != NULL, "load (splits %d, T %d): %s", splits, step_tokens, err);
    if (!m) return NULL;
    CHECK(pk_compile(pk_model_kernel(m), NULL) == PK_OK, "compile: %s", pk_kernel_error(pk_model_kernel(m)));
    return m;
}

/* One prompt of n tokens, `gen` tokens out; the last step's logits [n_rows, vocab] into lg. */
static void run(pk_model *m, int n, int gen, int32_t *out, pk_bf16 *lg, size_t lg_bytes) {
    int32_t ids[T];
    for (int i = 0; i < n; i++) ids[i] = 3 + (i * 37 + 11) % 500;
    pk_request r = {.prompt = ids, .prompt_len = n, .max_new_tokens = gen, .output = out};
    pk_kernel *k = pk_model_kernel(m);
    CHECK(pk_run(k, &r, 1, NULL, NULL) == PK_OK, "run: %s", pk_kernel_error(k));
    if (lg) CHECK(pk_tensor_read(k, pk_model_logits(m), lg, lg_bytes) == PK_OK, "read logits: %s", pk_kernel_error(k));
}

int main(void) {
    const int G = 2, direct = PK_ATTN_DIRECT_ROWS(S, G); /* 64 */
    pk_model *split = load(S, T), *whole = load(1, T), *small = load(S, 32);
    if (!split || !whole || !small) return check_report("attention_direct");
    CHECK(pk_model_get_info(split)->attention_kv_splits == S && pk_model_get_info(whole)->attention_kv_splits == 1,
          "splits %d / %d", pk_model_get_info(split)->attention_kv_splits, pk_model_get_info(whole)->attention_kv_splits);

    /* the partial tensors' rows */
    int found = 0, right = 0;
    char name[64];
    for (int l = 0; l < 64; l++) {
        snprintf(name, sizeof name, "pk.attn%d.part", l);
        const pk_tensor *p = pk_find_tensor(pk_model_kernel(split), name);
        const pk_tensor *q = pk_find_tensor(pk_model_kernel(small), name);
        if (!p) continue;
        found++;
        right += pk_tensor_dim(p, 0) == direct && q && pk_tensor_dim(q, 0) == 32;
    }
    CHECK(found > 0 && right == found, "%d partial tensors, %d with %d rows (T %d) and 32 rows (T 32)", found, right,
          direct, T);

    const int V = pk_model_get_info(split)->vocab_size;
    const size_t bytes = (size_t)T * V * sizeof(pk_bf16);
    pk_bf16 *a = malloc(bytes), *c = malloc(bytes);
    int32_t oa[8], oc[8];
    /* below the boundary, at it and above it: in one step of the T-128 graph (direct from `direct`
     * rows on) and in steps of 32 through the partials, the last row's logits are the same bits */
    const int lens[] = {direct - 1, direct, direct + 1, 100};
    for (int i = 0; i < 4; i++) {
        const int n = lens[i];
        run(split, n, 1, oa, a, bytes);
        run(small, n, 1, oc, c, (size_t)32 * V * sizeof(pk_bf16));
        const pk_bf16 *la = a + (size_t)(n - 1) * V, *lc = c + (size_t)((n - 1) % 32) * V;
        CHECK(memcmp(la, lc, (size_t)V * sizeof(pk_bf16)) == 0 && oa[0] == oc[0],
              "prompt %d: the last row's logits differ between one step and steps of 32 (tokens %d, %d)", n, oa[0],
              oc[0]);
    }
    /* the same greedy tokens whether the prompt's 100 rows ran as one direct step or as steps of
     * 32, 32, 32, 4 through the partials */
    run(split, 100, 8, oa, NULL, 0);
    run(small, 100, 8, oc, NULL, 0);
    CHECK(memcmp(oa, oc, sizeof oa) == 0, "100-token prompt: tokens differ between steps of 128 and of 32");
    free(c);
    free(a);
    pk_model_free(split);
    pk_model_free(whole);
    pk_model_free(small);
    return check_report("attention_direct");
}
