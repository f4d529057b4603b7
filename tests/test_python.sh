#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_python.sh — the Python package (python/pk) on the CPU backend: pytest over python/tests
# with PYTHONPATH=python and PK_LIBRARY=$BUILD/libpk.so (the demo's graph against `pk generate`,
# misuse, lifetimes, memory, the venv install). Needs `make` done first and Debian's python3,
# python3-numpy, python3-pytest, python3-venv, python3-setuptools (`make deps-test`). Ends with
# "python: N passed, N failed" (pytest's failures and errors; skips are listed above it).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
# The first interpreter that has numpy and pytest: $PYTHON, python3, then Debian's own.
py=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy, pytest' >/dev/null 2>&1; then py=$p; break; fi
done
if [ -z "$py" ]; then
    echo "no python3 with numpy and pytest (make deps-test installs python3-numpy python3-pytest)"
    echo "python: 0 passed, 1 failed"; exit 1
fi
[ -f "$BUILD/libpk.so" ] || { echo "$BUILD/libpk.so is missing: run make first"; echo "python: 0 passed, 1 failed"; exit 1; }
out=$(PYTHONPATH=python PK_LIBRARY="$PWD/$BUILD/libpk.so" BUILD="$PWD/$BUILD" PYTHONDONTWRITEBYTECODE=1 \
      timeout -k 10 600 "$py" -m pytest -q -rs -p no:cacheprovider python/tests 2>&1); rc=$?
printf '%s\n' "$out" | tail -n 40
summary=$(printf '%s\n' "$out" | tail -n 1)
num() { grep -oE "[0-9]+ $1" <<<"$summary" | grep -oE '^[0-9]+' || echo 0; }
passed=$(num passed); failed=$(( $(num failed) + $(num error) ))
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1  # pytest crashed, timed out or collected nothing
echo "python: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
