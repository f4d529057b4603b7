#!/usr/bin/env python3
"""random_models.py — random-weight models of the Qwen3 shapes in hf_baseline.CFGS, saved by
transformers in bf16 (the recipe of scripts/gpu_teacher_forcing.py's make_model, shared here so
the benchmark and the checks build the same models).

    python3 bench/random_models.py NAME OUT_DIR     # writes OUT_DIR (config.json, safetensors)

As a module: make_model(name, out_dir) -> (directory, in-memory bf16 model on the GPU).
Differences from the teacher-forcing script's models: max_position_embeddings is 40960 (the real
Qwen3's; pk refuses a max_seq_length past it, and the benchmark decodes at context 4096 + gen),
and config.json names no EOS token, so a benchmark always generates every token it asks for.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_baseline as hb  # noqa: E402  (CFGS: the preset shapes)

MAX_POSITIONS = 40960


def qwen3_config(name, **extra):
    from transformers import Qwen3Config
    if name not in hb.CFGS:
        raise SystemExit(f"unknown preset {name!r}; presets: {', '.join(hb.CFGS)}")
    kw = dict(vocab_size=151936, head_dim=128, rms_norm_eps=1e-6, rope_theta=1e6,
              max_position_embeddings=MAX_POSITIONS)
    kw.update(hb.CFGS[name])
    kw.update(extra)
    return Qwen3Config(**kw)


def drop_eos(directory):
    """config.json without bos/eos ids: pk then never stops a benchmark early."""
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    for key in ("eos_token_id", "bos_token_id", "pad_token_id"):
        cfg[key] = None
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)


def make_model(name, out_dir, seed=0, keep_eos=False):
    """(directory, model): the preset's shape, default HF random init (seed), bf16 on the GPU,
    saved to out_dir (sharded at 5 GB, as transformers does)."""
    import torch
    from transformers import Qwen3ForCausalLM
    torch.manual_seed(seed)
    cfg = qwen3_config(name)
    with torch.device("cuda"):
        m = Qwen3ForCausalLM(cfg).to(torch.bfloat16).eval()
    os.makedirs(out_dir, exist_ok=True)
    m.save_pretrained(out_dir, safe_serialization=True, max_shard_size="5GB")
    if not keep_eos:
        drop_eos(out_dir)
    return out_dir, m


def main():
    if len(sys.argv) != 3:
        print("usage: python3 bench/random_models.py NAME OUT_DIR   (NAME: " + ", ".join(hb.CFGS) + ")",
              file=sys.stderr)
        return 2
    t = time.time()
    d, m = make_model(sys.argv[1], sys.argv[2])
    nbytes = sum(p.numel() * p.element_size() for p in m.parameters())
    print(json.dumps({"model": sys.argv[1], "dir": d, "param_bytes": nbytes, "seconds": round(time.time() - t, 1)}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
