#!/usr/bin/env bash
# session 48, call 6: the LM head and the argmax as one layer by default where the MLP's tiles stage
# whole and the attention is unsplit (model.c's lm_argmax_auto: the Qwen3-0.6B at short contexts,
# pk-tiny) against the two layers as before (PK_LM_HEAD_ARGMAX=0). Measured before, opt-in: the
# 0.6B at 160 -0.4 % on the H200 (session 39), -0.6 to -1.0 % and -0.9 % on H100s (41, 44); at
# 4096 +0.5 % (the rule leaves split attention with two layers). Prediction: -0.4 to -1 %.
# Gate: pk-tiny's CUDA decode-step logits against the CPU, unsplit at 132 and 8 workers (now the
# one layer) and split 3 (two layers); the 0.6B's 160 one-row steps' logits with one layer equal
# to two layers' bit for bit (the LM head's tiles are the same; only where the argmax runs moves).
#   here:   bash docs/experiments/session48-call6.sh --precompile   (build/pk; -> .dev/gpu-s48c6.tar.xz)
#   device: bash docs/experiments/session48-call6.sh
#           carry ["build/pk", ".dev/gpu-s48c6.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
ids=$(python3 -c "print(','.join(str(7 + 37 * i) for i in range(160)))")
# the 0.6B's decode logits: 160 one-row steps, --max-tokens 128 so that max_seq is the bench's 288
q06_logits() { timeout 300 build/pk generate --model "$1" --prompt-ids "$ids" --max-tokens 128 --step-tokens 1 --logits "$2" \
    --backend cuda --threads 132; }
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s48c6
  pk_exp_models --zeros 0.6b
  ( pk_exp_bench /tmp/z-qwen3-0.6b 160 "" --gen 4; PK_LM_HEAD_ARGMAX=0 pk_exp_bench /tmp/z-qwen3-0.6b 160 "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  ( pk_exp_tiny 132 0 ""; pk_exp_tiny 8 0 ""; pk_exp_tiny 132 3 "" ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  ( q06_logits /tmp/z-qwen3-0.6b /dev/null; PK_LM_HEAD_ARGMAX=0 q06_logits /tmp/z-qwen3-0.6b /dev/null ) 2>&1 | grep -v "no CUDA GPU"
  pk_pack_cache s48c6
  exit
fi
pk_unpack_cache s48c6 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /tmp/gate
pk_tiny_logits_check build/pk 132 /tmp/gate 0
pk_tiny_logits_check build/pk 8 /tmp/gate 0
pk_tiny_logits_check build/pk 132 /tmp/gate 3
pk_exp_models 0.6b
q06_logits /tmp/qwen3-0.6b /tmp/gate/one.bin >/dev/null 2>&1 || echo "qwen3-0.6b one layer: generate FAILED"
PK_LM_HEAD_ARGMAX=0 q06_logits /tmp/qwen3-0.6b /tmp/gate/two.bin >/dev/null 2>&1 || echo "qwen3-0.6b two layers: generate FAILED"
cmp -s /tmp/gate/one.bin /tmp/gate/two.bin && echo "qwen3-0.6b decode logits: one layer = two layers, bit for bit" ||
  echo "qwen3-0.6b decode logits: one layer and two layers DIFFER"
for r in 1 2 3; do
  pk_bench_round "round $r qwen3-0.6b @160 one layer (default)" pk_exp_bench /tmp/qwen3-0.6b 160 "" --gen 128
  PK_LM_HEAD_ARGMAX=0 pk_bench_round "round $r qwen3-0.6b @160 two layers" pk_exp_bench /tmp/qwen3-0.6b 160 "" --gen 128
done
