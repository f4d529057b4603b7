#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Makes golden outputs from Hugging Face transformers for pk's tests, on a CUDA GPU.

1. Tiny random models (default): for each entry of SPECS, a seeded random Qwen3/Llama model is written
   to OUT/<name>/{config.json, model.safetensors (bf16)} with OUT/<name>/golden.json:
     prompts             3-4 prompts of random ids (lengths 1, 7, 23, and 70 for llama3_scaled)
     max_new_tokens      12
     greedy              transformers' greedy continuation (generate, do_sample False, no EOS stop)
                         of each prompt, from the bf16 model with eager attention
     prompt_last_logits  the bf16 logits at each prompt's last position (plain forward), as floats
     top2_gaps           top-1 minus top-2 logit at each generated step (bf16 generate's logits)
     min_top2_gap        the smallest such gap over all steps and prompts, computed in fp32 (the
                         bf16 weights upcast); min_top2_gap_bf16 the same from the bf16 run
     rope_inv_freq       the model's RoPE inverse frequencies (fp32)
   Random weights at the usual scale give near-uniform logits whose top-2 gaps are below bf16 noise,
   which makes greedy comparisons meaningless. So the weights are drawn at unit gain (see init_weights),
   the final norm is scaled so the logits have a standard deviation of about TARGET_LOGIT_STD, and the
   prompts are chosen, among many random ones, as those whose whole greedy run keeps the top-2 gap
   largest (required > MIN_GAP) and produces several distinct tokens.
2. --pk-tiny DIR: goldens of the shipped model (models/pk-tiny) into OUT/pk-tiny.json: prompts from
   its tokenizer, 24 greedy tokens, last-position logits.

Usage (scripts/gpu_make_assets.sh runs both):
    python3 scripts/make_goldens.py --out tests/data/golden
    python3 scripts/make_goldens.py --out tests/data/golden --pk-tiny models/pk-tiny
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

MAX_NEW = 12
MIN_GAP = 0.5
TARGET_LOGIT_STD = 6.0
MIN_DISTINCT = 6
MAX_RUN = 3
N_RANDOM_PROMPTS = 2048
MATMUL_NOTE = "CUDA; fp32 matmuls without TF32; bf16 matmuls with reduced-precision reduction off"

SPECS = {
    "qwen3_untied": dict(
        arch="Qwen3ForCausalLM", vocab_size=512, hidden_size=80, intermediate_size=200,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        tie_word_embeddings=False, rope_theta=10000.0, rope_scaling=None,
        max_position_embeddings=128, rms_norm_eps=1e-6, prompt_lens=[1, 7, 23], seed=1001,
        emb_std=1.0, layer_gain=1.5, q_gain=1.0),
    "qwen3_tied": dict(
        arch="Qwen3ForCausalLM", vocab_size=384, hidden_size=96, intermediate_size=160,
        num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2, head_dim=16,
        tie_word_embeddings=True, rope_theta=1000000.0, rope_scaling=None,
        max_position_embeddings=128, rms_norm_eps=1e-6, prompt_lens=[1, 7, 23], seed=2002,
        emb_std=0.25, layer_gain=3.0, q_gain=1.0),
    "llama3_scaled": dict(
        arch="LlamaForCausalLM", vocab_size=448, hidden_size=128, intermediate_size=344,
        num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, head_dim=16,
        tie_word_embeddings=False, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        max_position_embeddings=256, rms_norm_eps=1e-5, prompt_lens=[1, 7, 23, 70], seed=3003,
        emb_std=1.0, layer_gain=1.5, q_gain=2.0),
    "llama3_plain": dict(
        arch="LlamaForCausalLM", vocab_size=320, hidden_size=64, intermediate_size=176,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
        tie_word_embeddings=True, rope_theta=500000.0, rope_scaling=None,
        max_position_embeddings=128, rms_norm_eps=1e-5, prompt_lens=[1, 7, 23], seed=4004,
        emb_std=0.25, layer_gain=3.0, q_gain=2.0),
}


def log(*a):
    print(*a, flush=True)


# ---- pure Python parts (tested without torch) -------------------------------------------------

def expected_inv_freq(head_dim, theta, scaling):
    """RoPE inverse frequencies, with Llama 3.1's "llama3" scaling when given."""
    inv = [1.0 / (theta ** (i / head_dim)) for i in range(0, head_dim, 2)]
    if not scaling:
        return inv
    assert scaling["rope_type"] == "llama3"
    factor = scaling["factor"]
    lo, hi = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in inv:
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(f)
        elif wl > lo_wl:
            out.append(f / factor)
        else:
            s = (old / wl - lo) / (hi - lo)
            out.append((1 - s) * f / factor + s * f)
    return out


def legacy_config_keys(spec):
    """Top-level keys that checkpoints on the Hub carry (transformers 5 writes rope_parameters)."""
    extra = {"rope_theta": spec["rope_theta"], "torch_dtype": "bfloat16"}
    if spec["rope_scaling"]:
        extra["rope_scaling"] = dict(spec["rope_scaling"])
    return extra


def patch_config(path, extra):
    """Adds the keys of extra that config.json lacks. Returns the old text (to undo)."""
    with open(path) as f:
        old = f.read()
    cfg = json.loads(old)
    add = {k: v for k, v in extra.items() if k not in cfg}
    if add:
        cfg.update(add)
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")
    return old


def distinct(seq):
    return len(set(seq))


def max_run(seq):
    """The longest run of one token repeated back to back."""
    best = run = 1 if seq else 0
    for a, b in zip(seq, seq[1:]):
        run = run + 1 if a == b else 1
        best = max(best, run)
    return best


def lively(seq):
    """Not degenerate: several distinct tokens and no long repetition."""
    return distinct(seq) >= MIN_DISTINCT and max_run(seq) <= MAX_RUN


def pick_order(scores, valid, n_distinct=None, cap=1.5):
    """Candidate indices: valid ones first, by descending score (capped at `cap`), then by more
    distinct tokens; then the rest by score."""
    idx = list(range(len(scores)))
    nd = n_distinct or [0] * len(scores)
    return sorted(idx, key=lambda i: (not valid[i], -min(scores[i], cap), -nd[i], -scores[i]))


# ---- torch / transformers parts ---------------------------------------------------------------

def build_config(spec):
    import transformers

    cls = getattr(transformers, spec["arch"].replace("ForCausalLM", "Config"))
    kw = dict(
        vocab_size=spec["vocab_size"], hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"], num_hidden_layers=spec["num_hidden_layers"],
        num_attention_heads=spec["num_attention_heads"], num_key_value_heads=spec["num_key_value_heads"],
        head_dim=spec["head_dim"], tie_word_embeddings=spec["tie_word_embeddings"],
        max_position_embeddings=spec["max_position_embeddings"], rms_norm_eps=spec["rms_norm_eps"],
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    if spec["arch"].startswith("Llama"):
        kw.update(attention_bias=False, mlp_bias=False)
    rp = {"rope_type": "default", "rope_theta": spec["rope_theta"]}
    if spec["rope_scaling"]:
        rp = dict(spec["rope_scaling"], rope_theta=spec["rope_theta"])
    tries = [dict(rope_parameters=rp), dict(rope_theta=spec["rope_theta"], rope_scaling=spec["rope_scaling"])]
    last = None
    for extra in tries:
        try:
            return cls(**kw, **extra)
        except (TypeError, ValueError) as e:
            last = e
            log(f"  config with {list(extra)} failed: {e!r}")
    raise last


def inv_freq_of(model):
    for name, buf in model.named_buffers():
        if name.endswith("inv_freq"):
            return buf.detach().float().cpu()
    return None


def load_model(path, dtype, dev):
    import torch
    from transformers import AutoModelForCausalLM

    try:
        m = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="eager")
    except TypeError:
        m = AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype, attn_implementation="eager")
    return m.to(dev).eval()


