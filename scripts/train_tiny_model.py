#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains pk's shipped model, models/pk-tiny: a byte-level BPE tokenizer and a small Qwen3ForCausalLM
on the King James Bible (public domain), for a fixed wall-clock budget on one GPU.

Needs torch, transformers (>= 4.5x; written against 5.x), tokenizers and safetensors. The corpus is
the output of Debian's bible-kjv (`bible -f "Gen1:1-Rev22:21" | gzip > .dev/corpus.txt.gz`): one
verse a line, "Book<chapter>:<verse> text". Usage (scripts/gpu_make_assets.sh runs it):

    python3 scripts/train_tiny_model.py --corpus .dev/corpus.txt.gz --out models/pk-tiny --minutes 4

Writes OUT/{config.json, model.safetensors (bf16), generation_config.json, tokenizer.json,
tokenizer_config.json, README.md} and prints the loss as it goes.
"""
import argparse
import gzip
import json
import math
import os
import re
import sys
import time

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VERSE_RE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+)\s+(.*)$")
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def log(*a):
    print(*a, flush=True)


def read_chapters(path):
    """Returns [(book, chapter, text)], the verses of a chapter joined by newlines."""
    opener = gzip.open if path.endswith(".gz") else open
    chapters = []
    key = None
    verses = []
    bad = 0
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            m = VERSE_RE.match(line)
            if not m:
                bad += 1
                continue
            k = (m.group(1), int(m.group(2)))
            if k != key:
                if verses:
                    chapters.append((key[0], key[1], "\n".join(verses) + "\n"))
                key, verses = k, []
            verses.append(" ".join(m.group(4).split()))
    if verses:
        chapters.append((key[0], key[1], "\n".join(verses) + "\n"))
    if bad:
        log(f"warning: {bad} lines of {path} were not verses")
    return chapters


def split_chapters(chapters, every=100):
    """Every `every`-th chapter (from the 50th) is held out for validation."""
    train, val = [], []
    for i, c in enumerate(chapters):
        (val if i % every == 50 % every else train).append(c)
    return train, val


def train_tokenizer(texts, vocab_size):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    for i, s in enumerate(SPECIALS):
        if tok.token_to_id(s) != i:
            raise SystemExit(f"special token {s} got id {tok.token_to_id(s)}, wanted {i}")
    return tok


def tokenizer_config(max_len):
    added = {
        str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                 "single_word": False, "special": True}
        for i, s in enumerate(SPECIALS)
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "model_max_length": max_len,
        "pad_token": "<|endoftext|>",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


def make_qwen3_config(**kw):
    """Qwen3Config across transformers versions: 5.x takes rope_parameters, 4.x rope_theta."""
    from transformers import Qwen3Config

    theta = kw.pop("rope_theta")
    try:
        cfg = Qwen3Config(rope_parameters={"rope_type": "default", "rope_theta": theta}, **kw)
        rp = getattr(cfg, "rope_parameters", None)
        if isinstance(rp, dict) and float(rp.get("rope_theta", -1)) == float(theta):
            return cfg
    except TypeError:
        pass
    return Qwen3Config(rope_theta=theta, **kw)


def inv_freq_of(model):
    for name, buf in model.named_buffers():
        if name.endswith("inv_freq"):
            return buf.detach().float().cpu()
    return None


def patch_config_json(path, extra):
    """Adds the legacy top-level keys (rope_theta, rope_scaling, torch_dtype) that checkpoints on the
    Hub carry, where transformers 5 wrote only rope_parameters / dtype. Returns the old text."""
    with open(path) as f:
        old = f.read()
    cfg = json.loads(old)
    changed = False
    for k, v in extra.items():
        if k not in cfg:
            cfg[k] = v
            changed = True
    if changed:
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")
    return old


def save_model(model, out):
    try:
        model.save_pretrained(out, safe_serialization=True)
    except TypeError:
        model.save_pretrained(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=".dev/corpus.txt.gz")
    ap.add_argument("--out", default="models/pk-tiny")
    ap.add_argument("--minutes", type=float, default=4.0, help="wall-clock training budget")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    t_start = time.time()
    chapters = read_chapters(args.corpus)
    n_verses = sum(c[2].count("\n") for c in chapters)
    n_bytes = sum(len(c[2].encode()) for c in chapters)
    log(f"corpus: {len(chapters)} chapters, {n_verses} verses, {n_bytes} bytes")
    train_ch, val_ch = split_chapters(chapters)

    tok = train_tokenizer([c[2] for c in chapters], args.vocab)
    V = tok.get_vocab_size(with_added_tokens=True)
    os.makedirs(args.out, exist_ok=True)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(512), f, indent=2, sort_keys=True)
        f.write("\n")
    log(f"tokenizer: vocab {V}, trained in {time.time() - t_start:.1f}s; "
        f"'In the beginning' -> {tok.encode('In the beginning').ids}")

    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = True
    eos = 0

    def stream(chs):
        ids = []
        for enc in tok.encode_batch([c[2] for c in chs]):
            ids.extend(enc.ids)
            ids.append(eos)
        return torch.tensor(ids, dtype=torch.long)

    train_ids = stream(train_ch).to(dev)
    val_ids = stream(val_ch).to(dev)
    log(f"tokens: train {train_ids.numel()} ({len(train_ch)} chapters), val {val_ids.numel()} "
        f"({len(val_ch)} chapters); {n_bytes / (train_ids.numel() + val_ids.numel()):.2f} bytes/token")

    cfg = make_qwen3_config(
        vocab_size=V, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, rms_norm_eps=1e-6,
        rope_theta=10000.0, max_position_embeddings=512, tie_word_embeddings=True,
        bos_token_id=eos, eos_token_id=eos,
    )
    model = Qwen3ForCausalLM(cfg).to(dev).float()
    n_params = sum(p.numel() for p in model.parameters())
    inv = inv_freq_of(model)
    want = 1.0 / (10000.0 ** (torch.arange(0, 64, 2).float() / 64))
    rope_ok = inv is None or torch.allclose(inv, want, rtol=1e-5)
    if not rope_ok:
        log(f"ERROR: rope inv_freq is not theta 10000: {inv[:4].tolist()}; config {cfg}")
    tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    log(f"model: {n_params} parameters (tied lm_head: {tied}); transformers {transformers.__version__}, "
        f"torch {torch.__version__}")

    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed" not in n else no_decay).append(p)
    opt_kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, fused=True, **opt_kw)
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(groups, **opt_kw)

    T, B = args.seq, args.batch
    offs = torch.arange(T + 1, device=dev)

    def batch_from(ids, starts):
        return ids[starts[:, None] + offs[None, :]]

    def loss_of(x):
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = model(input_ids=x[:, :-1]).logits
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))

    g_eval = torch.Generator(device="cpu").manual_seed(7)
    n_val_win = max(1, min(64, (val_ids.numel() - 1) // (T + 1)))
    val_starts = (torch.arange(n_val_win) * (T + 1)).to(dev)
    train_eval_starts = torch.randint(0, train_ids.numel() - T - 1, (64,), generator=g_eval).to(dev)

    @torch.no_grad()
    def evaluate(ids, starts):
        model.eval()
        tot = 0.0
        for i in range(0, starts.numel(), 32):
            tot += loss_of(batch_from(ids, starts[i:i + 32])).item() * starts[i:i + 32].numel()
        model.train()
        return tot / starts.numel()

    budget = args.minutes * 60.0
    log(f"training for {budget:.0f}s: batch {B}x{T}, lr {args.lr}, warmup {args.warmup}, "
        f"cosine to {args.min_lr_ratio * args.lr:.2e} over the wall-clock budget")
    model.train()
    step, tokens, ema = 0, 0, None
    history = []
    t0 = time.time()
    last_print = t0
    last_eval = t0
    best_val = (float("inf"), 0)
    while True:
        el = time.time() - t0
        if el >= budget:
            break
        frac = min(1.0, el / budget)
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (
            args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, train_ids.numel() - T - 1, (B,), device=dev)
        loss = loss_of(batch_from(train_ids, starts))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += B * T
        if step % 25 == 0:
            lv = loss.item()
            ema = lv if ema is None else 0.9 * ema + 0.1 * lv
            now = time.time()
            if now - last_print >= 10 or step == 25:
                el = now - t0
                log(f"step {step:6d}  {el:6.1f}s  loss {lv:.4f} (ema {ema:.4f})  lr {lr:.2e}  "
                    f"{tokens / el / 1e6:.2f} M tok/s  epochs {tokens / train_ids.numel():.1f}")
                last_print = now
            if now - last_eval >= 30:
                vl = evaluate(val_ids, val_starts)
                best_val = min(best_val, (vl, step))
                history.append({"step": step, "seconds": round(now - t0, 1), "train_loss": round(ema, 4),
                                "val_loss": round(vl, 4)})
                log(f"  eval at step {step}: val loss {vl:.4f}")
                last_eval = time.time()
    train_time = time.time() - t0
    final_train = evaluate(train_ids, train_eval_starts)
    final_val = evaluate(val_ids, val_starts)
    best_val = min(best_val, (final_val, step))
    history.append({"step": step, "seconds": round(train_time, 1), "train_loss": round(final_train, 4),
                    "val_loss": round(final_val, 4)})
    log(f"done: {step} steps, {tokens / 1e6:.1f} M tokens ({tokens / train_ids.numel():.1f} epochs) in "
        f"{train_time:.1f}s = {tokens / train_time / 1e6:.2f} M tok/s; final train loss {final_train:.4f}, "
        f"val loss {final_val:.4f} (best val {best_val[0]:.4f} at step {best_val[1]})")

    model = model.to(torch.bfloat16).eval()
    try:
        model.generation_config.eos_token_id = eos
        model.generation_config.bos_token_id = eos
        model.generation_config.pad_token_id = eos
    except AttributeError:
        pass
    save_model(model, args.out)
    cpath = os.path.join(args.out, "config.json")
    patch_config_json(cpath, {"rope_theta": 10000.0, "torch_dtype": "bfloat16"} if rope_ok else {})
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    log(f"saved {args.out}: model.safetensors {size} bytes ({size / 2**20:.2f} MiB)")
    if size > 16 * 2**20:
        log("ERROR: model.safetensors is over 16 MiB")

    # Reload as a user would (eager attention, bf16), check it matches the model in memory, and sample.
    samples = {}
    try:
        sample_and_check(args, tok, model, train_ids, want, samples, dev, eos)
    except Exception as e:
        import traceback

        traceback.print_exc()
        log(f"ERROR: checks after saving failed: {e!r}")

    info = {
        "params": n_params, "steps": step, "tokens": tokens, "train_seconds": round(train_time, 1),
        "tokens_per_s": round(tokens / train_time), "epochs": round(tokens / train_ids.numel(), 1),
        "final_train_loss": round(final_train, 4), "final_val_loss": round(final_val, 4),
        "best_val_loss": round(best_val[0], 4), "best_val_step": best_val[1], "train_tokens": train_ids.numel(),
        "val_tokens": val_ids.numel(), "vocab": V, "size": size, "history": history, "samples": samples,
        "transformers": transformers.__version__, "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
    }
    write_readme(args, info, len(chapters), len(train_ch), len(val_ch), n_bytes)
    log("TRAIN_INFO " + json.dumps({k: v for k, v in info.items() if k != "history"}))
    log(f"total {time.time() - t_start:.1f}s")


def sample_and_check(args, tok, model, train_ids, want, samples, dev, eos):
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    try:
        m2 = AutoModelForCausalLM.from_pretrained(args.out, dtype=torch.bfloat16, attn_implementation="eager")
    except TypeError:
        m2 = AutoModelForCausalLM.from_pretrained(args.out, torch_dtype=torch.bfloat16, attn_implementation="eager")
    m2 = m2.to(dev).eval()
    probe = train_ids[:64][None]
    with torch.no_grad():
        a = model(input_ids=probe).logits.float()
        b = m2(input_ids=probe).logits.float()
    log(f"reload check: max |logit diff| in-memory (sdpa) vs reloaded (eager) = {(a - b).abs().max().item():.4f}"
        f" (logits up to {a.abs().max().item():.1f})")
    inv2 = inv_freq_of(m2)
    if inv2 is not None and not torch.allclose(inv2, want, rtol=1e-2):
        log(f"ERROR: the reloaded model's rope inv_freq is not theta 10000: {inv2[:4]}")

    for prompt in ["In the beginning", "And Jesus said"]:
        ids = torch.tensor([tok.encode(prompt).ids], device=dev)
        gc = GenerationConfig(max_new_tokens=40, do_sample=False, num_beams=1, eos_token_id=None,
                              pad_token_id=eos, bos_token_id=eos)
        with torch.no_grad():
            out = m2.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=gc)
        new = out[0, ids.shape[1]:].tolist()
        text = tok.decode(ids[0].tolist() + new, skip_special_tokens=False)
        samples[prompt] = text
        log(f"sample {prompt!r} -> {text!r}")

    try:
        from transformers import AutoTokenizer

        at = AutoTokenizer.from_pretrained(args.out)
        same = at("In the beginning God")["input_ids"] == tok.encode("In the beginning God").ids
        log(f"AutoTokenizer loads the folder: {type(at).__name__}, same ids as tokenizers: {same}")
    except Exception as e:  # not fatal: pk reads tokenizer.json itself
        log(f"warning: AutoTokenizer could not load {args.out}: {e!r}")


def write_readme(args, info, n_ch, n_train_ch, n_val_ch, n_bytes):
    hist = "\n".join(
        f"| {h['step']} | {h['seconds']} | {h['train_loss']} | {h['val_loss']} |" for h in info["history"])
    samples = "\n".join(f"- `{p}` → {json.dumps(t)}" for p, t in info["samples"].items())
    text = f"""# pk-tiny

