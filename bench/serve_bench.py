#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""serve_bench.py — issue 61's load benchmark of `pk serve`: for each concurrency level (default
1, 8, 32, 64) that many clients stream completions at once, and it reports time to first token
(TTFT) p50/p99, inter-token latency (ITL) p50/p99 and aggregate tokens/s, per level, as a table
and as JSON. Python 3's standard library only (asyncio, raw HTTP/1.0), so it runs on the GPU
machine as it is; bench/serve_run.sh runs it there against `pk serve --backend cuda`.

    python3 bench/serve_bench.py --url http://127.0.0.1:8000 [options]     # a running server
    python3 bench/serve_bench.py --pk build/pk [--model DIR] [--server-args "..."] [options]
                                                                           # starts one (port 0)
options: --levels 1,8,32,64  --prompt-tokens 512  --max-tokens 256  --requests N (at least N
requests per level, default 8; a level sends max(N, level), its clients each sending theirs one
after another)  --api-key KEY  --json FILE ("-": stdout)  --timeout-s 600 (per request).

Each request's prompt is different (it starts with its own number, then words drawn from a fixed
list by a generator seeded with that number), so a server with prefix caching cannot reuse one
request's prompt for another; its length is fitted to --prompt-tokens through the server's own
tokenizer (usage.prompt_tokens of max_tokens 1 requests) and the mean is reported. Measured on
the client, per request: TTFT from sending the request to the first chunk with text; ITL the gaps
between its chunks with text (the server sends one chunk per piece of text: a token whose bytes
end no character comes with the next, so a gap can span two tokens); tokens are usage's
completion_tokens (stream_options.include_usage). Per level: percentiles over every request's
TTFT and every gap, and tokens/s = all completion tokens / the level's wall time (first send to
last end). A request that fails is counted in "errors" and its numbers left out. No warm-up run
is timed: the fitting requests come first.
"""
import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import time
from urllib.parse import urlparse

WORDS = ("the of and to in is was that for on with as by at from his her their this which people time "
         "water light city river morning king house voice field road night story country music history "
         "market winter garden language mountain village question answer number system small great old "
         "new long early first last young strong open ancient quiet bright north south east west").split()


def percentile(xs, q):
    """The q-th percentile (0..100) of xs by linear interpolation between closest ranks; None if empty."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def prompt_text(i, words):
    rng = random.Random(i)
    return f"Request {i}: " + " ".join(rng.choice(WORDS) for _ in range(words))


class Server:
    def __init__(self, url, api_key, timeout_s):
        u = urlparse(url)
        self.host, self.port = u.hostname, u.port or 80
        self.api_key, self.timeout_s = api_key, timeout_s
        self.model = None

    def _head(self, method, path, body):
        h = f"{method} {path} HTTP/1.0\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
        if self.api_key:
            h += f"Authorization: Bearer {self.api_key}\r\n"
        return (h + f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    async def _open(self, method, path, obj):
        body = json.dumps(obj).encode() if obj is not None else b""
        r, w = await asyncio.open_connection(self.host, self.port, limit=1 << 22)
        w.write(self._head(method, path, body))
        await w.drain()
        status_line = await r.readline()
        m = re.match(rb"HTTP/1\.\d (\d+)", status_line)
        while (await r.readline()) not in (b"\r\n", b"\n", b""):
            pass
        return (int(m.group(1)) if m else -1), r, w

    async def get_json(self, method, path, obj=None):
        status, r, w = await self._open(method, path, obj)
        data = await asyncio.wait_for(r.read(), self.timeout_s)
        w.close()
        if status != 200:
            raise RuntimeError(f"{method} {path}: HTTP {status}: {data[:300]!r}")
        return json.loads(data)

    async def stream(self, prompt, max_tokens):
        """One streamed completion: {ttft, itl: [...], tokens, prompt_tokens, finish} or {error}."""
        req = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
               "stream": True, "stream_options": {"include_usage": True}}
        t0 = time.perf_counter()
        res = {"itl": [], "ttft": None, "tokens": 0, "prompt_tokens": 0, "finish": None}
        try:
            status, r, w = await self._open("POST", "/v1/completions", req)
            if status != 200:
                res["error"] = f"HTTP {status}: {(await r.read())[:200]!r}"
                w.close()
                return res
            last, done = None, False
            while True:
                line = await asyncio.wait_for(r.readline(), self.timeout_s)
                if not line:
                    break
                if not line.startswith(b"data: "):
                    continue
                payload = line[6:].strip()
                if payload == b"[DONE]":
                    done = True
                    break
                ev = json.loads(payload)
                if "error" in ev:
                    res["error"] = ev["error"].get("message", "error event")
                    break
                now = time.perf_counter()
                for ch in ev.get("choices") or []:
                    if ch.get("text"):
                        if last is None:
                            res["ttft"] = now - t0
                        else:
                            res["itl"].append(now - last)
                        last = now
                    if ch.get("finish_reason"):
                        res["finish"] = ch["finish_reason"]
                if ev.get("usage"):
                    res["tokens"] = ev["usage"]["completion_tokens"]
                    res["prompt_tokens"] = ev["usage"]["prompt_tokens"]
            w.close()
            if not done and "error" not in res:
                res["error"] = "the stream ended without [DONE]"
        except (OSError, asyncio.TimeoutError, ValueError) as e:
            res["error"] = f"{type(e).__name__}: {e}"
        res["end"] = time.perf_counter()
        res["start"] = t0
        return res


