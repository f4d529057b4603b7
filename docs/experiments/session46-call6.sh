#!/usr/bin/env bash
# session 46, call 6: why the bulk-row stage (-DPK_ATTD_BULK_ROWS=1) gains on the 1.7B and loses on
# the 0.6B. Call 5 (H100, same call): 0.6B @4096 +2.0 %, @160 +1.3 %; 1.7B @4096 -1.8 %. Here:
# default and bulk traces of the 0.6B and the 1.7B at 4096 side by side (one call, one machine),
# then the 1.7B at 160, two interleaved rounds (where would a per-shape rule put it?).
#   here:   bash docs/experiments/session46-call6.sh --precompile   (build/pk; -> .dev/gpu-s46c6.tar.xz;
#           starts from call 5's .gpu/cache-s45c5)
#   device: bash docs/experiments/session46-call6.sh
#           carry ["build/pk", ".dev/gpu-s46c6.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
B1=-DPK_ATTD_BULK_ROWS=1
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s46c6
  [ -d .gpu/cache-s45c5 ] && cp -rn .gpu/cache-s45c5/. "$PK_CACHE_DIR/"
  pk_exp_models --zeros 0.6b 1.7b
  z=/tmp/z-qwen3-1.7b
  ( pk_exp_bench $z 160 "" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  ( pk_exp_bench $z 160 "$B1" --gen 4 ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  for m in /tmp/z-qwen3-0.6b /tmp/z-qwen3-1.7b; do for d in "" "$B1"; do
    pk_exp_bench $m 4096 "$d" --gen 4 2>&1 | grep -v "no CUDA GPU" | grep -i compil; done; done # all cached
  pk_pack_cache s46c6
  exit
fi
pk_unpack_cache s46c6 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
pk_exp_models 0.6b 1.7b
for m in qwen3-0.6b qwen3-1.7b; do for d in "" "$B1"; do
  echo "== trace $m @4096 ${d:-default}"
  pk_exp_bench /tmp/$m 4096 "$d" --gen 128 --trace /tmp/t.json 2>&1 | grep -E "^(decode|floor|copy)"
  pk_trace_report /tmp/t.json
  python3 bench/trace_attention.py /tmp/t.json --groups 2>&1 | tail -12
done; done
for r in 1 2; do
  pk_bench_round "round $r qwen3-1.7b @160 default" pk_exp_bench /tmp/qwen3-1.7b 160 "" --gen 128
  pk_bench_round "round $r qwen3-1.7b @160 $B1" pk_exp_bench /tmp/qwen3-1.7b 160 "$B1" --gen 128
done
