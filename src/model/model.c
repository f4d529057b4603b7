// SPDX-License-Identifier: Apache-2.0
/* model.c — a Hugging Face model directory as a pk graph: Qwen3ForCausalLM and
 * LlamaForCausalLM, built only through pk.h (layers, tensors, pk_kernel_config and what the
 * backend reports: pk_kernel_device_info, pk_kernel_attention_reach).
 *
 * Per decoder layer (T rows, H hidden, I intermediate; fused weights without copies):
 *   qkv  = rmsnorm_linear(h, input_layernorm, [Wq|Wk|Wv] grouped by KV head)
 *   att  = attention(qkv, caches, q_norm / k_norm for Qwen3), split over the KV length where
 *          kv_splits_for says so
 *   h'   = linear_with_residual(att, o_proj, h)
 *   a    = rmsnorm_linear_swiglu(h', post_attention_layernorm, [gate|up] in blocks of I / grid rows)
 *   h''  = linear_with_residual(a, down_proj, h')
 * or, with the fused MLP (pk_model_options.fused_mlp; mlp_fused_auto) for every layer but the
 * last, the MLP as one layer (rmsnorm_swiglu_down): task i adds down's partial sums over its
 * I / grid features to an int64 fixed-point accumulator acc, and h'' is never stored: the next
 * layer's qkv is rmsnorm_linear_acc(h', acc), which writes h'' = h' + acc for its o_proj's
 * residual, and that o_proj zeroes acc (linear_with_residual_clear).
 * Then logits = rmsnorm_linear(h, norm, lm_head or the tied embedding) and argmax over them, as
 * one layer (rmsnorm_linear_argmax: each LM-head task finds the best of the logits it wrote, the
 * last to finish reduces) or as two (argmax_partial after the LM head): pk_model_options.
 * lm_head_argmax, lm_argmax_auto.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/hf_config.h"
#include "model/weights.h"
#include "pk.h"

struct pk_model {
    pk_kernel *k;
    pk_weights *w;
    pk_model_info info;
    pk_tensor *logits;
};

/* The largest divisor of n that is at most target (at least 1). */
static int pick_grid(int64_t n, int target) {
    if (target < 1) target = 1;
    for (int g = target; g > 1; g--)
        if (n % g == 0) return g;
    return 1;
}

/* The attention's split over the KV length: the config's, or where max_seq_length exceeds what
 * one unsplit decode-attention task holds on chip (pk_kernel_attention_reach; for a head shape
 * the backend's staged path does not take, PK_SPLIT_MIN_SEQ, about the reach of the shapes it
 * does), as many splits as give every worker one attention task, and no more than the
 * PK_ATTN_SPLIT_BLOCK-position blocks of max_seq_length. Past the reach an unsplit task reads
 * the cache from L2 / DRAM on one SM per KV head, and the split spreads that over every SM.
 * Within the reach splitting costs more than it saves: the task's time there is mostly fixed
 * cost, which splitting does not shrink. A backend with no reach (0: the CPU reads the cache in
 * place) is not split. */
#define PK_SPLIT_MIN_SEQ 320
static int kv_splits_for(const pk_kernel *k, int grid, int head_dim, int group) {
    const pk_config *c = pk_kernel_config(k);
    if (c->attention_kv_splits > 0) return c->attention_kv_splits;
    const int r = pk_kernel_attention_reach(k, head_dim, group), reach = r < 0 ? PK_SPLIT_MIN_SEQ : r;
    if (reach == 0 || grid < 1 || c->max_seq_length <= reach) return 1;
    int s = c->num_workers / grid, blocks = (c->max_seq_length + PK_ATTN_SPLIT_BLOCK - 1) / PK_ATTN_SPLIT_BLOCK;
    if (s > blocks) s = blocks;
    return s >= 2 ? s : 1;
}

