#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# precompile.sh — on the build machine (nvcc, no GPU): build pk and the GPU test binaries, then
# compile the CUDA kernels that bench/quick_gpu.sh and bench/run_bench.sh will load into
# .gpu/cache (stripped to kernel.so files: the device tool carries 64 MiB at most), so device
# time goes to running, not compiling. docs/PERF.md "Running the benchmark".
# Usage: MODELS="qwen3-0.6b qwen3-8b" VARIANTS="|--fused-mlp off" bash bench/precompile.sh
# Env: MODELS (qwen3-0.6b qwen3-8b), VARIANTS ('|'-separated extra `pk` arguments, "" = default),
#      SPLITS ("0": pk bench --kv-splits values, 0 = pk's choice; each is its own kernel),
#      CONTEXTS (160), THREADS (132), MAX_SEQ (4224; "context": each context + GEN, as
#      run_bench.py passes it), GEN (128), HARNESS (1: also tests/cuda's kernel harness), FRESH (1:
#      empty .gpu/cache first), PACK (0; 1: also xz-pack .gpu and the built harnesses into
#      .dev/gpu.tar.xz for the device tool's carry).
set -eu
cd "$(dirname "$0")/.."
MODELS=${MODELS:-qwen3-0.6b qwen3-8b}
VARIANTS=${VARIANTS:-}
SPLITS=${SPLITS:-0}
CONTEXTS=${CONTEXTS:-160}
THREADS=${THREADS:-132}
MAX_SEQ=${MAX_SEQ:-4224}
GEN=${GEN:-128}
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
make -s # builds build/tests/gpu/test_cuda_e2e too
mkdir -p .gpu/cache .gpu/logs
chmod 700 .gpu/cache
pk_gpu_libs
[ "${FRESH:-1}" = 1 ] && rm -rf .gpu/cache/* .gpu/logs/*
export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache
[ "${HARNESS:-1}" = 1 ] && bash tests/cuda/build.sh .dev/cuda >/dev/null &
build/tests/gpu/test_cuda_e2e --precompile >/dev/null
build/pk generate --prompt "x" --max-tokens 1 --backend cuda --threads "$THREADS" >/dev/null 2>&1 || true
build/pk generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 12 --kv-splits 3 --backend cuda --threads "$THREADS" \
    >/dev/null 2>&1 || true # the pk-tiny split check
IFS='|' read -r -a variants <<<"$VARIANTS"
[ ${#variants[@]} -eq 0 ] && variants=("")
for s in 0 3; do # the same at 8 workers (quick_gpu.sh, run_bench.sh's gate: the early attention stage)
    build/pk generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 --kv-splits $s \
        --logits /dev/null --backend cuda --threads 8 >/dev/null 2>&1 &
done
for v in "${variants[@]}"; do # gpu_env.sh's pk_tiny_logits_check (one-row steps), per variant
    for s in 0 3; do
        pk_with_variant "$v" build/pk generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 \
            --kv-splits $s --logits /dev/null --backend cuda --threads "$THREADS" >/dev/null 2>&1 &
    done
done
for m in $MODELS; do
    [ -d "/tmp/z-$m" ] || python3 bench/shape_model.py "$m" "/tmp/z-$m" --zeros >/dev/null
    for ctx in $CONTEXTS; do
        seq_len=$MAX_SEQ
        [ "$MAX_SEQ" = context ] && seq_len=$((ctx + GEN))
        for v in "${variants[@]}"; do
            for s in $SPLITS; do # compiles, then stops at "no CUDA GPU": expected; anything else is not
                log=.gpu/logs/$m-$ctx-$s-$(printf '%s' "$v" | tr -c 'A-Za-z0-9_=' '_').txt
                { pk_with_variant "$v" build/pk bench --model "/tmp/z-$m" --backend cuda --threads "$THREADS" \
                    --context "$ctx" --max-seq "$seq_len" --gen "$GEN" --kv-splits "$s" >"$log" 2>&1
                  grep -q "no CUDA GPU found" "$log" || { echo "precompile: $m, context $ctx, split $s, '$v':" >&2
                                                         cat "$log" >&2; }; } &
            done
        done
    done
done
wait
pk_cache_strip .gpu/cache
echo "precompiled $(ls .gpu/cache | wc -l) kernels: $(du -sh .gpu | cut -f1) in .gpu"
if [ "${PACK:-0}" = 1 ]; then
    mkdir -p .dev
    harnesses=""
    [ "${HARNESS:-1}" = 1 ] && harnesses=$(ls .dev/cuda*/test_cuda_kernels 2>/dev/null || true)
    # .gpu/cache and .gpu/lib only: anything else under .gpu would travel too and can outgrow the carry
    # shellcheck disable=SC2086
    tar -cf - .gpu/cache .gpu/lib $harnesses | xz -T0 -6 >.dev/gpu.tar.xz
    echo "packed: $(du -h .dev/gpu.tar.xz | cut -f1) in .dev/gpu.tar.xz"
fi
