// libFuzzer target for kiln's safetensors reader (scripts/fuzz_safetensors.sh builds and runs
// it with -DKILN_FUZZING). Each input is parsed as a whole file image; if it parses, every
// tensor is read, and the tensors and metadata are written back and read again, which must
// give the same names, dtypes, shapes, bytes and metadata. Anything but success or a
// kiln::Error (a crash, a sanitizer report, another exception, a failed property) is a bug.
//
// Without KILN_FUZZING (the normal CMake build, which makes this folder kiln_test_fuzz) the
// same entry point replays tests/io/regressions and tests/io/data under GoogleTest.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/io/safetensors.h"

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& name) {
  std::fprintf(stderr, "safetensors fuzz: property failed: %s (tensor '%s')\n", what, name.c_str());
  std::abort();
}

void check_round_trip(const kiln::io::SafetensorsFile& f, const kiln::io::NamedTensors& tensors) {
  std::vector<uint8_t> again = kiln::io::safetensors_bytes(tensors, f.metadata());
  kiln::io::SafetensorsFile g = kiln::io::SafetensorsFile::from_buffer(again.data(), again.size());
  if (g.size() != f.size()) property_failed("round trip changed the tensor count", "");
  if (g.metadata() != f.metadata()) property_failed("round trip changed the metadata", "");
  if (g.header_size() % 8 != 0) property_failed("written header is not 8-byte aligned", "");
  for (const auto& [name, t] : tensors) {
    if (!g.contains(name)) property_failed("round trip lost a tensor", name);
    const kiln::io::TensorInfo& a = f.info(name);
    const kiln::io::TensorInfo& b = g.info(name);
    if (a.dtype != b.dtype || a.shape != b.shape) property_failed("dtype or shape changed", name);
    std::span<const uint8_t> x = f.bytes(name), y = g.bytes(name);
    if (x.size() != y.size() || (x.size() && std::memcmp(x.data(), y.data(), x.size()) != 0))
      property_failed("bytes changed", name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    kiln::io::SafetensorsFile f = kiln::io::SafetensorsFile::from_buffer(data, size, "fuzz-input");
    kiln::io::NamedTensors tensors;
    bool all_read = true;
    for (const std::string& name : f.names()) {
      const kiln::io::TensorInfo& info = f.info(name);
      std::span<const uint8_t> bytes = f.bytes(name);
      if (bytes.size() != info.nbytes() || f.data_offset() + info.end > f.file_size())
        property_failed("tensor bytes outside the file", name);
      unsigned sum = 0;  // read every byte, so that ASan checks the range
      for (uint8_t b : bytes) sum += b;
      if (sum == 0xFFFFFFFFu) std::fputc(0, stderr);
      try {
        kiln::Tensor t = f.tensor(name);
        if (t.shape() != info.shape || t.dtype() != info.dtype || t.nbytes() != info.nbytes())
          property_failed("tensor() disagrees with info()", name);
        tensors.emplace_back(name, t);
      } catch (const kiln::ValueError&) {
        if (info.dtype != kiln::DType::Bool) throw;  // only BOOL bytes are checked lazily
        all_read = false;
      }
    }
    if (all_read) check_round_trip(f, tensors);
  } catch (const kiln::Error&) {
    // Rejected cleanly.
  }
  return 0;
}

#ifndef KILN_FUZZING
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

TEST(SafetensorsFuzzTarget, ReplaysTheCorpus) {
  namespace fs = std::filesystem;
  // KILN_TESTS_DIR: the tests/ folder (set by tests/CMakeLists.txt; __FILE__ may be a
  // relative path when ccache rewrites paths).
#ifdef KILN_TESTS_DIR
  fs::path io = fs::path(KILN_TESTS_DIR) / "io";
#else
  fs::path io = fs::path(__FILE__).parent_path().parent_path() / "io";
#endif
  size_t n = 0;
  for (const char* sub : {"regressions", "data"}) {
    if (!fs::is_directory(io / sub)) continue;
    for (const auto& e : fs::directory_iterator(io / sub)) {
      if (!e.is_regular_file() || e.path().extension() == ".py" || e.path().extension() == ".md")
        continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
      SCOPED_TRACE(e.path().string());
      EXPECT_EQ(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()), 0);
      ++n;
    }
  }
  EXPECT_GT(n, 0u) << "no corpus files under " << io;
}
#endif
