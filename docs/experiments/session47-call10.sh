#!/usr/bin/env bash
# session 47, call 10: the staged GEMV's qkv tile (the 0.6B's 32 rows of K 1024) with 4 rows per
# warp instead of 6 (two of them zeros) and 4 chunks ahead (the whole lane's loop: gemv_fast's
# form) — -DPK_LIN_SF_R4=1, -DPK_LIN_SF_U=4, both, against the default. PERF.md "What is open",
# item 2: the qkv's sums take 1.21 us where the model's gemv_fast took 0.71; session 28 measured
# R4 and U4 no faster, before sessions 29-46 changed what runs around them. Prediction: -0 to
# -1.5 % (up to ~0.5 us of 28 qkv tasks' chain). The sums' order per row does not depend on R or
# U, so the gate is bit-equality: pk-tiny's and the random Qwen3-0.6B's CUDA decode-step logits
# (160 one-row steps, --max-tokens 128 so that max_seq is the bench's 288) with each define against
# the default's (and pk-tiny's default against the CPU).
#   here:   bash docs/experiments/session47-call10.sh --precompile   (build/pk; -> .dev/gpu-s47c10.tar.xz)
#   device: bash docs/experiments/session47-call10.sh
#           carry ["build/pk", ".dev/gpu-s47c10.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
V=("" "-DPK_LIN_SF_R4=1" "-DPK_LIN_SF_U=4" "-DPK_LIN_SF_R4=1 -DPK_LIN_SF_U=4")
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s47c10
  pk_exp_models --zeros 0.6b
  ( for d in "${V[@]}"; do pk_exp_bench /tmp/z-qwen3-0.6b 160 "$d" --gen 4; done ) 2>&1 | grep -v "no CUDA GPU" &
  ( for d in "${V[@]}"; do pk_exp_tiny 132 0 "$d"; done ) 2>&1 | grep -v "no CUDA GPU" &
  ids=$(python3 -c "print(','.join(str(7 + 37 * i) for i in range(160)))")
  ( for d in "${V[@]}"; do PK_NVCC_DEFINES="$d" build/pk generate --model /tmp/z-qwen3-0.6b --prompt-ids "$ids" \
      --max-tokens 128 --step-tokens 1 --logits /dev/null --backend cuda --threads 132; done ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s47c10
  exit
fi
pk_unpack_cache s47c10 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /tmp/gate
pk_tiny_logits_check build/pk 132 /tmp/gate 0
for d in "${V[@]:1}"; do
  PK_NVCC_DEFINES="$d" timeout 300 build/pk generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 \
    --kv-splits 0 --logits /tmp/gate/v.bin --backend cuda --threads 132 >/dev/null 2>&1
  cmp -s /tmp/gate/tf_0_cuda.bin /tmp/gate/v.bin && echo "'$d': pk-tiny logits = the default's, bit for bit" ||
    echo "'$d': pk-tiny logits DIFFER from the default's"
done
pk_exp_models 0.6b
ids=$(python3 -c "print(','.join(str(7 + 37 * i) for i in range(160)))")
for d in "${V[@]}"; do # the 0.6B's 160 one-row steps' logits (the decode path), each define against the default
  PK_NVCC_DEFINES="$d" timeout 300 build/pk generate --model /tmp/qwen3-0.6b --prompt-ids "$ids" --max-tokens 128 \
    --step-tokens 1 --logits "/tmp/gate/q$(printf '%s' "$d" | tr -c 'A-Za-z0-9' _).bin" --backend cuda --threads 132 >/dev/null 2>&1 ||
    echo "'$d': qwen3-0.6b generate FAILED"
  [ -z "$d" ] && continue
  cmp -s /tmp/gate/q.bin "/tmp/gate/q$(printf '%s' "$d" | tr -c 'A-Za-z0-9' _).bin" &&
    echo "'$d': qwen3-0.6b decode logits = the default's, bit for bit" || echo "'$d': qwen3-0.6b decode logits DIFFER"
done
for r in 1 2 3; do
  for d in "${V[@]}"; do pk_bench_round "round $r qwen3-0.6b @160 '$d'" pk_exp_bench /tmp/qwen3-0.6b 160 "$d" --gen 128; done
done
