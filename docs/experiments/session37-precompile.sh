#!/usr/bin/env bash
# session 37: precompile (sm_90a, this machine) every kernel the next session's gate and A/B calls
# load: the LM head's argmax as one layer (PK_LM_HEAD_ARGMAX=1), session 36's pace 64 on the 1.7B
# (-DPK_LIN_PACE_KB=64, what its codegen patch emits), and the defaults they are compared with
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root (run it from a built tree: make)
. scripts/gpu_env.sh
pk_gpu_paths
export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache
mkdir -p .gpu/cache && chmod 700 .gpu/cache
for m in 0.6b 1.7b 8b; do # zero weights: only the shapes matter to the kernels
  [ -d /tmp/z-qwen3-$m ] || python3 bench/shape_model.py qwen3-$m /tmp/z-qwen3-$m --zeros >/dev/null
done
bench() { # model defines lm_argmax
  PK_LM_HEAD_ARGMAX=$3 PK_NVCC_DEFINES="$2" build/pk bench --model /tmp/z-qwen3-$1 --backend cuda --threads 132 --context 160 --max-seq 288 --gen 4 2>&1 | grep -v "no CUDA GPU" | tail -1
  echo "done bench $1 '$2' lm=$3"
}
gate() { # lm_argmax: pk-tiny's decode-step logits, unsplit and split 3, 132 workers
  for s in 0 3; do PK_LM_HEAD_ARGMAX=$1 build/pk generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 --kv-splits $s --logits /dev/null --backend cuda --threads 132 2>&1 | grep -v "no CUDA GPU" | tail -1; done
  echo "done gate lm=$1"
}
( bench 0.6b "" 0; bench 0.6b "" 1; gate 0; gate 1; bench 8b "" 0; bench 8b "" 1
  build/tests/gpu/test_cuda_e2e --precompile 2>&1 | tail -2 ) > /tmp/s37preA.log 2>&1 &
( bench 1.7b "" 0; bench 1.7b "-DPK_LIN_PACE_KB=64" 0; bench 1.7b "-DPK_LIN_PACE_KB=64" 1; bench 1.7b "" 1
  PK_LM_HEAD_ARGMAX=1 build/tests/gpu/test_cuda_e2e --precompile-big qwen3-0.6b 132 2>&1 | tail -2
  PK_NVCC_DEFINES=-DPK_LIN_PACE_KB=64 build/tests/gpu/test_cuda_e2e --precompile-big qwen3-1.7b 132 2>&1 | tail -2
  PK_LM_HEAD_ARGMAX=1 build/tests/gpu/test_cuda_e2e --precompile-big qwen3-8b 132 2>&1 | tail -2 ) > /tmp/s37preB.log 2>&1 &
wait
echo ALL DONE
