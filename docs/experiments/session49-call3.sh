#!/usr/bin/env bash
# session 49, call 3: the decode attention's layout with q and red first (attention_decode_layout.h:
# [0, hdr) written only by the task after its wait), so that a stage issued during the qkv tile
# (runtime.cuh's pk_att_early) starts its layout hdr bytes (9,344 at D 128, G 2) below the free
# area, over the qkv task's dead bytes: the Qwen3-0.6B's early stage then holds 288 positions
# instead of 272 (session 19's limit). In a `pk bench --context 160 --gen 128` run the last 16
# steps (positions 272-287) lost the early stage: those steps ran ~0.89 ms against ~0.79 on an H100
# (call 2's trace of steps 115-130: the attention's `end+` 9.08 us a layer).
# Prediction: the median unchanged (those steps are 1/8 of the run), the mean -1.3 to -1.6 %, the
# p90 ~ -10 %; the last-16-steps trace's attention `end+` back to ~4.5 us.
# (This call ran a first version whose pk_att_early read the shift from the next task's layer entry,
# two dependent loads; it became codegen's constant PK_GEN_ATT_HEAD before the commit: call 4.)
# Measured (H100, bench/results/2026-12-06-s49-call3.txt): gate passed; medians 0.8000 / 0.8049 /
# 0.7977 -> 0.8043 / 0.8072 / 0.8044, means 0.8115 / 0.8164 / 0.8101 -> 0.8069 / 0.8103 / 0.8075,
# p90 0.887-0.890 -> 0.818-0.823; the last 16 steps 889 -> 807 us.
# Gate: the layout moves areas, not sums: the random Qwen3-0.6B's 160 one-row steps' logits
# (--max-tokens 128: positions 160-287, past 272) bit-equal to 3533e48's (build-h/pk); pk-tiny's
# decode-step logits against the CPU, unsplit and split 3, at 132 and 8 workers.
#   here:   bash docs/experiments/session49-call3.sh --precompile   (build/pk at this change, build-h/pk
#           at 3533e48; -> .dev/gpu-s49c3.tar.xz)
#   device: bash docs/experiments/session49-call3.sh   (session49-call4.sh with PACK=s49c3 ROUNDS=3)
#           carry ["build/pk", "build-h", "build-kern", ".dev/gpu-s49c3.tar.xz"]
#           (build-kern: bash tests/cuda/build.sh build-kern, the tests/cuda harness at this change)
exec env PACK=s49c3 ROUNDS=3 bash "$(dirname "$0")/session49-call4.sh" "$@"
