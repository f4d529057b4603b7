// SPDX-License-Identifier: Apache-2.0
/* rope.c — the inverse RoPE frequencies of a layer, as Hugging Face computes them in fp32.
 *
 * inv_freq[i] = 1 / theta^e, e = fp32(2i) / fp32(D), i < D/2 (torch: 1.0 / (base **
 * (arange(0, dim, 2).float() / dim))). With llama3 scaling, transformers'
 * _compute_llama3_parameters step by step: Python-float constants become fp32 operands, and
 * `scalar / tensor` is torch's reciprocal(tensor) · scalar, so wavelen = fp32(1 / f) · fp32(2π).
 * Pure function of the params: the same inv_freq on every call and thread.
 */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "pk.h"

void pk_rope_inv_freq(const pk_layer_params *p, float *inv_freq) {
    int half = p->head_dim / 2;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)p->head_dim;
        inv_freq[i] = 1.0f / powf(p->rope_theta, e);
    }
    if (p->rope_scaling != PK_ROPE_SCALING_LLAMA3) return;

    const double two_pi = 6.283185307179586476925286766559;
    float factor = p->rope_factor, low = p->rope_low_freq_factor, high = p->rope_high_freq_factor;
    float old_len = (float)p->rope_original_max_position;
    /* Python doubles, compared with the fp32 wavelen tensor as fp32 */
    float low_freq_wavelen = (float)((double)p->rope_original_max_position / low);
    float high_freq_wavelen = (float)((double)p->rope_original_max_position / high);
    float band = (float)((double)high - (double)low);
    for (int i = 0; i < half; i++) {
        float f = inv_freq[i];
        float wavelen = (1.0f / f) * (float)two_pi;
        float scaled = wavelen > low_freq_wavelen ? f / factor : f;
        if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen)) {
            float smooth = ((1.0f / wavelen) * old_len - low) / band;
            scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
        }
        inv_freq[i] = scaled;
    }
}
