#!/usr/bin/env bash
# session 42, call 2: the split attention no longer stages during the qkv tile (PK_ATT_EARLY_SPLIT
# 0, the new default; call 1 on an H100: 0.6B at 4096 -5 %) — three interleaved rounds of the 0.6B
# at 4096 against -DPK_ATT_EARLY_SPLIT=1 (the old behaviour), then the full table
# (bench/run_bench.sh, gate included) from bench/precompile_table.sh's pack.
#   here:   bash bench/precompile_table.sh && bash docs/experiments/session42-call2.sh --precompile
#   device: bash docs/experiments/session42-call2.sh
#           carry ["build/pk", "build/tests/gpu/test_cuda_e2e", ".dev/gpu.tar.xz", ".dev/gpu-s42c2.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
OLD=-DPK_ATT_EARLY_SPLIT=1
bench() { PK_NVCC_DEFINES="$2" build/pk bench --model $1 --backend cuda --threads 132 --context 4096 --max-seq 4224 "${@:3}"; }
if [ "${1:-}" = "--precompile" ]; then
  export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache-s42c2
  rm -rf "$PK_CACHE_DIR" && mkdir -p "$PK_CACHE_DIR" && chmod 700 "$PK_CACHE_DIR"
  [ -d /tmp/z-qwen3-0.6b ] || python3 bench/shape_model.py qwen3-0.6b /tmp/z-qwen3-0.6b --zeros >/dev/null
  ( bench /tmp/z-qwen3-0.6b "" --gen 4 2>&1 | grep -v "no CUDA GPU" ) &
  ( bench /tmp/z-qwen3-0.6b "$OLD" --gen 4 2>&1 | grep -v "no CUDA GPU" ) &
  wait
  pk_pack_cache s42c2
  exit
fi
(
  pk_unpack_cache s42c2 || exit 1
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
  python3 bench/shape_model.py qwen3-0.6b /tmp/qwen3-0.6b >/dev/null
  for r in 1 2 3; do
    pk_bench_round "round $r qwen3-0.6b @4096 split not early (default)" bench /tmp/qwen3-0.6b "" --gen 128
    pk_bench_round "round $r qwen3-0.6b @4096 split early ($OLD)" bench /tmp/qwen3-0.6b "$OLD" --gen 128
  done
)
unset PK_CACHE_DIR PK_NVCC
echo "== the table"
tar -xJf .dev/gpu.tar.xz && PK_THREADS=132 PK_COMMIT=${PK_COMMIT:-unknown} bash bench/run_bench.sh
