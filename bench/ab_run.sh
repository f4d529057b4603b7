#!/usr/bin/env bash
# ab_run.sh — on the GPU machine: the same-call A/B that bench/ab_prepare.sh prepared. Runs
# `pk bench` for build/pk (each variant) and build/pk-old in turn, ROUNDS times, so that both
# builds see the same GPU in the same minutes (the calls' GPUs differ by a few %: docs/PERF.md
# session 18), and prints one line per run: round, build, variant, model, context, ms/token
# (median over the decode steps), floor. With CHECK=1 first pk-tiny's decode-step logits, CUDA
# against the CPU, for both builds (unsplit and split 3, THREADS and 8 workers: run_bench.sh's
# gate without cuda_e2e, whose kernels ab_prepare.sh does not compile).
# Usage: MODELS="qwen3-8b" ROUNDS=3 bash bench/ab_run.sh
#   carry ["build/pk", "build/pk-old", ".dev/gpu.tar.xz", ".dev/gpu-old.tar.xz"]
# Env: the same MODELS, CONTEXTS, MAX_SEQ, GEN, THREADS, VARIANTS as ab_prepare.sh (else the
#      kernels are compiled here, on device time); ROUNDS (3); CHECK (0); OUT (the device tool's
#      folder: the full bench output is copied there).
set -u
cd "$(dirname "$0")/.." || exit 1
ROUNDS=${ROUNDS:-3}
log=${OUT:-/tmp}/ab_run.log
mkdir -p .gpu/cache && chmod 700 .gpu/cache
if ! tar -xJf .dev/gpu.tar.xz || ! tar -xJf .dev/gpu-old.tar.xz; then echo "ab_run: unpacking the kernels failed"; exit 1; fi
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_ab_settings
pk_gpu_paths
export PK_CACHE_DIR=$PWD/.gpu/cache
for m in $MODELS; do [ -d "/tmp/$m" ] || python3 bench/shape_model.py "$m" "/tmp/$m" >/dev/null & done
if [ "${CHECK:-0}" = 1 ]; then
    mkdir -p /tmp/ab_check
    for b in pk pk-old; do
        for s in 0 3; do
            for w in "$THREADS" 8; do
                pk_tiny_logits_check "build/$b" "$w" /tmp/ab_check "$s" | sed "s/\$/ ($b, $w workers)/"
            done
        done
    done
fi
wait
IFS='|' read -r -a variants <<<"$VARIANTS"
[ ${#variants[@]} -eq 0 ] && variants=("")
: >"$log"
for r in $(seq "$ROUNDS"); do
    for m in $MODELS; do
        for ctx in $CONTEXTS; do
            runs=()
            for v in "${variants[@]}"; do runs+=("pk|$v"); done
            runs+=("pk-old|")
            for run in "${runs[@]}"; do
                b=${run%%|*} v=${run#*|}
                out=$(pk_with_variant "$v" "build/$b" bench --backend cuda --threads "$THREADS" --context "$ctx" \
                    --max-seq "$MAX_SEQ" --gen "$GEN" --model "/tmp/$m" 2>&1)
                printf '== round %s %s %s %s %s\n%s\n' "$r" "$b" "${v:-default}" "$m" "$ctx" "$out" >>"$log"
                ms=$(printf '%s\n' "$out" | awk '/^decode /{print $3}')
                fl=$(printf '%s\n' "$out" | awk '/^floor /{print $2}')
                printf '%s %-6s %-24s %-11s %5s %s ms/token (floor %s)\n' "$r" "$b" "${v:-default}" "$m" "$ctx" \
                    "${ms:-FAILED}" "${fl:--}"
                [ -n "$ms" ] || printf '%s\n' "$out" | tail -n 3
            done
        done
    done
done
