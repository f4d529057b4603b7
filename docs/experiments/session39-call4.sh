#!/usr/bin/env bash
# session 39's fourth call (prepared, not run: the device was paused): session39-qkv-in-mlp.patch,
# the next layer's qkv tile copied by the fused MLP task once its gate / up rows are read
# (-DPK_QKV_IN_MLP=1), gated and timed on the 0.6B against the same binary without the define.
# The patched tree builds into build-exp (make BUILD=build-exp), so build/ stays the main tree's.
#   here:   git apply docs/experiments/session39-qkv-in-mlp.patch && make BUILD=build-exp -j2 &&
#           git checkout src/runtime/cuda/device && make -j2
#           bash docs/experiments/session39-call4.sh --precompile      (-> .dev/gpu-s39call4.tar.xz)
#   device: bash docs/experiments/session39-call4.sh
#           carry ["build-exp/pk","build-exp/tests/gpu/test_cuda_e2e",".dev/gpu-s39call4.tar.xz"]
# What decides: the gate (pk-tiny's logits at splits 0 and 3, --big qwen3-0.6b 18 / 0), then the
# rounds (keep it if the 0.6B is >= 1 % faster in all three) and the traces (the qkv layer's `dur`
# and `skew`, now 3.15 / 2.26 us, against the MLP layer's `end+`). ptxas: the persistent kernel's
# spills 12 / 12 -> 40 / 64 bytes of stores / loads (bench/ptxas_report.sh with PK=build-exp/pk).
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
PK=build-exp/pk E2E=build-exp/tests/gpu/test_cuda_e2e
D=-DPK_QKV_IN_MLP=1
if [ "${1:-}" = "--precompile" ]; then
  export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache-s39call4
  rm -rf "$PK_CACHE_DIR" && mkdir -p "$PK_CACHE_DIR" && chmod 700 "$PK_CACHE_DIR"
  [ -d /tmp/z-qwen3-0.6b ] || python3 bench/shape_model.py qwen3-0.6b /tmp/z-qwen3-0.6b --zeros >/dev/null
  pre() { PK_NVCC_DEFINES="$1" $PK bench --model /tmp/z-qwen3-0.6b --backend cuda --threads 132 --context 160 --max-seq 288 --gen 4 2>&1 | tail -1; }
  tiny() { PK_NVCC_DEFINES=$D $PK generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 --kv-splits $1 --logits /dev/null --backend cuda --threads 132 2>&1 | tail -1; }
  ( pre ""; pre $D; tiny 0 ) > /tmp/s39pre4A.log 2>&1 &
  ( PK_NVCC_DEFINES=$D $E2E --precompile-big qwen3-0.6b 132 2>&1 | tail -2; tiny 3 ) > /tmp/s39pre4B.log 2>&1 &
  wait
  pk_pack_cache s39call4 && echo "(logs /tmp/s39pre4A.log /tmp/s39pre4B.log)"
  exit
fi
pk_unpack_cache s39call4 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
python3 bench/shape_model.py qwen3-0.6b /tmp/qwen3-0.6b >/dev/null &
mkdir -p /tmp/gate
echo "== gate pk-tiny, $D"
for s in 0 3; do PK_NVCC_DEFINES=$D pk_tiny_logits_check $PK 132 /tmp/gate $s; done
echo "== big 0.6b, $D"
PK_NVCC_DEFINES=$D timeout 150 $E2E --big qwen3-0.6b 132 2>&1 | tail -4
wait
run() { # label defines
  PK_NVCC_DEFINES="$2" pk_bench_round "round $r qwen3-0.6b $1" $PK bench --model /tmp/qwen3-0.6b --backend cuda --threads 132 --context 160 --max-seq 288 --gen 128
}
for r in 1 2 3; do run patched-off ""; run qkv-in-mlp "$D"; done
echo "== traces (qkv and the MLP layer: dur, skew, end+)"
for d in "" "$D"; do
  echo "-- defines '$d'"
  PK_NVCC_DEFINES="$d" $PK bench --model /tmp/qwen3-0.6b --backend cuda --threads 132 --context 160 --max-seq 288 --gen 128 --trace /tmp/tq.json >/dev/null 2>&1
  python3 bench/trace_summary.py /tmp/tq.json --steps 16 --end 70 2>&1 | grep -i "layer kind\|qkv\|swiglu\|attn\|total\|step"
done
