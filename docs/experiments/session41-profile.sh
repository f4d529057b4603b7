#!/usr/bin/env bash
# session 41: where a staged GEMV task's time goes after its event (linear.cuh's PK_LIN_PROFILE
# stamps in pk_lin_rows_staged1: the wait's barrier and the call, x and the norm weights read with
# the sum of squares, xs built, the sums and stores, the last barrier), on the 0.6B and the 1.7B;
# the qkv's 3.1 us `dur` is what session 41's call 1 left unexplained (docs/PERF.md "Session 41").
# The profiled kernels come from build-prof (make BUILD=build-prof: this tree, whatever build/ is).
#   here:   make BUILD=build-prof -j2 && bash docs/experiments/session41-profile.sh --precompile
#   device: bash docs/experiments/session41-profile.sh
#           carry ["build-prof/pk", ".dev/gpu-prof.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
PK=build-prof/pk
bench() { PK_NVCC_DEFINES=-DPK_LIN_PROFILE $PK bench --model $1 --backend cuda --threads 132 --context 160 --max-seq 288 "${@:2}"; }
if [ "${1:-}" = "--precompile" ]; then
  export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache-prof
  mkdir -p "$PK_CACHE_DIR" && chmod 700 "$PK_CACHE_DIR"
  for m in 0.6b 1.7b; do
    [ -d /tmp/z-qwen3-$m ] || python3 bench/shape_model.py qwen3-$m /tmp/z-qwen3-$m --zeros >/dev/null
    bench /tmp/z-qwen3-$m --gen 4 2>&1 | tail -1
  done
  pk_pack_cache prof
  exit
fi
pk_unpack_cache prof || exit 1
for m in qwen3-0.6b qwen3-1.7b; do
  [ -d /tmp/$m ] || python3 bench/shape_model.py $m /tmp/$m >/dev/null
  echo "== $m, -DPK_LIN_PROFILE (the stamps cost time: these ms/token are not the default's)"
  bench /tmp/$m --gen 128 2>&1 | grep -i "profile\|^decode \|error\|fail"
done
