#!/usr/bin/env bash
# session 45, call 4: the attention's phase A before its wait for the staged rows
# (-DPK_ATTD_A_BEFORE_COPIES=1, attention_decode.cuh), and the default 4096 traces on the H200
# (none since session 42 turned the split's early stage off; session 44's are an H100's).
# At 4096 a split task's copies go out after its worker's qkv tile and land ~6 us later, after the
# qkv layer's event; with the define the task waits for the event, runs phase A (~1.3 us at 160:
# q / K / V from L2, rotation, pos's row written) and then waits for its copies.
# Prediction: up to ~1.3 us a layer off the attention's end+ at 4096 — the 0.6B -2 to -3 %, the
# 1.7B -1.5 to -2 %; nothing at 160 (the unsplit stage there lands during the qkv tile).
#   Gate: pk-tiny's decode-step logits against the CPU with the define, unsplit and split 3, at 132
#   and 8 workers (the late path is the runtime's; tests/cuda's harness does not take it).
#   Then: 0.6B @4096 default against =1, three interleaved rounds; 1.7B @4096 two; 0.6B @160 two;
#   traces of the 0.6B @4096 (default and =1) and of the 1.7B @4096 (default).
# Ran once (H200, bench/results/2026-12-06-s45.txt): within noise; the define is no longer in the
# tree — check out 7db63e5, apply docs/experiments/session45-a-before-copies.patch, make.
#   here:   bash docs/experiments/session45-call4.sh --precompile   (build/pk; -> .dev/gpu-s45c4.tar.xz)
#   device: bash docs/experiments/session45-call4.sh
#           carry ["build/pk", ".dev/gpu-s45c4.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
A1=-DPK_ATTD_A_BEFORE_COPIES=1
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s45c4
  pk_exp_models --zeros 0.6b 1.7b
  z=/tmp/z-qwen3-0.6b
  ( pk_exp_bench $z 4096 "" --gen 4; pk_exp_bench $z 4096 "$A1" --gen 4; pk_exp_bench $z 160 "" --gen 4; pk_exp_bench $z 160 "$A1" --gen 4
    ) 2>&1 | grep -v "no CUDA GPU" &
  ( pk_exp_bench /tmp/z-qwen3-1.7b 4096 "" --gen 4; pk_exp_bench /tmp/z-qwen3-1.7b 4096 "$A1" --gen 4
    for t in 132 8; do for s in 0 3; do pk_exp_tiny $t $s "$A1"; done; done ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s45c4
  exit
fi
pk_unpack_cache s45c4 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /tmp/gate
for t in 132 8; do for s in 0 3; do PK_NVCC_DEFINES=$A1 pk_tiny_logits_check build/pk $t /tmp/gate $s; done; done
pk_exp_models 0.6b 1.7b
z=/tmp/qwen3-0.6b
for r in 1 2 3; do
  pk_bench_round "round $r qwen3-0.6b @4096 default" pk_exp_bench $z 4096 "" --gen 128
  pk_bench_round "round $r qwen3-0.6b @4096 $A1" pk_exp_bench $z 4096 "$A1" --gen 128
done
for r in 1 2; do
  pk_bench_round "round $r qwen3-1.7b @4096 default" pk_exp_bench /tmp/qwen3-1.7b 4096 "" --gen 128
  pk_bench_round "round $r qwen3-1.7b @4096 $A1" pk_exp_bench /tmp/qwen3-1.7b 4096 "$A1" --gen 128
done
for r in 1 2; do
  pk_bench_round "round $r qwen3-0.6b @160 default" pk_exp_bench $z 160 "" --gen 128
  pk_bench_round "round $r qwen3-0.6b @160 $A1" pk_exp_bench $z 160 "$A1" --gen 128
done
for v in "qwen3-0.6b|" "qwen3-0.6b|$A1" "qwen3-1.7b|"; do
  m=${v%%|*} d=${v#*|}
  echo "== trace $m @4096 ${d:-default}"
  pk_exp_bench /tmp/$m 4096 "$d" --gen 128 --trace /tmp/t.json >/dev/null 2>&1
  pk_trace_report /tmp/t.json
done
