#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ptxas_report.sh — on the build machine (nvcc, no GPU): the register, stack and spill report of
# the persistent kernel pk generates for a model, without the device. Device code that makes the
# static kernel spill slows every task, the paths that never run included (52 bytes of spills cost
# the 8B 3 %), so check this before spending device time on a change.
#   1. pk generates kernel.cu for the model (PK_CUDA_ARCH=sm_90a) with a stand-in nvcc that
#      answers --version and fails the compile, so the sources stay in a fresh cache folder;
#   2. nvcc -cubin -Xptxas -v on that kernel.cu with the flags pk would use (nvcc.cmd).
# Prints the static kernel's (pk_gen_kernel's) stack frame and spills and its out-of-line callees', and keeps
# the full report in $OUT (default /tmp/ptxas_report).
# Usage: bash bench/ptxas_report.sh [MODEL_DIR] (default /tmp/z-qwen3-0.6b: bench/shape_model.py's
#        zero-weight stand-in); CONTEXT (160),
#        MAX_SEQ (288), THREADS (132); PK: the pk binary (default build/pk; e.g. build-exp/pk from
#        `make BUILD=build-exp` for a tree whose headers differ). ~1 minute for the 0.6B, more for larger models.
set -eu
cd "$(dirname "$0")/.."
model=${1:-/tmp/z-qwen3-0.6b}
out=${OUT:-/tmp/ptxas_report}
pk=${PK:-build/pk}
[ -x "$pk" ] || { [ "$pk" = build/pk ] && make -s; } || { echo "ptxas_report: no $pk" >&2; exit 1; }
if [ ! -d "$model" ]; then
    case $model in
    /tmp/z-*) python3 bench/shape_model.py "${model#/tmp/z-}" "$model" --zeros >/dev/null ;;
    *) echo "ptxas_report: no model folder $model" >&2; exit 1 ;;
    esac
fi
command -v nvcc >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc >/dev/null || { echo "ptxas_report: nvcc not found" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/cache" && chmod 700 "$out/cache"
# an nvcc that answers pk's version check and fails the compile: kernel.cu stays in the cache folder
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_nvcc_cached "$out/nvcc-stand-in"
PK_CUDA_ARCH=sm_90a PK_CACHE_DIR="$out/cache" "$pk" bench --model "$model" \
    --backend cuda --threads "${THREADS:-132}" --context "${CONTEXT:-160}" --max-seq "${MAX_SEQ:-288}" \
    --gen 8 >/dev/null 2>&1 || true
dir=$(find "$out/cache" -mindepth 1 -maxdepth 1 -type d | head -n 1)
if [ -z "$dir" ] || [ ! -f "$dir/kernel.cu" ]; then
    echo "ptxas_report: pk did not generate kernel.cu" >&2
    exit 1
fi
# the flags pk uses, from its nvcc.cmd: -O3 ... and the defines, without -shared / -o
flags=$(tr ' ' '\n' <"$dir/nvcc.cmd" | grep -E '^(-O|-lineinfo|-std|-gencode|-D)' | tr '\n' ' ')
# shellcheck disable=SC2086
nvcc -cubin $flags -I"$dir" -Xptxas -v -o "$out/kernel.cubin" "$dir/kernel.cu" >"$out/ptxas.txt" 2>&1 ||
    { tail -n 20 "$out/ptxas.txt" >&2; exit 1; }
# the static kernel's entry (the one pk runs by default) and its out-of-line callees
awk '/Compiling entry function/ {e = $0; sub(/.*function \047/, "", e); sub(/\047.*/, "", e)}
     /Function properties for/ {f = $NF}
     /bytes stack frame/ && e == "pk_gen_kernel" {
         printf "stack %5s B, spill stores %5s B, loads %5s B  %s\n", $1, $5, $9, f}' "$out/ptxas.txt"
echo "ptxas_report: $dir/kernel.cu (flags: $flags); full report $out/ptxas.txt"
