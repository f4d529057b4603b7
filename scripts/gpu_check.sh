#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_check.sh — the CUDA backend's check on a GPU machine, in one go (docs/CUDA.md):
#   1. build pk and tests/gpu/test_cuda_e2e (or use binaries built elsewhere: see PREBUILT);
#   2. the end-to-end test table (tests/e2e_table.h): a 2-layer Qwen3-shaped model on the CPU and
#      CUDA backends × static and dynamic mode × 1 to 16 workers × variant (attention split over
#      the KV length, down_proj split over K, fused MLP, LM head with argmax, EOS), every row
#      against the reference forward (tokens identical, logits within bf16 tolerance, the same
#      bits within a graph); 100 repeated generations bit-identical, a Perfetto trace;
#   3. the debug build: a wait stalled on purpose must be reported, not hang;
#   4. with BIG="qwen3-0.6b qwen3-8b" (or qwen3-1.7b): random-weight model directories of those shapes,
#      loaded through pk_model_load_with (132 workers), CUDA static and dynamic vs the CPU backend:
#      tokens and logits;
#   5. every CUDA task kernel against its CPU kernel over a shape sweep (tests/cuda; KERNELS=0 skips);
#   6. logits against transformers under teacher forcing, pk-tiny and the BIG shapes
#      (scripts/gpu_teacher_forcing.py; TF=0 skips);
#   7. when models/pk-tiny exists: `pk generate` on both backends gives the same token ids, also
#      with the attention split over the KV length (`--kv-splits 3`, a 100-token prompt);
#   8. a result table.
# Switches: E2E_DEBUG=0 skips the debug-build pass of step 2, RUN_E2E=0 the normal pass, STALL=0 step 3;
# GEN=0 step 5; SANITIZE=1 adds a compute-sanitizer memcheck run of a short end-to-end check.
# Usage: bash scripts/gpu_check.sh        (OUT=dir keeps logs and the trace; default /tmp/pk-gpu-check)
# PREBUILT: if build/tests/gpu/test_cuda_e2e exists and its libraries resolve (.gpu/lib is added
# to LD_LIBRARY_PATH), it is used as is; a kernel cache in .gpu/cache is copied into a private
# directory and used (the cache key includes `nvcc --version`, so a different nvcc recompiles).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/pk-gpu-check}
mkdir -p "$OUT"
B=${BUILD:-build}
T0=$(date +%s)
results=()
note() { results+=("$(printf '%-44s %s' "$1" "$2")"); }

# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
pk_gpu_paths

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -4
nvcc --version 2>&1 | tail -2

echo "== build"
E2E=$B/tests/gpu/test_cuda_e2e
if [ -x "$E2E" ] && ! ldd "$E2E" | grep -q "not found"; then
    echo "using prebuilt $E2E"
else
    if make -j"$(nproc)" BUILD="$B" >"$OUT/build.log" 2>&1 && [ -x "$E2E" ]; then # make builds $E2E too
        echo "built"
    else
        tail -n 30 "$OUT/build.log"; note "build" "FAILED"
        printf '%s\n' "${results[@]}"; exit 1
    fi
fi

pk_private_cache
unset PK_CUDA_ARCH PK_CUDA_DEBUG

if [ "${E2E_DEBUG:-1}" != 0 ]; then
    echo "== end-to-end, debug build first (a stuck wait reports itself instead of hanging)"
    PK_CUDA_DEBUG=1 PK_CUDA_SPIN_LIMIT_MS=10000 timeout 150 "$E2E" >"$OUT/e2e_debug.log" 2>&1
    rc=$?
    grep -E '^(FAIL|cuda_e2e)' "$OUT/e2e_debug.log" | head -n 20
    summary=$(grep -E '^cuda_e2e: [0-9]+ passed' "$OUT/e2e_debug.log" | tail -n 1)
    note "end-to-end, debug build (exit $rc)" "${summary:-no summary (crash or timeout)}"
fi

if [ "${RUN_E2E:-1}" != 0 ]; then
    echo "== end-to-end: CUDA vs CPU"
    timeout 150 "$E2E" >"$OUT/e2e.log" 2>&1
    rc=$?
    grep -v '^pk: \(GPU memory\|compiling\)' "$OUT/e2e.log" | tail -n 40
    summary=$(grep -E '^cuda_e2e: [0-9]+ passed' "$OUT/e2e.log" | tail -n 1)
    note "end-to-end (exit $rc)" "${summary:-no summary (crash or timeout)}"
fi

if [ "${SANITIZE:-0}" != 0 ] && command -v compute-sanitizer >/dev/null; then
    echo "== compute-sanitizer memcheck: CPU vs CUDA static and dynamic (--quick)"
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$E2E" --quick >"$OUT/memcheck.log" 2>&1
    rc=$?
    grep -E '=========|^cuda_e2e_quick|FAIL' "$OUT/memcheck.log" | tail -n 12
    summary=$(grep -E '^cuda_e2e_quick: [0-9]+ passed' "$OUT/memcheck.log" | tail -n 1)
    note "memcheck (exit $rc; 9 = memory errors)" "${summary:-no summary (crash or timeout)}"
fi

