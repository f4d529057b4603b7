# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# gpu_env.sh — sourced (from the repository root) by the scripts that run on the GPU machine
# (scripts/gpu_check.sh, bench/run_bench.sh, bench/quick_gpu.sh, bench/ab_run.sh) and by those that
# prepare their kernels here (bench/precompile.sh, bench/ab_prepare.sh, bench/ptxas_report.sh).

# The libraries of prebuilt binaries (.gpu/lib: libcjson, libpcre2, which the GPU image may
# lack) and nvcc on PATH.
pk_gpu_paths() {
    if [ -d .gpu/lib ]; then export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
    export PATH="$PATH:/usr/local/cuda/bin"
}

# A private kernel cache in PK_CACHE_DIR (pk refuses a cache others can write), seeded with the
# kernels compiled ahead of time into .gpu/cache (docs/PERF.md). The caller removes it.
pk_private_cache() {
    PK_CACHE_DIR=$(mktemp -d /tmp/pk-cache-XXXXXX) || return 1
    export PK_CACHE_DIR
    chmod 700 "$PK_CACHE_DIR"
    if [ -d .gpu/cache ]; then cp -r .gpu/cache/. "$PK_CACHE_DIR"/ && chmod -R go-w "$PK_CACHE_DIR"; fi
}

# Kernels from the carried cache only: PK_NVCC becomes a stand-in that answers --version as nvcc
# does (the cache key holds it) and fails every compile, so on the device a cache miss ends the run
# at once instead of spending device time on nvcc (~90 s per kernel), and
# here a dry run of each command a call will make says, before packing, whether .gpu/cache holds
# its kernel ("kernel not in the cache" on stderr); bench/ptxas_report.sh uses it to have pk write
# kernel.cu without compiling it. Needs nvcc on PATH (pk_gpu_paths). Usage: pk_nvcc_cached [FILE]
# (where the stand-in goes; default a file in TMPDIR).
pk_nvcc_cached() {
    local f=${1:-${TMPDIR:-/tmp}/pk-nvcc-cached.$$}
    # shellcheck disable=SC2016 # the stand-in's own "$1", written literally
    printf '%s\n' '#!/bin/bash' 'if [ "$1" = "--version" ]; then exec nvcc --version; fi' \
        'echo "pk_nvcc_cached: kernel not in the cache" >&2; exit 1' >"$f" && chmod +x "$f" && export PK_NVCC="$f"
}

# The prompt of the pk-tiny split check (`pk generate --prompt-ids "$(pk_tiny_split_ids)"
# --max-tokens 12 --kv-splits 3`, CUDA against the CPU: quick_gpu.sh, gpu_check.sh, run_bench.sh's
# gate; precompile.sh compiles its kernel): 100 ids, so decode rows take the staged split path and
# prefill chunks cross 32-position blocks. 12 tokens, not more: the 14th of this prompt is an exact
# bf16 tie on the CPU (tokens 1306 and 3097 both 29.5; the GPU gives 29.375 / 29.625), with or
# without the split, so the backends part there by rounding alone.
pk_tiny_split_ids() { seq -s, 7 37 3700; }

# pk-tiny's decode steps under teacher forcing, CUDA against the CPU: `pk generate --logits
# --step-tokens 1` runs every prefix of the pk_tiny_split_ids prompt as one-row steps (the staged
# decode attention on the GPU; with --kv-splits S > 1 its split), and scripts/compare_logits.py
# compares the logits (relative L2 <= 1e-2, argmax equal wherever the CPU's top-2 gap is
# decisive). Where the backends sum in different orders (the tensor cores) greedy tokens may part
# at a near tie; this check says whether every step's logits still agree. Usage:
# pk_tiny_logits_check PK THREADS OUTDIR [KV_SPLITS [ARGS]] (THREADS "": CUDA's default, one
# worker per SM; ARGS: more `pk` arguments for both backends' runs, e.g. "--fused-mlp off"); prints
# one line, returns its status.
pk_tiny_logits_check() {
    local pk=$1 threads=$2 out=$3 splits=${4:-0} args=${5:-} be
    local -a thr
    # shellcheck disable=SC2086 # the extra arguments are words of their own
    for be in cpu cuda; do # the CPU's result does not depend on its thread count: 8 of them
        thr=()
        if [ $be = cpu ]; then thr=(--threads 8); elif [ -n "$threads" ]; then thr=(--threads "$threads"); fi
        timeout 300 "$pk" generate --prompt-ids "$(pk_tiny_split_ids)" --max-tokens 1 --step-tokens 1 \
            --kv-splits "$splits" --logits "$out/tf_${splits}_$be.bin" --backend $be "${thr[@]}" $args \
            >/dev/null 2>"$out/tf_${splits}_$be.err" || { echo "pk-tiny decode logits (splits $splits): $be run FAILED: $(tail -n 1 "$out/tf_${splits}_$be.err")"; return 1; }
    done
    local line rc
    line=$(python3 scripts/compare_logits.py "$out/tf_${splits}_cpu.bin" "$out/tf_${splits}_cuda.bin" 100); rc=$?
    echo "pk-tiny decode logits, cuda vs cpu (100 one-row steps, splits $splits): $line"
    return $rc
}

