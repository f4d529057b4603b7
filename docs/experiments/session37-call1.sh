#!/usr/bin/env bash
# session 37's prepared call 1 (run by the next session that is lent a device; kernels precompiled
# by docs/experiments/session37-precompile.sh, packed by .dev/s37pack.sh into .dev/gpu-call1.tar.xz): the gates of the LM head's argmax as one layer
# (PK_LM_HEAD_ARGMAX=1) and of the 1.7B's pace 64 (-DPK_LIN_PACE_KB=64), then the 0.6B A/B and
# transformers. carry: ["build/pk","build/tests/gpu/test_cuda_e2e",".dev/gpu-call1.tar.xz"]
set -u
mkdir -p .gpu && tar -xJf .dev/gpu-call1.tar.xz || { echo "unpack failed"; exit 1; }
chmod 700 .gpu/cache
. scripts/gpu_env.sh
pk_gpu_paths
export PK_CACHE_DIR=$PWD/.gpu/cache
pk_nvcc_cached /tmp/nvcc-standin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for m in qwen3-0.6b qwen3-1.7b; do python3 bench/shape_model.py $m /tmp/$m >/dev/null & done
mkdir -p /tmp/gate
for lm in 0 1; do
  echo "== gate pk-tiny, PK_LM_HEAD_ARGMAX=$lm"
  for s in 0 3; do PK_LM_HEAD_ARGMAX=$lm pk_tiny_logits_check build/pk 132 /tmp/gate $s; done
done
echo "== harness (its split checks include the one-layer LM head argmax)"
timeout 200 build/tests/gpu/test_cuda_e2e 2>&1 | grep -i "fail\|passed\|lm argmax" | tail -12
echo "== big 0.6b, PK_LM_HEAD_ARGMAX=1"
PK_LM_HEAD_ARGMAX=1 timeout 150 build/tests/gpu/test_cuda_e2e --big qwen3-0.6b 132 2>&1 | tail -4
echo "== big 1.7b, -DPK_LIN_PACE_KB=64"
PK_NVCC_DEFINES=-DPK_LIN_PACE_KB=64 timeout 150 build/tests/gpu/test_cuda_e2e --big qwen3-1.7b 132 2>&1 | tail -4
wait
run() { # label model defines lm_argmax
  local out
  out=$(PK_LM_HEAD_ARGMAX=$4 PK_NVCC_DEFINES="$3" build/pk bench --model /tmp/$2 --backend cuda --threads 132 --context 160 --max-seq 288 --gen 128 2>&1)
  echo "round $r $2 $1: $(printf '%s\n' "$out" | awk '/^decode /{print $3 " median, " $6 " mean, p90 " $10}') $(printf '%s\n' "$out" | awk '/^floor /{f=$2} /^copy b\/w/{b=$3} END{print "floor", f, "copy b/w", b, "GB/s"}')"
  printf '%s\n' "$out" | grep -q "^decode " || printf '%s\n' "$out" | tail -3
}
for r in 1 2 3; do run two-layers qwen3-0.6b "" 0; run lm-argmax qwen3-0.6b "" 1; done
echo "== traces 0.6b (the LM head's end+ and the argmax tail)"
for lm in 0 1; do
  PK_LM_HEAD_ARGMAX=$lm build/pk bench --model /tmp/qwen3-0.6b --backend cuda --threads 132 --context 160 --max-seq 288 --gen 128 --trace /tmp/tr$lm.json >/dev/null 2>&1
  python3 bench/trace_summary.py /tmp/tr$lm.json --steps 16 --end 70 2>&1 | grep -i "logits\|argmax\|step\|total"
done
echo "== the attention's task ends (bench/trace_ends.py: what o_proj by KV-head group could overlap)"
python3 bench/trace_ends.py /tmp/tr0.json --steps 16 --kind "attention|h_attn|qkv"
echo "== transformers (bench/hf_baseline.py)"
timeout 120 python3 bench/hf_baseline.py qwen3-0.6b qwen3-1.7b 2>&1 | grep -v Warning | tail -4