if [ "${STALL:-1}" != 0 ]; then
echo "== debug build: a stalled wait is reported"
PK_CUDA_DEBUG=1 PK_CUDA_SPIN_LIMIT_MS=1000 PK_CUDA_DEBUG_STALL_TASK=1 timeout 60 "$E2E" --stall >"$OUT/stall.log" 2>&1
rc=$?
grep -E 'stall run|FAIL|cuda_e2e_stall' "$OUT/stall.log"
summary=$(grep -E '^cuda_e2e_stall: [0-9]+ passed' "$OUT/stall.log" | tail -n 1)
note "debug stall (exit $rc)" "${summary:-no summary (hang or crash)}"
fi

# BIG="qwen3-0.6b qwen3-8b" (qwen3-1.7b too): random-weight models of those shapes, 132 workers, CUDA vs CPU
for shape in ${BIG:-}; do
    echo "== $shape-shaped random model: CUDA vs CPU"
    limit=100; [ "$shape" = qwen3-8b ] && limit=200
    timeout $limit "$E2E" --big "$shape" 132 >"$OUT/big_$shape.log" 2>&1
    rc=$?
    grep -E 'cpu request|last step|relative L2|FAIL|^cuda_big' "$OUT/big_$shape.log" | head -n 20
    summary=$(grep -E '^cuda_big: [0-9]+ passed' "$OUT/big_$shape.log" | tail -n 1)
    note "$shape CUDA vs CPU (exit $rc)" "${summary:-no summary (crash or timeout)}"
done

if [ "${KERNELS:-1}" != 0 ]; then
    echo "== every CUDA task kernel against its CPU kernel (tests/cuda, fresh random inputs, shape sweep)"
    KB=.dev/cuda/test_cuda_kernels
    if [ ! -x "$KB" ]; then bash tests/cuda/build.sh .dev/cuda >"$OUT/kernels_build.log" 2>&1 || tail -n 20 "$OUT/kernels_build.log"; fi
    timeout 200 "$KB" >"$OUT/kernels.log" 2>&1
    rc=$?
    tail -n 17 "$OUT/kernels.log"
    summary=$(grep -E '^cuda_kernels: [0-9]+ passed' "$OUT/kernels.log" | tail -n 1)
    note "task kernels vs CPU (exit $rc)" "${summary:-no summary (crash or timeout)}"
fi

if [ "${TF:-1}" != 0 ] && python3 -c 'import transformers' 2>/dev/null; then
    echo "== logits vs transformers (bf16, teacher forcing; fp32 reference): pk-tiny ${BIG:-}"
    PK="$B/pk" OUT="$OUT/tf" BASELINE=0 NEW_TOKENS=16 timeout 600 python3 scripts/gpu_teacher_forcing.py pk-tiny ${BIG:-} \
        >"$OUT/tf.log" 2>&1
    rc=$?
    grep -v -i -E 'warn|it/s' "$OUT/tf.log" | tail -n 8
    note "logits vs transformers (exit $rc)" "$(grep -E '^teacher forcing:' "$OUT/tf.log" || echo 'no result')"
fi

if [ "${GEN:-1}" != 0 ] && [ -d models/pk-tiny ] && [ -x "$B/pk" ]; then
    echo "== pk generate: cpu vs cuda (models/pk-tiny)"
    "$B/pk" generate --prompt "The persistent kernel" --max-tokens 24 --print-ids --backend cpu >"$OUT/gen_cpu.txt" 2>"$OUT/gen_cpu.err"
    "$B/pk" generate --prompt "The persistent kernel" --max-tokens 24 --print-ids --backend cuda \
        --trace "$OUT/trace_pk_tiny.json" >"$OUT/gen_cuda.txt" 2>"$OUT/gen_cuda.err"
    tail -n 3 "$OUT/gen_cuda.err"
    note "pk generate pk-tiny, cuda vs cpu" "$(pk_tokens_compare "$OUT/gen_cpu.txt" "$OUT/gen_cuda.txt")"
    # the attention split over the KV length end to end with real weights (pk-tiny: D 64, so decode
    # rows take the staged split path; gpu_env.sh's pk_tiny_split_ids says why 12 tokens)
    ids=$(pk_tiny_split_ids)
    "$B/pk" generate --prompt-ids "$ids" --max-tokens 12 --kv-splits 3 --print-ids --backend cpu \
        >"$OUT/gen_split_cpu.txt" 2>"$OUT/gen_split_cpu.err"
    "$B/pk" generate --prompt-ids "$ids" --max-tokens 12 --kv-splits 3 --print-ids --backend cuda \
        >"$OUT/gen_split_cuda.txt" 2>"$OUT/gen_split_cuda.err"
    note "pk generate pk-tiny --kv-splits 3, cuda vs cpu" "$(pk_tokens_compare "$OUT/gen_split_cpu.txt" "$OUT/gen_split_cuda.txt")"
    for s in 0 3; do
        note "pk-tiny decode-step logits (splits $s)" "$(pk_tiny_logits_check "$B/pk" "" "$OUT" "$s")"
        # at 8 workers qkv tiles' workers run attention tasks (runtime.cuh pk_att_early)
        note "pk-tiny decode-step logits (splits $s, 8 workers)" "$(pk_tiny_logits_check "$B/pk" 8 "$OUT" "$s")"
    done
fi

echo
echo "== results ($(( $(date +%s) - T0 )) s)"
[ -f "$OUT/e2e.log" ] && grep -A 60 -E '^row +compile s' "$OUT/e2e.log" | grep -E '^(cpu|cuda) '
for shape in ${BIG:-}; do grep -E '^(0\.6b|1\.7b|8b) ' "$OUT/big_$shape.log"; done
printf '%s\n' "${results[@]}"
rm -rf "$PK_CACHE_DIR"