/* The qkv projection's grid on a backend that stages weight tiles (stage_bytes > 0). A worker
 * that runs a qkv tile and then an attention task stages that task's KV cache during the tile
 * only when the tile is staged whole (<= stage_bytes): a streamed tile's rings leave no room, and
 * such attention tasks start after their tile. So when the tiles at `target` would stream, the
 * grid drops to at most target - att_tasks tiles, leaving the attention tasks workers of their
 * own (the schedule puts them there), as long as that keeps at least half the tiles. */
static int qkv_grid_for(int64_t rows, int64_t K, int target, int att_tasks, int64_t stage_bytes) {
    const int g = pick_grid(rows, target);
    if (rows / g * K * 2 <= stage_bytes || att_tasks >= target) return g;
    const int g2 = pick_grid(rows, target - att_tasks);
    return 2 * g2 >= g ? g2 : g;
}

typedef struct builder {
    pk_model *m;
    const pk_hf_config *c;
    char *err;
    size_t err_len;
    const pk_config *cfg;  /* the kernel's, num_workers resolved */
    int target;            /* tasks per layer to aim for */
    int cuda;              /* the kernel's backend is CUDA */
    int64_t stage_bytes;   /* pk_device_info's: the largest weight tile a task stages whole (0: none) */
    pk_model_options opts; /* each -1 (the rule), 0 or 1 */
    int failed; /* err holds the first failure: later lookups must not overwrite (or clear) it */
} builder;

static pk_tensor *weight(builder *b, const char *name, int ndim, int64_t d0, int64_t d1) {
    const pk_bf16 *data = NULL;
    int64_t dims[2] = {d0, d1};
    if (b->failed) return NULL;
    if (pk_weights_get_bf16(b->m->w, name, ndim, dims, &data, b->err, b->err_len) != PK_OK) {
        b->failed = 1;
        return NULL;
    }
    pk_tensor *t = pk_attach_input(b->m->k, name, PK_DTYPE_BF16, ndim, dims, NULL, data);
    if (!t) {
        snprintf(b->err, b->err_len, "%s", pk_kernel_error(b->m->k));
        b->failed = 1;
    }
    return t;
}

/* A pk-owned tensor [T, cols] of dtype (T = max_tokens_per_step). */
static pk_tensor *step_tensor(builder *b, const char *name, pk_dtype dtype, int64_t cols) {
    if (b->failed) return NULL;
    int64_t dims[2] = {b->cfg->max_tokens_per_step, cols};
    pk_tensor *t = pk_new_tensor(b->m->k, name, dtype, 2, dims, PK_IO_LOCAL);
    if (!t) {
        snprintf(b->err, b->err_len, "%s", pk_kernel_error(b->m->k));
        b->failed = 1;
    }
    return t;
}

static pk_tensor *activation(builder *b, const char *name, int64_t cols) {
    return step_tensor(b, name, PK_DTYPE_BF16, cols);
}

/* Copies the kernel's message into err when a layer call fails. */
static int layer_ok(builder *b, pk_status s) {
    if (s != PK_OK) {
        snprintf(b->err, b->err_len, "%s", pk_kernel_error(b->m->k));
        b->failed = 1;
    }
    return s == PK_OK;
}

/* The rule for the MLP as one layer: on the GPU where its task's tile (gate, up and down rows,
 * 3 · I / grid rows of H) stages whole in shared memory: the Qwen3-0.6B shape's 144 KB (192 KB
 * leaves room for the task's gu and act in the 227 KB a block has). A tile that streams (the
 * 1.7B's 576 KB) copies its down block after the GEMV, whose stream fills the shared memory, and
 * then the layer is slower than gate_up and down apart. Not on the CPU: the fixed-point sum is
 * the GPU's answer to unordered adds, which the CPU's tasks do not make. */
#define MLP_FUSED_AUTO_BYTES (192 << 10)
static int mlp_fused_auto(const builder *b, int64_t I, int64_t H, int grid) {
    return b->cuda && 3 * (I / grid) * H * 2 <= MLP_FUSED_AUTO_BYTES;
}