def save_model(model, path):
    try:
        model.save_pretrained(path, safe_serialization=True)
    except TypeError:
        model.save_pretrained(path)


def init_weights(model, spec, seed):
    """Unit-gain Gaussian weights from a seeded CPU generator; norm weights uniform around 1. Tied models
    get small embeddings (emb_std) so that the residual stream is not dominated by the current token,
    which would make the tied head repeat it."""
    layer_gain, q_gain = spec["layer_gain"], spec["q_gain"]
    import torch

    g = torch.Generator().manual_seed(seed)
    H = spec["hidden_size"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = p.shape

            def randn():
                return torch.randn(shape, generator=g)

            def unif(a, b):
                return a + (b - a) * torch.rand(shape, generator=g)

            if name.endswith("embed_tokens.weight"):
                w = randn() * spec["emb_std"]
            elif name.endswith("lm_head.weight"):
                w = randn() / math.sqrt(H)
            elif name.endswith("q_norm.weight"):
                w = unif(1.0, 2.0)
            elif name.endswith("k_norm.weight"):
                w = unif(0.7, 1.5)
            elif name == "model.norm.weight" or name.endswith(".norm.weight") and "layers" not in name:
                w = unif(0.75, 1.25)
            elif name.endswith("norm.weight"):
                w = unif(0.5, 1.5)
            elif name.endswith("proj.weight"):
                w = randn() / math.sqrt(shape[1])
                if "o_proj" in name or "down_proj" in name:
                    w = w * layer_gain
                if "q_proj" in name:
                    w = w * q_gain
            elif name.endswith("bias"):
                w = 0.1 * randn()
            else:
                log(f"  warning: no rule for {name}; N(0, 0.02)")
                w = 0.02 * randn()
            p.copy_(w.to(p.dtype))


def final_norm(model):
    return model.model.norm.weight


def set_eager(cfg):
    for attr in ("_attn_implementation", "attn_implementation"):
        try:
            setattr(cfg, attr, "eager")
            return
        except Exception:
            pass


def forward_logits(model, ids):
    import torch

    with torch.no_grad():
        return model(input_ids=ids).logits


def greedy_nocache(model, prompts, steps, chunk=1024):
    """Greedy decoding by full forward passes (no KV cache). Returns tokens [B,steps], gaps [B,steps]."""
    import torch

    toks, gaps = [], []
    for i in range(0, prompts.shape[0], chunk):
        x = prompts[i:i + chunk]
        tt, gg = [], []
        for _ in range(steps):
            lg = forward_logits(model, x)[:, -1, :].float()
            top = lg.topk(2, dim=-1)
            gg.append(top.values[:, 0] - top.values[:, 1])
            nxt = lg.argmax(dim=-1)
            tt.append(nxt)
            x = torch.cat([x, nxt[:, None]], dim=1)
        toks.append(torch.stack(tt, 1))
        gaps.append(torch.stack(gg, 1))
    return torch.cat(toks, 0), torch.cat(gaps, 0)


def hf_greedy(model, prompt, n):
    """transformers' generate, greedy, exactly n new tokens (no EOS). Returns (tokens, step logits or
    None, source)."""
    import torch
    from transformers import GenerationConfig

    ids = torch.tensor([prompt], device=model.device)
    gc = GenerationConfig(max_new_tokens=n, do_sample=False, num_beams=1, eos_token_id=None,
                          pad_token_id=None, bos_token_id=None)
    try:
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=gc,
                                 output_logits=True, return_dict_in_generate=True)
        seq = out.sequences[0, ids.shape[1]:].tolist()
        lg = getattr(out, "logits", None) or getattr(out, "scores", None)
        if len(seq) == n:
            logits = torch.stack([l[0].float() for l in lg], 0) if lg else None
            return seq, logits, "generate"
        log(f"  warning: generate gave {len(seq)} tokens, wanted {n}")
    except Exception as e:
        log(f"  warning: generate failed: {e!r}")
    t, _ = greedy_nocache(model, ids, n)
    return t[0].tolist(), None, "nocache"


