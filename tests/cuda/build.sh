#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds tests/cuda/test_cuda_kernels: the CUDA task kernels against the CPU kernels (linked as C
# objects). Warnings are errors. Usage: tests/cuda/build.sh [outdir] (default .dev/cuda);
# PTXAS_V=1 adds -Xptxas -v (registers, shared memory, spills per kernel); NVCC_EXTRA adds flags.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.dev/cuda}
mkdir -p "$out"
CC=${CC:-gcc}
NVCC=${NVCC:-nvcc}
objs=()
for f in src/kernels/cpu/*.c; do
    o="$out/cpu_$(basename "${f%.c}").o"
    "$CC" -std=c11 -O2 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla \
        -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Isrc -c "$f" -o "$o"
    objs+=("$o")
done
extra=()
[ -n "${PTXAS_V:-}" ] && extra+=(-Xptxas -v)
# shellcheck disable=SC2206
[ -n "${NVCC_EXTRA:-}" ] && extra+=($NVCC_EXTRA) # e.g. -lineinfo for a profiler
"$NVCC" -std=c++17 -O3 -lineinfo -gencode=arch=compute_90a,code=sm_90a -I src -I include \
    -Xcompiler -Wall,-Wextra,-Werror -Werror all-warnings "${extra[@]}" \
    tests/cuda/test_cuda_kernels.cu "${objs[@]}" -lm -o "$out/test_cuda_kernels"
echo "built $out/test_cuda_kernels"
