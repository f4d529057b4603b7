#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_license.sh — pk's licence as shipped: LICENSE is the Apache License 2.0 text, the shipped
# model's card states its terms, and every source file carries "SPDX-License-Identifier:
# Apache-2.0" in its first 3 lines (scripts/add_spdx.sh adds it; its --list names the files).
# Ends with "test_license: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
TAG="SPDX-License-Identifier: Apache-2.0"
pass=0; fail=0
ok() { if "$@"; then pass=$((pass + 1)); return 0; else fail=$((fail + 1)); return 1; fi; }

# The standard text as Debian ships it (/usr/share/common-licenses/Apache-2.0).
apache=cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30
ok [ "$(sha256sum < LICENSE 2>/dev/null | cut -d' ' -f1)" = "$apache" ] ||
    echo "FAIL LICENSE is not the Apache License 2.0 text"
ok grep -q 'Apache License 2.0' models/pk-tiny/README.md ||
    echo "FAIL models/pk-tiny/README.md does not state its licence"

has_tag() { head -n 3 "$1" | grep -qF "$TAG"; }
n=0
while IFS= read -r f; do
    n=$((n + 1))
    ok has_tag "$f" || echo "FAIL $f: no '$TAG' in its first 3 lines (scripts/add_spdx.sh adds it)"
done < <(bash scripts/add_spdx.sh --list)
ok [ "$n" -ge 100 ] || echo "FAIL only $n source files found: the list cannot be right"
echo "test_license: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
