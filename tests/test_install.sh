#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test_install.sh — pk as people install and use it: `make install` into a prefix inside the
# build dir (and with DESTDIR), the files and links it writes, the soname, pk.pc through
# pkg-config, the exported names against pk.h, the README's C example being examples/graph.c
# as printed, both examples built with `cc x.c $(pkg-config --cflags --libs pk)` against the
# installed library and run (generate.c on models/pk-tiny, its text checked against the
# transformers golden), the installed pk, and `make uninstall`. Needs `make` done first
# (check_all.sh) and pkg-config (`make deps`). Ends with "test_install: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CC=${CC:-cc}
pass=0; fail=0
check() { # check NAME CMD...: one test
    local name=$1; shift
    local out; out=$("$@" 2>&1); local rc=$?
    if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); else
        fail=$((fail + 1)); echo "FAIL $name"; printf '%s\n' "$out" | tail -n 15 | sed 's/^/    /'
    fi
}
version=$(sed -n 's/^#define PK_VERSION_STRING "\(.*\)"/\1/p' include/pk.h)
major=${version%%.*}
tmp="$BUILD/install-test"
rm -rf "$tmp"; mkdir -p "$tmp"
prefix=$(cd "$tmp" && pwd)/prefix
lib="$prefix/lib"

check "make install PREFIX=$prefix" make -s --no-print-directory BUILD="$BUILD" install PREFIX="$prefix"

files_present() {
    local p=$1
    [ -x "$p/bin/pk" ] && [ -f "$p/lib/libpk.so.$version" ] && [ ! -L "$p/lib/libpk.so.$version" ] &&
    [ "$(readlink "$p/lib/libpk.so.$major")" = "libpk.so.$version" ] &&
    [ "$(readlink "$p/lib/libpk.so")" = "libpk.so.$major" ] &&
    [ -f "$p/lib/libpk.a" ] && cmp -s "$p/include/pk.h" include/pk.h && [ -f "$p/lib/pkgconfig/pk.pc" ] ||
    { ls -lR "$p"; return 1; }
}
check "installed files and links (version $version)" files_present "$prefix"
check "soname libpk.so.$major" bash -c "readelf -d '$lib/libpk.so.$version' | grep -q 'Library soname: \[libpk.so.$major\]'"

export PKG_CONFIG_PATH="$lib/pkgconfig"
check "pkg-config --modversion pk is $version" bash -c "[ \"\$(pkg-config --modversion pk)\" = '$version' ]"
check "pkg-config --libs pk" bash -c "pkg-config --libs pk | grep -q -- '-L$lib -lpk' && pkg-config --static --libs pk | grep -q -- '-lcjson' && pkg-config --cflags pk | grep -q -- '-I$prefix/include'"

# libpk.so exports exactly the functions pk.h declares.
exports_match() {
    diff <(grep -oE '\bpk_[a-z0-9_]+\(' include/pk.h | tr -d '(' | sort -u) \
         <(nm -D --defined-only "$lib/libpk.so" | awk '{print $3}' | sort -u)
}
check "libpk.so exports exactly pk.h's functions" exports_match

# The README's C block is examples/graph.c, so it compiles as printed.
readme_block() { awk '/^```c$/ {on = 1; next} on && /^```$/ {exit} on' README.md; }
check "README's C example is examples/graph.c" diff <(readme_block) <(grep -v '^// SPDX-License-Identifier:' examples/graph.c)

cflags="-std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes"
for ex in graph generate; do
    # shellcheck disable=SC2046,SC2086
    check "cc examples/$ex.c \$(pkg-config --cflags --libs pk)" \
        $CC $cflags "examples/$ex.c" $(pkg-config --cflags --libs pk) -o "$tmp/$ex"
done
check "examples/graph resolves the installed libpk.so.$major" \
    bash -c "LD_LIBRARY_PATH='$lib' ldd '$tmp/graph' | grep -q 'libpk.so.$major => $lib/libpk.so.$major'"
run_graph() { local out; out=$(LD_LIBRARY_PATH="$lib" "$tmp/graph") && echo "$out" &&
              [[ "$out" =~ ^[0-9]+( [0-9]+){7}$ ]]; }
check "examples/graph runs: 8 token ids" run_graph
golden="In the beginning of the sayings of Jesus Christ, and Timothyy, in the truth of the church."
run_generate() { local out; out=$(LD_LIBRARY_PATH="$lib" "$tmp/generate" models/pk-tiny "In the beginning" 24) &&
                 echo "$out" && [[ "$out" == "$golden"* ]]; }
check "examples/generate on models/pk-tiny gives the golden text" run_generate
check "examples/generate on a missing directory exits 1 with a message" \
    bash -c "! LD_LIBRARY_PATH='$lib' '$tmp/generate' '$tmp/none' 2>'$tmp/err' && grep -q 'config.json' '$tmp/err'"
check "the installed pk generates" bash -c "'$prefix/bin/pk' generate --model models/pk-tiny --prompt 'In the beginning' --max-tokens 4 | grep -q 'In the beginning'"

# DESTDIR stages the default prefix; uninstall removes every file install wrote.
stage=$(cd "$tmp" && pwd)/stage
check "make install DESTDIR=... (PREFIX /usr/local)" make -s --no-print-directory BUILD="$BUILD" install DESTDIR="$stage"
check "DESTDIR install's files and links" files_present "$stage/usr/local"
check "pk.pc under DESTDIR names /usr/local" grep -qx 'prefix=/usr/local' "$stage/usr/local/lib/pkgconfig/pk.pc"
check "make uninstall DESTDIR=..." make -s --no-print-directory BUILD="$BUILD" uninstall DESTDIR="$stage"
check "uninstall leaves no file" bash -c "[ -z \"\$(find '$stage' ! -type d)\" ] || find '$stage' ! -type d"

rm -rf "$tmp"
echo "test_install: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