/* The rule for the LM head and the argmax as one layer: always on the CPU; on the GPU where the
 * MLP's tiles stage whole (the Qwen3-0.6B shape) and the attention is unsplit, where each LM-head
 * task's own argmax saves the second layer's hand-off. With a split attention or for larger
 * shapes the two layers are as fast or faster. Called after the decoder layers: it reads their
 * attention split. */
static int lm_argmax_auto(const builder *b, int64_t I, int64_t H) {
    return !b->cuda || (mlp_fused_auto(b, I, H, pick_grid(I, b->target)) && b->m->info.attention_kv_splits <= 1);
}

/* Layer l from its input: *h, plus *acc when the layer before left its MLP's sum in an
 * accumulator (the layer's input is then h + acc); both are set to the layer's output. */
static int build_decoder_layer(builder *b, int l, pk_tensor **h, pk_tensor **acc) {
    const pk_hf_config *c = b->c;
    pk_kernel *k = b->m->k;
    const int64_t H = c->hidden_size, D = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    const int64_t I = c->intermediate_size;
    char n[160], p[64];
    snprintf(p, sizeof p, "model.layers.%d.", l);
#define W(suffix, nd, d0, d1) (snprintf(n, sizeof n, "%s%s", p, suffix), weight(b, n, nd, d0, d1))
#define A(suffix, cols) (snprintf(n, sizeof n, "%s%s", p, suffix), activation(b, n, cols))
    pk_tensor *attn_norm = W("input_layernorm.weight", 1, H, 0);
    pk_tensor *qkv_parts[3] = {W("self_attn.q_proj.weight", 2, Hq * D, H), W("self_attn.k_proj.weight", 2, Hkv * D, H),
                               W("self_attn.v_proj.weight", 2, Hkv * D, H)};
    pk_tensor *wo = W("self_attn.o_proj.weight", 2, H, Hq * D);
    pk_tensor *q_norm = NULL, *k_norm = NULL;
    if (c->has_qk_norm) {
        q_norm = W("self_attn.q_norm.weight", 1, D, 0);
        k_norm = W("self_attn.k_norm.weight", 1, D, 0);
        if (!q_norm || !k_norm) return 0;
    }
    pk_tensor *mlp_norm = W("post_attention_layernorm.weight", 1, H, 0);
    pk_tensor *gu_parts[2] = {W("mlp.gate_proj.weight", 2, I, H), W("mlp.up_proj.weight", 2, I, H)};
    pk_tensor *wd = W("mlp.down_proj.weight", 2, H, I);
    if (!attn_norm || !qkv_parts[0] || !qkv_parts[1] || !qkv_parts[2] || !wo || !mlp_norm || !gu_parts[0] ||
        !gu_parts[1] || !wd)
        return 0;
    snprintf(n, sizeof n, "%sself_attn.qkv_proj.weight(fused)", p);
    pk_tensor *wqkv = pk_fuse_tensors(k, n, qkv_parts, 3, 0, (int)Hkv);
    /* The MLP's tasks each take a gate block and its up block (one group per task). */
    const int t = b->target, gu_grid = pick_grid(I, t);
    snprintf(n, sizeof n, "%smlp.gate_up_proj.weight(fused)", p);
    pk_tensor *wgu = wqkv ? pk_fuse_tensors(k, n, gu_parts, 2, 0, gu_grid) : NULL;
    if (!wqkv || !wgu) return layer_ok(b, pk_kernel_status(k));

    int64_t cache_dims[4] = {b->cfg->num_pages, b->cfg->page_size, Hkv, D};
    /* Check each cache at once: a later successful pk_new_tensor clears the kernel's error. */
    snprintf(n, sizeof n, "%sk_cache", p);
    pk_tensor *kc = pk_new_tensor(k, n, PK_DTYPE_BF16, 4, cache_dims, PK_IO_LOCAL);
    if (!kc) return layer_ok(b, pk_kernel_status(k));
    snprintf(n, sizeof n, "%sv_cache", p);
    pk_tensor *vc = pk_new_tensor(k, n, PK_DTYPE_BF16, 4, cache_dims, PK_IO_LOCAL);
    if (!vc) return layer_ok(b, pk_kernel_status(k));
    const int64_t qkv_cols = Hkv * (Hq / Hkv + 2) * D;
    pk_tensor *qkv = A("qkv", qkv_cols), *att = A("attn_out", Hq * D), *h_attn = A("h_attn", H);
    /* the MLP as one layer leaves its sum in an accumulator (every layer but the last) */
    const int fused = l + 1 < c->num_hidden_layers &&
                      (b->opts.fused_mlp > 0 || (b->opts.fused_mlp < 0 && mlp_fused_auto(b, I, H, gu_grid)));
    pk_tensor *gu = fused ? NULL : A("mlp_act", I);
    pk_tensor *h_mlp = fused ? NULL : A("h_mlp", H);
    pk_tensor *h_in = *acc ? A("h_in", H) : *h; /* the layer's input as bf16: o_proj's residual */
    if (!qkv || !att || !h_attn || (!fused && (!gu || !h_mlp)) || !h_in) return 0; /* activation() wrote err */
#undef W
#undef A
    pk_attention_params ap;
    pk_hf_config_attention_params(c, &ap);
    const int att_grid = pick_grid(Hkv, t);
    ap.kv_splits = b->m->info.attention_kv_splits = kv_splits_for(k, att_grid, (int)D, (int)(Hq / Hkv));
    const float eps = (float)c->rms_norm_eps;
    const int qkv_grid = b->stage_bytes > 0
                             ? qkv_grid_for(qkv_cols, H, t, att_grid * ap.kv_splits, b->stage_bytes)
                             : pick_grid(qkv_cols, t);
    const int oproj_grid = pick_grid(H, t);
    if (!layer_ok(b, *acc ? pk_rmsnorm_linear_acc_layer(k, *h, *acc, attn_norm, wqkv, qkv, h_in, eps, qkv_grid)
                          : pk_rmsnorm_linear_layer(k, *h, attn_norm, wqkv, qkv, eps, qkv_grid)) ||
        !layer_ok(b, pk_attention_layer(k, qkv, kc, vc, q_norm, k_norm, att, &ap, att_grid)) ||
        !layer_ok(b, *acc ? pk_linear_with_residual_clear_layer(k, att, wo, h_in, *acc, h_attn, oproj_grid)
                          : pk_linear_with_residual_layer(k, att, wo, h_in, h_attn, oproj_grid)))
        return 0;
    if (fused) {
        snprintf(n, sizeof n, "%smlp_acc", p);
        pk_tensor *a = step_tensor(b, n, PK_DTYPE_INT64, H);
        if (!a || !layer_ok(b, pk_rmsnorm_swiglu_down_layer(k, h_attn, mlp_norm, wgu, wd, a, eps, gu_grid))) return 0;
        *h = h_attn, *acc = a;
        return 1;
    }
    if (!layer_ok(b, pk_rmsnorm_linear_swiglu_layer(k, h_attn, mlp_norm, wgu, (int)(I / gu_grid), gu, eps, gu_grid)) ||
        !layer_ok(b, pk_linear_with_residual_layer(k, gu, wd, h_attn, h_mlp, pick_grid(H, t))))
        return 0;
    *h = h_mlp, *acc = NULL;
    return 1;
}

