// GGUF files built byte by byte here (from the format's description: little-endian header,
// metadata, tensor infos listing sizes innermost first, data aligned to general.alignment):
// every value type and tensor kind reads back; each structural defect gets its error; and
// thousands of mutated files either read completely or fail with a kiln::Error, never
// reading outside the image (this suite runs under ASan and UBSan in CI).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/core/half.h"
#include "kiln/io/gguf_file.h"
#include "kiln/kiln.h"

namespace kiln::test {
namespace {

using io::GGUFFile;
using io::GGUFValueType;

struct Builder {
  std::vector<uint8_t> b;
  template <typename T>
  Builder& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Builder& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Builder& pad_to(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
};

// A file with one key of each scalar type, a string array, and three tensors: F32 [2, 3],
// Q8_0 [2, 32] (two blocks with scales 0.5 and -0.25) and I32 [4].
std::vector<uint8_t> sample_file() {
  Builder f;
  f.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(3).put<uint64_t>(6);
  f.str("general.architecture").put<uint32_t>(8).str("llama");
  f.str("a.u32").put<uint32_t>(4).put<uint32_t>(4000000000u);
  f.str("a.i8").put<uint32_t>(1).put<int8_t>(-7);
  f.str("a.f64").put<uint32_t>(12).put<double>(2.5);
  f.str("a.bool").put<uint32_t>(7).put<uint8_t>(1);
  f.str("a.tokens").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("<s>").str("\xe2\x96\x81hi");
  // Tensor infos: name, n_dims, sizes (innermost first), type, offset.
  f.str("f").put<uint32_t>(2).put<uint64_t>(3).put<uint64_t>(2).put<uint32_t>(0).put<uint64_t>(0);
  f.str("q").put<uint32_t>(2).put<uint64_t>(32).put<uint64_t>(2).put<uint32_t>(8).put<uint64_t>(32);
  f.str("i").put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(26).put<uint64_t>(128);
  f.pad_to(32);
  const size_t data = f.b.size();
  for (int k = 0; k < 6; ++k) f.put<float>(float(k) - 1.5f);
  f.pad_to(32);
  for (int row = 0; row < 2; ++row) {
    f.put<uint16_t>(Half::from_float(row == 0 ? 0.5f : -0.25f));
    for (int j = 0; j < 32; ++j) f.put<int8_t>(int8_t(j - 16 + row));
  }
  while (f.b.size() < data + 128) f.b.push_back(0);
  for (int k = 0; k < 4; ++k) f.put<int32_t>(k * 1000 - 7);
  return f.b;
}

TEST(GGUFFile, ReadsMetadataAndTensors) {
  const std::vector<uint8_t> bytes = sample_file();
  GGUFFile f = GGUFFile::from_buffer(bytes.data(), bytes.size(), "sample");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  ASSERT_EQ(f.metadata().size(), 6u);
  EXPECT_EQ(f.find("general.architecture")->string_value, "llama");
  EXPECT_EQ(f.find("a.u32")->uint_value, 4000000000u);
  EXPECT_EQ(f.find("a.i8")->int_value, -7);
  EXPECT_EQ(f.find("a.f64")->float_value, 2.5);
  EXPECT_TRUE(f.find("a.bool")->bool_value);
  const io::GGUFValue* tokens = f.find("a.tokens");
  ASSERT_EQ(tokens->type, GGUFValueType::Array);
  ASSERT_EQ(tokens->items.size(), 2u);
  EXPECT_EQ(tokens->items[1].string_value, "\xe2\x96\x81hi");
  EXPECT_EQ(f.find("missing"), nullptr);

  Tensor t = f.tensor("f");
  ASSERT_EQ(t.shape(), (Shape{2, 3}));
  for (int k = 0; k < 6; ++k) EXPECT_EQ(t.data_ptr<float>()[k], float(k) - 1.5f);

  Tensor raw = f.tensor("q");
  EXPECT_EQ(raw.dtype(), DType::U8);
  EXPECT_EQ(raw.shape(), (Shape{2, 34}));
  Tensor q = f.dequantize("q");
  ASSERT_EQ(q.shape(), (Shape{2, 32}));
  for (int row = 0; row < 2; ++row)
    for (int j = 0; j < 32; ++j)
      EXPECT_EQ(q.data_ptr<float>()[row * 32 + j], float(j - 16 + row) * (row == 0 ? 0.5f : -0.25f));

  Tensor i = f.tensor("i");
  EXPECT_EQ(i.dtype(), DType::I32);
  EXPECT_EQ(i.data_ptr<int32_t>()[3], 2993);
  EXPECT_THROW(f.dequantize("i"), TypeError);
  EXPECT_THROW(f.tensor("nope"), ValueError);
}

TEST(GGUFFile, StructuralDefectsAreValueErrors) {
  const std::vector<uint8_t> good = sample_file();
  auto expect_error = [](std::vector<uint8_t> bytes, const std::string& substring) {
    try {
      GGUFFile::from_buffer(bytes.data(), bytes.size(), "bad");
      ADD_FAILURE() << "accepted a file that should fail with: " << substring;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(substring), std::string::npos) << e.what();
    }
  };
  expect_error({}, "truncated");
  std::vector<uint8_t> b = good;
  b[0] = 'X';
  expect_error(b, "not a GGUF file");
  b = good;
  b[4] = 4;
  expect_error(b, "unsupported GGUF version 4");
  for (size_t cut : {size_t(10), size_t(30), size_t(100), good.size() - 1})
    expect_error(std::vector<uint8_t>(good.begin(), good.begin() + cut), "truncated");
  // Claim a huge key count: each key is then read until the file ends.
  b = good;
  const uint64_t many = 1ull << 19;
  std::memcpy(b.data() + 16, &many, 8);
  expect_error(b, "GGUF file");
}

TEST(GGUFFile, MutatedFilesReadFullyOrFailCleanly) {
  const std::vector<uint8_t> good = sample_file();
  std::mt19937 rng(123);
  int ok = 0, failed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = good;
    const int kind = iter % 3;
    if (kind == 0) {
      for (int k = 0, n = 1 + int(rng() % 6); k < n; ++k) b[rng() % b.size()] = uint8_t(rng());
    } else if (kind == 1) {
      b.resize(rng() % b.size());
    } else {
      const size_t pos = rng() % (b.size() - 8);
      const uint64_t vals[] = {0, 1, 31, 33, 1ull << 32, ~0ull, 1ull << 63};
      std::memcpy(b.data() + pos, &vals[rng() % 7], 8);
    }
    try {
      GGUFFile f = GGUFFile::from_buffer(b.data(), b.size(), "fuzz");
      for (const io::GGUFTensorInfo& t : f.tensors()) {
        Tensor v = f.tensor(t.name);
        EXPECT_EQ(v.nbytes(), t.nbytes);
        try {
          f.dequantize(t.name);
        } catch (const TypeError&) {
        }
      }
      ++ok;
    } catch (const Error&) {
      ++failed;
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace kiln::test
