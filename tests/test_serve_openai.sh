#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_serve_openai.sh — pk serve through the official OpenAI Node SDK (tests/serve_openai.mjs):
# needs `make` done first, node and the npm package openai in ./node_modules (`make deps-test`).
# Ends with "serve_openai: N passed, N failed"; a missing dependency is a failure, not a skip.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if ! command -v node >/dev/null 2>&1 || [ ! -f node_modules/openai/package.json ]; then
    echo "no node or no node_modules/openai (make deps-test installs them)"
    echo "serve_openai: 0 passed, 1 failed"; exit 1
fi
[ -x "$BUILD/pk" ] || { echo "$BUILD/pk is missing: run make first"; echo "serve_openai: 0 passed, 1 failed"; exit 1; }
out=$(BUILD="$BUILD" timeout -k 10 300 node tests/serve_openai.mjs 2>&1); rc=$?
printf '%s\n' "$out" | tail -n 30 | grep -v '^serve_openai: '
summary=$(printf '%s\n' "$out" | grep -E '^serve_openai: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
if [ -z "$summary" ]; then echo "serve_openai: 0 passed, 1 failed"; exit 1; fi
if [ "$rc" -ne 0 ] && [[ "$summary" == *" 0 failed" ]]; then summary="${summary% 0 failed} 1 failed"; fi
echo "$summary"
[[ "$summary" == *" 0 failed" ]]
