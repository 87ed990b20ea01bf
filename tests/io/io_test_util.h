#pragma once
// Helpers for the io tests: temporary directories, raw tensor bytes, and safetensors images
// assembled by hand from a header string and a data buffer.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kiln/io/safetensors.h"
#include "kiln/io/serialize.h"
#include "kiln/kiln.h"

namespace kiln::test {

namespace fs = std::filesystem;

// tests/io/. KILN_TESTS_DIR (set by tests/CMakeLists.txt) is absolute; __FILE__ may be relative
// when ccache rewrites paths to share its cache between checkouts.
#ifdef KILN_TESTS_DIR
inline fs::path io_test_dir() { return fs::path(KILN_TESTS_DIR) / "io"; }
#else
inline fs::path io_test_dir() { return fs::path(__FILE__).parent_path(); }
#endif

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("kiln_io_test_" + std::to_string(rd()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The logical bytes of t (row-major, host copy), whatever its device and layout.
inline std::vector<uint8_t> raw_bytes(const Tensor& t) {
  Tensor h = t.contiguous().cpu();
  const auto* p = static_cast<const uint8_t*>(h.raw_data());
  return std::vector<uint8_t>(p, p + h.nbytes());
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// 8-byte little-endian n followed by rest; image(): a file image: 8-byte little-endian length of `header`, the header, then `data_size`
// bytes of data (0, 1, 2, ...).
inline std::vector<uint8_t> with_length(uint64_t n, const std::string& rest) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  s += rest;
  return std::vector<uint8_t>(s.begin(), s.end());
}
inline std::vector<uint8_t> image(const std::string& header, size_t data_size = 0) {
  std::string data(data_size, '\0');
  for (size_t i = 0; i < data_size; ++i) data[i] = char(uint8_t(i));
  return with_length(header.size(), header + data);
}

// A tensor of dtype and shape on device whose bytes are exactly `bytes`.
inline Tensor from_bytes(const std::vector<uint8_t>& bytes, const Shape& shape, DType dtype,
                         Device device = Device(DeviceType::CPU, 0)) {
  EXPECT_EQ(bytes.size(), size_t(numel_of(shape)) * element_size(dtype));
  return from_blob_copy(bytes.data(), shape, dtype, device);
}

// n random bytes valid for dtype (0/1 for bool, any pattern otherwise).
inline std::vector<uint8_t> random_bytes(size_t n, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = dtype == DType::Bool ? uint8_t(rng() & 1) : uint8_t(rng());
  return out;
}

// Every dtype safetensors can hold (all of kiln's but complex128, which it has no name for).
inline std::vector<DType> all_dtypes() {
  std::vector<DType> out;
  for (int i = 0; i < kNumDTypes; ++i)
    if (DType(i) != DType::C128) out.push_back(DType(i));
  return out;
}

}  // namespace kiln::test
