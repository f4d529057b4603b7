#!/usr/bin/env bash
# session 49, call 1: the 1.7B's MLP as one layer (PK_MLP_FUSED=1, off there since session 32:
# +0.9 %) with its two handicaps removed —
#   A (-DPK_MLP_ASYNC_PRE=1, runtime.cuh): the fused task's GEMV (gate and up rows, 384 KB) issues
#     its first stages before its wait, as every other streamed GEMV does; until now they went out
#     only after the event;
#   B (-DPK_LIN_TAIL=1, linear.cuh / mlp_fused.cuh's pk_dev_mlp_down_ring): the down column block
#     (192 KB) streams into the GEMV's rings as they free, so the SM's copies do not pause between
#     the GEMV and the down sums (session 32: the fused task 22.6 us against 17.5 for 576 KB).
# Prediction (docs/PERF.md "Session 49"): the fused task ~22.6 -> ~19 us and the layer's two
# hand-offs one: the 1.7B @160 -3 to -6 % against gate_up and down apart (the default).
# Measured (H100, bench/results/2026-12-06-s49-call1.txt), two rounds: default 1.6504 / 1.6496,
# fused 1.7041 / 1.7084, +A 1.6762 / 1.6680, +A+B 1.6987 / 1.6977 ms/token: every fused variant
# slower than the default; dropped, kept as docs/experiments/session49-mlp-tail.patch (applies to
# 3533e48). The gate did not run in that call: the generate runs' kernels (another kernel than the
# bench's) were not in the pack; the --precompile below now builds them too.
# Gate: the sums and their order do not depend on A or B, so the random Qwen3-1.7B's 160 one-row
# steps' logits with A and A+B must be bit-equal to the fused layer's without them; the fused
# layer against the default (other sums) is printed by compare_logits.py for the record.
# The defines are the patch's: git apply docs/experiments/session49-mlp-tail.patch (to 3533e48's
# source), make build/pk, then:
#   here:   bash docs/experiments/session49-call1.sh --precompile   (build/pk; -> .dev/gpu-s49c1.tar.xz)
#   device: bash docs/experiments/session49-call1.sh
#           carry ["build/pk", ".dev/gpu-s49c1.tar.xz"]
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
pk_gpu_paths
# variant i: PK_MLP_FUSED value (empty: the model's default) and nvcc defines
F=("" 1 1 1)
D=("" "" "-DPK_MLP_ASYNC_PRE=1" "-DPK_MLP_ASYNC_PRE=1 -DPK_LIN_TAIL=1")
N=("default (gate_up, down)" "fused" "fused +A (pre-wait stages)" "fused +A+B (down block as the rings' tail)")
ids=$(python3 -c "print(','.join(str(7 + 37 * i) for i in range(160)))")
q17_logits() { PK_MLP_FUSED="$3" PK_NVCC_DEFINES="$4" timeout 300 build/pk generate --model "$1" --prompt-ids "$ids" \
    --max-tokens 128 --step-tokens 1 --logits "$2" --backend cuda --threads 132; }
bench() { PK_MLP_FUSED="$3" pk_exp_bench "$1" "$2" "$4" "${@:5}"; }
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache s49c1
  pk_exp_models --zeros 1.7b
  ( for v in 0 2; do bench /tmp/z-qwen3-1.7b 160 "${F[$v]}" "${D[$v]}" --gen 4; done ) 2>&1 | grep -v "no CUDA GPU" &
  ( for v in 1 3; do bench /tmp/z-qwen3-1.7b 160 "${F[$v]}" "${D[$v]}" --gen 4; done ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  ( for v in 0 2; do q17_logits /tmp/z-qwen3-1.7b /dev/null "${F[$v]}" "${D[$v]}"; done ) 2>&1 | grep -v "no CUDA GPU" &
  ( for v in 1 3; do q17_logits /tmp/z-qwen3-1.7b /dev/null "${F[$v]}" "${D[$v]}"; done ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  pk_pack_cache s49c1
  exit
fi
pk_unpack_cache s49c1 || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /tmp/gate
pk_exp_models 1.7b
for v in 0 1 2 3; do
  q17_logits /tmp/qwen3-1.7b "/tmp/gate/v$v.bin" "${F[$v]}" "${D[$v]}" >/tmp/gate/v$v.log 2>&1 ||
    { echo "qwen3-1.7b ${N[$v]}: generate FAILED"; tail -3 /tmp/gate/v$v.log; }
done
for v in 2 3; do
  cmp -s /tmp/gate/v1.bin "/tmp/gate/v$v.bin" && echo "qwen3-1.7b decode logits: ${N[$v]} = fused's, bit for bit" ||
    echo "qwen3-1.7b decode logits: ${N[$v]} DIFFER from fused's"
done
echo "fused against the default: $(python3 scripts/compare_logits.py /tmp/gate/v0.bin /tmp/gate/v1.bin 100)"
for r in 1 2; do
  for v in 0 1 2 3; do
    pk_bench_round "round $r qwen3-1.7b @160 ${N[$v]}" bench /tmp/qwen3-1.7b 160 "${F[$v]}" "${D[$v]}" --gen 128
  done
done
for v in 0 1 3; do
  echo "== trace qwen3-1.7b @160 ${N[$v]}"
  bench /tmp/qwen3-1.7b 160 "${F[$v]}" "${D[$v]}" --gen 128 --trace /tmp/t.json 2>&1 | grep -E "^(decode|floor|copy)"
  pk_trace_report /tmp/t.json
done
