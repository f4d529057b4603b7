#!/usr/bin/env bash
# session 42, call 1: where the long-context (4096) step's time goes. At 4096 the attention is split
# 16 ways (128 partial tasks, the group's last task folds) and the 0.6B's step is 0.45 ms longer
# than at 160 for 0.1 ms more bytes (session 41's table). Traces of the 0.6B and the 1.7B at 4096
# (trace_summary, trace_attention --groups, trace_lag), two rounds each, and the 0.6B with the
# attention's early stage off (PK_ATT_EARLY=0: what staging the split's KV during the qkv tile buys),
# and the next layer's KV rows fetched into L2 by each staged split task (PK_ATT_KV_PREFETCH=1,
# attention_decode.cuh pk_attd_prefetch_next: now only in session42-kv-prefetch.patch, apply it to
# rerun this), gated first (pk-tiny's logits at split 3).
#   here:   bash docs/experiments/session42-call1.sh --precompile   (build/pk; -> .dev/gpu-s42c1.tar.xz)
#   device: bash docs/experiments/session42-call1.sh
#           carry ["build/pk", ".dev/gpu-s42c1.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
NOEARLY=-DPK_ATT_EARLY=0 PF=-DPK_ATT_KV_PREFETCH=1
bench() { PK_NVCC_DEFINES="$2" build/pk bench --model $1 --backend cuda --threads 132 --context 4096 --max-seq 4224 "${@:3}"; }
if [ "${1:-}" = "--precompile" ]; then
  export PK_CUDA_ARCH=sm_90a PK_CACHE_DIR=$PWD/.gpu/cache-s42c1
  mkdir -p "$PK_CACHE_DIR" && chmod 700 "$PK_CACHE_DIR"
  for m in 0.6b 1.7b; do [ -d /tmp/z-qwen3-$m ] || python3 bench/shape_model.py qwen3-$m /tmp/z-qwen3-$m --zeros >/dev/null; done
  tiny() { PK_NVCC_DEFINES=$1 build/pk generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 --kv-splits 3 --logits /dev/null --backend cuda --threads 132 2>&1 | tail -1; }
  ( for d in "" $NOEARLY $PF; do bench /tmp/z-qwen3-0.6b "$d" --gen 4 2>&1 | grep -v "no CUDA GPU"; done ) &
  ( for d in "" $PF; do bench /tmp/z-qwen3-1.7b "$d" --gen 4 2>&1 | grep -v "no CUDA GPU"; done; tiny $PF ) &
  wait
  pk_pack_cache s42c1
  exit
fi
pk_unpack_cache s42c1 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for m in qwen3-0.6b qwen3-1.7b; do [ -d /tmp/$m ] || python3 bench/shape_model.py $m /tmp/$m >/dev/null; done
mkdir -p /tmp/gate
echo "== gate pk-tiny split 3, $PF"
PK_NVCC_DEFINES=$PF pk_tiny_logits_check build/pk 132 /tmp/gate 3
for r in 1 2; do
  pk_bench_round "round $r qwen3-0.6b @4096 default" bench /tmp/qwen3-0.6b "" --gen 128
  pk_bench_round "round $r qwen3-0.6b @4096 att-early-off" bench /tmp/qwen3-0.6b "$NOEARLY" --gen 128
  pk_bench_round "round $r qwen3-0.6b @4096 kv-prefetch" bench /tmp/qwen3-0.6b "$PF" --gen 128
  pk_bench_round "round $r qwen3-1.7b @4096 default" bench /tmp/qwen3-1.7b "" --gen 128
  pk_bench_round "round $r qwen3-1.7b @4096 kv-prefetch" bench /tmp/qwen3-1.7b "$PF" --gen 128
done
for m in qwen3-0.6b qwen3-1.7b; do for d in "" "$PF"; do
  echo "== trace $m @4096, defines '$d'"
  bench /tmp/$m "$d" --gen 128 --trace /tmp/t4k.json >/dev/null 2>&1
  python3 bench/trace_summary.py /tmp/t4k.json --steps 16 2>&1
  python3 bench/trace_attention.py /tmp/t4k.json --steps 4 --groups 2>&1 | tail -30
  python3 bench/trace_lag.py /tmp/t4k.json 2>&1 | head -16
done; done
