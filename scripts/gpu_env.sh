# shellcheck shell=bash
# gpu_env.sh — sourced (from the repository root) by the scripts that run on the GPU machine:
# scripts/gpu_check.sh, bench/run_bench.sh, bench/quick_gpu.sh.

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

# The prompt of the pk-tiny split check (`pk generate --prompt-ids "$(pk_tiny_split_ids)"
# --max-tokens 12 --kv-splits 3`, CUDA against the CPU: quick_gpu.sh, gpu_check.sh, run_bench.sh's
# gate; precompile.sh compiles its kernel): 100 ids, so decode rows take the staged split path and
# prefill chunks cross 32-position blocks. 12 tokens, not more: the 14th of this prompt is an exact
# bf16 tie on the CPU (tokens 1306 and 3097 both 29.5; the GPU gives 29.375 / 29.625), with or
# without the split, so the backends part there by rounding alone.
pk_tiny_split_ids() { seq -s, 7 37 3700; }
