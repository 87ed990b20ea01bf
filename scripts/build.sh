#!/usr/bin/env bash
# Configures and builds one flavour of kiln: scripts/build.sh release|asan [targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so every clone (CI's included) shares hits.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
flavour=${1:-release}
shift || true
case "$flavour" in
  release) flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON) ;;
  *) echo "usage: $0 release|asan [targets...]" >&2; exit 2 ;;
esac
dir=build/$flavour
# Prefer Debian's cmake (the pip shim may point at a different version).
cmake_bin=/usr/bin/cmake
[ -x "$cmake_bin" ] || cmake_bin=cmake
"$cmake_bin" -S . -B "$dir" -G Ninja "${flags[@]}" -DCMAKE_INSTALL_PREFIX="$PWD/$dir/prefix" >/dev/null
ninja -C "$dir" -j"$(nproc)" "$@"
