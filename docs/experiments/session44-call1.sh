#!/usr/bin/env bash
# session 44, call 1: session 43's call 2 (never lent an H200), trimmed to fit one call with what
# is left of the device budget, plus the gate the one-layer LM head argmax needs to become the
# 0.6B's default: pk-tiny's decode-step logits against the CPU with PK_LM_HEAD_ARGMAX=1, unsplit
# and split 3, one worker per SM. Then: the 0.6B with PK_LM_HEAD_ARGMAX=1 against the default
# (two layers), three interleaved rounds at 160 and two at 4096; -DPK_MLP_PACE_KB=64 on the 0.6B
# and -DPK_LIN_PACE_KB=48 on the 1.7B at 4096 (both paces were tuned at 160 only), two rounds;
# traces of the 0.6B and 1.7B at 4096 on d34a8dc's device code.
#   here:   bash docs/experiments/session44-call1.sh --precompile   (build/pk; -> .dev/gpu-s44c1.tar.xz)
#   device: bash docs/experiments/session44-call1.sh
#           carry ["build/pk", ".dev/gpu-s44c1.tar.xz"]
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
  export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache-s44c1
  mkdir -p "$PK_CACHE_DIR" && chmod 700 "$PK_CACHE_DIR"
  for m in 0.6b 1.7b; do [ -d /tmp/z-qwen3-$m ] || python3 bench/shape_model.py qwen3-$m /tmp/z-qwen3-$m --zeros >/dev/null; done
  z=/tmp/z-qwen3-0.6b
  ( bench $z 160 "" "" --gen 4; bench $z 160 "" 1 --gen 4; bench $z 4096 "" "" --gen 4
    for s in 0 3; do
      PK_LM_HEAD_ARGMAX=1 build/pk generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 \
          --kv-splits $s --logits /dev/null --backend cuda --threads 132
    done ) 2>&1 | grep -v "no CUDA GPU" &
  ( bench $z 4096 "" 1 --gen 4; bench $z 4096 "$MLP64" "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  ( bench /tmp/z-qwen3-1.7b 4096 "" "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  ( bench /tmp/z-qwen3-1.7b 4096 "$LIN48" "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s44c1
  exit
fi
pk_unpack_cache s44c1 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /tmp/gate
for s in 0 3; do PK_LM_HEAD_ARGMAX=1 pk_tiny_logits_check build/pk 132 /tmp/gate $s; done
for m in qwen3-0.6b qwen3-1.7b; do [ -d /tmp/$m ] || python3 bench/shape_model.py $m /tmp/$m >/dev/null; done
z=/tmp/qwen3-0.6b
for r in 1 2 3; do
  pk_bench_round "round $r qwen3-0.6b @160 default (two-layer argmax)" bench $z 160 "" "" --gen 128
  pk_bench_round "round $r qwen3-0.6b @160 one-layer argmax (PK_LM_HEAD_ARGMAX=1)" bench $z 160 "" 1 --gen 128
done
for r in 1 2; do
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
  pk_trace_report /tmp/t4k.json
done
