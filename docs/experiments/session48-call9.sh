#!/usr/bin/env bash
# session 48, call 9: the 1.7B's gate_up first stages issued during o_proj's wait on the attention
# (-DPK_LIN_NEXT_EARLY=1, linear.cuh / runtime.cuh's pk_lin_next_early: 64 KB per worker, its rings
# slot-major, o_proj's tile at the top of the area) against the default (the stages issued after
# o_proj's task, warp-major rings). PERF.md "What is open", session 48's sketch: DRAM streams
# ~8 MB more while the attention runs; prediction ≲ 1-2 us a layer (-2 %), less what the attention
# and o_proj's poll lose to the copies in flight. The sums' order does not depend on the rings'
# layout or when the stages go out, so the gate is bit-equality: the random Qwen3-1.7B's 160
# one-row steps' logits (--max-tokens 128: max_seq the bench's 288) with the define against the
# default's. Measured (H100): right — the logits bit-equal — and +6.4 % (1.7335 / 1.7290 against
# 1.6266 / 1.6284 ms/token); dropped, kept as the patch (docs/PERF.md "Session 48").
# The define is the patch's: git apply docs/experiments/session48-lin-next-early.patch (to 1ef5f08's
# source), make build/pk, then:
#   here:   bash docs/experiments/session48-call9.sh --precompile   (build/pk; -> .dev/gpu-s48c9.tar.xz)
#   device: bash docs/experiments/session48-call9.sh
#           carry ["build/pk", ".dev/gpu-s48c9.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
V=("" "-DPK_LIN_NEXT_EARLY=1")
ids=$(python3 -c "print(','.join(str(7 + 37 * i) for i in range(160)))")
q17_logits() { PK_NVCC_DEFINES="$3" timeout 300 build/pk generate --model "$1" --prompt-ids "$ids" --max-tokens 128 \
    --step-tokens 1 --logits "$2" --backend cuda --threads 132; }
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s48c9
  pk_exp_models --zeros 1.7b
  ( for d in "${V[@]}"; do pk_exp_bench /tmp/z-qwen3-1.7b 160 "$d" --gen 4; done ) 2>&1 | grep -v "no CUDA GPU" &
  ( for d in "${V[@]}"; do q17_logits /tmp/z-qwen3-1.7b /dev/null "$d"; done ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s48c9
  exit
fi
pk_unpack_cache s48c9 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /tmp/gate
pk_exp_models 1.7b
q17_logits /tmp/qwen3-1.7b /tmp/gate/d.bin "" >/dev/null 2>&1 || echo "qwen3-1.7b default: generate FAILED"
q17_logits /tmp/qwen3-1.7b /tmp/gate/e.bin "${V[1]}" >/dev/null 2>&1 || echo "qwen3-1.7b '${V[1]}': generate FAILED"
cmp -s /tmp/gate/d.bin /tmp/gate/e.bin && echo "qwen3-1.7b decode logits: '${V[1]}' = the default's, bit for bit" ||
  echo "qwen3-1.7b decode logits: '${V[1]}' DIFFER from the default's"
for r in 1 2; do
  for d in "${V[@]}"; do pk_bench_round "round $r qwen3-1.7b @160 '$d'" pk_exp_bench /tmp/qwen3-1.7b 160 "$d" --gen 128; done
done
