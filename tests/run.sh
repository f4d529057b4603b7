#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every test program in $BUILD/tests and ends with the total "N passed, N failed".
# A program that crashes, prints no summary or runs longer than $TEST_TIMEOUT seconds (default
# 900: a deadlocked runtime must fail the run, not hang it) counts as one failure.
set -u
BUILD=${BUILD:-build}
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
cd "$(dirname "$0")/.."
total_pass=0; total_fail=0
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    # ONLY="test_a test_b" restricts the run to those programs.
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $(basename "$t") "* ]]; then continue; fi
    out=$(timeout -k 10 "$TEST_TIMEOUT" "$t" 2>&1); rc=$?
    summary=$(printf '%s\n' "$out" | grep -E '^[A-Za-z0-9_./-]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ "$rc" -eq 124 ]; then
        printf '%s\n' "$out" | tail -n 20
        echo "$(basename "$t"): timed out after ${TEST_TIMEOUT}s"
        total_fail=$((total_fail + 1)); continue
    fi
    if [ -z "$summary" ]; then
        printf '%s\n' "$out" | tail -n 20
        echo "$(basename "$t"): crashed or printed no summary (exit $rc)"
        total_fail=$((total_fail + 1)); continue
    fi
    p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/' <<<"$summary")
    f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/' <<<"$summary")
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    [ "$f" -ne 0 ] && printf '%s\n' "$out" | grep -E '^FAIL|^error' | head -n 20
    echo "$summary"
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
done
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
