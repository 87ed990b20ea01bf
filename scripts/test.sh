#!/usr/bin/env bash
# Sets up kiln on a fresh Debian 12 machine and runs every test: the C++ suites in a Release
# build and in an AddressSanitizer + UndefinedBehaviorSanitizer build, then an install and a
# separate consumer project built against it with find_package(kiln).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/install_deps.sh
jobs=$(nproc)

echo "== Release build and tests"
bash scripts/build.sh release
ctest --test-dir build/release --output-on-failure -j"$jobs" --timeout 600

echo "== ASan + UBSan build and tests"
bash scripts/build.sh asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan --output-on-failure -j"$jobs" --timeout 900

echo "== install + find_package(kiln) consumer"
rm -rf build/release/prefix build/consumer
cmake --install build/release --prefix build/release/prefix >/dev/null
cmake_bin=/usr/bin/cmake
[ -x "$cmake_bin" ] || cmake_bin=cmake
"$cmake_bin" -S examples/consumer -B build/consumer -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/release/prefix" >/dev/null
ninja -C build/consumer
./build/consumer/kiln_consumer

echo "== all tests passed in $(( $(date +%s) - start )) s"
