// SPDX-License-Identifier: Apache-2.0
/* test_e2e_graph.c — the end-to-end test table (tests/e2e_table.h): a 2-layer Qwen3-shaped model built
 * by hand through pk.h (GQA, q/k norm, heads·head_dim ≠ hidden, untied LM head, fused qkv and gate|up
 * weights; tests/e2e_model.h), run for 4 requests of different prompt lengths with chunked prefill, a
 * paged KV cache and fewer slots than requests, on every row of backend × scheduling mode × workers ×
 * variant (attention split over the KV length, down_proj split over K, fused MLP, LM head with
 * argmax, EOS). Every row's greedy tokens must be the reference forward's (written out in
 * e2e_model.h), its last step's logits within bf16 tolerance of the reference's, and rows of the same
 * graph bit-identical. CUDA rows run where there is a GPU; without one they are skipped, counted and
 * said once (tests/gpu/test_cuda_e2e runs them on the GPU machine, with its GPU-only checks).
 */
#include "check.h"
#include "e2e_model.h"
#include "e2e_table.h"

int main(void) {
    weights w;
    e2e_make_weights(&w);
    static e2e_ref ref;
    e2e_ref_init(&ref, &w);
    e2e_run_table(&w, &ref, 0, e2e_has_gpu());
    e2e_free_weights(&w);
    return check_report("e2e_graph");
}
