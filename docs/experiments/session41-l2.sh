#!/usr/bin/env bash
# session 41: the L2 prefetch of a worker's next tiles while the attention runs
# (-DPK_DEEP_PREFETCH_BYTES, runtime.cuh pk_prefetch_ahead: before an o_proj task's wait, thread 0
# issues cp.async.bulk.prefetch.L2 of the tiles of the worker's next tasks — the fused MLP's, the
# next qkv's — up to the budget), last measured in session 5 on a 1.5 ms 0.6B (slower then). Why
# again: the DRAM is idle while 8 SMs run the attention, and a qkv task's poll returns ~1.1 us late
# behind its own tile's copies in flight (PERF.md "Session 36"); from L2 those copies land sooner.
# Three interleaved rounds on the 0.6B and the 1.7B against the default, and one trace each.
#   here:   bash docs/experiments/session41-l2.sh --precompile   (build/pk; -> .dev/gpu-l2.tar.xz)
#   device: bash docs/experiments/session41-l2.sh
#           carry ["build/pk", ".dev/gpu-l2.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
D256=-DPK_DEEP_PREFETCH_BYTES=262144u D128=-DPK_DEEP_PREFETCH_BYTES=131072u
bench() { PK_NVCC_DEFINES="$2" build/pk bench --model $1 --backend cuda --threads 132 --context 160 --max-seq 288 "${@:3}"; }
if [ "${1:-}" = "--precompile" ]; then
  export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache-l2
  mkdir -p "$PK_CACHE_DIR" && chmod 700 "$PK_CACHE_DIR"
  for m in 0.6b 1.7b; do [ -d /tmp/z-qwen3-$m ] || python3 bench/shape_model.py qwen3-$m /tmp/z-qwen3-$m --zeros >/dev/null; done
  ( for d in "" $D256 $D128; do bench /tmp/z-qwen3-0.6b "$d" --gen 4 2>&1 | grep -v "no CUDA GPU"; done ) &
  ( for d in "" $D256; do bench /tmp/z-qwen3-1.7b "$d" --gen 4 2>&1 | grep -v "no CUDA GPU"; done ) &
  wait
  pk_pack_cache l2
  exit
fi
pk_unpack_cache l2 || exit 1
for m in qwen3-0.6b qwen3-1.7b; do [ -d /tmp/$m ] || python3 bench/shape_model.py $m /tmp/$m >/dev/null; done
echo "== gate: pk-tiny is not needed (a prefetch into L2 changes no value); --big runs in call 3's script"
for r in 1 2 3; do
  pk_bench_round "round $r qwen3-0.6b default" bench /tmp/qwen3-0.6b "" --gen 128
  pk_bench_round "round $r qwen3-0.6b deep-l2-256k" bench /tmp/qwen3-0.6b "$D256" --gen 128
  pk_bench_round "round $r qwen3-0.6b deep-l2-128k" bench /tmp/qwen3-0.6b "$D128" --gen 128
  pk_bench_round "round $r qwen3-1.7b default" bench /tmp/qwen3-1.7b "" --gen 128
  pk_bench_round "round $r qwen3-1.7b deep-l2-256k" bench /tmp/qwen3-1.7b "$D256" --gen 128
done
echo "== traces 0.6b (default, 256 KB)"
for d in "" "$D256"; do
  echo "-- defines '$d'"
  bench /tmp/qwen3-0.6b "$d" --gen 128 --trace /tmp/tl2.json >/dev/null 2>&1
  python3 bench/trace_summary.py /tmp/tl2.json --steps 16 --end 70 2>&1 | grep -i "layer kind\|qkv\|swiglu\|attn\|total\|step"
  python3 bench/trace_lag.py /tmp/tl2.json 2>&1 | head -12
done