static int build(builder *b) {
    const pk_hf_config *c = b->c;
    pk_kernel *k = b->m->k;
    const int64_t V = c->vocab_size, H = c->hidden_size;
    if (pk_weights_has(b->m->w, "model.layers.0.self_attn.q_proj.bias")) {
        snprintf(b->err, b->err_len, "%s: attention biases (self_attn.q_proj.bias) are not supported",
                 pk_weights_dir(b->m->w));
        return 0;
    }
    pk_tensor *embed = weight(b, "model.embed_tokens.weight", 2, V, H);
    pk_tensor *h = activation(b, "embed_out", H);
    if (!embed || !h) return 0;
    if (!layer_ok(b, pk_embedding_layer(k, pk_step_tokens(k), embed, h, pick_grid(H, b->target)))) return 0;
    pk_tensor *acc = NULL;
    for (int l = 0; l < c->num_hidden_layers; l++)
        if (!build_decoder_layer(b, l, &h, &acc)) return 0;
    pk_tensor *norm = weight(b, "model.norm.weight", 1, H, 0);
    pk_tensor *head = c->tie_word_embeddings ? embed : weight(b, "lm_head.weight", 2, V, H);
    pk_tensor *logits = activation(b, "logits", V);
    if (!norm || !head || !logits) return 0;
    int g = pick_grid(V, b->target);
    const float eps = (float)c->rms_norm_eps;
    const int lm_argmax =
        b->opts.lm_head_argmax >= 0 ? b->opts.lm_head_argmax : lm_argmax_auto(b, c->intermediate_size, H);
    if (lm_argmax ? !layer_ok(b, pk_rmsnorm_linear_argmax_layer(k, h, norm, head, logits, pk_step_output(k), eps, g))
                  : !layer_ok(b, pk_rmsnorm_linear_layer(k, h, norm, head, logits, eps, g)) ||
                        !layer_ok(b, pk_argmax_layer(k, logits, pk_step_output(k), g)))
        return 0;
    b->m->logits = logits;
    return 1;
}

