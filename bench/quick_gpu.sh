#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# quick_gpu.sh — one short GPU call for a tuning step:
#   1. correctness: tests/cuda's kernel harness (if built: .dev/cuda/test_cuda_kernels), the quick
#      CPU-vs-CUDA end-to-end check, pk-tiny's greedy tokens and decode-step logits against the CPU;
#   2. `pk bench` on random Qwen3-shaped models (bench/shape_model.py) for every variant (more
#      `pk` arguments, "" = the default), with a trace summary (bench/trace_summary.py) of the
#      default variant.
# Usage (device tool, after precompiling the kernels here with bench/precompile.sh and the same
# MODELS / VARIANTS / SPLITS / CONTEXTS / MAX_SEQ):
#   MODELS="qwen3-0.6b qwen3-8b" VARIANTS="|--fused-mlp off" bash bench/quick_gpu.sh
#   carry ["build/pk", "build/tests/gpu/test_cuda_e2e", ".gpu", ".dev/cuda/test_cuda_kernels"]
# Env: MODELS (qwen3-0.6b qwen3-8b), CONTEXT (160), GEN (128), MAX_SEQ (4224: run_bench's, so
#      the precompiled kernels serve both), THREADS (132), VARIANTS ('|'-separated, default ""),
#      TRACE (1), HARNESS_GROUPS (linear attention bench), OUT (where logs go), SPLITS ("0": pk bench
#      --kv-splits values, 0 = pk's choice), CONTEXTS (CONTEXT: several contexts, one kernel each).
set -u
cd "$(dirname "$0")/.." || exit 1
MODELS=${MODELS:-qwen3-0.6b qwen3-8b}
CONTEXT=${CONTEXT:-160}
GEN=${GEN:-128}
MAX_SEQ=${MAX_SEQ:-4224}
THREADS=${THREADS:-132}
VARIANTS=${VARIANTS:-}
SPLITS=${SPLITS:-0}
CONTEXTS=${CONTEXTS:-$CONTEXT}
TRACE=${TRACE:-1}
OUT=${OUT:-/tmp/pk-quick}
mkdir -p "$OUT"
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_gpu_paths
pk_private_cache
trap 'rm -rf "$PK_CACHE_DIR"' EXIT

for m in $MODELS; do python3 bench/shape_model.py "$m" "/tmp/$m" >/dev/null & done
if [ -x .dev/cuda/test_cuda_kernels ]; then
    # shellcheck disable=SC2086
    .dev/cuda/test_cuda_kernels ${HARNESS_GROUPS:-linear attention bench} >"$OUT/kernels.txt" 2>&1
    grep -A40 "^bench linear" "$OUT/kernels.txt" | grep -v "^kind \|^$" | head -40
    grep -B1 "^attention decode" "$OUT/kernels.txt"
    grep "FAIL" "$OUT/kernels.txt" | head -20
    tail -n 1 "$OUT/kernels.txt"
fi
wait
echo "== correctness"
timeout 200 build/tests/gpu/test_cuda_e2e --quick >"$OUT/e2e.txt" 2>&1
tail -n 1 "$OUT/e2e.txt"
build/pk generate --prompt "The persistent kernel" --max-tokens 24 --print-ids --backend cpu >"$OUT/tiny_cpu.txt" 2>/dev/null
build/pk generate --prompt "The persistent kernel" --max-tokens 24 --print-ids --backend cuda --threads "$THREADS" \
    >"$OUT/tiny_cuda.txt" 2>"$OUT/tiny_cuda.err"
echo "pk-tiny greedy tokens, cuda vs cpu: $(pk_tokens_compare "$OUT/tiny_cpu.txt" "$OUT/tiny_cuda.txt") $(tail -n 1 "$OUT/tiny_cuda.err" | grep -v '^pk: cuda backend')"
# the attention split's decode path end to end with real weights (pk-tiny: D 64; gpu_env.sh's
# pk_tiny_split_ids says why 12 tokens)
ids=$(pk_tiny_split_ids)
for be in cpu cuda; do
    build/pk generate --prompt-ids "$ids" --max-tokens 12 --kv-splits 3 --print-ids --backend $be --threads "$THREADS" \
        >"$OUT/tiny_split_$be.txt" 2>"$OUT/tiny_split_$be.err"
done
echo "pk-tiny --kv-splits 3 greedy tokens, cuda vs cpu: $(pk_tokens_compare "$OUT/tiny_split_cpu.txt" "$OUT/tiny_split_cuda.txt")"

IFS='|' read -r -a variants <<<"$VARIANTS"
[ ${#variants[@]} -eq 0 ] && variants=("")
for v in "${variants[@]}"; do # decode steps' logits under teacher forcing, per variant
    for s in 0 3; do pk_tiny_logits_check build/pk "$THREADS" "$OUT" "$s" "$v" | sed "s/\$/${v:+ ($v)}/"; done
done
# at 8 workers the qkv tiles' workers run attention tasks, which then stage during the tile
# (runtime.cuh pk_att_early); at 132 pk-tiny's attention tasks all land on workers without one
for s in 0 3; do pk_tiny_logits_check build/pk 8 "$OUT" "$s" | sed 's/$/ (8 workers)/'; done

B="build/pk bench --backend cuda --threads $THREADS --max-seq $MAX_SEQ --gen $GEN"
for m in $MODELS; do
    for ctx in $CONTEXTS; do
        for v in "${variants[@]}"; do
            for s in $SPLITS; do
                echo "== $m @ $ctx, kv-splits $s ${v:+($v)}"
                # shellcheck disable=SC2086 # $B and the variant are words of their own
                $B --context "$ctx" --kv-splits "$s" --model "/tmp/$m" $v 2>&1 |
                    grep -E "decode |floor|compiling|^pk: .*(error|no CUDA|failed)"
            done
        done
    done
    if [ "$TRACE" = 1 ]; then
        $B --context "$CONTEXT" --model "/tmp/$m" --gen 24 --trace "/tmp/trace_$m.json" >/dev/null 2>&1
        python3 bench/trace_summary.py "/tmp/trace_$m.json" --steps 16 --layers >"$OUT/trace_$m.txt" 2>&1
        sed -n 2,14p "$OUT/trace_$m.txt"
    fi
done