def gaps_of(logits):
    top = logits.float().topk(2, dim=-1).values
    return (top[:, 0] - top[:, 1]).tolist()


def teacher_forced_gaps(model, prompt, seq):
    """fp32 top-2 gaps at each generated step, by one forward pass over prompt + seq."""
    import torch

    ids = torch.tensor([prompt + seq], device=model.device)
    lg = forward_logits(model, ids)[0].float()
    steps = lg[len(prompt) - 1: len(prompt) - 1 + len(seq)]
    am = steps.argmax(-1).tolist()
    return gaps_of(steps), am == seq


def make_one(name, spec, out_root, dev, deadline, n_prompts=N_RANDOM_PROMPTS):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    t0 = time.time()
    V = spec["vocab_size"]
    tied = spec["tie_word_embeddings"]
    out_dir = os.path.join(out_root, name)
    best = None
    for attempt in range(4):
        seed = spec["seed"] + 17 * attempt
        cfg = build_config(spec)
        set_eager(cfg)
        try:
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
        except TypeError:
            model = AutoModelForCausalLM.from_config(cfg)
        model = model.float().to(dev).eval()
        init_weights(model, spec, seed)
        if tied and model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
            log("  warning: lm_head is not tied to embed_tokens in memory; copying embed_tokens into it")
            with torch.no_grad():
                model.lm_head.weight.copy_(model.model.embed_tokens.weight)
        # Scale the final norm so that the logits have the target standard deviation.
        gcal = torch.Generator(device="cpu").manual_seed(seed + 1)
        probe = torch.randint(0, V, (64, 16), generator=gcal).to(dev)
        s1 = forward_logits(model, probe).float().std(dim=-1).mean().item()
        with torch.no_grad():
            final_norm(model).mul_(TARGET_LOGIT_STD / s1)
        model = model.to(torch.bfloat16)
        s2 = forward_logits(model, probe).float().std(dim=-1).mean().item()
        log(f"[{name}] attempt {attempt} seed {seed}: logit std {s1:.3f} -> {s2:.3f} "
            f"(emb std {spec['emb_std']}, layer gain {spec['layer_gain']}, q gain {spec['q_gain']})")

        tmp = out_dir + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        save_model(model, tmp)
        for extra_file in ("generation_config.json",):
            if os.path.exists(os.path.join(tmp, extra_file)):
                os.remove(os.path.join(tmp, extra_file))
        ref = forward_logits(model, probe[:4]).float()
        d0 = (forward_logits(load_model(tmp, torch.bfloat16, dev), probe[:4]).float() - ref).abs().max().item()
        old_cfg = patch_config(os.path.join(tmp, "config.json"), legacy_config_keys(spec))
        m16 = load_model(tmp, torch.bfloat16, dev)
        diff = (forward_logits(m16, probe[:4]).float() - ref).abs().max().item()
        config_patched = True
        log(f"  reload: max |logit diff| vs in-memory {d0} as saved, {diff} with legacy rope keys")
        if diff > d0 + 1e-6:
            log("  warning: the legacy keys change the reloaded model; undoing them")
            with open(os.path.join(tmp, "config.json"), "w") as f:
                f.write(old_cfg)
            config_patched = False
            m16 = load_model(tmp, torch.bfloat16, dev)
            diff = d0
        if diff > 0.05 * ref.abs().max().item():
            log(f"  ERROR: the reloaded model differs from the one in memory by {diff}")
        m32 = load_model(tmp, torch.float32, dev)
        inv = inv_freq_of(m16)
        want = torch.tensor(expected_inv_freq(spec["head_dim"], spec["rope_theta"], spec["rope_scaling"]))
        if inv is None:
            inv_ok = "not found"
        elif torch.allclose(inv, want, rtol=1e-5, atol=0):
            inv_ok = "fp32 formula"
        elif torch.equal(inv, want.to(torch.bfloat16).float()):
            inv_ok = "formula rounded to bf16"
        else:
            inv_ok = "MISMATCH"
        log(f"  rope inv_freq of the bf16 model: {inv_ok}")
        if inv_ok == "MISMATCH":
            log(f"  ERROR: rope inv_freq {inv.tolist()} != expected {want.tolist()}")

        g = torch.Generator(device="cpu").manual_seed(seed + 2)
        prompts, greedy, last_logits, gaps16, gaps32, sources, agree = [], [], [], [], [], [], []
        cands_info = []
        for L in spec["prompt_lens"]:
            if L == 1:
                cand = torch.arange(V)[:, None]
            else:
                cand = torch.randint(0, V, (n_prompts, L), generator=g)
            cand = cand.to(dev)
            toks, gps = greedy_nocache(m32, cand, MAX_NEW)
            score = gps.min(dim=1).values.tolist()
            tl = toks.tolist()
            valid = [lively(t) for t in tl]
            n_ok = sum(1 for s, v in zip(score, valid) if v and s > MIN_GAP)
            cands_info.append({"len": L, "candidates": len(tl), "passing": n_ok,
                               "frac_lively": round(sum(valid) / len(valid), 3)})
            chosen = None
            for i in pick_order(score, valid, [distinct(t) for t in tl])[:16]:
                p = cand[i].tolist()
                seq16, lg16, src = hf_greedy(m16, p, MAX_NEW)
                seq32, _, _ = hf_greedy(m32, p, MAX_NEW)
                g32, tf_ok = teacher_forced_gaps(m32, p, seq16)
                g16 = gaps_of(lg16) if lg16 is not None else teacher_forced_gaps(m16, p, seq16)[0]
                ok = seq16 == seq32 == tl[i] and tf_ok
                cand_rec = (p, seq16, g16, g32, src, ok)
                if ok and min(g32) > MIN_GAP and min(g16) > MIN_GAP and lively(seq16):
                    chosen = cand_rec
                    break
                if chosen is None or (ok and not chosen[5]):
                    chosen = cand_rec
            p, seq16, g16, g32, src, ok = chosen
            lg = forward_logits(m16, torch.tensor([p], device=dev))[0, -1].float().tolist()
            prompts.append(p)
            greedy.append(seq16)
            last_logits.append(lg)
            gaps16.append([round(x, 4) for x in g16])
            gaps32.append([round(x, 5) for x in g32])
            sources.append(src)
            agree.append(ok)
            log(f"  len {L}: {cands_info[-1]}; chosen min gap fp32 {min(g32):.3f} bf16 {min(g16):.3f}, "
                f"distinct {distinct(seq16)}, max run {max_run(seq16)}, fp32==bf16==nocache {ok}, via {src}: {p[:8]}... -> {seq16}")
        min32 = min(min(x) for x in gaps32)
        min16 = min(min(x) for x in gaps16)
        res = dict(seed=seed, min32=min32, min16=min16, prompts=prompts, greedy=greedy, last_logits=last_logits,
                   gaps16=gaps16, gaps32=gaps32, sources=sources, agree=agree, tmp=tmp, inv=inv,
                   inv_ok=inv_ok, want=want, logit_std=s2, cands=cands_info, config_patched=config_patched,
                   reload_diff=diff)
        score_now = min(min32, min16) if all(agree) else -1.0
        if best is None or score_now > best[0]:
            if best is not None:
                shutil.rmtree(best[1]["tmp"], ignore_errors=True)
            res["tmp"] = out_dir + f".try{attempt}"
            shutil.rmtree(res["tmp"], ignore_errors=True)
            os.rename(tmp, res["tmp"])
            best = (score_now, res)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        if score_now > MIN_GAP:
            break
        if time.time() > deadline:
            log(f"  out of time for {name}: keeping the best attempt")
            break
        log(f"  attempt {attempt} not decisive enough (score {score_now:.3f}); trying another seed")

    score, r = best
    shutil.rmtree(out_dir, ignore_errors=True)
    os.rename(r["tmp"], out_dir)
    golden = {
        "model": name,
        "architecture": spec["arch"],
        "prompts": r["prompts"],
        "max_new_tokens": MAX_NEW,
        "greedy": r["greedy"],
        "prompt_last_logits": r["last_logits"],
        "min_top2_gap": round(r["min32"], 5),
        "min_top2_gap_bf16": round(r["min16"], 5),
        "top2_gaps": r["gaps16"],
        "top2_gaps_fp32": r["gaps32"],
        "greedy_source": r["sources"],
        "greedy_fp32_bf16_nocache_agree": r["agree"],
        "logit_std": round(r["logit_std"], 4),
        "rope_inv_freq": None if r["inv"] is None else r["inv"].tolist(),
        "rope_inv_freq_is": r["inv_ok"],
        "rope_inv_freq_formula": r["want"].tolist(),
        "config_has_legacy_rope_keys": r["config_patched"],
        "seed": r["seed"],
        "recipe": ("weights N(0,1/fan_in) (embeddings N(0,%g^2)), o_proj/down_proj x%g, q_proj x%g, "
                   "norm weights U(0.5,1.5) (q_norm U(1,2), k_norm U(0.7,1.5)), final norm U(0.75,1.25) "
                   "scaled to a logit std of %g; prompts chosen among random ones for the largest min "
                   "top-2 gap with >= %d distinct tokens and runs <= %d" % (
                       spec["emb_std"], spec["layer_gain"], spec["q_gain"], TARGET_LOGIT_STD,
                       MIN_DISTINCT, MAX_RUN)),
        "candidates": r["cands"],
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "dtype": "bfloat16",
        "attn_implementation": "eager",
        "matmul": MATMUL_NOTE,
    }
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f)
        f.write("\n")
    size = os.path.getsize(os.path.join(out_dir, "model.safetensors"))
    log(f"[{name}] done in {time.time() - t0:.1f}s: min top-2 gap fp32 {r['min32']:.3f}, bf16 {r['min16']:.3f}; "
        f"model.safetensors {size} bytes; files {sorted(os.listdir(out_dir))}")
    if size > 1.5 * 2**20:
        log(f"  ERROR: {name}/model.safetensors is over 1.5 MiB")
    return golden


