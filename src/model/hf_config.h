// SPDX-License-Identifier: Apache-2.0
/* hf_config.h — a Hugging Face config.json for Qwen3ForCausalLM / LlamaForCausalLM.
 *
 * Parses the keys pk needs, fills in the defaults transformers would use, and refuses what pk
 * cannot run (other architectures, rope scaling other than "llama3", sliding-window layers,
 * attention/MLP biases, activations other than SiLU) with PK_ERR_UNSUPPORTED, and malformed or
 * out-of-range values with PK_ERR_FORMAT. Every message names the file, the key and the
 * numbers. Both config layouts are read: transformers 4.x ("rope_theta", "rope_scaling",
 * "torch_dtype") and 5.x ("rope_parameters", "dtype").
 */
#ifndef PK_MODEL_HF_CONFIG_H
#define PK_MODEL_HF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "pk.h"

#define PK_HF_MAX_EOS 8
#define PK_HF_MAX_HEAD_DIM 512

typedef enum pk_hf_arch {
    PK_HF_ARCH_QWEN3 = 0, /* Qwen3ForCausalLM: per-head q_norm/k_norm */
    PK_HF_ARCH_LLAMA = 1, /* LlamaForCausalLM */
} pk_hf_arch;

typedef struct pk_hf_config {
    char architecture[64]; /* architectures[0] */
    pk_hf_arch arch;
    int has_qk_norm;       /* 1 for Qwen3 */
    int vocab_size;        /* V */
    int hidden_size;       /* H */
    int intermediate_size; /* I (MLP) */
    int num_hidden_layers;
    int num_attention_heads; /* Hq */
    int num_key_value_heads; /* Hkv; default Hq; divides Hq */
    int head_dim;            /* D; default H / Hq (Llama) or 128 (Qwen3, as transformers) */
    double rms_norm_eps;     /* default 1e-6 */
    double rope_theta;       /* "rope_theta" or "rope_parameters".rope_theta; default 10000 */
    pk_rope_scaling_type rope_scaling;  /* NONE for null / "default" */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor; /* llama3 only */
    int rope_original_max_position;                                  /* llama3 only */
    int max_position_embeddings; /* default 2048 (Llama) / 32768 (Qwen3), as transformers */
    int tie_word_embeddings;     /* default 0 */
    int64_t bos_token_id;        /* -1 when absent or null */
    int64_t eos_token_id;        /* the first of eos_token_ids, -1 when none */
    int64_t eos_token_ids[PK_HF_MAX_EOS]; /* a list in config.json keeps its first 8 */
    int num_eos_token_ids;
    char dtype[16]; /* "torch_dtype" or "dtype" ("bfloat16"), "" if absent; informational */
} pk_hf_config;

/* Reads and parses DIR/config.json. On error returns the status, leaves *out zeroed and writes
 * a one-line reason to err (err may be NULL or err_len 0). PK_ERR_IO when the file cannot be
 * read. */
pk_status pk_hf_config_load(const char *dir, pk_hf_config *out, char *err, size_t err_len);

/* Parses `len` bytes of config.json text (not necessarily NUL-terminated; buf may hold any
 * bytes). `label` names the file in messages (NULL: "config.json"). */
pk_status pk_hf_config_parse(const char *buf, size_t len, const char *label, pk_hf_config *out,
                             char *err, size_t err_len);

/* The attention parameters of one layer (qk_norm_eps = rms_norm_eps). */
void pk_hf_config_attention_params(const pk_hf_config *c, pk_attention_params *out);

#endif /* PK_MODEL_HF_CONFIG_H */
