#!/usr/bin/env bash
# session 45, call 3: where the split attention's time goes on the H200 with the default device
# code (d34a8dc's, the table's kernels in .dev/gpu.tar.xz: bench/precompile_table.sh). No default
# 4096 trace had been taken on the H200 since session 42 turned the split's early stage off
# (session 44's are an H100's). Traces of the 0.6B and 1.7B at 4096 and of the 0.6B at 160 (the
# unsplit attention, for the contrast), each after one bench round (ms/token, floor, copy b/w).
#   device: bash docs/experiments/session45-call3.sh
#           carry ["build/pk", ".dev/gpu.tar.xz"]   (build/pk: the binary the pack was compiled with)
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
mkdir -p .gpu && tar -xJf .dev/gpu.tar.xz || exit 1
pk_gpu_paths
chmod 700 .gpu/cache && export PK_CACHE_DIR=$PWD/.gpu/cache
pk_nvcc_cached /tmp/nvcc-standin-s45c3
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
bench() {
  local m=$1 c=$2
  shift 2
  build/pk bench --model "$m" --backend cuda --threads 132 --context "$c" --max-seq $((c + 128)) "$@"
}
for m in qwen3-0.6b qwen3-1.7b; do [ -d /tmp/$m ] || python3 bench/shape_model.py $m /tmp/$m >/dev/null; done
for mc in "qwen3-0.6b 4096" "qwen3-1.7b 4096" "qwen3-0.6b 160"; do
  set -- $mc
  pk_bench_round "$1 @$2 default" bench /tmp/$1 $2 --gen 128
  echo "== trace $1 @$2 (default)"
  bench /tmp/$1 $2 --gen 128 --trace /tmp/t.json >/dev/null 2>&1
  pk_trace_report /tmp/t.json
done