A small Qwen3 model that ships with pk so that its loader, tokenizer, task graph and generation can be
run and tested end to end without downloading anything. It writes King-James-Bible-like English; it
is a test asset, not a useful assistant.

| | |
| --- | --- |
| architecture | `Qwen3ForCausalLM` (transformers), {info['params']:,} parameters, bf16 |
| shape | vocab {info['vocab']}, hidden 256, intermediate 768, 4 layers, 4 query heads, 2 KV heads, head_dim 64, QK-norm, tied embeddings, RoPE theta 10000, max 512 positions, rms_norm_eps 1e-6 |
| tokenizer | byte-level BPE (`tokenizer.json`, HF `tokenizers`): GPT-2 regex pre-tokenizer (ByteLevel, use_regex), ByteLevel decoder, {info['vocab']} tokens; specials `<\\|endoftext\\|>` = 0 (BOS/EOS/pad), `<\\|im_start\\|>` = 1, `<\\|im_end\\|>` = 2 |
| files | `config.json`, `model.safetensors` ({info['size']:,} bytes), `generation_config.json`, `tokenizer.json`, `tokenizer_config.json` |
| corpus | the King James Version of the Bible (1611/1769 text, public domain), as Debian's `bible-kjv` package prints it: {n_ch} chapters, {n_bytes:,} bytes; verses joined by newlines, chapters separated by `<\\|endoftext\\|>`; {n_val_ch} chapters (every 100th) held out for validation |
| training | {info['steps']} steps of AdamW (lr {args.lr}, betas 0.9/0.95, weight decay {args.weight_decay}, {args.warmup} warmup steps, cosine to {args.min_lr_ratio}× over a {args.minutes:g}-minute wall-clock budget), batches of {args.batch}×{args.seq} random windows, bf16 autocast; {info['tokens'] / 1e6:.0f} M tokens = {info['epochs']} epochs of the {info['train_tokens']:,} training tokens, {info['tokens_per_s'] / 1e6:.2f} M tokens/s on one {info['gpu']} |
| final loss | train {info['final_train_loss']}, validation {info['final_val_loss']} (nats/token; best validation {info['best_val_loss']}) |
| made with | torch {info['torch']}, transformers {info['transformers']} |

