#!/usr/bin/env bash
# session 45, call 5: the decode attention's stage by one cp.async.bulk per K / V row on an mbarrier
# (-DPK_ATTD_BULK_ROWS=1, attention_decode.cuh). Call 4's trace: a split task's threads stay in the
# stage's issue loop (32 16-byte cp.async each) until most rows have landed, so nothing overlaps
# the copies. With two bulk copies per thread the issue is instant: phase A runs while the rows
# land (4096), and at 160 the unsplit stage issued during the qkv tile no longer holds the tile's
# threads. Prediction: up to ~1.3 us a layer at 4096 (phase A) — the 0.6B -1 to -3 %; at 160
# unknown (-0 to -2 %).
#   Gate: tests/cuda's harness built with the define (attention group: the bulk stage against the
#   CPU, unsplit and split); pk-tiny's decode-step logits against the CPU with the define, unsplit
#   and split 3, at 132 and 8 workers.
#   Then (most wanted first: the device budget may end the call): 0.6B @4096 default against =1,
#   three interleaved rounds; a trace of the 0.6B @4096 with =1; 0.6B @160 two; 1.7B @4096 two.
#   here:   bash docs/experiments/session45-call5.sh --precompile   (build/pk; -> .dev/gpu-s45c5.tar.xz)
#           NVCC_EXTRA=-DPK_ATTD_BULK_ROWS=1 bash tests/cuda/build.sh .dev/cuda-bulk
#   device: bash docs/experiments/session45-call5.sh
#           carry ["build/pk", ".dev/gpu-s45c5.tar.xz", ".dev/cuda-bulk/test_cuda_kernels"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
B1=-DPK_ATTD_BULK_ROWS=1
E1="$B1 -DPK_ATT_EARLY_SPLIT=1" # session 46: the split stage before the qkv tile, on top of the bulk rows
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s45c5
  pk_exp_models --zeros 0.6b 1.7b
  z=/tmp/z-qwen3-0.6b
  ( pk_exp_bench $z 4096 "" --gen 4; pk_exp_bench $z 4096 "$B1" --gen 4; pk_exp_bench $z 160 "" --gen 4; pk_exp_bench $z 160 "$B1" --gen 4
    pk_exp_bench $z 4096 "$E1" --gen 4
    ) 2>&1 | grep -v "no CUDA GPU" &
  ( pk_exp_bench /tmp/z-qwen3-1.7b 4096 "" --gen 4; pk_exp_bench /tmp/z-qwen3-1.7b 4096 "$B1" --gen 4
    for t in 132 8; do for s in 0 3; do pk_exp_tiny $t $s "$B1"; done; done ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s45c5
  exit
fi
pk_unpack_cache s45c5 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
echo "== tests/cuda harness with $B1, attention group"
timeout 200 .dev/cuda-bulk/test_cuda_kernels attention >/tmp/kh.log 2>&1; echo "exit $?"
grep -E "^attention" /tmp/kh.log | grep -vc " ok$" | sed 's/^/lines not ok: /'
grep -E "^attention" /tmp/kh.log | grep -v " ok$" | head -5; tail -n 3 /tmp/kh.log
mkdir -p /tmp/gate
for t in 132 8; do for s in 0 3; do PK_NVCC_DEFINES=$B1 pk_tiny_logits_check build/pk $t /tmp/gate $s; done; done
pk_exp_models 0.6b 1.7b
z=/tmp/qwen3-0.6b
for r in 1 2 3; do
  pk_bench_round "round $r qwen3-0.6b @4096 default" pk_exp_bench $z 4096 "" --gen 128
  pk_bench_round "round $r qwen3-0.6b @4096 $B1" pk_exp_bench $z 4096 "$B1" --gen 128
done
echo "== trace qwen3-0.6b @4096 $B1"
pk_exp_bench $z 4096 "$B1" --gen 128 --trace /tmp/t.json >/dev/null 2>&1
pk_trace_report /tmp/t.json
for r in 1 2; do
  pk_bench_round "round $r qwen3-0.6b @160 default" pk_exp_bench $z 160 "" --gen 128
  pk_bench_round "round $r qwen3-0.6b @160 $B1" pk_exp_bench $z 160 "$B1" --gen 128
done
for r in 1 2; do
  pk_bench_round "round $r qwen3-1.7b @4096 default" pk_exp_bench /tmp/qwen3-1.7b 4096 "" --gen 128
  pk_bench_round "round $r qwen3-1.7b @4096 $B1" pk_exp_bench /tmp/qwen3-1.7b 4096 "$B1" --gen 128
done
for r in 1 2; do
  pk_bench_round "round $r qwen3-0.6b @4096 $B1" pk_exp_bench $z 4096 "$B1" --gen 128
  pk_bench_round "round $r qwen3-0.6b @4096 $E1" pk_exp_bench $z 4096 "$E1" --gen 128
done
