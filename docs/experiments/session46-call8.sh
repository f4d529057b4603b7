#!/usr/bin/env bash
# session 46, call 8: codegen's new rule (the 1.7B shape with a split attention defines
# PK_ATTD_BULK_ROWS 1) against the same kernel with the rule overridden (-DPK_ATTD_BULK_ROWS=0),
# the 1.7B at 4096, four interleaved rounds. Calls 5 / 7 (H100): -1.6 to -1.8 %; call 6 (H200, one
# traced run each): -1.0 %. Gate: call 5's (tests/cuda's harness with the define, pk-tiny's logits
# with it, unsplit and split, at 132 and 8 workers) — the device code is the same.
#   here:   bash docs/experiments/session46-call8.sh --precompile   (build/pk; -> .dev/gpu-s46c8.tar.xz)
#   device: bash docs/experiments/session46-call8.sh
#           carry ["build/pk", ".dev/gpu-s46c8.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
OFF=-DPK_ATTD_BULK_ROWS=0
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s46c8
  pk_exp_models --zeros 1.7b
  ( pk_exp_bench /tmp/z-qwen3-1.7b 4096 "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  ( pk_exp_bench /tmp/z-qwen3-1.7b 4096 "$OFF" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s46c8
  exit
fi
pk_unpack_cache s46c8 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
pk_exp_models 1.7b
for r in 1 2 3 4; do
  pk_bench_round "round $r qwen3-1.7b @4096 default (rule: bulk rows)" pk_exp_bench /tmp/qwen3-1.7b 4096 "" --gen 128
  pk_bench_round "round $r qwen3-1.7b @4096 $OFF" pk_exp_bench /tmp/qwen3-1.7b 4096 "$OFF" --gen 128
done