# Greedy tokens of two backends (files of ids, one line each), for the log: "same N tokens" or
# where they part. Not a pass / fail: the tensor-core decode attention sums in another order than
# the CPU, and a near tie (or an exact bf16 tie: pk_tiny_split_ids) decides a greedy token by
# rounding alone; pk_tiny_logits_check decides whether every step's logits agree.
pk_tokens_compare() {
    python3 - "$1" "$2" <<'PY'
import sys
a, b = (open(p).read().split() for p in sys.argv[1:3])
if a and a == b:
    print(f"same {len(a)} tokens")
else:
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    print(f"part at token {k + 1} ({len(a)} cpu, {len(b)} cuda)")
PY
}

# The settings of a same-call A/B (bench/ab_prepare.sh compiles the kernels, bench/ab_run.sh runs
# them): both must use the same ones, since they are part of what each kernel is compiled for.
# Sets MODELS, CONTEXTS, MAX_SEQ, GEN, THREADS and VARIANTS from the environment or the defaults.
# MAX_SEQ "context" (the default): each context's kernel has max_seq_length context + GEN, as
# bench/run_bench.py builds it (pk_ab_max_seq); a number: one max_seq_length for every context.
pk_ab_settings() {
    MODELS=${MODELS:-qwen3-0.6b}
    CONTEXTS=${CONTEXTS:-160}
    MAX_SEQ=${MAX_SEQ:-context}
    GEN=${GEN:-128}
    THREADS=${THREADS:-132}
    VARIANTS=${VARIANTS:-}
}

# The --max-seq of CONTEXT's kernel under pk_ab_settings' MAX_SEQ. Usage: pk_ab_max_seq CONTEXT
pk_ab_max_seq() {
    if [ "$MAX_SEQ" = context ]; then echo $(($1 + GEN)); else echo "$MAX_SEQ"; fi
}

# Runs "$@" (a pk command line) as variant $1 of an A/B (VARIANTS' entries): the variant's words
# are more arguments of that command (e.g. "--fused-mlp off"); "" is the build's default.
pk_with_variant() {
    local v=$1
    shift
    # shellcheck disable=SC2086 # the variant's arguments are words of their own
    "$@" $v
}

# The host libraries build/pk loads beyond glibc's own (libc, libm and the loader, which the
# device has): cJSON, PCRE2, and pk serve's libmicrohttpd with what it pulls in (GnuTLS, nettle,
# gmp, p11-kit, ...), copied into .gpu/lib for the device, whose image may lack any of them
# (pk_gpu_paths puts .gpu/lib on LD_LIBRARY_PATH there). The list is ldd's, so a library pk
# comes to link is carried without a change here.
# Each goes in under a new name and is renamed over the old: a shell where pk_gpu_paths put .gpu/lib
# on LD_LIBRARY_PATH runs cp itself against these files (cp links PCRE2), and writing into the
# library cp has mapped crashes it.
pk_gpu_libs() {
    [ -x build/pk ] || { echo "pk_gpu_libs: build/pk is missing (make first)" >&2; return 1; }
    mkdir -p .gpu/lib
    local name path
    while read -r name path; do
        case "$name" in libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) continue ;; esac
        cp -L "$path" ".gpu/lib/.new.$name" && mv -f ".gpu/lib/.new.$name" ".gpu/lib/$name" || return 1
    done < <(ldd build/pk | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
    for name in libcjson.so.1 libpcre2-8.so.0 libmicrohttpd.so.12; do
        [ -f ".gpu/lib/$name" ] || { echo "pk_gpu_libs: ldd build/pk names no $name" >&2; return 1; }
    done
}

# Compiles, without a GPU, the kernel `pk bench ARGS` would load for MODEL's zero-weight stand-in
# (bench/shape_model.py --zeros, made into /tmp/z-MODEL first when missing), into $PK_CACHE_DIR;
# the compile runs in the background (the caller waits), and pk's expected "no CUDA GPU" is
# dropped from its output. Usage: pk_bench_precompile MODEL ARGS...
pk_bench_precompile() {
    local m=$1
    shift
    [ -d "/tmp/z-$m" ] || python3 bench/shape_model.py "$m" "/tmp/z-$m" --zeros >/dev/null
    PK_CUDA_ARCH=sm_90a build/pk bench --model "/tmp/z-$m" "$@" 2>&1 | grep -v "no CUDA GPU" &
}

# The random-weight stand-ins (bench/shape_model.py) of MODELS... in /tmp/MODEL, made where missing.
pk_random_models() {
    local m
    for m in "$@"; do [ -d "/tmp/$m" ] || python3 bench/shape_model.py "$m" "/tmp/$m" >/dev/null; done
}

# Strips a kernel cache folder to its kernel.so files (the device tool carries 64 MiB at most):
# each entry's generated sources go; an entry without kernel.so is an error (returns 1).
pk_cache_strip() {
    local d
    for d in "$1"/*/; do
        rm -rf "$d"kernel.cu "$d"common "$d"kernels "$d"runtime "$d"pk.h "$d"pk_abi.h
        [ -f "$d"kernel.so ] || { echo "pk_cache_strip: no kernel.so in $d" >&2; return 1; }
    done
}
