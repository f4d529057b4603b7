#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ab_prepare.sh — on the build machine (nvcc, no GPU): everything a same-call A/B of this checkout
# against an older commit needs on the device, compiled here so device time goes to running.
#   1. build/pk here (make), and the old commit's pk in a worktree (/tmp/pk-ab-<commit>), copied
#      to build/pk-old;
#   2. each build compiles its kernels for every model and context (and this build's for each
#      variant) into its own cache (.gpu/cache here, the worktree's for the old one) — the cache key
#      holds the build's embedded device sources, so the two sets never collide — plus pk-tiny's
#      one-row decode kernels (unsplit and split 3, THREADS and 8 workers) for ab_run.sh's CHECK;
#   3. packs them for the device tool's carry (64 MiB in all): .dev/gpu.tar.xz (this build's,
#      with .gpu/lib) and .dev/gpu-old.tar.xz (the old one's, as .gpu/cache entries).
# Usage: OLD=<commit> MODELS="qwen3-0.6b qwen3-1.7b qwen3-8b" CONTEXTS="160 4096" bash bench/ab_prepare.sh
#   then on the device, with the same MODELS / CONTEXTS / MAX_SEQ / GEN / THREADS / VARIANTS:
#   MODELS="..." CONTEXTS="..." ROUNDS=3 AA=1 OUT=$OUT bash bench/ab_run.sh
#   carry ["build/pk", "build/pk-old", ".dev/gpu.tar.xz", ".dev/gpu-old.tar.xz"]
# Env: OLD (required), MODELS (qwen3-0.6b), CONTEXTS (160), MAX_SEQ ("context": each context +
#      GEN, as bench/run_bench.py builds it; or one number for every context), GEN (128), THREADS
#      (132), VARIANTS ('|'-separated variants of this build: more `pk` arguments, e.g.
#      "|--fused-mlp off"; "" = its default; the old build runs its default only). Models are
#      bench/shape_model.py's zero-weight stand-ins in /tmp/z-<model> (a kernel depends on the
#      shapes only). An 8B kernel takes ~6 minutes on two cores, per build and context.
set -eu
cd "$(dirname "$0")/.."
: "${OLD:?OLD=<commit> to compare against}"
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_ab_settings

old=$(git rev-parse --short "$OLD")
wt=/tmp/pk-ab-$old
[ -d "$wt" ] || git worktree add -f --detach "$wt" "$old" >/dev/null
make -s
make -s -C "$wt"
cp "$wt/build/pk" build/pk-old

# compile(PK, CACHE, VARIANT...): every model and context, and pk-tiny's gate kernels, into CACHE
compile() {
    local pk=$1 cache=$2 v m ctx s w log
    shift 2
    rm -rf "$cache" && mkdir -p "$cache" && chmod 700 "$cache" # only this A/B's kernels travel
    for v in "$@"; do
        for s in 0 3; do
            for w in "$THREADS" 8; do
                PK_CUDA_ARCH=sm_90a PK_CACHE_DIR="$cache" pk_with_variant "$v" "$pk" generate \
                    --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 --kv-splits $s \
                    --logits /dev/null --backend cuda --threads "$w" >/dev/null 2>&1 &
            done
        done
        for m in $MODELS; do
            [ -d "/tmp/z-$m" ] || python3 bench/shape_model.py "$m" "/tmp/z-$m" --zeros >/dev/null
            for ctx in $CONTEXTS; do # compiles, then stops at "no CUDA GPU": expected; anything else is not
                log=$(mktemp)
                PK_CUDA_ARCH=sm_90a PK_CACHE_DIR="$cache" pk_with_variant "$v" "$pk" bench --model "/tmp/z-$m" \
                    --backend cuda --threads "$THREADS" --context "$ctx" --max-seq "$(pk_ab_max_seq "$ctx")" \
                    --gen "$GEN" >"$log" 2>&1 || true
                grep -q "no CUDA GPU found" "$log" || { echo "ab_prepare: $pk, $m, context $ctx, '$v':" >&2; cat "$log" >&2; }
                rm -f "$log"
            done
        done
        wait
    done
    pk_cache_strip "$cache" # the carry holds kernel.so files only
}

mkdir -p .dev
pk_gpu_libs
IFS='|' read -r -a variants <<<"$VARIANTS"
[ ${#variants[@]} -eq 0 ] && variants=("")
compile build/pk "$PWD/.gpu/cache" "${variants[@]}"
compile "$wt/build/pk" "$wt/.gpu/cache" ""
tar -cf - .gpu/cache .gpu/lib | xz -T0 -6 >.dev/gpu.tar.xz
tar -C "$wt" -cf - .gpu/cache | xz -T0 -6 >.dev/gpu-old.tar.xz
echo "ab_prepare: build/pk ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include || echo '+changes')) and" \
     "build/pk-old ($old); .dev/gpu.tar.xz $(du -h .dev/gpu.tar.xz | cut -f1), .dev/gpu-old.tar.xz" \
     "$(du -h .dev/gpu-old.tar.xz | cut -f1)"
