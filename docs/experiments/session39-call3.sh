#!/usr/bin/env bash
# session 39's third call: session 36's pace 64 as the 1.7B's codegen default (the rule in
# codegen.c, gated by test_cuda_e2e --big), the LM head's argmax as one layer once more on the 0.6B
# and on the 1.7B with that pace, and the 0.6B's attention split 2 and 4 ways at context 160
# (pk bench --kv-splits: 16 / 32 attention tasks and the fold, against 8 unsplit).
#   here:   bash docs/experiments/session39-call3.sh --precompile   (sm_90a kernels into .gpu/cache)
#           bash docs/experiments/session37-pack.sh s39call3         (-> .dev/gpu-s39call3.tar.xz)
#   device: bash docs/experiments/session39-call3.sh
#           carry ["build/pk","build/tests/gpu/test_cuda_e2e",".dev/gpu-s39call3.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
if [ "${1:-}" = "--precompile" ]; then
  export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache
  mkdir -p .gpu/cache && chmod 700 .gpu/cache
  for m in 0.6b 1.7b; do [ -d /tmp/z-qwen3-$m ] || python3 bench/shape_model.py qwen3-$m /tmp/z-qwen3-$m --zeros >/dev/null; done
  pre() { build/pk bench --model /tmp/z-qwen3-$1 --backend cuda --threads 132 --context 160 --max-seq 288 --gen 4 "${@:2}" 2>&1 | tail -1; }
  ( PK_LM_HEAD_ARGMAX=0 pre 1.7b; PK_LM_HEAD_ARGMAX=1 pre 1.7b; PK_LM_HEAD_ARGMAX=0 pre 0.6b --kv-splits 2 ) > /tmp/s39preA.log 2>&1 &
  ( build/tests/gpu/test_cuda_e2e --precompile-big qwen3-1.7b 132 2>&1 | tail -2
    PK_LM_HEAD_ARGMAX=0 pre 0.6b --kv-splits 4 ) > /tmp/s39preB.log 2>&1 &
  wait
  echo "precompiled (logs /tmp/s39preA.log /tmp/s39preB.log)"
  exit 0
fi
mkdir -p .gpu && tar -xJf .dev/gpu-s39call3.tar.xz || { echo "unpack failed"; exit 1; }
pk_gpu_paths # again: .gpu/lib (libcjson, libpcre2) exists only now
chmod 700 .gpu/cache
export PK_CACHE_DIR=$PWD/.gpu/cache
pk_nvcc_cached /tmp/nvcc-standin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for m in qwen3-0.6b qwen3-1.7b; do python3 bench/shape_model.py $m /tmp/$m >/dev/null & done
echo "== big 1.7b, the default (pace 64 by the codegen rule)"
timeout 150 build/tests/gpu/test_cuda_e2e --big qwen3-1.7b 132 2>&1 | tail -4
wait
run() { # label model lm_argmax [pk bench options]
  PK_LM_HEAD_ARGMAX=$3 pk_bench_round "round $r $2 $1" build/pk bench --model /tmp/$2 --backend cuda --threads 132 --context 160 --max-seq 288 --gen 128 "${@:4}"
}
for r in 1 2 3; do
  run default qwen3-0.6b 0; run lm-argmax qwen3-0.6b 1
  run kv-splits-2 qwen3-0.6b 0 --kv-splits 2; run kv-splits-4 qwen3-0.6b 0 --kv-splits 4
  run default qwen3-1.7b 0; run lm-argmax qwen3-1.7b 1
done
echo "== traces 0.6b: unsplit and split 2 (the attention's and o_proj's end+)"
for s in 1 2; do
  build/pk bench --model /tmp/qwen3-0.6b --backend cuda --threads 132 --context 160 --max-seq 288 --gen 128 --kv-splits $s --trace /tmp/ts$s.json >/dev/null 2>&1
  python3 bench/trace_summary.py /tmp/ts$s.json --steps 16 --end 70 2>&1 | grep -i "attention\|attn\|combine\|fold\|qkv\|step"
done
echo "== transformers (bench/hf_baseline.py)"
timeout 120 python3 bench/hf_baseline.py qwen3-0.6b qwen3-1.7b 2>&1 | grep -v Warning | tail -4
