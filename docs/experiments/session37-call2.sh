#!/usr/bin/env bash
# session 37's prepared call 2: the 1.7B with pace 64 and / or the LM head's argmax as one layer,
# the 8B with and without the latter, interleaved rounds (kernels: .dev/gpu-call2.tar.xz, packed by
# .dev/s37pack.sh). carry: ["build/pk",".dev/gpu-call2.tar.xz","build/cluster_chain"]
# Session 38 put bench/cluster_chain.cu's `hc` schedule first (build it here: nvcc -O3 -arch=sm_90a
# -o build/cluster_chain bench/cluster_chain.cu; seconds of device time).
set -u
if [ -x build/cluster_chain ]; then
  echo "== cluster_chain: global / fused / mlp / global, hc (1500 ns and att_ns per rank), mlp"
  timeout 60 build/cluster_chain 2500 10 0 0 1500
  timeout 60 build/cluster_chain 4000 10 0 0 2000
fi
mkdir -p .gpu && tar -xJf .dev/gpu-call2.tar.xz || { echo "unpack failed"; exit 1; }
chmod 700 .gpu/cache
. scripts/gpu_env.sh
pk_gpu_paths
export PK_CACHE_DIR=$PWD/.gpu/cache
pk_nvcc_cached /tmp/nvcc-standin
for m in qwen3-1.7b qwen3-8b; do python3 bench/shape_model.py $m /tmp/$m >/dev/null & done
wait
run() { # label model defines lm_argmax
  local out
  out=$(PK_LM_HEAD_ARGMAX=$4 PK_NVCC_DEFINES="$3" build/pk bench --model /tmp/$2 --backend cuda --threads 132 --context 160 --max-seq 288 --gen 128 2>&1)
  echo "round $r $2 $1: $(printf '%s\n' "$out" | awk '/^decode /{print $3 " median, " $6 " mean, p90 " $10}') $(printf '%s\n' "$out" | awk '/^floor /{f=$2} /^copy b\/w/{b=$3} END{print "floor", f, "copy b/w", b, "GB/s"}')"
  printf '%s\n' "$out" | grep -q "^decode " || printf '%s\n' "$out" | tail -3
}
for r in 1 2 3; do
  run default qwen3-1.7b "" 0; run pace64 qwen3-1.7b "-DPK_LIN_PACE_KB=64" 0
  run pace64+lm-argmax qwen3-1.7b "-DPK_LIN_PACE_KB=64" 1; run lm-argmax qwen3-1.7b "" 1
done
for r in 1 2; do run two-layers qwen3-8b "" 0; run lm-argmax qwen3-8b "" 1; done
echo "== 8B trace: the attention's task ends (bench/trace_ends.py) and the tail"
build/pk bench --model /tmp/qwen3-8b --backend cuda --threads 132 --context 160 --max-seq 288 --gen 128 --trace /tmp/tr8.json >/dev/null 2>&1
python3 bench/trace_ends.py /tmp/tr8.json --steps 16 --kind "attention|h_attn|qkv"
python3 bench/trace_summary.py /tmp/tr8.json --steps 16 --end 70 2>&1 | grep -i "attn\|logits\|argmax\|step"
echo "== transformers (bench/hf_baseline.py)"
timeout 120 python3 bench/hf_baseline.py qwen3-8b 2>&1 | grep -v Warning | tail -3
