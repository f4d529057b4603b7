#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""demo.py — the seed's demo in pk: a Qwen3 or Llama-3 decode graph built layer by layer through
pk.PersistentKernel from a Hugging Face directory's safetensors, then greedy generation.

    PYTHONPATH=python python3 python/examples/demo.py --model models/pk-tiny --prompt "In the beginning"

--graph pk (default) builds the graph pk's C builder builds on the CPU (src/model/model.c), so
the tokens are `pk generate`'s:
    h    = embedding(step tokens)
    per layer: qkv = rmsnorm_linear(h, input_layernorm, [Wq|Wk|Wv] fused per KV head)
               att = attention(qkv, k/v caches, q/k norms for Qwen3; RoPE from config.json)
               h'  = linear_with_residual(att, o_proj, h)
               a   = rmsnorm_linear_swiglu(h', post_attention_layernorm, [gate|up] in blocks)
               h   = linear_with_residual(a, down_proj, h')
    ids  = rmsnorm_linear_argmax(h, norm, lm_head)
--graph mpk builds MPK's demo's layer sequence instead (rmsnorm, linear; gate_up as one linear,
silu_mul, down with residual; the LM head as rmsnorm_linear then argmax_partial / _reduce).
Grids: each layer's largest divisor of its split dimension up to two tasks per worker.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pk  # noqa: E402
from pk.safetensors import open_dir  # noqa: E402


def read_config(model_dir):
    """config.json with transformers' defaults (as src/model/hf_config.c reads it)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    arch = c["architectures"][0]
    if arch not in ("Qwen3ForCausalLM", "LlamaForCausalLM"):
        raise SystemExit(f"{model_dir}: architecture {arch} (the demo builds Qwen3 and Llama-3)")
    qwen = arch == "Qwen3ForCausalLM"
    H, Hq = c["hidden_size"], c["num_attention_heads"]
    rope = c.get("rope_parameters") or {}
    scaling = c.get("rope_scaling") or (rope if rope.get("rope_type") == "llama3" else None)
    if scaling is not None and scaling.get("rope_type", scaling.get("type")) in (None, "default"):
        scaling = None
    eos = c.get("eos_token_id")
    return dict(arch=arch, qk_norm=qwen, H=H, I=c["intermediate_size"], V=c["vocab_size"], L=c["num_hidden_layers"],
                Hq=Hq, Hkv=c.get("num_key_value_heads") or Hq,
                D=c.get("head_dim") or (128 if qwen else H // Hq), eps=c.get("rms_norm_eps", 1e-6),
                theta=c.get("rope_theta", rope.get("rope_theta", 10000.0)), scaling=scaling,
                max_pos=c.get("max_position_embeddings", 32768 if qwen else 2048),
                tied=c.get("tie_word_embeddings", False), bos=c.get("bos_token_id"),
                eos=eos[0] if isinstance(eos, list) else -1 if eos is None else eos)


def pick_grid(n, target):
    """The largest divisor of n that is at most target (model.c's pick_grid)."""
    for g in range(max(1, target), 1, -1):
        if n % g == 0:
            return g
    return 1


def build(mpk, st, c, graph="pk"):
    """Adds the decode graph's layers to mpk from the weights in st (a pk.safetensors.Dir)."""
    T, t = mpk.max_num_batched_tokens, 2 * mpk.num_workers  # tasks per layer: two per worker (CPU)
    H, I, V, D, Hq, Hkv = c["H"], c["I"], c["V"], c["D"], c["Hq"], c["Hkv"]
    eps = c["eps"]

    def w(name):
        return mpk.attach_input(st.bf16_weight(name), name=name, dtype=pk.bfloat16)

    def act(name, cols, dtype=pk.bfloat16):
        return mpk.new_tensor(dims=(T, cols), dtype=dtype, name=name, io_category="cuda_tensor")

    embed = w("model.embed_tokens.weight")
    h = act("embed_out", H)
    mpk.embed_layer(input=mpk.step_tokens, weight=embed, output=h, grid_dim=(pick_grid(H, t), 1, 1),
                    block_dim=(128, 1, 1))
    gu_grid = pick_grid(I, t)
    for layer in range(c["L"]):
        p = f"model.layers.{layer}."
        attn_norm = w(p + "input_layernorm.weight")
        wq, wk, wv = (w(p + f"self_attn.{x}_proj.weight") for x in "qkv")
        wo = w(p + "self_attn.o_proj.weight")
        q_norm = w(p + "self_attn.q_norm.weight") if c["qk_norm"] else None
        k_norm = w(p + "self_attn.k_norm.weight") if c["qk_norm"] else None
        mlp_norm = w(p + "post_attention_layernorm.weight")
        wg, wu, wd = (w(p + f"mlp.{x}_proj.weight") for x in ("gate", "up", "down"))
        wqkv = mpk.fuse_tensors([wq, wk, wv], fused_dim=0, num_groups=Hkv, name=p + "self_attn.qkv_proj.weight(fused)")
        # pk's MLP layer takes each task's gate block then its up block; MPK's silu_mul all gates then all ups
        wgu = mpk.fuse_tensors([wg, wu], fused_dim=0, num_groups=gu_grid if graph == "pk" else 1,
                               name=p + "mlp.gate_up_proj.weight(fused)")
        cache = (mpk.max_num_pages, mpk.page_size, Hkv, D)
        kc = mpk.new_tensor(dims=cache, dtype=pk.bfloat16, name=p + "k_cache")
        vc = mpk.new_tensor(dims=cache, dtype=pk.bfloat16, name=p + "v_cache")
        qkv_cols = Hkv * (Hq // Hkv + 2) * D
        qkv, att, h_attn = act(p + "qkv", qkv_cols), act(p + "attn_out", Hq * D), act(p + "h_attn", H)
        if graph == "pk":
            mpk.rmsnorm_linear_layer(input=h, weight_norm=attn_norm, weight_linear=wqkv, output=qkv,
                                     grid_dim=pick_grid(qkv_cols, t), eps=eps)
        else:
            normed = act(p + "rmsnorm_out", H)
            mpk.rmsnorm_layer(input=h, weight=attn_norm, output=normed, grid_dim=pick_grid(T, t), eps=eps)
            mpk.linear_layer(input=normed, weight=wqkv, output=qkv, grid_dim=pick_grid(qkv_cols, t))
        mpk.attention_layer(input=qkv, k_cache=kc, v_cache=vc, q_norm=q_norm, k_norm=k_norm, cos_pos_embed=None,
                            sin_pos_embed=None, output=att, grid_dim=(1, pick_grid(Hkv, t), 1), block_dim=(128, 1, 1),
                            rope_theta=c["theta"], rope_scaling=c["scaling"], qk_norm_eps=eps)
        mpk.linear_with_residual_layer(input=att, weight=wo, residual=h, output=h_attn, grid_dim=pick_grid(H, t))
        h_mlp = act(p + "h_mlp", H)
        if graph == "pk":
            a = act(p + "mlp_act", I)
            mpk.rmsnorm_linear_swiglu_layer(x=h_attn, norm_w=mlp_norm, w=wgu, block=I // gu_grid, out=a,
                                            grid_dim=gu_grid, eps=eps)
            mpk.linear_with_residual_layer(input=a, weight=wd, residual=h_attn, output=h_mlp, grid_dim=pick_grid(H, t))
        else:
            mlp_mid, silu_out = act(p + "mlp_mid", 2 * I), act(p + "silu_mul_out", I)
            mpk.rmsnorm_linear_layer(input=h_attn, weight_norm=mlp_norm, weight_linear=wgu, output=mlp_mid,
                                     grid_dim=pick_grid(2 * I, t), eps=eps)
            mpk.silu_mul_layer(input=mlp_mid, output=silu_out, grid_dim=pick_grid(I, t))
            mpk.linear_with_residual_layer(input=silu_out, weight=wd, residual=h_attn, output=h_mlp,
                                           grid_dim=pick_grid(H, t))
        h = h_mlp
    norm = w("model.norm.weight")
    head = embed if c["tied"] else w("lm_head.weight")
    logits = act("logits", V)
    g = pick_grid(V, t)
    if graph == "pk":
        mpk.rmsnorm_linear_argmax_layer(x=h, norm_w=norm, w=head, logits=logits, out=mpk.step_output, grid_dim=g,
                                        eps=eps)
    else:
        mpk.rmsnorm_linear_layer(input=h, weight_norm=norm, weight_linear=head, output=logits, grid_dim=g, eps=eps)
        value, index = act("argmax_part_value", g), act("argmax_part_index", g, pk.int64)
        mpk.argmax_partial_layer(input=logits, output=(value, index), grid_dim=(g, 1, 1), block_dim=(128, 1, 1))
        mpk.argmax_reduce_layer(input=(value, index), output=mpk.step_output, grid_dim=(1, 1, 1),
                                block_dim=(128, 1, 1))
    return logits


def make_kernel(model_dir, prompt_len, max_tokens, num_workers=None, graph="pk", backend="cpu", step_tokens=64,
                eos_token_id=None):
    """A compiled PersistentKernel for one request of prompt_len + max_tokens positions, sized as
    `pk generate` sizes its run."""
    c = read_config(model_dir)
    workers = num_workers or (os.cpu_count() or 1)
    mpk = pk.PersistentKernel(world_size=1, mpi_rank=0, num_workers=workers, num_local_schedulers=1,
                              num_remote_schedulers=0, max_seq_length=max(2, min(prompt_len + max_tokens, c["max_pos"])),
                              eos_token_id=c["eos"] if eos_token_id is None else eos_token_id, meta_tensors=None,
                              profiler_tensor=None, spec_decode_config=None, backend=backend,
                              max_num_batched_requests=1, max_num_batched_tokens=step_tokens)
    build(mpk, open_dir(model_dir), c, graph)
    mpk.compile()
    return mpk


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.environ.get("PK_MODEL", "models/pk-tiny"))
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt", help="the prompt as text (needs tokenizer.json)")
    g.add_argument("--prompt-ids", help="the prompt as token ids: 1,2,3")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="workers (default: one per core)")
    ap.add_argument("--graph", choices=("pk", "mpk"), default="pk")
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--print-ids", action="store_true", help="print the generated ids instead of the text")
    a = ap.parse_args()
    tok = None
    if a.prompt is not None:
        tok = pk.Tokenizer(os.path.join(a.model, "tokenizer.json"))
        ids = tok.encode(a.prompt)
        c = read_config(a.model)
        if c["arch"] == "LlamaForCausalLM" and c["bos"] is not None and (not ids or ids[0] != c["bos"]):
            ids = [c["bos"]] + ids  # Llama-3 expects <|begin_of_text|>, as `pk generate` adds it
    else:
        ids = [int(x) for x in a.prompt_ids.replace(",", " ").split()]
    with make_kernel(a.model, len(ids), a.max_tokens, a.threads, a.graph, a.backend) as mpk:
        out = mpk([ids], max_new_tokens=a.max_tokens)[0]
    print(" ".join(map(str, out)) if a.print_ids or tok is None else a.prompt + tok.decode(out))


if __name__ == "__main__":
    main()
