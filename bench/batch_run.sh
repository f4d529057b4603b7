#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# batch_run.sh — issue 59's batch table on the GPU machine: `pk bench --batch N` (N requests with
# distinct random prompts of CONTEXT tokens decoding together: the median step and tokens/s), the
# floor (the weights once plus every request's KV at the median context, at the copy bandwidth
# pk bench measures) and transformers' CUDA-graph step at the same batch over a StaticCache
# (bench/hf_baseline.py --batch), all in one call on one card.
# Usage (device): MODELS="qwen3-8b" BATCHES="1 8 32 64" CONTEXT=1024 OUT=$OUT bash bench/batch_run.sh
# Build machine first: the same with --precompile (kernels into .gpu/cache: one per batch size).
# Env: GEN (32), THREADS (132).
set -u
cd "$(dirname "$0")/.." || exit 1
MODELS=${MODELS:-qwen3-8b}
BATCHES=${BATCHES:-1 8 32 64}
CONTEXT=${CONTEXT:-1024}
GEN=${GEN:-32}
THREADS=${THREADS:-132}
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_gpu_paths
mkdir -p .gpu/cache && chmod 700 .gpu/cache
export PK_CACHE_DIR=$PWD/.gpu/cache
args() { echo --backend cuda --threads "$THREADS" --context "$CONTEXT" --gen "$GEN" --max-seq $((CONTEXT + GEN)) --batch "$1"; }

if [ "${1:-}" = "--precompile" ]; then
    pk_gpu_libs
    for m in $MODELS; do
        # shellcheck disable=SC2046
        for b in $BATCHES; do pk_bench_precompile "$m" $(args "$b"); done
    done
    wait
    pk_cache_strip .gpu/cache
    exit 0
fi

out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$out/batch_run.txt"
# shellcheck disable=SC2086
pk_random_models $MODELS
for m in $MODELS; do
    for b in $BATCHES; do
        # shellcheck disable=SC2046
        j=$(timeout 300 build/pk bench --model "/tmp/$m" $(args "$b") --json 2>"$out/pk_${m}_b${b}.err")
        echo "$j" >"$out/pk_${m}_b${b}.json"
        python3 - "$m" "$b" "$j" <<'PY' | tee -a "$out/batch_run.txt"
import json, sys
m, b, j = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    r = json.loads(j)
    print(f"pk {m} batch {b} context {r['prompt_len']}: step median {r['decode_ms_median']:.3f} ms, "
          f"{r['decode_tokens_per_s']:.0f} tokens/s, floor {r['floor_ms']:.3f} ms ({r['pct_of_floor']:.0f} %)")
except Exception as e:
    print(f"pk {m} batch {b}: no result ({e})")
PY
    done
    timeout 400 python3 bench/hf_baseline.py --batch "$(echo "$BATCHES" | tr ' ' ,)" --context "$CONTEXT" "$m" 2>&1 |
        grep -v Warning | tee -a "$out/batch_run.txt"
done
exit 0
