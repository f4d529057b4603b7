#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The full suite, as CI runs it (README: `make check`):
#   1. the normal build and every test; the Python package over build/libpk.so (tests/test_python.sh);
#      pk serve through the OpenAI Node SDK (tests/test_serve_openai.sh); bench/serve_bench.py's
#      smoke run (tests/test_serve_bench.sh);
#      `make install` into the build dir and the examples built against it through pkg-config
#      (tests/test_install.sh); LICENSE and the SPDX line of every source file (tests/test_license.sh);
#   2. the same tests built with AddressSanitizer + UndefinedBehaviorSanitizer (test_cuda_compile's
#      checks of nvcc's own output, ptxas's report and the bench builds, run in 1 only);
#   3. the runtime, task-graph, session and pk serve tests built with ThreadSanitizer;
#   4. the fuzz targets replaying their seed corpora, and a short libFuzzer run when clang has it;
#   5. `pk compile` of the shipped model for the CUDA backend (compile only) when nvcc is present.
# Ends with the total line "N passed, N failed"; exits non-zero if anything failed.
set -u
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
pass=0; fail=0
tally() { # adds "[NAME: ]P passed, F failed" from the last line of $1
    local line; line=$(tail -n 1 "$1")
    if [[ "$line" =~ ^([A-Za-z0-9_./-]+:\ )?([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        pass=$((pass + BASH_REMATCH[2])); fail=$((fail + BASH_REMATCH[3]))
    else
        echo "$2: no summary line"; fail=$((fail + 1))
    fi
}
log=$(mktemp -d)
start=$SECONDS
section() { echo "== $1 (at $((SECONDS - start)) s)"; } # CI has 30 minutes: say where they go

section "build and test"
if make -j"$JOBS" >"$log/build.txt" 2>&1; then
    BUILD=build bash tests/run.sh | tee "$log/normal.txt"; tally "$log/normal.txt" normal
    section "Python package"
    BUILD=build bash tests/test_python.sh | tee "$log/python.txt"; tally "$log/python.txt" python
    section "pk serve through the OpenAI Node SDK"
    BUILD=build bash tests/test_serve_openai.sh | tee "$log/openai.txt"; tally "$log/openai.txt" serve_openai
    section "pk serve's load benchmark, a smoke run"
    BUILD=build bash tests/test_serve_bench.sh | tee "$log/serve_bench.txt"; tally "$log/serve_bench.txt" serve_bench
else
    tail -n 30 "$log/build.txt"; echo "build failed"; fail=$((fail + 1))
fi

section "install, pkg-config, examples; licence"
BUILD=build bash tests/test_install.sh | tee "$log/install.txt"; tally "$log/install.txt" install
bash tests/test_license.sh | tee "$log/license.txt"; tally "$log/license.txt" license

section "AddressSanitizer + UBSan"
if make -j"$JOBS" SAN=address >"$log/asan-build.txt" 2>&1; then
    # nvcc's own output (ptxas's report, the bench builds) is checked once, in the normal pass
    PK_TEST_NVCC_EXTRAS=0 ASAN_OPTIONS=detect_leaks=1 BUILD=build-address bash tests/run.sh | tee "$log/asan.txt"
    tally "$log/asan.txt" asan
else
    tail -n 30 "$log/asan-build.txt"; echo "ASan build failed"; fail=$((fail + 1))
fi

section "ThreadSanitizer (runtime tests)"
tsan_tests="test_e2e_graph test_runtime_stress test_taskgraph test_session test_serve"
targets="build-thread/pk"; for t in $tsan_tests; do [ -f "tests/$t.c" ] && targets="$targets build-thread/tests/$t"; done
if make -j"$JOBS" SAN=thread $targets >"$log/tsan-build.txt" 2>&1; then
    ONLY="$tsan_tests" BUILD=build-thread bash tests/run.sh | tee "$log/tsan.txt"; tally "$log/tsan.txt" tsan
else
    tail -n 30 "$log/tsan-build.txt"; echo "TSan build failed"; fail=$((fail + 1))
fi

if [ -x fuzz/run.sh ] || [ -f fuzz/run.sh ]; then
    section "fuzz"
    if FUZZ_SECONDS=${FUZZ_SECONDS:-20} bash fuzz/run.sh >"$log/fuzz.txt" 2>&1; then
        tail -n 5 "$log/fuzz.txt"; pass=$((pass + 1)); echo "fuzz: 1 passed, 0 failed"
    else
        tail -n 30 "$log/fuzz.txt"; fail=$((fail + 1)); echo "fuzz: 0 passed, 1 failed"
    fi
fi

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    section "CUDA compile-only (pk compile of the shipped model)"
    out=$(mktemp -d)
    if PK_CACHE_DIR="$out/cache" ./build/pk compile --out "$out/kernel" --arch sm_90a >"$log/cuda.txt" 2>&1; then
        tail -n 3 "$log/cuda.txt"; pass=$((pass + 1)); echo "cuda_compile_only: 1 passed, 0 failed"
    else
        tail -n 30 "$log/cuda.txt"; fail=$((fail + 1)); echo "cuda_compile_only: 0 passed, 1 failed"
    fi
    rm -rf "$out"
fi
rm -rf "$log"
echo "(all sections: $((SECONDS - start)) s)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
