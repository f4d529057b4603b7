#!/usr/bin/env bash
# precompile_table.sh — on the build machine (nvcc, no GPU): every kernel bench/run_bench.sh will
# load — the gate's (test_cuda_e2e --precompile), pk-tiny's, and one per (model, context) with
# --max-seq = context + GEN as run_bench.py passes it — into .gpu/cache (stripped to kernel.so),
# then packed as .dev/gpu.tar.xz for the device tool's 64 MiB carry (docs/PERF.md "Running it").
# Usage: bash bench/precompile_table.sh; then, on the device:
#   tar -xJf .dev/gpu.tar.xz && PK_THREADS=132 PK_COMMIT=<commit> bash bench/run_bench.sh
#   carry ["build/pk", "build/tests/gpu/test_cuda_e2e", ".dev/gpu.tar.xz"]
# Env: MODELS (qwen3-0.6b qwen3-1.7b qwen3-8b), CONTEXTS (160 4096), GEN (128), THREADS (132).
set -eu
cd "$(dirname "$0")/.."
MODELS=${MODELS:-qwen3-0.6b qwen3-1.7b qwen3-8b}
CONTEXTS=${CONTEXTS:-160 4096}
GEN=${GEN:-128}
THREADS=${THREADS:-132}
make -s
mkdir -p .gpu/lib .gpu/cache .dev
chmod 700 .gpu/cache
rm -rf .gpu/cache/*
cp -L /usr/lib/x86_64-linux-gnu/libcjson.so.1 /usr/lib/x86_64-linux-gnu/libpcre2-8.so.0 .gpu/lib/
export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache
build/tests/gpu/test_cuda_e2e --precompile >/dev/null &
build/pk generate --prompt "x" --max-tokens 1 --backend cuda --threads "$THREADS" >/dev/null 2>&1 || true
build/pk generate --prompt-ids "$(seq -s, 7 37 3700)" --max-tokens 12 --kv-splits 3 --backend cuda \
    --threads "$THREADS" >/dev/null 2>&1 || true # the gate's split run
for m in $MODELS; do
    [ -d "/tmp/z-$m" ] || python3 bench/shape_model.py "$m" "/tmp/z-$m" --zeros >/dev/null
    for ctx in $CONTEXTS; do # compiles, then stops at "no CUDA GPU": expected
        build/pk bench --model "/tmp/z-$m" --backend cuda --threads "$THREADS" --context "$ctx" \
            --max-seq $((ctx + GEN)) >/dev/null 2>&1 &
    done
done
wait
for d in .gpu/cache/*/; do
    rm -rf "$d"kernel.cu "$d"common "$d"kernels "$d"runtime "$d"pk.h "$d"pk_abi.h
    [ -f "$d"kernel.so ] || { echo "precompile_table: no kernel.so in $d" >&2; exit 1; }
done
tar -cf - .gpu | xz -T0 -6 >.dev/gpu.tar.xz
echo "precompiled $(ls .gpu/cache | wc -l) kernels ($(du -sh .gpu | cut -f1)); packed: $(du -h .dev/gpu.tar.xz | cut -f1)"
