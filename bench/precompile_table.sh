#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# precompile_table.sh — on the build machine (nvcc, no GPU): every kernel bench/run_bench.sh will
# load (the gate's, pk-tiny's, one per model and context with --max-seq = context + GEN as
# run_bench.py passes it), packed as .dev/gpu.tar.xz for the device tool's 64 MiB carry
# (docs/PERF.md "Running the benchmark"): bench/precompile.sh with the table's settings.
# Usage: bash bench/precompile_table.sh; then, on the device:
#   tar -xJf .dev/gpu.tar.xz && PK_THREADS=132 PK_COMMIT=<commit> bash bench/run_bench.sh
#   carry ["build/pk", "build/tests/gpu/test_cuda_e2e", ".dev/gpu.tar.xz"]
# Env: MODELS (qwen3-0.6b qwen3-1.7b qwen3-8b), CONTEXTS (160 4096), GEN (128), THREADS (132),
#      FRESH (1: start from an empty .gpu/cache, ~24 min on two cores; 0: keep the kernels already
#      there and compile only what the build's keys miss — seconds when only docs changed, a few
#      minutes after a host-only change such as a model.c rule; the pack then also holds the stale
#      kernels: check it stays under the carry's 64 MiB with build/pk and the tree).
set -eu
cd "$(dirname "$0")/.."
MODELS=${MODELS:-qwen3-0.6b qwen3-1.7b qwen3-8b} CONTEXTS=${CONTEXTS:-160 4096} MAX_SEQ=context \
    VARIANTS='' SPLITS=0 HARNESS=0 FRESH=${FRESH:-1} PACK=1 exec bash bench/precompile.sh
