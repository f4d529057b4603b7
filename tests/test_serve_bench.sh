#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_serve_bench.sh — bench/serve_bench.py's smoke run: it starts $BUILD/pk serve on the shipped
# model (CPU) and runs 1 and 4 streaming clients with ~32-token prompts and 8 new tokens (a few
# seconds); its JSON must hold both levels, no failed request, the tokens asked for (or fewer at
# the end token), prompts near the length asked, and ordered positive latencies. Needs `make`
# first and python3 (standard library only). Ends with "serve_bench: N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
[ -x "$BUILD/pk" ] || { echo "$BUILD/pk is missing: run make first"; echo "serve_bench: 0 passed, 1 failed"; exit 1; }
out=$(mktemp -d)
timeout -k 10 120 python3 bench/serve_bench.py --pk "$BUILD/pk" --server-args "--threads 2" --levels 1,4 \
    --prompt-tokens 32 --max-tokens 8 --requests 4 --json "$out/bench.json" >"$out/table.txt" 2>"$out/err.txt"
rc=$?
cat "$out/table.txt"
[ "$rc" -ne 0 ] && tail -n 20 "$out/err.txt"
python3 - "$out/bench.json" "$rc" <<'PY'
import json, sys
passed = failed = 0
def check(ok, what):
    global passed, failed
    if ok: passed += 1
    else: failed += 1; print("FAIL", what)
check(sys.argv[2] == "0", f"serve_bench.py exited {sys.argv[2]}")
try:
    j = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    j = {"levels": []}; check(False, f"no JSON: {e}")
levels = j["levels"]
check([r["clients"] for r in levels] == [1, 4], f"levels {[r['clients'] for r in levels]}")
for r in levels:
    c = r["clients"]
    check(r["requests"] == 4 and r["errors"] == 0, f"level {c}: {r['requests']} requests, {r['errors']} errors ({r['first_error']})")
    check(0 < r["completion_tokens"] <= 4 * 8 and sum(r["finish"].values()) == 4, f"level {c}: {r['completion_tokens']} tokens, finish {r['finish']}")
    check(r["prompt_tokens_mean"] is not None and 24 <= r["prompt_tokens_mean"] <= 40, f"level {c}: prompt {r['prompt_tokens_mean']} tokens (asked 32)")
    check(all(r[k] is not None and r[k] > 0 for k in ("ttft_ms_p50", "itl_ms_p50", "tokens_per_s", "wall_s")), f"level {c}: {r}")
    check(r["ttft_ms_p99"] >= r["ttft_ms_p50"] and r["itl_ms_p99"] >= r["itl_ms_p50"], f"level {c}: p99 below p50: {r}")
print(f"serve_bench: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
rc=$?
rm -rf "$out"
exit $rc
