#!/usr/bin/env bash
# session 49, call 2: the table (PERF.md "What is open", item 1) when the device is an H200:
# bench/run_bench.sh with 3533e48's binaries (build-h: build/pk and tests/gpu/test_cuda_e2e built at
# 3533e48, whose device code the pack .dev/gpu.tar.xz was compiled for by bench/precompile_table.sh);
# on another card, one traced `pk bench` of the 0.6B at 160 (the default since session 48: the LM
# head and the argmax as one layer) for the per-kind table.
#   device: bash docs/experiments/session49-call2.sh      carry ["build-h", ".dev/gpu.tar.xz"]
set -u
mkdir -p .gpu && tar -xJf .dev/gpu.tar.xz || { echo "unpack failed"; exit 1; }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $name"
if echo "$name" | grep -q H200; then
  REQUIRE_GPU=H200 BUILD=build-h PK_THREADS=132 PK_COMMIT=3533e48 OUT=$OUT DEADLINE_S=540 bash bench/run_bench.sh > $OUT/table.txt 2>&1
  echo "run_bench exit $?"; tail -40 $OUT/table.txt
else
  . scripts/gpu_env.sh; pk_gpu_paths
  pk_exp_models 0.6b
  for m in 0.6b; do
    echo "== trace qwen3-$m @160 default"
    PK_NVCC_DEFINES= timeout 200 build-h/pk bench --model /tmp/qwen3-$m --backend cuda --threads 132 --context 160 --max-seq 288 --gen 128 --trace /tmp/t.json 2>&1 | grep -E "^(decode|floor|copy)"
    pk_trace_report /tmp/t.json
  done
fi
