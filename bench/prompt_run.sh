#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# prompt_run.sh — time to first token on the GPU machine, issue 59's prompt table: for each model
# and prompt length, `pk bench --prompt-len N` at each step size (prefill_ms: the prompt's steps
# from the runtime's step records), then transformers' one sdpa forward over the same length and
# the bf16 matmul rate (hf_prefill.py, given as PREFILL_PY), all in one call on one card. Prints one
# line per run and the compute floor: 2 · (parameters without the embedding) · N FLOPs for the
# linear layers plus 2 · 2 · layers · heads · head_dim · N² / 2 for causal attention, at the
# measured matmul rate.
# Usage (device): MODELS="qwen3-0.6b qwen3-8b" LENS="4096" STEPS="64 512" PREFILL_PY=.dev/hf_prefill.py \
#                 OUT=$OUT bash bench/prompt_run.sh
# Build machine first: MODELS=... LENS=... STEPS=... bash bench/prompt_run.sh --precompile (kernels
# into .gpu/cache; carry .gpu and build/pk).
# Env: GEN (32: decode steps after the prompt, their median is printed too), THREADS (132),
#      PK_ARGS (more `pk bench` arguments for every run and its kernel, e.g. "--fused-mlp off").
set -u
cd "$(dirname "$0")/.." || exit 1
MODELS=${MODELS:-qwen3-0.6b qwen3-8b}
LENS=${LENS:-4096}
STEPS=${STEPS:-64 512}
GEN=${GEN:-32}
THREADS=${THREADS:-132}
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_gpu_paths
mkdir -p .gpu/cache && chmod 700 .gpu/cache
export PK_CACHE_DIR=$PWD/.gpu/cache

if [ "${1:-}" = "--precompile" ]; then
    pk_gpu_libs
    for m in $MODELS; do
        for n in $LENS; do
            for t in $STEPS; do
                # shellcheck disable=SC2086
                pk_bench_precompile "$m" --backend cuda --threads "$THREADS" --prompt-len "$n" --gen "$GEN" \
                    --max-seq $((n + GEN)) --step-tokens "$t" ${PK_ARGS:-}
            done
        done
    done
    wait
    pk_cache_strip .gpu/cache
    exit 0
fi

out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$out/prompt_run.txt"
# shellcheck disable=SC2086
pk_random_models $MODELS
for m in $MODELS; do
    for n in $LENS; do
        for t in $STEPS; do
            # shellcheck disable=SC2086
            j=$(timeout 300 build/pk bench --model "/tmp/$m" --backend cuda --threads "$THREADS" --prompt-len "$n" \
                --gen "$GEN" --max-seq $((n + GEN)) --step-tokens "$t" ${PK_ARGS:-} --json 2>"$out/pk_${m}_${n}_${t}.err")
            echo "$j" >"$out/pk_${m}_${n}_${t}.json"
            python3 - "$m" "$n" "$t" "$j" <<'PY' | tee -a "$out/prompt_run.txt"
import json, sys
m, n, t, j = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
try:
    r = json.loads(j)
    print(f"pk {m} prompt {n} step-tokens {t}: prefill_ms {r['prefill_ms']:.1f} "
          f"({int(n) / r['prefill_ms'] * 1e3:.0f} tokens/s), decode median {r['decode_ms_median']:.3f} ms/token")
except Exception as e:
    print(f"pk {m} prompt {n} step-tokens {t}: no result ({e})")
PY
        done
    done
done
[ -n "${PREFILL_PY:-}" ] && timeout 400 python3 "$PREFILL_PY" $MODELS --lengths "$(echo "$LENS" | tr ' ' ,)" 2>&1 |
    grep -v Warning | tee -a "$out/prompt_run.txt"
exit 0
