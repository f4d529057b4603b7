#!/usr/bin/env bash
# session 37: one xz pack per prepared call, holding only the kernels that call loads
# (docs/experiments/session37-keys.sh CALL), stripped, plus .gpu/lib: .dev/gpu-CALL.tar.xz
set -u
cd "$(dirname "$0")/../.." || exit 1 # the repository root
. scripts/gpu_env.sh
root=$PWD
mkdir -p .dev
pk_gpu_libs # .gpu/lib: libcjson, libpcre2 for the prebuilt binaries
for call in "$@"; do
  keys=$(bash docs/experiments/session37-keys.sh $call)
  rm -rf /tmp/pack-$call && mkdir -p /tmp/pack-$call/.gpu/cache && chmod 700 /tmp/pack-$call/.gpu/cache
  cp -r .gpu/lib /tmp/pack-$call/.gpu/
  miss=0 n=0
  for k in $keys; do
    if [ -f .gpu/cache/$k/kernel.so ]; then cp -r .gpu/cache/$k /tmp/pack-$call/.gpu/cache/; n=$((n + 1))
    else echo "$call: $k not compiled"; miss=$((miss + 1)); fi
  done
  pk_cache_strip /tmp/pack-$call/.gpu/cache
  (cd /tmp/pack-$call && tar -cf - .gpu | xz -T0 -6 > "$root/.dev/gpu-$call.tar.xz")
  echo "$call: $n kernels, $miss missing, $(du -m .dev/gpu-$call.tar.xz | cut -f1) MB"
done
