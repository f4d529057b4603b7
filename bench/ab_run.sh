#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ab_run.sh — on the GPU machine: the same-call A/B that bench/ab_prepare.sh prepared. Runs
# `pk bench` for build/pk (each variant) and build/pk-old in turn, ROUNDS times, so that both
# builds see the same GPU in the same minutes (two calls' GPUs differ by a few %), and prints one
# line per run: round, build, variant, model, context, ms/token (median over the decode steps),
# floor. AA=1 runs build/pk-old twice in every round (labelled pk-old and pk-old2): an A/A pair,
# whose spread is the noise a difference between pk and pk-old must exceed. With CHECK=1 first
# pk-tiny's decode-step logits, CUDA against the CPU, for both builds (unsplit and split 3, THREADS
# and 8 workers: run_bench.sh's gate without cuda_e2e, whose kernels ab_prepare.sh does not compile),
# and whether the two builds' CUDA logits are bit-equal.
# Usage: MODELS="qwen3-0.6b qwen3-1.7b qwen3-8b" CONTEXTS="160 4096" ROUNDS=3 AA=1 CHECK=1 OUT=$OUT bash bench/ab_run.sh
#   carry ["build/pk", "build/pk-old", ".dev/gpu.tar.xz", ".dev/gpu-old.tar.xz"]
# Env: the same MODELS, CONTEXTS, MAX_SEQ, GEN, THREADS, VARIANTS as ab_prepare.sh (else the
#      kernels are compiled here, on device time); ROUNDS (3); AA (0); CHECK (0); OUT (the device
#      tool's folder: the full bench output goes to $OUT/ab_run.log, the lines to $OUT/ab_run.txt).
set -u
cd "$(dirname "$0")/.." || exit 1
ROUNDS=${ROUNDS:-3}
mkdir -p "${OUT:-/tmp}"
log=${OUT:-/tmp}/ab_run.log
txt=${OUT:-/tmp}/ab_run.txt
mkdir -p .gpu/cache && chmod 700 .gpu/cache
if ! tar -xJf .dev/gpu.tar.xz || ! tar -xJf .dev/gpu-old.tar.xz; then echo "ab_run: unpacking the kernels failed"; exit 1; fi
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_ab_settings
pk_gpu_paths
export PK_CACHE_DIR=$PWD/.gpu/cache
for m in $MODELS; do [ -d "/tmp/$m" ] || python3 bench/shape_model.py "$m" "/tmp/$m" >/dev/null & done
{ nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo "(no nvidia-smi)"; } | head -1 | tee "$txt"
if [ "${CHECK:-0}" = 1 ]; then
    for s in 0 3; do
        for w in "$THREADS" 8; do
            for b in pk pk-old; do
                mkdir -p "/tmp/ab_check/$b"
                pk_tiny_logits_check "build/$b" "$w" "/tmp/ab_check/$b" "$s" | sed "s/\$/ ($b, $w workers)/" | tee -a "$txt"
            done
            # the two builds' CUDA logits, every one-row step: the same bits where the arithmetic is the same
            if cmp -s "/tmp/ab_check/pk/tf_${s}_cuda.bin" "/tmp/ab_check/pk-old/tf_${s}_cuda.bin"; then
                echo "pk-tiny CUDA logits of pk and pk-old (splits $s, $w workers): bit-equal" | tee -a "$txt"
            else
                echo "pk-tiny CUDA logits of pk and pk-old (splits $s, $w workers): DIFFER" | tee -a "$txt"
            fi
        done
    done
fi
wait
IFS='|' read -r -a variants <<<"$VARIANTS"
[ ${#variants[@]} -eq 0 ] && variants=("")
runs=()
for v in "${variants[@]}"; do runs+=("pk|pk|$v"); done
runs+=("pk-old|pk-old|")
[ "${AA:-0}" = 1 ] && runs+=("pk-old2|pk-old|")
: >"$log"
for r in $(seq "$ROUNDS"); do
    for m in $MODELS; do
        for ctx in $CONTEXTS; do
            for run in "${runs[@]}"; do
                IFS='|' read -r label b v <<<"$run"
                out=$(pk_with_variant "$v" "build/$b" bench --backend cuda --threads "$THREADS" --context "$ctx" \
                    --max-seq "$(pk_ab_max_seq "$ctx")" --gen "$GEN" --model "/tmp/$m" 2>&1)
                printf '== round %s %s %s %s %s\n%s\n' "$r" "$label" "${v:-default}" "$m" "$ctx" "$out" >>"$log"
                ms=$(printf '%s\n' "$out" | awk '/^decode /{print $3}')
                fl=$(printf '%s\n' "$out" | awk '/^floor /{print $2}')
                printf '%s %-7s %-20s %-11s %5s %s ms/token (floor %s)\n' "$r" "$label" "${v:-default}" "$m" "$ctx" \
                    "${ms:-FAILED}" "${fl:--}" | tee -a "$txt"
                [ -n "$ms" ] || printf '%s\n' "$out" | tail -n 3
            done
        done
    done
done
