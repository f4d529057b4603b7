#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""run_bench.py — issue 5's table: `pk bench --backend cuda` next to transformers
(bench/hf_baseline.py, eager and CUDA graph) on random-weight models shaped like Qwen3-0.6B,
Qwen3-1.7B and Qwen3-8B, at context 160 and 4096. bench/run_bench.sh runs the correctness gate
first and then this; run it through that script on the GPU machine.

    python3 bench/run_bench.py [--models qwen3-0.6b,qwen3-1.7b,qwen3-8b] [--contexts 160,4096]
                               [--gen 128] [--results DIR] [--deadline-s S] [--gate TEXT]
    python3 bench/run_bench.py --table DIR/results.jsonl [MORE.jsonl ...]   # the table again
    python3 bench/run_bench.py --hf NAME --prompt N --gen G   # one transformers run (JSON line)

Every stage runs in a subprocess with a timeout (a hung or crashed stage costs its own result,
not the run's), progress lines are flushed as they happen, and every result is appended to
DIR/results.jsonl at once; the table is printed after each model and at the end from whatever
is there. Run again with the same --results DIR (RESUME=1, the default) and finished
(model, context) pairs are skipped, so a run cut short by the device's time limit continues.

pk side: `pk bench --json`: median decode ms/token over the pure-decode steps, timed inside the
kernel (%globaltimer at every step boundary); floor = (weights + KV at the median context) /
device-to-device copy bandwidth measured in the same pk process. transformers side: hf_baseline's
run(): mean host wall-clock ms/token over 128 tokens, after a prompt of the same length as pk's
context (HF_PROMPT=32 gives hf_baseline's own ~32-token prompt instead; a context the HF run
cannot take falls back to 32 and is marked with *).

Env: PK (build/pk), PK_TIMEOUT_S (420: the first context of a model compiles its kernel),
HF_TIMEOUT_S (300), MAKE_TIMEOUT_S (300), HF=0 (skip transformers), HF_PROMPT (context | 32),
KEEP_MODELS=1 (keep the model directories), RESUME=0 (start over), PK_THREADS (pk's --threads:
default one worker per SM; give the count a kernel was precompiled with, docs/PERF.md), PK_COMMIT
(the commit to name in the table when the GPU machine's git HEAD is stale).
pk's models come from bench/shape_model.py (random bf16 weights, written without torch);
transformers builds its own random model of the same shape (hf_baseline.run).
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
T0 = time.time()
TARGETS_MS = {"qwen3-0.6b": 0.40, "qwen3-1.7b": 1.00, "qwen3-8b": 4.30}  # issue 5, context 160
DEFAULT_MODELS = ["qwen3-0.6b", "qwen3-1.7b", "qwen3-8b"]


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def last_json(text):
    """The last JSON object in text: it may span lines (pk bench --json prints one object over
    several lines), so each line that starts with "{" is tried, from the last, with everything
    after it; None if nothing parses."""
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].lstrip().startswith("{"):
            try:
                obj = json.loads("\n".join(lines[i:]))
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def tail(text, n=2):
    return " | ".join(line.strip() for line in text.strip().splitlines()[-n:])


class Runner:
    def __init__(self, args):
        self.results_dir = args["results"]
        os.makedirs(self.results_dir, exist_ok=True)
        self.path = os.path.join(self.results_dir, "results.jsonl")
        self.deadline = T0 + args["deadline_s"]
        self.pk = os.environ.get("PK", os.path.join(ROOT, "build/pk"))
        self.records = load_records([self.path]) if os.environ.get("RESUME", "1") != "0" else []

    def record(self, rec):
        rec["time"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        self.records.append(rec)
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def left(self):
        return self.deadline - time.time()

    def run(self, cmd, timeout, what):
        """(returncode or None on timeout, stdout, stderr) of cmd, bounded by the deadline."""
        limit = min(timeout, self.left() - 5)
        if limit < 20:
            log(f"{what}: skipped ({self.left():.0f} s left before the deadline)")
            return None, "", "skipped: deadline"
        t = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, cwd=ROOT)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            log(f"{what}: TIMEOUT after {limit:.0f} s; {tail(err)}")
            return None, out, err + f"\ntimeout after {limit:.0f} s"
        log(f"{what}: exit {p.returncode} in {time.time() - t:.1f} s")
        return p.returncode, p.stdout, p.stderr

    def done(self, kind, model, ctx):
        return any(r.get("kind") == kind and r.get("model") == model and r.get("context") == ctx and "error" not in r
                   for r in self.records)


def sh(cmd):
    """stdout of a short command, "" when it cannot run."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def load_records(paths):
    recs = []
    for p in paths:
        if not os.path.exists(p):
            continue
        with open(p) as f:
            for line in f:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
    return recs


def bench_model(R, name, contexts, gen):
    # Each context gets the kernel pk builds for it (max_seq = context + gen: the attention is split
    # over the KV length only past ~330-350 positions at head size 128, src/model/model.c); SHARED_MAX_SEQ=1: one kernel
    # for every context (max_seq = the largest context + gen), as a server sized for the longest would.
    shared_max_seq = max(contexts) + gen if os.environ.get("SHARED_MAX_SEQ") == "1" else None
    todo_pk = [c for c in contexts if not R.done("pk", name, c)]
    todo_hf = [c for c in contexts if os.environ.get("HF", "1") != "0" and not R.done("hf", name, c)]
    if not todo_pk and not todo_hf:
        log(f"{name}: every context done already (RESUME)")
        return
    d = os.path.join(R.results_dir, "models", name)
    if todo_pk:
        if not os.path.exists(os.path.join(d, "config.json")):
            # random bf16 weights without torch (bench/shape_model.py): the same config.json as on the
            # build machine, so a kernel compiled there ahead of time is found in the cache
            rc, out, err = R.run([sys.executable, os.path.join(HERE, "shape_model.py"), name, d],
                                 int(os.environ.get("MAKE_TIMEOUT_S", "300")), f"{name}: random model")
            if rc != 0:
                for ctx in todo_pk:
                    R.record({"kind": "pk", "model": name, "context": ctx, "error": "making the model: " + tail(err)})
                log(f"{name}: could not make the model: {tail(err, 5)}")
                todo_pk = []
    first = True
    for ctx in contexts:
        if ctx in todo_pk:
            cmd = [R.pk, "bench", "--model", d, "--backend", "cuda", "--context", str(ctx), "--gen", str(gen),
                   "--max-seq", str(shared_max_seq or ctx + gen), "--json"]
            if os.environ.get("PK_THREADS"):  # workers (default: one per SM); set to match a precompiled kernel
                cmd += ["--threads", os.environ["PK_THREADS"]]
            limit = int(os.environ.get("PK_TIMEOUT_S", "420" if first else "240"))
            rc, out, err = R.run(cmd, limit, f"{name} @ {ctx}: pk bench")
            first = False
            j = last_json(out) if rc == 0 else None
            if j is None:
                R.record({"kind": "pk", "model": name, "context": ctx, "error": tail(err) or f"exit {rc}"})
                log(f"{name} @ {ctx}: pk FAILED: {tail(err, 5)}")
            else:
                j.update({"kind": "pk", "model": name, "context": ctx})
                R.record(j)
                log(f"{name} @ {ctx}: pk {j['decode_ms_median']:.3f} ms/token (p90 {j['decode_ms_p90']:.3f}), "
                    f"floor {j['floor_ms']:.3f} ms ({j['pct_of_floor']:.0f}% of it), {j['achieved_GBps']:.0f} GB/s, "
                    f"copy {j['copy_bandwidth_GBps']:.0f} GB/s, prefill {j['prefill_ms']:.1f} ms")
                mem = j.get("memory", {})
                log(f"{name} @ {ctx}: GPU memory: weights {mem.get('weights_bytes', 0) / 1e9:.2f} GB, KV "
                    f"{mem.get('kv_cache_bytes', 0) / 1e9:.2f} GB, workspace {mem.get('workspace_bytes', 0) / 1e6:.0f} MB")
        if ctx in todo_hf:
            bench_hf(R, name, ctx, gen)
    if os.environ.get("KEEP_MODELS") != "1" and os.path.isdir(d):
        import shutil
        shutil.rmtree(d, ignore_errors=True)


def bench_hf(R, name, ctx, gen):
    limit = int(os.environ.get("HF_TIMEOUT_S", "300"))
    prompts = [32] if os.environ.get("HF_PROMPT") == "32" else [ctx] + ([32] if ctx != 32 else [])
    for prompt in prompts:
        cmd = [sys.executable, os.path.abspath(__file__), "--hf", name, "--prompt", str(prompt), "--gen", str(gen)]
        rc, out, err = R.run(cmd, limit, f"{name} @ {ctx}: transformers (prompt {prompt})")
        j = last_json(out)
        if rc == 0 and j is not None and "error" not in j:
            j.update({"kind": "hf", "model": name, "context": ctx, "hf_prompt": prompt})
            R.record(j)
            log(f"{name} @ {ctx}: transformers eager {j['eager_ms']:.2f} ms, CUDA graph {j['cudagraph_ms']:.2f} ms "
                f"(prompt {prompt})")
            return
        why = (j or {}).get("error") or tail(err) or f"exit {rc}"
        log(f"{name} @ {ctx}: transformers FAILED at prompt {prompt}: {why}")
        if rc is None and "deadline" in err:
            break
    R.record({"kind": "hf", "model": name, "context": ctx, "error": why})


def hf_one(name, prompt, gen):
    """One transformers run in this process; prints one JSON line."""
    sys.path.insert(0, HERE)
    try:
        import torch
        import hf_baseline as hb
        r = hb.run(name, prompt=prompt, new=gen)
        r["copy_bandwidth_GBps"] = hb.bw() / 1e9
        r["gpu"] = torch.cuda.get_device_name(0)
        print(json.dumps(r), flush=True)
        return 0
    except Exception as e:  # noqa: BLE001 — reported, not raised: the driver records it
        import traceback
        traceback.print_exc()
        print(json.dumps({"error": f"{type(e).__name__}: {e}"[:400]}), flush=True)
        return 1


def fmt(v, spec, missing="-"):
    return format(v, spec) if isinstance(v, (int, float)) else missing


def table(records, out=sys.stdout):
    """One row per (model, context): the newest successful pk and transformers results."""
    pk, hf, meta = {}, {}, {}
    for r in records:
        key = (r.get("model"), r.get("context"))
        if r.get("kind") == "meta":
            meta = r
        elif r.get("kind") == "pk" and "error" not in r:
            pk[key] = r
        elif r.get("kind") == "hf" and "error" not in r:
            hf[key] = r
        elif r.get("kind") in ("pk", "hf"):
            d = pk if r["kind"] == "pk" else hf
            if "error" in d.get(key, {"error": ""}):
                d[key] = r  # the newest error, while there is no success
    keys = sorted(set(pk) | set(hf), key=lambda k: (
        DEFAULT_MODELS.index(k[0]) if k[0] in DEFAULT_MODELS else 99, k[1] if isinstance(k[1], int) else -1))
    w = out.write
    w("\n")
    if meta:
        w(f"GPU {meta.get('gpu', '?')}; pk {meta.get('commit', '?')}; correctness gate: {meta.get('gate', '?')}\n")
    w("batch 1, bf16, greedy, random weights. pk: median ms/token over the pure-decode steps of one request, timed\n"
      "inside the kernel (%globaltimer per step); floor = (weights + KV read at the median context) / copy bandwidth\n"
      "measured in the same pk process. HF: bench/hf_baseline.py, mean host ms/token over the generated tokens after a\n"
      "prompt of `context` tokens (* = after a 32-token prompt: hf_baseline's default). speedup = HF ms / pk ms.\n"
      "split: pk's attention split over the KV length (1: none) in the kernel pk built for that context.\n\n")
    hdr = (f"{'model':11} {'context':>7} {'split':>5} {'pk ms/tok':>9} {'p90':>7} {'floor ms':>8} {'% floor':>7} "
           f"{'GB/s':>6} {'HF eager':>9} {'HF graph':>9} {'vs eager':>8} {'vs graph':>8}  target")
    w(hdr + "\n" + "-" * len(hdr) + "\n")
    for k in keys:
        p, h = pk.get(k, {}), hf.get(k, {})
        med = p.get("decode_ms_median")
        star = "*" if h.get("hf_prompt") == 32 and k[1] != 32 else " "
        eager, graph = h.get("eager_ms"), h.get("cudagraph_ms")
        sp_e = f"{eager / med:.2f}x" if med and eager else "-"
        sp_g = f"{graph / med:.2f}x" if med and graph else "-"
        target = ""
        if k[1] == 160 and k[0] in TARGETS_MS:
            t = TARGETS_MS[k[0]]
            if "H200" in str(meta.get("gpu", "")):
                target = f"<= {t:.2f} ms: " + ("met" if med and med <= t else "not met" if med else "-")
            else:  # the targets are the H200's: on another card the row says so, not met / met
                target = f"(H200's <= {t:.2f} ms; not an H200)"
        if "error" in p:
            target += f"  pk error: {p['error'].split(' | ')[-1][:70]}"
        if "error" in h:
            target += f"  HF error: {h['error'].split(' | ')[-1][:70]}"
        w(f"{str(k[0]):11} {str(k[1]):>7} {str(p.get('kv_splits', '-')):>5} {fmt(med, '9.3f'):>9} "
          f"{fmt(p.get('decode_ms_p90'), '7.3f'):>7} "
          f"{fmt(p.get('floor_ms'), '8.3f'):>8} "
          f"{(fmt(p.get('pct_of_floor'), '.0f') + '%') if 'pct_of_floor' in p else '-':>7} "
          f"{fmt(p.get('achieved_GBps'), '6.0f'):>6} {fmt(eager, '8.2f') + star:>9} {fmt(graph, '8.2f') + star:>9} "
          f"{sp_e:>8} {sp_g:>8}  {target}\n")
    bws = sorted({round(r["copy_bandwidth_GBps"]) for r in pk.values() if "copy_bandwidth_GBps" in r})
    if bws:
        w(f"\ncopy bandwidth measured by pk: {', '.join(str(b) for b in bws)} GB/s (device-to-device, read + write)\n")
    out.flush()


def main(argv):
    if argv[:1] == ["--hf"]:
        a = dict(zip(argv[::2], argv[1::2]))
        return hf_one(a["--hf"], int(a.get("--prompt", "32")), int(a.get("--gen", "128")))
    if argv[:1] == ["--table"]:
        table(load_records(argv[1:]))
        return 0
    args = {"models": ",".join(DEFAULT_MODELS), "contexts": "160,4096", "gen": "128", "results": "/tmp/pk-bench",
            "deadline_s": "540", "gate": "not run"}
    it = iter(argv)
    for a in it:
        if not a.startswith("--") or a[2:].replace("-", "_") not in args:
            print(__doc__, file=sys.stderr)
            return 2
        args[a[2:].replace("-", "_")] = next(it, "")
    args["deadline_s"] = float(args["deadline_s"])
    models = [m for m in args["models"].replace(" ", ",").split(",") if m]
    contexts = [int(c) for c in args["contexts"].replace(" ", ",").split(",") if c]
    gen = int(args["gen"])
    R = Runner(args)
    gpu = sh(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).splitlines()
    # PK_COMMIT: the commit the binaries were built from, when the GPU machine's copy of the tree
    # carries a stale git HEAD (the device tool copies the working tree; its .git may lag)
    commit = os.environ.get("PK_COMMIT") or sh(["git", "rev-parse", "--short", "HEAD"])
    dirty = "" if os.environ.get("PK_COMMIT") else sh(["git", "status", "--porcelain", "--untracked-files=no"])
    R.record({"kind": "meta", "gpu": gpu[0] if gpu else "?", "commit": commit + ("+dirty" if dirty else ""),
              "gate": args["gate"], "models": models, "contexts": contexts, "gen": gen})
    log(f"models {models}, contexts {contexts}, {gen} tokens; results in {R.path}; "
        f"deadline in {R.left():.0f} s")
    for name in models:
        if R.left() < 30:
            log(f"{name}: skipped (deadline)")
            continue
        try:
            bench_model(R, name, contexts, gen)
        except Exception as e:  # noqa: BLE001 — one model's failure must not lose the others
            log(f"{name}: driver error {type(e).__name__}: {e}")
            R.record({"kind": "pk", "model": name, "context": None, "error": f"driver: {e}"[:400]})
        table(R.records)
    with open(os.path.join(R.results_dir, "table.txt"), "w") as f:
        table(R.records, f)
    wanted = {(m, c) for m in models for c in contexts}
    ok = {(r["model"], r["context"]) for r in R.records if r.get("kind") == "pk" and "error" not in r}
    missing = sorted(wanted - ok, key=str)
    log("complete" if not missing else f"incomplete: no pk result for {missing}")
    return 0 if not missing else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
