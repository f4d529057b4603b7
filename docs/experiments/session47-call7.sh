#!/usr/bin/env bash
# session 47, calls 4 and 7: the fused MLP's accumulator in 4 copies (task i adds into copy i mod 4, the
# next qkv's x stage adds the copies up; PK_MLP_ACC_COPIES, model.c) against one (today's layout).
# bench/red_width.cu (calls 2-3, H100): 128 tasks x 1024 int64 reductions into one 8 KB array drain
# in 3.0 us, into 4 copies 1.8 (the signal alone 1.3): the L2 serialises the adds to one address.
# Session 31: half the reductions skipped (timing only) made the 0.6B's step -2.6 %. Prediction:
# the 0.6B -1 to -3 % at 160 and 4096 (the qkv's x read loads 32 KB of copies instead of 8 KB).
#   Call 4 ran this script without the 2-copies rows, its gate at 8 workers too, on the patch's
#   first reader, which summed each copy before loading the next (four L2 round trips): +9 %
#   (that script, session47-call4.sh, is in git history up to 2a79b83). Call 7: the reader issues
#   every copy's loads first (rmsnorm.cuh), and the copies are 1, 2 or 4. Gate: pk-tiny's decode-step logits, CUDA with 4 copies against CUDA with
#   1: the same bits, at 132 workers, unsplit and split 3; and against the CPU (tolerance).
#   needs docs/experiments/session47-acc-copies.patch applied (git apply; not in the tree: dropped, see README.md)
#   here:   bash docs/experiments/session47-call7.sh --precompile   (build/pk; -> .dev/gpu-s47c7.tar.xz)
#   device: bash docs/experiments/session47-call7.sh
#           carry ["build/pk", ".dev/gpu-s47c7.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s47c7
  pk_exp_models --zeros 0.6b
  z=/tmp/z-qwen3-0.6b
  ( for c in 4 1; do PK_MLP_ACC_COPIES=$c pk_exp_bench $z 160 "" --gen 4; PK_MLP_ACC_COPIES=$c pk_exp_bench $z 4096 "" --gen 4; done
    ) 2>&1 | grep -v "no CUDA GPU" &
  ( PK_MLP_ACC_COPIES=2 pk_exp_bench $z 160 "" --gen 4
    for c in 4 1; do for s in 0 3; do PK_MLP_ACC_COPIES=$c pk_exp_tiny 132 $s ""; done; done
    ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s47c7
  exit
fi
pk_unpack_cache s47c7 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /tmp/gate
for t in 132; do for s in 0 3; do
  pk_tiny_logits_check build/pk $t /tmp/gate $s # 4 copies (the default) against the CPU
  PK_MLP_ACC_COPIES=1 timeout 300 build/pk generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 \
    --kv-splits $s --logits /tmp/gate/one_$s.bin --backend cuda --threads $t >/dev/null 2>&1
  cmp -s /tmp/gate/tf_${s}_cuda.bin /tmp/gate/one_$s.bin && echo "workers $t split $s: 4 copies = 1 copy, bit for bit" ||
    echo "workers $t split $s: 4 copies and 1 copy DIFFER"
done; done
pk_exp_models 0.6b
z=/tmp/qwen3-0.6b
for r in 1 2 3; do
  pk_bench_round "round $r qwen3-0.6b @160 4 copies" pk_exp_bench $z 160 "" --gen 128
  PK_MLP_ACC_COPIES=1 pk_bench_round "round $r qwen3-0.6b @160 1 copy" pk_exp_bench $z 160 "" --gen 128
  PK_MLP_ACC_COPIES=2 pk_bench_round "round $r qwen3-0.6b @160 2 copies" pk_exp_bench $z 160 "" --gen 128
done
echo "== trace qwen3-0.6b @160, 4 copies, then 1"
pk_exp_bench $z 160 "" --gen 128 --trace /tmp/t4.json >/dev/null 2>&1
pk_trace_report /tmp/t4.json
PK_MLP_ACC_COPIES=1 pk_exp_bench $z 160 "" --gen 128 --trace /tmp/t1.json >/dev/null 2>&1
pk_trace_report /tmp/t1.json
for r in 1 2; do
  pk_bench_round "round $r qwen3-0.6b @4096 4 copies" pk_exp_bench $z 4096 "" --gen 128
  PK_MLP_ACC_COPIES=1 pk_bench_round "round $r qwen3-0.6b @4096 1 copy" pk_exp_bench $z 4096 "" --gen 128
done