/* The pk_model_info fields config.json determines (weight_bytes stays as it is). */
static void info_from_config(const pk_hf_config *c, pk_model_info *i) {
    snprintf(i->architecture, sizeof i->architecture, "%s", c->architecture);
    i->vocab_size = c->vocab_size;
    i->hidden_size = c->hidden_size;
    i->intermediate_size = c->intermediate_size;
    i->num_layers = c->num_hidden_layers;
    i->num_q_heads = c->num_attention_heads;
    i->num_kv_heads = c->num_key_value_heads;
    i->head_dim = c->head_dim;
    i->max_position_embeddings = c->max_position_embeddings;
    i->tie_word_embeddings = c->tie_word_embeddings;
    i->has_qk_norm = c->has_qk_norm;
    i->bos_token_id = c->bos_token_id;
    i->eos_token_id = c->eos_token_id;
}

pk_status pk_model_read_info(const char *dir, pk_model_info *out, char *err, size_t err_len) {
    char dummy[8];
    if (!err || err_len == 0) {
        err = dummy;
        err_len = sizeof dummy;
    }
    err[0] = '\0';
    if (!dir || !out) {
        snprintf(err, err_len, "pk_model_read_info: directory or output is NULL");
        return PK_ERR_INVALID_ARGUMENT;
    }
    pk_hf_config c;
    pk_status s = pk_hf_config_load(dir, &c, err, err_len);
    if (s != PK_OK) return s;
    memset(out, 0, sizeof *out);
    info_from_config(&c, out);
    out->weight_bytes = -1;
    out->attention_kv_splits = 0;
    return PK_OK;
}

pk_model_options pk_model_options_default(void) { return (pk_model_options){.fused_mlp = -1, .lm_head_argmax = -1}; }

pk_model *pk_model_load(const char *dir, const pk_config *cfg, char *err, size_t err_len) {
    return pk_model_load_with(dir, cfg, NULL, err, err_len);
}

