#!/usr/bin/env bash
# Adds the line "SPDX-License-Identifier: Apache-2.0" to every source file of pk that lacks it:
# C, CUDA and JavaScript files get a `//` line at the top, shell and Python files a `#` line
# after the shebang (or at the top). Idempotent: a file that has the line in its first 3 lines is
# left alone, so it can be run again after a merge brings new files. `--list` prints the files it
# covers (tests/test_license.sh checks each), one a line.
set -eu
cd "$(dirname "$0")/.."
TAG="SPDX-License-Identifier: Apache-2.0"

list() {
    find src include tools tests examples fuzz scripts bench python -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.sh' \
           -o -name '*.py' -o -name '*.mjs' \) \
        -not -path 'tests/data/*' -not -path 'fuzz/corpus/*' -not -path 'bench/results/*' | LC_ALL=C sort
    printf '%s\n' Makefile .ci/run python/pyproject.toml
}

has_tag() { head -n 3 "$1" | grep -qF "$TAG"; }

if [ "${1:-}" = "--list" ]; then list; exit 0; fi

added=0
while IFS= read -r f; do
    has_tag "$f" && continue
    case "$f" in
        *.c|*.h|*.cu|*.cuh|*.mjs) line="// $TAG" ;;
        *) line="# $TAG" ;;
    esac
    tmp="$f.spdx.tmp"
    if head -n 1 "$f" | grep -q '^#!'; then
        { head -n 1 "$f"; echo "$line"; tail -n +2 "$f"; } > "$tmp"
    else
        { echo "$line"; cat "$f"; } > "$tmp"
    fi
    cat "$tmp" > "$f" && rm -f "$tmp" # keeps the file's mode
    added=$((added + 1))
done < <(list)
echo "add_spdx: added the line to $added file(s)"
