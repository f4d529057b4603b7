#!/usr/bin/env bash
# Ran in session 50 (an H100): medians equal (-0.14 %), mean -1.2 %, p90 -8.4 %, harness 345 / 0, logits bit-equal;
# bench/results/2026-12-06-s50-call4.txt, docs/PERF.md "Session 50".
# session 49, call 4: call 3 again with PK_GEN_ATT_HEAD (codegen: the shift a constant, no load in pk_att_early) — the decode attention's layout with q and red first (attention_decode_layout.h:
# [0, hdr) written only by the task after its wait), so that a stage issued during the qkv tile
# (runtime.cuh's pk_att_early) starts its layout hdr bytes (9,344 at D 128, G 2) below the free
# area, over the qkv task's dead bytes: the Qwen3-0.6B's early stage then holds 288 positions
# instead of 272 (session 19's limit). In a `pk bench --context 160 --gen 128` run the last 16
# steps (positions 272-287) lost the early stage: those steps ran ~0.89 ms against ~0.79 on an H100
# (call 2's trace of steps 115-130: the attention's `end+` 9.08 us a layer).
# Prediction: the median unchanged (those steps are 1/8 of the run), the mean -1.3 to -1.6 %, the
# p90 ~ -10 %; the last-16-steps trace's attention `end+` back to ~4.5 us.
# Gate: the layout moves areas, not sums: the random Qwen3-0.6B's 160 one-row steps' logits
# (--max-tokens 128: positions 160-287, past 272) bit-equal to 3533e48's (build-h/pk); pk-tiny's
# decode-step logits against the CPU, unsplit and split 3, at 132 and 8 workers.
#   here:   bash docs/experiments/session49-call3.sh --precompile   (build/pk at this change, build-h/pk
#           at 3533e48; -> .dev/gpu-s49c4.tar.xz)
#   device: bash docs/experiments/session49-call3.sh
#           carry ["build/pk", "build-h", "build-kern", ".dev/gpu-s49c4.tar.xz"]
#           (build-kern: bash tests/cuda/build.sh build-kern, the tests/cuda harness at this change)
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
PACK=${PACK:-s49c4} ROUNDS=${ROUNDS:-4} # session49-call3.sh: s49c3, 3
. scripts/gpu_env.sh
pk_gpu_paths
B=(build-h/pk build/pk)
N=("3533e48" "hdr layout")
ids=$(python3 -c "print(','.join(str(7 + 37 * i) for i in range(160)))")
logits() { timeout 300 "$1" generate --model "$2" --prompt-ids "$ids" --max-tokens 128 --step-tokens 1 --logits "$3" \
    --backend cuda --threads 132; }
bench() { timeout 300 "$1" bench --model "$2" --backend cuda --threads 132 --context 160 --max-seq 288 "${@:3}"; }
if [ "${1:-}" = "--precompile" ]; then
  pk_exp_precompile_cache "$PACK"
  [ "$PACK" != s49c3 ] && [ -d .gpu/cache-s49c3 ] && cp -rn .gpu/cache-s49c3/. ".gpu/cache-$PACK/" # 3533e48's kernels (build-h/pk)
  pk_exp_models --zeros 0.6b
  ( for b in "${B[@]}"; do bench "$b" /tmp/z-qwen3-0.6b --gen 4; done ) 2>&1 | grep -v "no CUDA GPU" &
  ( for b in "${B[@]}"; do logits "$b" /tmp/z-qwen3-0.6b /dev/null; done ) 2>&1 | grep -v "no CUDA GPU" &
  wait
  for s in 0 3; do ( for w in 132 8; do pk_exp_tiny $w $s "" 2>&1 | grep -v "no CUDA GPU"; done ) & done
  wait
  pk_pack_cache "$PACK"
  exit
fi
pk_unpack_cache "$PACK" || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /tmp/gate
timeout 200 build-kern/test_cuda_kernels >/tmp/gate/kernels.log 2>&1; echo "tests/cuda harness (exit $?): $(grep -E '^cuda_kernels: [0-9]+ passed' /tmp/gate/kernels.log | tail -1)"
grep -i "fail" /tmp/gate/kernels.log | head -5
pk_tiny_logits_check build/pk 132 /tmp/gate 0
pk_tiny_logits_check build/pk 8 /tmp/gate 0
pk_tiny_logits_check build/pk 132 /tmp/gate 3
pk_tiny_logits_check build/pk 8 /tmp/gate 3
pk_exp_models 0.6b
for v in 0 1; do
  logits "${B[$v]}" /tmp/qwen3-0.6b "/tmp/gate/l$v.bin" >/tmp/gate/l$v.log 2>&1 || { echo "${N[$v]}: generate FAILED"; tail -3 /tmp/gate/l$v.log; }
done
cmp -s /tmp/gate/l0.bin /tmp/gate/l1.bin && echo "qwen3-0.6b decode logits (positions 160-287): ${N[1]} = ${N[0]}'s, bit for bit" ||
  echo "qwen3-0.6b decode logits: ${N[1]} DIFFER from ${N[0]}'s"
for r in $(seq "$ROUNDS"); do
  for v in 0 1; do pk_bench_round "round $r qwen3-0.6b @160 ${N[$v]}" bench "${B[$v]}" /tmp/qwen3-0.6b --gen 128; done
done
for v in 0 1; do
  echo "== trace qwen3-0.6b @160 ${N[$v]}: the last 16 steps (positions 272-287), then steps 55-70"
  bench "${B[$v]}" /tmp/qwen3-0.6b --gen 128 --trace /tmp/t.json 2>&1 | grep -E "^(decode|floor|copy)"
  python3 bench/trace_summary.py /tmp/t.json --steps 16 2>&1 | grep -E "^(attention|rmsnorm_linear>|linear_with|rmsnorm_swiglu|step)"
  python3 bench/trace_summary.py /tmp/t.json --steps 16 --end 70 2>&1 | grep -E "^(attention|rmsnorm_linear>|linear_with|rmsnorm_swiglu|step)"
done
