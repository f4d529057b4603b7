#!/usr/bin/env bash
# session 40: the table's kernels with session39-qkv-in-mlp.patch as the default (PK_QKV_IN_MLP 1),
# built before call 4 has decided, so that a win can go straight to bench/run_bench.sh on the
# device. The patched tree lives in a git worktree (/tmp/wt-qkv at HEAD), so this checkout's
# sources and build/ are untouched; its binaries are copied to build-qkv/ and its pack to
# .dev/gpu-table-qkv.tar.xz (both ignored).
#   here:   bash docs/experiments/session40-qkv-default-table.sh     (~35 min on 2 cores)
#   device: tar -xJf .dev/gpu-table-qkv.tar.xz && BUILD=build-qkv PK_THREADS=132 bash bench/run_bench.sh
#           carry ["build-qkv/pk","build-qkv/tests/gpu/test_cuda_e2e",".dev/gpu-table-qkv.tar.xz"]
# The run_bench.sh gate (cuda_e2e --quick, pk-tiny's logits at splits 0 / 3) runs the patched
# kernels too. If the patch becomes the default in the tree, these keys are its keys only when
# the committed headers are byte for byte the worktree's (check: git diff against /tmp/wt-qkv).
set -eu
cd "$(dirname "$0")/../.." # the repository root
root=$PWD wt=${WT:-/tmp/wt-qkv}
rm -rf "$wt" && git worktree prune && git worktree add -q "$wt" HEAD
cd "$wt"
git apply "$root/docs/experiments/session39-qkv-in-mlp.patch"
sed -i 's/^#define PK_QKV_IN_MLP 0/#define PK_QKV_IN_MLP 1/' src/runtime/cuda/device/dispatch.cuh
grep -q '^#define PK_QKV_IN_MLP 1' src/runtime/cuda/device/dispatch.cuh || { echo "default not flipped" >&2; exit 1; }
make -s -j2
bash bench/precompile_table.sh
mkdir -p "$root/build-qkv/tests/gpu" "$root/.dev"
cp build/pk "$root/build-qkv/pk"
cp build/tests/gpu/test_cuda_e2e "$root/build-qkv/tests/gpu/"
cp .dev/gpu.tar.xz "$root/.dev/gpu-table-qkv.tar.xz"
echo "build-qkv/ and .dev/gpu-table-qkv.tar.xz ready (worktree $wt; git worktree remove --force $wt when done)"