pk_model *pk_model_load_with(const char *dir, const pk_config *cfg_in, const pk_model_options *opts_in, char *err,
                             size_t err_len) {
    char dummy[8];
    if (!err || err_len == 0) {
        err = dummy;
        err_len = sizeof dummy;
    }
    err[0] = '\0';
    if (!dir) {
        snprintf(err, err_len, "pk_model_load: directory is NULL");
        return NULL;
    }
    const pk_model_options opts = opts_in ? *opts_in : pk_model_options_default();
    if (opts.fused_mlp < -1 || opts.fused_mlp > 1 || opts.lm_head_argmax < -1 || opts.lm_head_argmax > 1) {
        snprintf(err, err_len, "pk_model_load: %s is %d; it must be -1 (auto), 0 (off) or 1 (on)",
                 opts.fused_mlp < -1 || opts.fused_mlp > 1 ? "fused_mlp" : "lm_head_argmax",
                 opts.fused_mlp < -1 || opts.fused_mlp > 1 ? opts.fused_mlp : opts.lm_head_argmax);
        return NULL;
    }
    if (opts.check_tensors != 0 && opts.check_tensors != 1) {
        snprintf(err, err_len, "pk_model_load: check_tensors is %d; it must be 0 (off) or 1 (scan every weight for NaN "
                 "and infinity)", opts.check_tensors);
        return NULL;
    }
    pk_hf_config c;
    if (pk_hf_config_load(dir, &c, err, err_len) != PK_OK) return NULL;
    pk_config cfg = cfg_in ? *cfg_in : pk_config_default();
    if (cfg.eos_token_id == -1) cfg.eos_token_id = c.eos_token_id;
    if (!cfg_in && cfg.max_seq_length > c.max_position_embeddings) cfg.max_seq_length = c.max_position_embeddings;
    if (cfg.max_seq_length > c.max_position_embeddings) {
        snprintf(err, err_len, "max_seq_length %d exceeds the model's max_position_embeddings %d (%s/config.json)",
                 cfg.max_seq_length, c.max_position_embeddings, dir);
        return NULL;
    }
    if (cfg.eos_token_id >= c.vocab_size) {
        snprintf(err, err_len, "eos_token_id %lld is outside the vocabulary [0, %d)", (long long)cfg.eos_token_id,
                 c.vocab_size);
        return NULL;
    }
    pk_model *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    if (pk_weights_open(dir, &m->w, err, err_len) != PK_OK) {
        free(m);
        return NULL;
    }
    pk_weights_set_check_finite(m->w, opts.check_tensors);
    m->k = pk_kernel_new(&cfg);
    if (!m->k || pk_kernel_status(m->k) != PK_OK) {
        snprintf(err, err_len, "%s", m->k ? pk_kernel_error(m->k) : "out of memory");
        pk_model_free(m);
        return NULL;
    }
    /* Tasks per layer: one per worker on the GPU (one CTA per SM), two per thread on the CPU.
     * The kernel's config has num_workers resolved (0 means one per core / SM). */
    const pk_config *kc = pk_kernel_config(m->k);
    const int cuda = kc->backend == PK_BACKEND_CUDA;
    builder b = {.m = m, .c = &c, .err = err, .err_len = err_len, .cfg = kc,
                 .target = cuda ? kc->num_workers : 2 * kc->num_workers, .cuda = cuda, .opts = opts};
    pk_device_info dev;
    if (pk_kernel_device_info(m->k, &dev) == PK_OK) b.stage_bytes = dev.stage_bytes;
    if (!build(&b)) {
        pk_model_free(m);
        return NULL;
    }
    pk_model_info *i = &m->info;
    info_from_config(&c, i);
    /* Bytes a decode step reads: every weight but the embedding table (one row of it), plus the
     * LM head even when tied. */
    i->weight_bytes = pk_weights_bytes_handed_out(m->w) - (int64_t)c.vocab_size * c.hidden_size * 2;
    if (c.tie_word_embeddings) i->weight_bytes += (int64_t)c.vocab_size * c.hidden_size * 2;
    return m;
}

void pk_model_free(pk_model *m) {
    if (!m) return;
    pk_kernel_free(m->k); /* before the weights it points into */
    pk_weights_close(m->w);
    free(m);
}

pk_kernel *pk_model_kernel(pk_model *m) { return m ? m->k : NULL; }
const pk_model_info *pk_model_get_info(const pk_model *m) { return m ? &m->info : NULL; }
pk_tensor *pk_model_logits(pk_model *m) { return m ? m->logits : NULL; }
