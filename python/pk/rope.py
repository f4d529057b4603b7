# SPDX-License-Identifier: Apache-2.0
"""rope.py — RoPE tables as pk computes them, to check MPK-style cos/sin tables against.

pk's attention computes RoPE from pk_attention_params (src/kernels/cpu/rope.c: Hugging Face's
inv_freq in fp32, llama3 scaling step by step). MPK's attention_layer takes cos/sin tables
[S, D] instead (transformers' rotary_emb: cat(freqs, freqs), freqs = pos · inv_freq), so a table
handed to pk.PersistentKernel.attention_layer must be the one pk's parameters give.
"""
import math

import numpy as np

from . import errors

TOLERANCE = 2e-2  # bf16 tables round to 2^-8; fp32 angles at long positions drift by ~1e-3


def inv_freq(p):
    """[D/2] fp32 inverse frequencies of AttentionParams p, as rope.c computes them."""
    D = p.head_dim
    e = (np.arange(0, D, 2, dtype=np.float32) / np.float32(D)).astype(np.float32)
    f = (np.float32(1.0) / np.power(np.float32(p.rope_theta), e, dtype=np.float32)).astype(np.float32)
    if p.rope_scaling != 1:
        return f
    factor, low, high = np.float32(p.rope_factor), p.rope_low_freq_factor, p.rope_high_freq_factor
    old = np.float32(p.rope_original_max_position)
    low_wl = np.float32(p.rope_original_max_position / low)
    high_wl = np.float32(p.rope_original_max_position / high)
    band = np.float32(high - low)
    wl = (np.float32(1.0) / f) * np.float32(2 * math.pi)
    scaled = np.where(wl > low_wl, f / factor, f).astype(np.float32)
    smooth = ((np.float32(1.0) / wl) * old - np.float32(low)) / band
    mid = ~(wl < high_wl) & ~(wl > low_wl)
    return np.where(mid, (1 - smooth) * scaled / factor + smooth * scaled, scaled).astype(np.float32)


def check_tables(cos, sin, p, max_seq_length):
    """Raises pk.InvalidArgumentError unless cos / sin [S, D] match p for positions < max_seq_length."""
    D = p.head_dim
    for name, t in (("cos_pos_embed", cos), ("sin_pos_embed", sin)):
        if t.ndim != 2 or t.shape[1] != D:
            raise errors.ShapeError(f"attention_layer: {name} has shape {t.shape}; it must be [S, {D}] (head_dim)")
    S = min(cos.shape[0], sin.shape[0], max_seq_length)
    ang = np.arange(S, dtype=np.float32)[:, None] * inv_freq(p)[None, :]
    ang = np.concatenate([ang, ang], axis=1)
    for name, t, want in (("cos_pos_embed", cos, np.cos(ang)), ("sin_pos_embed", sin, np.sin(ang))):
        err = np.abs(t[:S] - want)
        if err.size and err.max() > TOLERANCE:
            pos, col = np.unravel_index(int(err.argmax()), err.shape)
            raise errors.InvalidArgumentError(
                f"attention_layer: {name}[{pos}, {col}] is {t[pos, col]:.4f}, but rope_theta {p.rope_theta:g}"
                f"{' with llama3 scaling' if p.rope_scaling == 1 else ''} gives {want[pos, col]:.4f}: pk computes "
                "RoPE from the parameters, so a table must be theirs")
