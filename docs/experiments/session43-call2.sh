#!/usr/bin/env bash
# session 43, call 2 (prepared, not run: no H200 was lent after call 1): the LM head and the argmax
# as one layer on the 0.6B (PK_LM_HEAD_ARGMAX=1; session 39 on the H200 -0.4 %, session 41 on an
# H100 -0.6 to -1.0 %), three interleaved rounds against the default (two layers) at 160 and 4096;
# two define-only knobs never tuned at 4096 (the fused MLP's pace, PK_MLP_PACE_KB 64 against 32, on
# the 0.6B; the streamed GEMVs' pre-wait pace, PK_LIN_PACE_KB 48 against codegen's 64, on the
# 1.7B); then traces of the 0.6B and 1.7B at 4096 on d34a8dc's device code (session 42's were on an
# H100, before it). If the one layer wins again: apply docs/experiments/session43-lm-argmax-rule.patch
# (model.c's lm_argmax_auto: the default where the MLP is one layer), rebuild, precompile the table
# and run it with its gate (pk-tiny then takes the one-layer argmax on the GPU too).
#   here:   bash docs/experiments/session43-call2.sh --precompile   (build/pk; -> .dev/gpu-s43c2.tar.xz)
#   device: bash docs/experiments/session43-call2.sh
#           carry ["build/pk", ".dev/gpu-s43c2.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
MLP64=-DPK_MLP_PACE_KB=64 LIN48=-DPK_LIN_PACE_KB=48
# bench MODEL CONTEXT DEFINES LM_ARGMAX(""|1) ARGS...
bench() {
  local m=$1 c=$2 d=$3 a=$4
  shift 4
  if [ -n "$a" ]; then export PK_LM_HEAD_ARGMAX=$a; else unset PK_LM_HEAD_ARGMAX; fi
  PK_NVCC_DEFINES="$d" build/pk bench --model "$m" --backend cuda --threads 132 --context "$c" --max-seq $((c + 128)) "$@"
}
if [ "${1:-}" = "--precompile" ]; then
  export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache-s43c2
  mkdir -p "$PK_CACHE_DIR" && chmod 700 "$PK_CACHE_DIR"
  for m in 0.6b 1.7b; do [ -d /tmp/z-qwen3-$m ] || python3 bench/shape_model.py qwen3-$m /tmp/z-qwen3-$m --zeros >/dev/null; done
  z=/tmp/z-qwen3-0.6b
  ( bench $z 160 "" "" --gen 4; bench $z 160 "" 1 --gen 4; bench $z 4096 "" "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  ( bench $z 4096 "" 1 --gen 4; bench $z 4096 "$MLP64" "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  ( bench /tmp/z-qwen3-1.7b 4096 "" "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  ( bench /tmp/z-qwen3-1.7b 4096 "$LIN48" "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s43c2
  exit
fi
pk_unpack_cache s43c2 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for m in qwen3-0.6b qwen3-1.7b; do [ -d /tmp/$m ] || python3 bench/shape_model.py $m /tmp/$m >/dev/null; done
z=/tmp/qwen3-0.6b
for r in 1 2 3; do
  pk_bench_round "round $r qwen3-0.6b @160 default (two-layer argmax)" bench $z 160 "" "" --gen 128
  pk_bench_round "round $r qwen3-0.6b @160 one-layer argmax (PK_LM_HEAD_ARGMAX=1)" bench $z 160 "" 1 --gen 128
done
for r in 1 2 3; do
  pk_bench_round "round $r qwen3-0.6b @4096 default (two-layer argmax)" bench $z 4096 "" "" --gen 128
  pk_bench_round "round $r qwen3-0.6b @4096 one-layer argmax (PK_LM_HEAD_ARGMAX=1)" bench $z 4096 "" 1 --gen 128
  pk_bench_round "round $r qwen3-0.6b @4096 $MLP64" bench $z 4096 "$MLP64" "" --gen 128
done
for r in 1 2; do
  pk_bench_round "round $r qwen3-1.7b @4096 default (pace 64)" bench /tmp/qwen3-1.7b 4096 "" "" --gen 128
  pk_bench_round "round $r qwen3-1.7b @4096 $LIN48" bench /tmp/qwen3-1.7b 4096 "$LIN48" "" --gen 128
done
for m in qwen3-0.6b qwen3-1.7b; do
  echo "== trace $m @4096 (default)"
  bench /tmp/$m 4096 "" "" --gen 128 --trace /tmp/t4k.json >/dev/null 2>&1
  python3 bench/trace_summary.py /tmp/t4k.json --steps 16 2>&1 | grep -v "^task "
  python3 bench/trace_lag.py /tmp/t4k.json 2>&1 | head -16
done