async def fit_words(srv, target):
    """Words per prompt for about `target` prompt tokens: the server's mean count over 4 of the
    prompts the levels send, scaled up to 3 times."""
    async def mean_tokens(words):
        n = 0
        for i in range(4):
            j = await srv.get_json("POST", "/v1/completions",
                                   {"model": srv.model, "prompt": prompt_text(i, words), "max_tokens": 1})
            n += j["usage"]["prompt_tokens"]
        return n / 4
    words = max(1, target)
    for _ in range(3):
        n = await mean_tokens(words)
        if abs(n - target) <= max(1, target // 50):
            break
        words = max(1, round(words * target / max(n, 1)))
    return words


async def run_level(srv, level, nreq, words, max_tokens, first_id):
    queue = list(range(first_id, first_id + nreq))
    results = []

    async def client():
        while queue:
            i = queue.pop(0)
            results.append(await srv.stream(prompt_text(i, words), max_tokens))

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(level)))
    wall = time.perf_counter() - t0
    ok = [r for r in results if "error" not in r]
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    itl = [g for r in ok for g in r["itl"]]
    tokens = sum(r["tokens"] for r in ok)
    ms = lambda x: None if x is None else round(x * 1e3, 3)  # noqa: E731
    return {
        "clients": level, "requests": len(results), "errors": len(results) - len(ok),
        "first_error": next((r["error"] for r in results if "error" in r), None),
        "prompt_tokens_mean": round(sum(r["prompt_tokens"] for r in ok) / len(ok), 1) if ok else None,
        "completion_tokens": tokens,
        "finish": {f: sum(1 for r in ok if r["finish"] == f) for f in sorted({r["finish"] for r in ok if r["finish"]})},
        "wall_s": round(wall, 3),
        "ttft_ms_p50": ms(percentile(ttft, 50)), "ttft_ms_p99": ms(percentile(ttft, 99)),
        "itl_ms_p50": ms(percentile(itl, 50)), "itl_ms_p99": ms(percentile(itl, 99)),
        "tokens_per_s": round(tokens / wall, 2) if wall > 0 else None,
    }


def table(rows):
    cols = [("clients", "clients"), ("requests", "requests"), ("errors", "errors"),
            ("prompt_tokens_mean", "prompt"), ("completion_tokens", "tokens"),
            ("ttft_ms_p50", "TTFT p50 ms"), ("ttft_ms_p99", "TTFT p99 ms"),
            ("itl_ms_p50", "ITL p50 ms"), ("itl_ms_p99", "ITL p99 ms"), ("tokens_per_s", "tokens/s")]
    cells = [[h for _, h in cols]] + [["-" if r[k] is None else str(r[k]) for k, _ in cols] for r in rows]
    widths = [max(len(row[c]) for row in cells) for c in range(len(cols))]
    return "\n".join("  ".join(v.rjust(widths[c]) for c, v in enumerate(row)) for row in cells)


def start_server(pk, model, extra):
    """`pk serve --port 0` with its stderr in a file; (process, url, log path) once it serves."""
    log = f"/tmp/serve_bench.{os.getpid()}.err"
    cmd = [pk, "serve", "--port", "0"] + (["--model", model] if model else []) + extra
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=f)
    deadline = time.time() + 900  # a CUDA kernel that is not in the cache compiles first
    while time.time() < deadline:
        text = open(log).read()
        m = re.search(r"serving \S+ on (http://\S+) ", text)
        if m:
            return p, m.group(1), log
        if p.poll() is not None:
            sys.exit(f"serve_bench: {' '.join(cmd)} exited {p.returncode}: {text[-2000:]}")
        time.sleep(0.2)
    p.kill()
    sys.exit(f"serve_bench: {' '.join(cmd)} did not start in 900 s")


async def main_async(a, url):
    srv = Server(url, a.api_key, a.timeout_s)
    models = await srv.get_json("GET", "/v1/models")
    srv.model = models["data"][0]["id"]
    words = await fit_words(srv, a.prompt_tokens)
    rows, next_id = [], 0
    for level in a.levels:
        n = max(a.requests, level)
        row = await run_level(srv, level, n, words, a.max_tokens, next_id)
        next_id += n
        rows.append(row)
        print(f"level {level}: {json.dumps(row)}", file=sys.stderr, flush=True)
    return {"url": url, "model": srv.model, "prompt_tokens": a.prompt_tokens, "prompt_words": words,
            "max_tokens": a.max_tokens, "levels": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url")
    ap.add_argument("--pk", help="start this pk binary's `serve` (instead of --url)")
    ap.add_argument("--model")
    ap.add_argument("--server-args", default="", help="more `pk serve` arguments, one string")
    ap.add_argument("--levels", default="1,8,32,64")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--api-key", default=os.environ.get("PK_API_KEY"))
    ap.add_argument("--json", help="write the results as JSON here ('-': stdout)")
    ap.add_argument("--timeout-s", type=float, default=600)
    a = ap.parse_args()
    a.levels = [int(x) for x in a.levels.split(",") if x]
    if bool(a.url) == bool(a.pk):
        ap.error("give --url or --pk")
    proc = log = None
    url = a.url
    if a.pk:
        extra = a.server_args.split()
        if "--max-requests" not in extra:  # every client of the top level must be admitted
            extra += ["--max-requests", str(max(a.levels))]
        proc, url, log = start_server(a.pk, a.model, extra)
    try:
        out = asyncio.run(main_async(a, url))
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=60)
            if proc.returncode != 0:
                print(f"serve_bench: the server exited {proc.returncode}: {open(log).read()[-2000:]}", file=sys.stderr)
            os.unlink(log)
    print(f"pk serve {out['model']} at {url}: prompt {a.prompt_tokens} tokens (asked), {a.max_tokens} new tokens")
    print(table(out["levels"]))
    if a.json == "-":
        print(json.dumps(out))
    elif a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if any(r["errors"] for r in out["levels"]) else 0


if __name__ == "__main__":
    sys.exit(main())
