#!/usr/bin/env bash
# Fuzzes kiln's safetensors reader with libFuzzer (clang, AddressSanitizer + UBSan).
#
#   scripts/fuzz_safetensors.sh [seconds=60] [extra libFuzzer flags...]
#
# Builds libkiln with clang and coverage instrumentation in build-fuzz/, links the target
# tests/fuzz/safetensors_fuzz.cpp, and runs it for the given time with the seed corpus in
# tests/io/data and tests/io/regressions and the dictionary tests/fuzz/safetensors.dict.
# New corpus inputs go to build-fuzz/corpus (not committed). Inputs that crash, leak or time
# out are saved to tests/io/regressions/: fix the bug and commit them; the GoogleTest case
# tests/io/regression_corpus_test.cpp replays every file there (under ASan in CI).
# Exits non-zero if the fuzzer found a problem.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true

# libomp-14-dev: clang's OpenMP runtime, for kiln's find_package(OpenMP).
bash scripts/install_deps.sh clang libclang-rt-14-dev libomp-14-dev
cxx=$(command -v clang++-14 || command -v clang++)
dir=build-fuzz
cmake_bin=/usr/bin/cmake
[ -x "$cmake_bin" ] || cmake_bin=cmake

echo "== building libkiln with $cxx (ASan + UBSan + fuzzer coverage) in $dir"
"$cmake_bin" -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DKILN_SANITIZE=ON -DKILN_BUILD_TESTS=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null
ninja -C "$dir" -j"${KILN_JOBS:-2}" kiln
"$cxx" -std=c++20 -O1 -g -DKILN_FUZZING -Iinclude -pthread \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
  tests/fuzz/safetensors_fuzz.cpp -L"$dir" -lkiln -Wl,-rpath,"$PWD/$dir" -o "$dir/safetensors_fuzz"

mkdir -p "$dir/corpus" tests/io/regressions
before=$(ls tests/io/regressions | sort)
echo "== fuzzing for ${seconds}s"
set +e
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
  "$dir/safetensors_fuzz" "$dir/corpus" tests/io/data tests/io/regressions \
  -dict=tests/fuzz/safetensors.dict -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=65536 -artifact_prefix=tests/io/regressions/ -print_final_stats=1 "$@"
status=$?
set -e
after=$(ls tests/io/regressions | sort)
found=$(comm -13 <(echo "$before") <(echo "$after"))
if [ -n "$found" ]; then
  echo "== new inputs saved in tests/io/regressions/ (fix the bug, then commit them):"
  echo "$found"
fi
echo "== fuzzer exit status: $status"
exit $status
