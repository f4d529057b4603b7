// SPDX-License-Identifier: Apache-2.0
/* graph.c — a decode step built through pk's layer API and run on the CPU: embedding, then
 * RMSNorm + LM head, then argmax, over made-up bf16 weights; prints the 8 greedy tokens. */
#include <pk.h>
#include <stdio.h>
#include <string.h>

enum { V = 256, H = 64 };                      /* vocabulary, hidden size */
static uint16_t embed[V * H], norm[H], lm_head[V * H]; /* bf16: a float's upper 16 bits */

static uint16_t bf16(float f) { uint32_t u; memcpy(&u, &f, 4); return (uint16_t)(u >> 16); }

int main(void) {
    for (int i = 0; i < V * H; i++) embed[i] = bf16((float)(i * 37 % 101) / 101 - 0.5f);
    for (int i = 0; i < V * H; i++) lm_head[i] = bf16((float)(i * 53 % 103) / 103 - 0.5f);
    for (int i = 0; i < H; i++) norm[i] = bf16(1.0f);

    pk_config cfg = pk_config_default();       /* 4 workers, the CPU, the backend's step rows */
    pk_kernel *k = pk_kernel_new(&cfg);
    const int64_t T = pk_kernel_config(k)->max_tokens_per_step; /* rows per step: 64 on the CPU */
    pk_tensor *emb = pk_attach_input(k, "embed", PK_DTYPE_BF16, 2, (int64_t[]){V, H}, NULL, embed);
    pk_tensor *nw = pk_attach_input(k, "norm", PK_DTYPE_BF16, 1, (int64_t[]){H}, NULL, norm);
    pk_tensor *w = pk_attach_input(k, "lm_head", PK_DTYPE_BF16, 2, (int64_t[]){V, H}, NULL, lm_head);
    pk_tensor *x = pk_new_tensor(k, "x", PK_DTYPE_BF16, 2, (int64_t[]){T, H}, PK_IO_LOCAL);
    pk_tensor *logits = pk_new_tensor(k, "logits", PK_DTYPE_BF16, 2, (int64_t[]){T, V}, PK_IO_LOCAL);

    pk_status s = pk_embedding_layer(k, pk_step_tokens(k), emb, x, 4); /* grid 4: four tasks */
    /* a model's decoder layers go here: pk_attention_layer, pk_linear_with_residual_layer, ... */
    if (s == PK_OK) s = pk_rmsnorm_linear_layer(k, x, nw, w, logits, 1e-6f, 8);
    if (s == PK_OK) s = pk_argmax_layer(k, logits, pk_step_output(k), 8);
    if (s == PK_OK) s = pk_compile(k, NULL);
    int32_t prompt[] = {1, 2, 3}, out[8];
    pk_request r = {.prompt = prompt, .prompt_len = 3, .max_new_tokens = 8, .output = out};
    if (s == PK_OK) s = pk_run(k, &r, 1, NULL, NULL); /* greedy tokens in out[0 .. r.num_output) */
    if (s != PK_OK) fprintf(stderr, "graph: %s\n", pk_kernel_error(k));
    for (int i = 0; s == PK_OK && i < r.num_output; i++) printf("%d%c", out[i], i + 1 < r.num_output ? ' ' : '\n');
    pk_kernel_free(k);
    return s == PK_OK ? 0 : 1;
}
