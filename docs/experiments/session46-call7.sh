#!/usr/bin/env bash
# session 46, call 7: does the bulk-row stage (-DPK_ATTD_BULK_ROWS=1) gain where the MLP is not
# one fused layer — the 1.7B and the 8B — at 4096? Calls 5 / 6: 1.7B @4096 -1.8 % (H100, two
# rounds), -1.0 % (H200, one traced run each); the 0.6B +2.0 / +2.8 % at 4096; at 160 every model
# slower (0.6B +1.3 %, 1.7B +0.5 / +0.9 %). If the 8B gains too, a codegen rule (split attention,
# not the fused-MLP shape) is worth writing. Three interleaved rounds of the 1.7B, two of the 8B.
#   here:   bash docs/experiments/session46-call7.sh --precompile   (build/pk; -> .dev/gpu-s46c7.tar.xz)
#   device: bash docs/experiments/session46-call7.sh
#           carry ["build/pk", ".dev/gpu-s46c7.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
B1=-DPK_ATTD_BULK_ROWS=1
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s46c7
  pk_exp_models --zeros 1.7b 8b
  ( pk_exp_bench /tmp/z-qwen3-8b 4096 "" --gen 4; pk_exp_bench /tmp/z-qwen3-1.7b 4096 "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  ( pk_exp_bench /tmp/z-qwen3-8b 4096 "$B1" --gen 4; pk_exp_bench /tmp/z-qwen3-1.7b 4096 "$B1" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s46c7
  exit
fi
pk_unpack_cache s46c7 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
pk_exp_models 1.7b 8b
for r in 1 2 3; do
  pk_bench_round "round $r qwen3-1.7b @4096 default" pk_exp_bench /tmp/qwen3-1.7b 4096 "" --gen 128
  pk_bench_round "round $r qwen3-1.7b @4096 $B1" pk_exp_bench /tmp/qwen3-1.7b 4096 "$B1" --gen 128
done
for r in 1 2; do
  pk_bench_round "round $r qwen3-8b @4096 default" pk_exp_bench /tmp/qwen3-8b 4096 "" --gen 128
  pk_bench_round "round $r qwen3-8b @4096 $B1" pk_exp_bench /tmp/qwen3-8b 4096 "$B1" --gen 128
done
