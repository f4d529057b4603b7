// SPDX-License-Identifier: Apache-2.0
/* fuzz_config.c — libFuzzer target: pk_hf_config_parse over arbitrary bytes.
 * On success the config must satisfy what the graph builder relies on (positive sizes, GQA
 * heads dividing, even head_dim <= 512, at most 8 EOS ids, a sane llama3 rope); on failure
 * the message must not be empty and the struct must be zeroed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/hf_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    pk_hf_config c;
    pk_status s = pk_hf_config_parse((const char *)data, size, "fuzz/config.json", &c, err,
                                     sizeof err);
    if (s != PK_OK) {
        static const pk_hf_config zero;
        if (err[0] == '\0' || memcmp(&c, &zero, sizeof c) != 0) abort();
        return 0;
    }
    if (c.vocab_size < 1 || c.hidden_size < 1 || c.intermediate_size < 1 ||
        c.num_hidden_layers < 1 || c.num_attention_heads < 1 || c.num_key_value_heads < 1 ||
        c.num_attention_heads % c.num_key_value_heads != 0 || c.head_dim < 2 ||
        c.head_dim % 2 != 0 || c.head_dim > PK_HF_MAX_HEAD_DIM || c.max_position_embeddings < 1)
        abort();
    if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1) || !(c.rope_theta > 0)) abort();
    if (c.num_eos_token_ids < 0 || c.num_eos_token_ids > PK_HF_MAX_EOS) abort();
    if ((c.num_eos_token_ids == 0) != (c.eos_token_id == -1)) abort();
    if (c.rope_scaling == PK_ROPE_SCALING_LLAMA3 &&
        !(c.rope_factor > 0 && c.rope_high_freq_factor > c.rope_low_freq_factor &&
          c.rope_original_max_position >= 1))
        abort();
    if (strlen(c.architecture) >= sizeof c.architecture) abort();
    pk_attention_params ap;
    pk_hf_config_attention_params(&c, &ap);
    if (ap.num_q_heads != c.num_attention_heads) abort();
    return 0;
}
