#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""shape_model.py — a random-weight bf16 model directory of one of hf_baseline's Qwen3 shapes,
written in plain Python (no torch, no numpy), for timing pk.

    python3 bench/shape_model.py NAME OUT_DIR [--zeros]   # NAME: qwen3-0.6b, qwen3-1.7b, qwen3-8b

--zeros writes sparse files of zero weights at once (no disk space used): enough to compile the
model's kernel ahead of time (`pk bench ... --threads 132` with PK_CUDA_ARCH=sm_90a), not to time it.

No GPU and no torch are needed, so the same directory can be made on the build machine and on
the GPU machine, and the kernel pk compiles for it (which depends on config.json only) can be
compiled ahead of time into .gpu/cache (docs/PERF.md). Timing does not depend on the values; they only need to be ordinary:
every weight element is a random bf16 of magnitude 2^-9 .. 2^-6 (about HF's init std 0.02) with a
random sign, norm weights are 1.0. To write 16 GB quickly the elements come from one 64 MiB random
pool, each tensor starting at its own random offset (no two tensors share bytes at the same
place, so no cache can profit). The correctness checks make their models with transformers
(scripts/gpu_teacher_forcing.py).

config.json is the Qwen3Config transformers would write for the shape (hf_baseline.CFGS, vocab
151936, head_dim 128, eps 1e-6, theta 1e6, max_position_embeddings 40960) without EOS, so a
benchmark generates every token it asks for.
"""
import json
import math
import os
import random
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
POOL_BYTES = 64 << 20
SHARD_BYTES = 5 << 30


def shapes():
    """hf_baseline.CFGS, read from its source (importing it needs torch)."""
    src = open(os.path.join(HERE, "hf_baseline.py")).read()
    m = re.search(r"^CFGS = \{.*?^\}", src, re.S | re.M)
    ns = {}
    exec(m.group(0), {"dict": dict, "True": True, "False": False}, ns)  # noqa: S102 — our own file
    return ns["CFGS"]


def config(name):
    cfgs = shapes()
    if name not in cfgs:
        raise SystemExit(f"unknown shape {name!r}; shapes: {', '.join(cfgs)}")
    c = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=151936, head_dim=128,
             rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=40960, hidden_act="silu",
             attention_bias=False, rope_scaling=None, torch_dtype="bfloat16", bos_token_id=None,
             eos_token_id=None, pad_token_id=None)
    c.update(cfgs[name])
    return c


def tensors(c):
    """(name, shape, is_norm) in the order transformers saves them."""
    H, I, V, D = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["head_dim"]
    Hq, Hkv = c["num_attention_heads"], c["num_key_value_heads"]
    out = [("model.embed_tokens.weight", (V, H), False)]
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        out += [(p + "input_layernorm.weight", (H,), True),
                (p + "self_attn.q_proj.weight", (Hq * D, H), False),
                (p + "self_attn.k_proj.weight", (Hkv * D, H), False),
                (p + "self_attn.v_proj.weight", (Hkv * D, H), False),
                (p + "self_attn.o_proj.weight", (H, Hq * D), False),
                (p + "self_attn.q_norm.weight", (D,), True),
                (p + "self_attn.k_norm.weight", (D,), True),
                (p + "post_attention_layernorm.weight", (H,), True),
                (p + "mlp.gate_proj.weight", (I, H), False),
                (p + "mlp.up_proj.weight", (I, H), False),
                (p + "mlp.down_proj.weight", (H, I), False)]
    out.append(("model.norm.weight", (H,), True))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (V, H), False))
    return out


def random_pool(rng):
    """POOL_BYTES of bf16: random low bytes; high bytes = sign | exponent 119..121 (2^-9 .. 2^-6)."""
    pool = bytearray(rng.randbytes(POOL_BYTES))
    high = bytes((b & 0x80) | (0x3B + b % 3) for b in range(256))
    pool[1::2] = bytes(pool[1::2]).translate(high)
    return bytes(pool)


def write_shard(path, items, pool, rng, zeros=False):
    header, off = {}, 0
    for name, shape, _ in items:
        n = 2 * math.prod(shape)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    one = struct.pack("<H", 0x3F80)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        if zeros:
            f.truncate(8 + len(hb) + off)
            return
        for name, shape, is_norm in items:
            n = header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
            if is_norm:
                f.write(one * (n // 2))
                continue
            pos = rng.randrange(0, POOL_BYTES // 2) * 2
            while n > 0:
                k = min(n, POOL_BYTES - pos)
                f.write(pool[pos:pos + k])
                n -= k
                pos = 0


def main(argv):
    zeros = "--zeros" in argv
    argv = [a for a in argv if a != "--zeros"]
    if len(argv) != 2:
        raise SystemExit(__doc__)
    name, out = argv
    c = config(name)
    rng = random.Random(0)
    pool = b"" if zeros else random_pool(rng)
    os.makedirs(out, exist_ok=True)
    items = tensors(c)
    shards, cur, size = [], [], 0
    for it in items:
        n = 2 * math.prod(it[1])
        if cur and size + n > SHARD_BYTES:
            shards.append(cur)
            cur, size = [], 0
        cur.append(it)
        size += n
    shards.append(cur)
    index = {}
    for i, sh in enumerate(shards):
        fname = "model.safetensors" if len(shards) == 1 else f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_shard(os.path.join(out, fname), sh, pool, rng, zeros)
        for it in sh:
            index[it[0]] = fname
    if len(shards) > 1:
        total = sum(2 * math.prod(it[1]) for it in items)
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": index}, f, indent=2)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    print(f"{out}: {name}, {len(items)} tensors in {len(shards)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