The model has seen its training text {info['epochs']:.0f} times and is heavily overfitted: it recites and
recombines KJV phrases, and its held-out loss went from {info['best_val_loss']} (its best, at step
{info['best_val_step']}) to {info['final_val_loss']}. That suits a test asset meant to write readable
English; a shorter `--minutes` gives a model that generalises better. Its greedy choices are mostly,
not always, decisive: `tests/data/golden/pk-tiny.json` lists the top-2 logit gap of every step.

Greedy samples (40 new tokens, transformers, bf16, no EOS stop):

{samples}

Loss during training:

| step | seconds | train loss | validation loss |
| --- | --- | --- | --- |
{hist}

## Remaking it

On a machine with a CUDA GPU, torch, transformers and tokenizers:

```
apt-get install bible-kjv            # Debian: the `bible` program and the KJV text
mkdir -p .dev && bible -f "Gen1:1-Rev22:21" | gzip -9 > .dev/corpus.txt.gz
python3 scripts/train_tiny_model.py --corpus .dev/corpus.txt.gz --out models/pk-tiny --minutes {args.minutes:g}
```

(`scripts/gpu_make_assets.sh` does this and also writes the goldens in `tests/data/golden/`.) A run is
not bit-reproducible: the wall-clock budget decides the number of steps.

## Licence

The weights and the tokenizer (every file in this folder) are released under the Apache License 2.0,
as pk's code is (`LICENSE` at the repository's root; SPDX: `Apache-2.0`). They were made by pk's
scripts (`scripts/train_tiny_model.py`) from one corpus alone: the King James Version of the Bible
as Debian's `bible-kjv` package prints it. That text is in the public domain (outside the United
Kingdom, where the Crown's letters patent apply to printed copies).
"""
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
