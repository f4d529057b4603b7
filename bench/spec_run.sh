#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# spec_run.sh — issue 62's verification-step cost on the GPU machine: a step of L + 1 rows of one
# request (as speculation's verification carries them) against a one-row decode step, at the same
# context. Random-weight shapes keep no drafts, so the rows come from the prompt instead: `pk bench
# --step-tokens L+1 --prompt-len CONTEXT` runs the prompt in steps of L + 1 rows; the median of its
# last 16 full steps (contexts CONTEXT - 16 (L+1) .. CONTEXT) over the median decode step that
# follows, in one process. Then the shipped model with and without --spec-length on a passage it
# is prompted to repeat (tokens/s and kept drafts from `pk generate`'s stats lines).
# Usage (device): MODELS="qwen3-0.6b qwen3-8b" L=5 CONTEXT=1024 OUT=$OUT bash bench/spec_run.sh
# Build machine first: the same with --precompile (one kernel per model: T = L + 1).
set -u
cd "$(dirname "$0")/.." || exit 1
MODELS=${MODELS:-qwen3-0.6b qwen3-8b}
L=${L:-5}
CONTEXT=${CONTEXT:-1024}
GEN=${GEN:-64}
THREADS=${THREADS:-132}
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_gpu_paths
mkdir -p .gpu/cache && chmod 700 .gpu/cache
export PK_CACHE_DIR=$PWD/.gpu/cache
P="And God said, Let there be light: and there was light. And God saw the light, that it was good: and God divided the light from the darkness."
args() { echo --backend cuda --threads "$THREADS" --prompt-len "$CONTEXT" --gen "$GEN" --max-seq $((CONTEXT + GEN)) --step-tokens $((L + 1)); }

if [ "${1:-}" = "--precompile" ]; then
    pk_gpu_libs
    # shellcheck disable=SC2046
    for m in $MODELS; do pk_bench_precompile "$m" $(args); done
    PK_CUDA_ARCH=sm_90a build/pk generate --backend cuda --threads "$THREADS" --prompt "$P $P $P And God said" --max-tokens 120 >/dev/null 2>&1 &
    wait
    pk_cache_strip .gpu/cache
    exit 0
fi

out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$out/spec_run.txt"
# shellcheck disable=SC2086
pk_random_models $MODELS
for m in $MODELS; do
    # shellcheck disable=SC2046
    j=$(timeout 300 build/pk bench --model "/tmp/$m" $(args) --json 2>"$out/spec_${m}.err")
    python3 - "$m" "$L" "$j" <<'PY' | tee -a "$out/spec_run.txt"
import json, statistics, sys
m, L, j = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    r = json.loads(j)
    full = [ms for ms, rows in zip(r["prefill_step_ms"], r["prefill_step_rows"]) if rows == L + 1][-16:]
    v, d = statistics.median(full), r["decode_ms_median"]
    print(f"pk {m}: a step of {L + 1} rows {v:.3f} ms, a one-row step {d:.3f} ms: {v / d:.2f}x (context {r['prompt_len']})")
except Exception as e:
    print(f"pk {m}: no result ({e})")
PY
done
for s in 0 "$L"; do
    timeout 120 build/pk generate --backend cuda --threads "$THREADS" --prompt "$P $P $P And God said" --max-tokens 120 \
        --spec-length "$s" 2>&1 >/dev/null | sed "s/^/spec-length $s: /" | tee -a "$out/spec_run.txt"
done
exit 0
