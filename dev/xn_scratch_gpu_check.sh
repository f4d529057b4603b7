#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Session 60 call 2: RMSNORM GEMMs through the xn scratch (working tree) against 2e99e2d (.dev/base61).
cd "$(dirname "$0")/../.." || exit 1
. scripts/gpu_env.sh
L=$OUT/log.txt
log() { echo "== $* ($(date +%T))" | tee -a "$L"; }
tar -xJf .dev/c60/pack.tar.xz || { echo "unpack failed" >> "$L"; exit 1; }
pk_gpu_paths
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$L"
export PK_CACHE_DIR=/tmp/pkc && mkdir -p $PK_CACHE_DIR && chmod 700 $PK_CACHE_DIR && cp -r .gpu/cache/. $PK_CACHE_DIR/ && chmod -R go-w $PK_CACHE_DIR
pk_nvcc_cached /tmp/nvstub
H=.dev/h62/test_cuda_kernels
log "harness linear"
timeout 200 $H linear > /tmp/harness.txt 2>&1; echo "rc $?" >> "$L"
grep -E "FAIL" /tmp/harness.txt | head -20 >> "$L"; tail -9 /tmp/harness.txt >> "$L"
log "pk-tiny 400-row prompt logits: new, base, cpu"
for P in build/pk .dev/base61/pk; do
  timeout 200 $P generate --model models/pk-tiny --prompt-ids "$(seq -s, 7 7 2800)" --max-tokens 12 --logits /tmp/$(basename $(dirname $P)).bin --backend cuda --threads 132 > /tmp/t.txt 2>/tmp/t.err; echo "$P rc $?: $(tail -1 /tmp/t.err)" >> "$L"
done
python3 scripts/compare_logits.py /tmp/base61.bin /tmp/build.bin 400 >> "$L" 2>&1
python3 scripts/compare_logits.py .dev/ref/cpu400.bin /tmp/build.bin 400 >> "$L" 2>&1
run_pb() { # pk model tag extra...
  local P=$1 m=$2 tag=$3; shift 3
  timeout 300 $P bench --model /tmp/$m --backend cuda --threads 132 --prompt-len 4096 --gen 32 --max-seq 4128 --step-tokens 512 "$@" --json > /tmp/b.json 2>/tmp/b.err
  echo "$m $tag rc $?: $(python3 -c "import json;r=json.load(open('/tmp/b.json'));print('prefill_ms %.1f decode %.3f'%(r['prefill_ms'],r['decode_ms_median']))" 2>&1) $(tail -1 /tmp/b.err)" >> "$L"
}
log "0.6B prompt 4096, T512, fused-mlp off: 2e99e2d vs xn, 2 rounds"
pk_random_models qwen3-0.6b
for r in 1 2; do run_pb .dev/base61/pk qwen3-0.6b "base r$r" --fused-mlp off; run_pb build/pk qwen3-0.6b "xn r$r" --fused-mlp off; done
log "bench_mma"
timeout 120 $H bench_mma 2>&1 | grep -E "chunk|xn" > $OUT/bench_mma.txt
log "8B prompt 4096, T512 (xn)"
pk_random_models qwen3-8b
run_pb build/pk qwen3-8b "xn"
log "transformers prefill 0.6B"
timeout 200 python3 .dev/c60/hf_prefill.py qwen3-0.6b --lengths 4096 2>&1 | grep -v Warning | tail -2 >> "$L"
log done
