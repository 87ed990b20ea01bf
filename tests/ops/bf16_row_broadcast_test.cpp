// bfloat16 binary ops with a row broadcast down the rows (x * b[0], x + bias, bias - x): the
// row is widened once into a periodic float32 buffer, and at the AVX2 / AVX-512 levels mul,
// add and (row - x) run as muladd_bf16 with the row as the per-element scale or shift
// (bf16_elementwise.h), converting in registers. Every result must be exactly the float32 op
// on the widened values rounded once to nearest even (a NaN result: some NaN), for rows
// shorter than a vector, longer than a block (256) and than a vector group, specials in both
// operands (signed zeros: -0 * 3 must stay -0, so the shift of x * row is -0.0), rows taken
// at a storage offset, and both operand orders. x - row and x / row take the generic blocks
// and must agree too. Also float32 -> bfloat16 conversion of NaNs: the sign and the payload's
// high bits kept, the quiet bit set (the rounding add must not carry a NaN into infinity).
// CTest reruns this suite at every ISA level.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops/bf16_bits.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

float widen(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16 values in [-4, 4) with signed zeros, infinities and NaN at a few places.
std::vector<double> values_with_specials(size_t n, uint32_t seed) {
  std::vector<double> v = random_values(n, -4, 4, seed);
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {0.0, -0.0, inf, -inf, std::nan(""), 3.0, -0.5};
  for (size_t i = 0; i < n; i += 13) v[i] = specials[(i / 13) % std::size(specials)];
  return v;
}

struct RowOp {
  std::string name;
  std::function<Tensor(const Tensor& x, const Tensor& row)> op;
  std::function<float(float x, float r)> ref;
};

TEST(BinaryBf16RowBroadcast, EveryOpRoundsOnceForEveryRowLength) {
  const std::vector<RowOp> ops = {
      {"x * row", [](const Tensor& x, const Tensor& r) { return x * r; },
       [](float x, float r) { return x * r; }},
      {"row * x", [](const Tensor& x, const Tensor& r) { return r * x; },
       [](float x, float r) { return r * x; }},
      {"x + row", [](const Tensor& x, const Tensor& r) { return x + r; },
       [](float x, float r) { return x + r; }},
      {"row + x", [](const Tensor& x, const Tensor& r) { return r + x; },
       [](float x, float r) { return r + x; }},
      {"row - x", [](const Tensor& x, const Tensor& r) { return r - x; },
       [](float x, float r) { return r - x; }},
      {"x - row", [](const Tensor& x, const Tensor& r) { return x - r; },
       [](float x, float r) { return x - r; }},
      {"x / row", [](const Tensor& x, const Tensor& r) { return x / r; },
       [](float x, float r) { return x / r; }},
  };
  const Device cpu(DeviceType::CPU, 0);
  for (int64_t cols : {int64_t(7), int64_t(37), int64_t(300), int64_t(2053)}) {
    const int64_t rows = std::max<int64_t>(3, 140000 / cols);  // threaded for the longer rows
    const Tensor x =
        make(values_with_specials(size_t(rows * cols), uint32_t(cols)), {rows, cols},
             DType::BF16, cpu);
    // The row at a storage offset: row 2 of a [4, cols] tensor (b[2] of the b[0]).
    const Tensor table =
        make(values_with_specials(size_t(4 * cols), uint32_t(cols + 1)), {4, cols}, DType::BF16,
             cpu);
    const Tensor row = table.select(0, 2);
    const std::vector<uint16_t> xb = bf16_bits_of(x), rb = bf16_bits_of(row);
    for (const RowOp& op : ops) {
      const std::string what = op.name + " cols " + std::to_string(cols);
      const Tensor got = op.op(x, row);
      ASSERT_EQ(got.dtype(), DType::BF16) << what;
      ASSERT_EQ(got.shape(), (Shape{rows, cols})) << what;
      const std::vector<uint16_t> g = bf16_bits_of(got);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const size_t k = size_t(i * cols + j);
          const float want = op.ref(widen(xb[k]), widen(rb[size_t(j)]));
          if (std::isnan(want)) {
            ASSERT_TRUE((g[k] & 0x7fffu) > 0x7f80u) << what << " at " << i << ", " << j;
            continue;
          }
          ASSERT_EQ(g[k], round_to_bf16_bits(want))
              << what << " at " << i << ", " << j << ": x bits 0x" << std::hex << xb[k]
              << ", row bits 0x" << rb[size_t(j)];
        }
    }
  }
}

TEST(ConversionBf16, Float32NaNsKeepSignAndPayloadWhenNarrowed) {
  const uint32_t nans[] = {0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu,
                           0xff800001u, 0xffffffffu, 0xffc00001u, 0x7f80ffffu};
  const Device cpu(DeviceType::CPU, 0);
  // Lengths with and without a vector tail, and one large enough to be threaded.
  for (int64_t n : {int64_t(8), int64_t(45), int64_t(100003)}) {
    std::vector<float> f(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = nans[size_t(i) % std::size(nans)];
      std::memcpy(&f[size_t(i)], &u, 4);
    }
    Tensor x = empty({n}, TensorOptions(DType::F32, cpu));
    std::memcpy(x.raw_data(), f.data(), f.size() * 4);
    const std::vector<uint16_t> g = bf16_bits_of(x.to(DType::BF16));
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = nans[size_t(i) % std::size(nans)];
      ASSERT_EQ(g[size_t(i)], uint16_t((u >> 16) | 0x40u))
          << "n " << n << " at " << i << ": float32 bits 0x" << std::hex << u;
    }
  }
}

}  // namespace
}  // namespace kiln::test
