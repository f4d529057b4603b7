#!/usr/bin/env bash
# session 45, call 2: the split attention's stage in two parts (PK_ATT_EARLY_SPLIT=2, docs/PERF.md
# "Session 45"). Call 1 ran bench/kv_gather.cu: pk's 16-byte gather of the 4096 context's KV rows
# lands as fast alone as contiguous or bulk copies (6.24 us for 16.8 MB on an H100), so what the
# traces' ~8 us after the qkv layer add is the stage's place in the step, not its copies. Its two
# dependent round trips (token -> page table -> slots) run after the worker's qkv tile; with
# PK_ATT_EARLY_SPLIT=2 they run during the tile (no DRAM traffic beside it: ~1 KB of slots from L2)
# and the copies go out at once after it.
#   Gate: tests/cuda's harness, attention group (the two-part stage against the one-part one, bit
#   for bit, unsplit and split; the refactored one-part stage against the CPU); pk-tiny's decode-
#   step logits against the CPU, the default unsplit and split 3 (the refactor) and
#   PK_ATT_EARLY_SPLIT=2 split 3, at 132 and 8 workers (8: every worker runs qkv tiles before its
#   split attention task, so the two-part path runs).
#   Then: 0.6B @4096 default against PK_ATT_EARLY_SPLIT=2, three interleaved rounds; 1.7B @4096 two;
#   0.6B @160 default, one (the refactor's instructions; 160 is unsplit, =2 changes nothing there);
#   a trace of the 0.6B @4096 with =2 (the partial tasks' start after the qkv layer's end).
# Ran once (H200, bench/results/2026-12-06-s45.txt): right and slower, so the code is no longer in
# the tree — check out 7db63e5, apply docs/experiments/session45-stage-two-parts.patch, make.
#   here:   bash docs/experiments/session45-call2.sh --precompile   (build/pk; -> .dev/gpu-s45c2.tar.xz)
#   device: bash docs/experiments/session45-call2.sh
#           carry ["build/pk", ".dev/gpu-s45c2.tar.xz", ".dev/cuda/test_cuda_kernels"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
TWO=-DPK_ATT_EARLY_SPLIT=2
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s45c2
  pk_exp_models --zeros 0.6b 1.7b
  z=/tmp/z-qwen3-0.6b
  ( pk_exp_bench $z 4096 "" --gen 4; pk_exp_bench $z 4096 "$TWO" --gen 4; pk_exp_bench $z 160 "" --gen 4
    pk_exp_tiny 132 0 ""; pk_exp_tiny 132 3 ""; pk_exp_tiny 132 3 "$TWO"; pk_exp_tiny 8 3 "$TWO" ) 2>&1 | grep -v "no CUDA GPU" &
  ( pk_exp_bench /tmp/z-qwen3-1.7b 4096 "" --gen 4; pk_exp_bench /tmp/z-qwen3-1.7b 4096 "$TWO" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s45c2
  exit
fi
pk_unpack_cache s45c2 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
echo "== tests/cuda harness, attention group"
timeout 200 .dev/cuda/test_cuda_kernels attention 2>&1 | grep -E "FAIL|attention_decode|attention_split|^cuda_kernels" | head -40
mkdir -p /tmp/gate
pk_tiny_logits_check build/pk 132 /tmp/gate 0
pk_tiny_logits_check build/pk 132 /tmp/gate 3
PK_NVCC_DEFINES=$TWO pk_tiny_logits_check build/pk 132 /tmp/gate 3
PK_NVCC_DEFINES=$TWO pk_tiny_logits_check build/pk 8 /tmp/gate 3
pk_exp_models 0.6b 1.7b
z=/tmp/qwen3-0.6b
for r in 1 2 3; do
  pk_bench_round "round $r qwen3-0.6b @4096 default" pk_exp_bench $z 4096 "" --gen 128
  pk_bench_round "round $r qwen3-0.6b @4096 $TWO" pk_exp_bench $z 4096 "$TWO" --gen 128
done
for r in 1 2; do
  pk_bench_round "round $r qwen3-1.7b @4096 default" pk_exp_bench /tmp/qwen3-1.7b 4096 "" --gen 128
  pk_bench_round "round $r qwen3-1.7b @4096 $TWO" pk_exp_bench /tmp/qwen3-1.7b 4096 "$TWO" --gen 128
done
pk_bench_round "qwen3-0.6b @160 default (refactored stage)" pk_exp_bench $z 160 "" --gen 128
echo "== trace qwen3-0.6b @4096 $TWO"
pk_exp_bench $z 4096 "$TWO" --gen 128 --trace /tmp/t4k.json >/dev/null 2>&1
pk_trace_report /tmp/t4k.json
