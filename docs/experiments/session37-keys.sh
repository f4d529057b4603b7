#!/usr/bin/env bash
# session 37: the cache keys (kernel directories) a list of commands loads, found by running each
# against an empty probe cache with a stand-in nvcc (pk writes <key>/kernel.cu, the stand-in fails).
# Usage: bash docs/experiments/session37-keys.sh CALL  ->  prints the keys, one per line
# (CALL: call1, call2, table, or s39call3: session 39's third call)
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
export PK_CUDA_ARCH=sm_90a
pk_nvcc_cached /tmp/nvcc-standin-keys
P=$(mktemp -d /tmp/pk-keyprobe-XXXXXX); chmod 700 "$P"; export PK_CACHE_DIR=$P
q() { "$@" >/dev/null 2>&1; }
bench() { PK_LM_HEAD_ARGMAX=$3 PK_NVCC_DEFINES="$2" q build/pk bench --model /tmp/z-qwen3-$1 --backend cuda --threads 132 --context ${4:-160} --max-seq ${5:-288} --gen 128; }
tiny() { PK_LM_HEAD_ARGMAX=$1 q build/pk generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 --kv-splits $2 --logits /dev/null --backend cuda --threads $3; }
case $1 in
call1)
  for lm in 0 1; do for s in 0 3; do tiny $lm $s 132; done; done
  q build/tests/gpu/test_cuda_e2e --precompile
  PK_LM_HEAD_ARGMAX=1 q build/tests/gpu/test_cuda_e2e --precompile-big qwen3-0.6b 132
  PK_NVCC_DEFINES=-DPK_LIN_PACE_KB=64 q build/tests/gpu/test_cuda_e2e --precompile-big qwen3-1.7b 132
  bench 0.6b "" 0; bench 0.6b "" 1 ;;
call2)
  bench 1.7b "" 0; bench 1.7b "-DPK_LIN_PACE_KB=64" 0; bench 1.7b "-DPK_LIN_PACE_KB=64" 1; bench 1.7b "" 1
  bench 8b "" 0; bench 8b "" 1 ;;
s39call3) # docs/experiments/session39-call3.sh
  q build/tests/gpu/test_cuda_e2e --precompile-big qwen3-1.7b 132
  bench 0.6b "" 0; bench 0.6b "" 1; bench 1.7b "" 0; bench 1.7b "" 1
  for s in 2 4; do PK_LM_HEAD_ARGMAX=0 q build/pk bench --model /tmp/z-qwen3-0.6b --backend cuda --threads 132 --context 160 --max-seq 288 --gen 128 --kv-splits $s; done ;;
table)
  q build/tests/gpu/test_cuda_e2e --precompile   # --quick's W4 kernels are among these
  for s in 0 3; do tiny 0 $s 132; tiny 0 $s 8; done
  q build/pk generate --prompt "The persistent kernel" --max-tokens 24 --print-ids --backend cuda --threads 132
  q build/pk generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 12 --kv-splits 3 --print-ids --backend cuda --threads 132
  for m in 0.6b 1.7b 8b; do bench $m "" 0 160 288; bench $m "" 0 4096 4224; done ;;
esac
ls "$P"
rm -rf "$P"
