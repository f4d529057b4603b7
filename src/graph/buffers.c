// SPDX-License-Identifier: Apache-2.0
/* buffers.c — which tensors a backend keeps while it runs the graph, and of what kind: the plan
 * behind pk_kernel_memory. A fused tensor is one buffer (its inputs, read only through it, are
 * none); an owned tensor that an attention layer reads as its K or V cache is KV cache even where
 * another layer writes it.
 */
#include <string.h>

#include "pk_internal.h"

void pk_graph_buffer_kinds(const pk_kernel *k, uint8_t *kind) {
    memset(kind, PK_BUFFER_NONE, (size_t)k->ntensors);
    for (int l = 0; l < k->nlayers; l++) {
        const pk_layer *L = &k->layers[l];
        for (int v = 0; v < L->ninputs + L->noutputs; v++) {
            const int id = v < L->ninputs ? L->inputs[v] : L->outputs[v - L->ninputs];
            if (id < 0) continue;
            const pk_tensor *t = k->tensors[id];
            pk_buffer_kind b = PK_BUFFER_WORK;
            if (t->storage != PK_STORAGE_OWNED)
                b = PK_BUFFER_WEIGHT;
            else if ((L->kind == PK_TASK_ATTENTION || L->kind == PK_TASK_ATTENTION_PARTIAL) &&
                     (v == PK_V_ATT_K_CACHE || v == PK_V_ATT_V_CACHE))
                b = PK_BUFFER_KV;
            if (kind[id] == PK_BUFFER_NONE || b == PK_BUFFER_KV) kind[id] = (uint8_t)b;
        }
    }
    const int state[] = {k->t_step_tokens, k->t_step_output, k->t_step_info,   k->t_token_pos,
                         k->t_token_req,   k->t_page_table,  k->t_sample_params, k->t_sample_slot};
    for (size_t i = 0; i < sizeof state / sizeof state[0]; i++)
        if (kind[state[i]] == PK_BUFFER_NONE) kind[state[i]] = PK_BUFFER_WORK;
}

pk_status pk_graph_memory_plan(pk_kernel *k, pk_memory_stats *out) {
    uint8_t *kind = malloc(k->ntensors > 0 ? (size_t)k->ntensors : 1);
    if (!kind) return pk_fail(k, PK_ERR_NO_MEMORY, "pk_kernel_memory: out of memory planning the buffers");
    pk_graph_buffer_kinds(k, kind);
    memset(out, 0, sizeof *out);
    for (int id = 0; id < k->ntensors; id++) {
        const pk_tensor *t = k->tensors[id];
        const int64_t bytes = pk_tensor_numel(t) * (int64_t)pk_dtype_size(t->dtype);
        switch (kind[id]) {
        case PK_BUFFER_WEIGHT: out->weight_bytes += bytes; break;
        case PK_BUFFER_KV: out->kv_cache_bytes += bytes; break;
        case PK_BUFFER_WORK: out->workspace_bytes += bytes; break;
        default: break;
        }
    }
    free(kind);
    return PK_OK;
}
