#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run_bench.sh — issue 5's benchmark in one run on the GPU machine:
#   1. the machine, the build (build/pk and tests/gpu/test_cuda_e2e, prebuilt or made here);
#   2. the correctness gate, so that timings are only reported for a correct build:
#      GATE=quick (default): scripts/gpu_check.sh's quick end-to-end (test_cuda_e2e --quick: CPU vs
#        CUDA static and dynamic, tokens identical, logits within tolerance) and pk-tiny's
#        decode-step logits under teacher forcing, CUDA against the CPU (gpu_env.sh
#        pk_tiny_logits_check; `pk generate --print-ids` on both is logged: where tokens part);
#      GATE=full: scripts/gpu_check.sh's normal end-to-end pass (every configuration, 100 repeats,
#        EOS, trace) and the pk-tiny comparison;
#      GATE=0: skipped (the table then says so). A failed gate stops here with exit 1;
#   3. bench/run_bench.py: for qwen3-0.6b, qwen3-1.7b, qwen3-8b (random weights, bf16, saved by
#      transformers) at context 160 and 4096: `pk bench --backend cuda --json` and
#      bench/hf_baseline.py's run() (eager and CUDA graph), then one table: pk ms/token (median),
#      % of the floor, HF eager, HF CUDA graph, speedups, and issue 5's targets at context 160.
# Usage: bash bench/run_bench.sh                    (about 5 min with the kernels precompiled: docs/PERF.md)
#        MODELS="qwen3-0.6b qwen3-1.7b" CONTEXTS="160" bash bench/run_bench.sh
#        bash bench/run_bench.sh --table [results.jsonl ...]   # print the table again
# Env: BENCH_DIR (work directory: models, logs, results.jsonl, table.txt; default /tmp/pk-bench,
#      kept between calls: run the same command again and the gate (for the same binaries) and the
#      finished (model, context) pairs are skipped; RESUME=0 starts over);
#      OUT (if set, logs, results and table are copied there at exit: the device tool's folder);
#      DEADLINE_S (seconds for the whole script, default 560: stages that would run past it are
#      skipped and the table shows what finished); GEN (tokens, 128); GATE; BUILD (build);
#      REQUIRE_GPU (e.g. H200: exit 3 at once, nothing run, when the GPU's name lacks it — the
#      device tool may lend an H100 for an H200 call, and issue 5's table is the H200's);
#      run_bench.py's PK_TIMEOUT_S, HF_TIMEOUT_S, MAKE_TIMEOUT_S, HF=0, HF_PROMPT, KEEP_MODELS.
# Prebuilt binaries and a kernel cache are used as scripts/gpu_check.sh does (.gpu/lib, .gpu/cache).
set -u
cd "$(dirname "$0")/.."
W=${BENCH_DIR:-/tmp/pk-bench}
mkdir -p "$W"
B=${BUILD:-build}
DEADLINE_S=${DEADLINE_S:-560}
T0=$(date +%s)
log() { printf '[%5ss] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }

# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_gpu_paths

if [ "${1:-}" = "--table" ]; then
    shift
    [ $# -gt 0 ] || set -- "$W/results.jsonl"
    exec python3 bench/run_bench.py --table "$@"
fi

PK_CACHE_DIR=
finish() {
    [ -n "$PK_CACHE_DIR" ] && rm -rf "$PK_CACHE_DIR"
    if [ -n "${OUT:-}" ] && [ "$OUT" != "$W" ]; then
        # the table and the results as files of their own, every log in one archive: the device
        # tool brings back at most 8 files from $OUT, and the gate's logs alone are more than that
        mkdir -p "$OUT" && cp "$W"/table.txt "$W"/results.jsonl "$OUT"/ 2>/dev/null
        (cd "$W" && shopt -s nullglob && logs=(*.jsonl *.txt *.log *.err) && [ -d gate ] && logs+=(gate)
            tar -czf "$OUT/run_bench_logs.tar.gz" "${logs[@]}" 2>/dev/null)
    fi
    return 0
}
trap finish EXIT

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | head -4
if [ -n "${REQUIRE_GPU:-}" ] && ! nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -q "$REQUIRE_GPU"; then
    log "not a $REQUIRE_GPU (REQUIRE_GPU): nothing run"
    exit 3
fi
nvcc --version 2>&1 | tail -1
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>&1 | tail -1
echo "pk ${PK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo +dirty)}"

echo "== build"
E2E=$B/tests/gpu/test_cuda_e2e
runs() { [ -x "$1" ] && ! ldd "$1" 2>/dev/null | grep -q "not found"; }
if runs "$B/pk" && runs "$E2E"; then
    log "using prebuilt $B/pk and $E2E"
elif timeout 300 make -j"$(nproc)" >"$W/build.log" 2>&1 && mkdir -p "$B/tests/gpu" &&
    timeout 120 cc -std=c11 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Isrc -O2 -g \
        tests/gpu/test_cuda_e2e.c "$B/libpk.a" -lcjson -lpcre2-8 -lpthread -lm -ldl -o "$E2E" >>"$W/build.log" 2>&1; then
    log "built"
else
    tail -n 30 "$W/build.log"; log "build FAILED (see $W/build.log)"; exit 1
fi

pk_private_cache
unset PK_CUDA_ARCH PK_CUDA_DEBUG PK_COPY_PROBE_MB

GATE=${GATE:-quick}
gate="skipped (GATE=0)"
gate_key="$GATE $(cat "$B/pk" "$E2E" 2>/dev/null | md5sum | cut -c1-16)"
if [ "$GATE" != 0 ] && [ "${RESUME:-1}" != 0 ] && [ -f "$W/gate.ok" ] && [ "$(head -n 1 "$W/gate.ok")" = "$gate_key" ]; then
    gate="$(tail -n 1 "$W/gate.ok") (in an earlier call, same binaries)"
    log "correctness gate passed earlier in $W for these binaries: not repeated"
elif [ "$GATE" != 0 ]; then
    echo "== correctness gate ($GATE)"
    ok=1
    if [ "$GATE" = full ]; then
        OUT="$W/gate" RUN_E2E=1 E2E_DEBUG=0 STALL=0 KERNELS=0 TF=0 GEN=0 SANITIZE=0 BIG= \
            timeout 300 bash scripts/gpu_check.sh >"$W/gate_check.log" 2>&1
        cp "$W/gate/e2e.log" "$W/gate_e2e.log" 2>/dev/null
        summary=$(grep -E '^cuda_e2e: [0-9]+ passed' "$W/gate_e2e.log" 2>/dev/null | tail -n 1)
        pattern='^cuda_e2e: [0-9]+ passed, 0 failed$'
    else
        timeout 240 "$E2E" --quick >"$W/gate_e2e.log" 2>&1
        summary=$(grep -E '^cuda_e2e_quick: [0-9]+ passed' "$W/gate_e2e.log" | tail -n 1)
        pattern='^cuda_e2e_quick: [0-9]+ passed, 0 failed$'
    fi
    if [[ "$summary" =~ $pattern ]]; then
        log "end-to-end: $summary"
    else
        ok=0
        log "end-to-end FAILED: ${summary:-no summary (crash or timeout)}"
        grep -E '^FAIL' "$W/gate_e2e.log" 2>/dev/null | head -n 10
    fi
    if [ -d models/pk-tiny ]; then
        timeout 60 "$B/pk" generate --prompt "The persistent kernel" --max-tokens 24 --print-ids --backend cpu \
            >"$W/gate_cpu.txt" 2>"$W/gate_cpu.err"
        timeout 180 "$B/pk" generate --prompt "The persistent kernel" --max-tokens 24 --print-ids --backend cuda \
            >"$W/gate_cuda.txt" 2>"$W/gate_cuda.err"
        [ -s "$W/gate_cuda.txt" ] || { ok=0; log "pk generate pk-tiny on cuda FAILED: $(tail -n 1 "$W/gate_cuda.err")"; }
        log "pk generate pk-tiny, cuda vs cpu: $(pk_tokens_compare "$W/gate_cpu.txt" "$W/gate_cuda.txt")"
        # the attention split with real weights (gpu_env.sh's pk_tiny_split_ids: why 12 tokens)
        ids=$(pk_tiny_split_ids)
        for be in cpu cuda; do
            timeout 180 "$B/pk" generate --prompt-ids "$ids" --max-tokens 12 --kv-splits 3 --print-ids --backend $be \
                >"$W/gate_split_$be.txt" 2>"$W/gate_split_$be.err"
        done
        [ -s "$W/gate_split_cuda.txt" ] || { ok=0; log "pk-tiny --kv-splits 3 on cuda FAILED: $(tail -n 1 "$W/gate_split_cuda.err")"; }
        log "pk generate pk-tiny --kv-splits 3, cuda vs cpu: $(pk_tokens_compare "$W/gate_split_cpu.txt" "$W/gate_split_cuda.txt")"
        for s in 0 3; do # every decode step's logits (gpu_env.sh)
            line=$(pk_tiny_logits_check "$B/pk" "" "$W" "$s") || ok=0
            log "$line"
        done
        for s in 0 3; do # and at 8 workers, where qkv tiles' workers run attention tasks (pk_att_early)
            line=$(pk_tiny_logits_check "$B/pk" 8 "$W" "$s") || ok=0
            log "$line (8 workers)"
        done
    fi
    if [ "$ok" != 1 ]; then
        log "correctness gate FAILED: no timings are reported for this build (logs in $W)"
        exit 1
    fi
    gate="passed ($GATE: ${summary}; pk-tiny decode-step logits cuda vs cpu, also with --kv-splits 3 and at 8 workers)"
    printf '%s\n%s\n' "$gate_key" "$gate" >"$W/gate.ok"
fi

echo "== benchmark ($(left) s left)"
[ "${RESUME:-1}" = 0 ] && rm -f "$W/results.jsonl"
PK="$B/pk" timeout $(( $(left) + 20 )) python3 -u bench/run_bench.py --results "$W" \
    --models "${MODELS:-qwen3-0.6b,qwen3-1.7b,qwen3-8b}" --contexts "${CONTEXTS:-160,4096}" --gen "${GEN:-128}" \
    --deadline-s "$(( $(left) - 10 ))" --gate "$gate"
rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    log "the benchmark driver was stopped at the deadline; what finished:"
    python3 bench/run_bench.py --table "$W/results.jsonl" | tee "$W/table.txt"
fi
log "done (exit $rc); results: $W/results.jsonl, table: $W/table.txt${OUT:+, copied to $OUT}"
exit $rc
