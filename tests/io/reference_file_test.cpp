// tests/io/data/reference.safetensors was written by the official safetensors Python package
// (tests/io/data/make_reference.py). kiln must read exactly the values the script wrote,
// given there as bit patterns, and kiln's writer must produce the very same bytes.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>

#include "io_test_util.h"

namespace kiln::test {
namespace {

using io::SafetensorsFile;

std::string reference_path() { return (io_test_dir() / "data" / "reference.safetensors").string(); }

template <typename Bits>
std::vector<uint8_t> le_bytes(const std::vector<Bits>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(Bits));
  std::memcpy(out.data(), values.data(), out.size());  // little-endian host
  return out;
}

struct Expected {
  std::string name;
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};

std::vector<Expected> expected_tensors() {
  return {
      {"f32", DType::F32, {3, 3},
       le_bytes<uint32_t>({0x00000000, 0x80000000, 0x3FC00000, 0xC0100000, 0x7F800000,
                           0xFF800000, 0x7FC12345, 0x00000001, 0xFF812345})},
      {"f64", DType::F64, {5},
       le_bytes<uint64_t>({0x8000000000000000ull, 0x0000000000000001ull, 0x7FF0000000000001ull,
                           0xFFF8000000000ABCull, 0x400921FB54442D18ull})},
      {"f16", DType::F16, {2, 3}, le_bytes<uint16_t>({0x0000, 0x8000, 0x0001, 0x7C00, 0x7E01, 0x3C00})},
      {"bf16", DType::BF16, {4}, le_bytes<uint16_t>({0x3F80, 0x8000, 0x7FC1, 0x0001})},
      {"i8", DType::I8, {4}, le_bytes<int8_t>({-128, -1, 0, 127})},
      {"u8", DType::U8, {3}, le_bytes<uint8_t>({0, 128, 255})},
      {"i16", DType::I16, {2, 2}, le_bytes<int16_t>({-32768, -1, 1, 32767})},
      {"i32", DType::I32, {3}, le_bytes<int32_t>({INT32_MIN, 0, INT32_MAX})},
      {"i64", DType::I64, {1, 2}, le_bytes<int64_t>({INT64_MIN, INT64_MAX})},
      {"mask", DType::Bool, {2, 2}, {1, 0, 0, 1}},
      {"scalar", DType::F64, {}, le_bytes<double>({-7.125})},
      {"empty", DType::I32, {0, 3}, {}},
      {"odd \"name\"\\ \xC3\xA9\t", DType::U8, {2}, {7, 9}},
  };
}

TEST(SafetensorsReference, ReadsWhatThePythonPackageWrote) {
  SafetensorsFile f = SafetensorsFile::open(reference_path());
  std::vector<Expected> want = expected_tensors();
  ASSERT_EQ(f.size(), want.size());
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  for (const Expected& e : want) {
    SCOPED_TRACE(e.name);
    ASSERT_TRUE(f.contains(e.name));
    EXPECT_EQ(f.info(e.name).dtype, e.dtype);
    EXPECT_EQ(f.info(e.name).shape, e.shape);
    Tensor t = f.tensor(e.name);
    EXPECT_EQ(t.dtype(), e.dtype);
    EXPECT_EQ(t.shape(), e.shape);
    EXPECT_EQ(raw_bytes(t), e.bytes);
  }
  // A few values through kiln's own conversions, as a sanity check of the bit patterns.
  EXPECT_EQ(f.tensor("i64").to_vector<int64_t>(), (std::vector<int64_t>{INT64_MIN, INT64_MAX}));
  EXPECT_EQ(f.tensor("scalar").item<double>(), -7.125);
  std::vector<double> f32 = f.tensor("f32").to_vector<double>();
  EXPECT_EQ(f32[2], 1.5);
  EXPECT_EQ(f32[3], -2.25);
  EXPECT_TRUE(std::signbit(f32[1]) && f32[1] == 0.0);
  EXPECT_TRUE(std::isnan(f32[6]));
  EXPECT_EQ(f32[7], std::ldexp(1.0, -149));  // the smallest float32 subnormal
  EXPECT_EQ(f.tensor("bf16").to_vector<double>()[0], 1.0);
  EXPECT_EQ(f.tensor("f16").to_vector<double>()[2], std::ldexp(1.0, -24));
  // The tensor order is the reference implementation's: by decreasing alignment, then name.
  std::vector<std::string> order{"i64", "f64", "scalar", "f32", "empty", "i32", "bf16", "f16",
                                 "i16", "i8", "odd \"name\"\\ \xC3\xA9\t", "u8", "mask"};
  EXPECT_EQ(f.names(), order);
}

TEST(SafetensorsReference, WriterProducesTheSameBytes) {
  io::NamedTensors tensors;
  for (const Expected& e : expected_tensors())
    tensors.emplace_back(e.name, from_bytes(e.bytes, e.shape, e.dtype));
  std::vector<uint8_t> ours = io::safetensors_bytes(tensors, {{"format", "pt"}});
  std::vector<uint8_t> theirs = read_file(reference_path());
  ASSERT_FALSE(theirs.empty());
  EXPECT_EQ(std::string(ours.begin(), ours.end()), std::string(theirs.begin(), theirs.end()));
}

}  // namespace
}  // namespace kiln::test
