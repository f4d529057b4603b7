#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fuzz/run.sh — builds and runs pk's fuzz targets; exits non-zero on any crash.
#   1. replays each seed corpus through a gcc ASan/UBSan build of the target and
#      fuzz/standalone_main.c (no libFuzzer needed);
#   2. builds each target with clang -fsanitize=fuzzer,address,undefined and fuzzes it for
#      FUZZ_SECONDS (default 20) over a copy of its corpus in a temp dir.
# Env: FUZZ_SECONDS, FUZZ_TARGETS ("safetensors config tokenizer serve_request"), FUZZ_OUT (binaries and crash
# reproducers, default fuzz-out/), CC_REPLAY (gcc), CLANG (clang), FUZZ_REPLAY_ONLY=1 (skip 2).
# A crash leaves its input in $FUZZ_OUT/crash-<target>-*; replay it with
# $FUZZ_OUT/<target>_replay FILE.
set -eu
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-20}
TARGETS=${FUZZ_TARGETS:-"safetensors config tokenizer serve_request"}
OUT=${FUZZ_OUT:-fuzz-out}
CC_REPLAY=${CC_REPLAY:-gcc}
CLANG=${CLANG:-clang}
mkdir -p "$OUT"

WARN="-std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla"
CPP="-D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Isrc"
LIBS="-lcjson -lpcre2-8 -lm -lpthread"
SRCS_safetensors="src/model/safetensors.c src/common/file.c"
SRCS_config="src/model/hf_config.c src/common/file.c"
SRCS_tokenizer="$(echo src/tokenizer/*.c) src/common/file.c"
SRCS_serve_request="tools/serve/request.c"

work=$(mktemp -d /tmp/pk_fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Stage 2 needs clang with libFuzzer (libclang-rt-dev on Debian); without it only the replays
# run, as tests/check_all.sh promises.
fuzzer=0
if [ "${FUZZ_REPLAY_ONLY:-0}" != 1 ]; then
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\n%s\n' \
        'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' \
        >"$work/probe.c"
    if "$CLANG" -fsanitize=fuzzer "$work/probe.c" -o "$work/probe" >/dev/null 2>&1; then
        fuzzer=1
    else
        echo "== $CLANG cannot build libFuzzer targets: corpus replays only"
    fi
fi

status=0
for t in $TARGETS; do
    srcs_var=SRCS_$t
    srcs=${!srcs_var}
    echo "== $t: replay corpus ($CC_REPLAY, ASan+UBSan)"
    # shellcheck disable=SC2086
    "$CC_REPLAY" $WARN $CPP -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined \
        "fuzz/fuzz_$t.c" fuzz/standalone_main.c $srcs $LIBS -o "$OUT/${t}_replay"
    "$OUT/${t}_replay" "fuzz/corpus/$t" || { echo "$t: corpus replay FAILED"; status=1; continue; }

    [ "$fuzzer" = 1 ] || continue
    echo "== $t: libFuzzer for ${SECONDS_EACH}s"
    # shellcheck disable=SC2086
    "$CLANG" $WARN $CPP -g -O1 -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=undefined "fuzz/fuzz_$t.c" $srcs $LIBS -o "$OUT/${t}_fuzz"
    cp -r "fuzz/corpus/$t" "$work/$t"
    if ! "$OUT/${t}_fuzz" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
            -max_len=8192 -dict="fuzz/$t.dict" -artifact_prefix="$OUT/crash-$t-" \
            -print_final_stats=1 "$work/$t" >"$work/$t.log" 2>&1; then
        tail -n 60 "$work/$t.log"
        echo "$t: FUZZER FOUND A CRASH (reproducer in $OUT/crash-$t-*)"
        status=1
        continue
    fi
    grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$work/$t.log" || true
    echo "$t: ok ($(ls "$work/$t" | wc -l) corpus entries after fuzzing)"
done
exit $status