def make_pk_tiny(model_dir, out_root, dev, n_new=24):
    import torch
    import transformers
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    m16 = load_model(model_dir, torch.bfloat16, dev)
    m32 = load_model(model_dir, torch.float32, dev)
    texts = ["In the beginning", "And Jesus said unto them"]
    res = {"model": "pk-tiny", "model_dir": model_dir, "prompts_text": texts, "prompts": [],
           "max_new_tokens": n_new, "greedy": [], "greedy_text": [], "prompt_last_logits": [],
           "top2_gaps": [], "top2_gaps_fp32": [], "greedy_source": [], "greedy_fp32_agrees": []}
    for t in texts:
        p = tok.encode(t).ids
        seq, lg, src = hf_greedy(m16, p, n_new)
        g16 = gaps_of(lg) if lg is not None else teacher_forced_gaps(m16, p, seq)[0]
        g32, _ = teacher_forced_gaps(m32, p, seq)
        seq32, _, _ = hf_greedy(m32, p, n_new)
        last = forward_logits(m16, torch.tensor([p], device=dev))[0, -1].float().tolist()
        res["prompts"].append(p)
        res["greedy"].append(seq)
        res["greedy_text"].append(tok.decode(p + seq, skip_special_tokens=False))
        res["prompt_last_logits"].append(last)
        res["top2_gaps"].append([round(x, 4) for x in g16])
        res["top2_gaps_fp32"].append([round(x, 5) for x in g32])
        res["greedy_source"].append(src)
        res["greedy_fp32_agrees"].append(seq32 == seq)
        log(f"[pk-tiny] {t!r} {p} -> {seq}\n    {res['greedy_text'][-1]!r}\n    min gap bf16 {min(g16):.3f} "
            f"fp32 {min(g32):.3f}; fp32 greedy agrees: {seq32 == seq}")
    res["min_top2_gap"] = round(min(min(x) for x in res["top2_gaps_fp32"]), 5)
    res["min_top2_gap_bf16"] = round(min(min(x) for x in res["top2_gaps"]), 5)
    res.update(transformers_version=transformers.__version__, torch_version=torch.__version__,
               dtype="bfloat16", attn_implementation="eager", matmul=MATMUL_NOTE)
    path = os.path.join(out_root, "pk-tiny.json")
    with open(path, "w") as f:
        json.dump(res, f)
        f.write("\n")
    log(f"[pk-tiny] wrote {path}; min top-2 gap fp32 {res['min_top2_gap']}, bf16 {res['min_top2_gap_bf16']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/data/golden")
    ap.add_argument("--only", nargs="*", help="names of SPECS to make (default: all)")
    ap.add_argument("--pk-tiny", help="make the goldens of this trained model directory instead")
    ap.add_argument("--seconds", type=float, default=150.0, help="time after which no new seed is tried")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--n-prompts", type=int, default=N_RANDOM_PROMPTS, help="random prompts tried per length")
    args = ap.parse_args()

    import torch

    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    except Exception:
        pass
    dev = torch.device(args.device)
    os.makedirs(args.out, exist_ok=True)
    if args.pk_tiny:
        make_pk_tiny(args.pk_tiny, args.out, dev)
        return
    t0 = time.time()
    names = args.only or list(SPECS)
    failed = []
    for i, name in enumerate(names):
        deadline = t0 + args.seconds * (i + 1) / len(names)
        try:
            make_one(name, SPECS[name], args.out, dev, deadline, args.n_prompts)
        except Exception as e:
            import traceback

            traceback.print_exc()
            log(f"[{name}] FAILED: {e!r}")
            failed.append(name)
    log(f"goldens done in {time.time() - t0:.1f}s; failed: {failed}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
