// float32 <-> float16 conversions of dense tensors (the ISA's F16C converters, copy_kernels.cpp)
// and of strided ones (the element loop), against float64 math: every float16 bit pattern
// widened, float32 values of every magnitude (ties, subnormal results, overflow, NaN payloads)
// narrowed. Also float32 -> bfloat16 with NaN lanes among ordinary ones (the AVX-512 pair
// store takes another path for a pair of vectors holding a NaN). Run at every ISA level.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/bf16_bits.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The value of float16 bits in float64 (NaN for every NaN pattern).
double half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1f) return m ? std::nan("") : s * INFINITY;
  if (e == 0) return s * std::ldexp(double(m), -24);
  return s * std::ldexp(1.0 + m / 1024.0, e - 15);
}

// float32 -> the nearest float16 value (ties to even) in float64 math; infinity past 65504.
double nearest_half(float f) {
  const double x = double(f), a = std::fabs(x);
  if (a == 0 || std::isinf(x)) return x;
  const int e = std::max(std::ilogb(a), -14);  // below 2^-14: the subnormal spacing
  const double ulp = std::ldexp(1.0, e - 10);
  const double q = std::nearbyint(a / ulp) * ulp;  // a / ulp is exact: a power-of-two scale
  return std::copysign(q >= 65520.0 ? INFINITY : q, x);
}

Tensor f32_tensor(const std::vector<uint32_t>& bits) {
  Tensor t = empty({int64_t(bits.size())}, TensorOptions(DType::F32));
  std::memcpy(t.raw_data(), bits.data(), bits.size() * 4);
  return t;
}
std::vector<uint16_t> u16_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint16_t> b(size_t(c.numel()));
  std::memcpy(b.data(), c.raw_data(), b.size() * 2);
  return b;
}
std::vector<uint32_t> u32_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint32_t> b(size_t(c.numel()));
  std::memcpy(b.data(), c.raw_data(), b.size() * 4);
  return b;
}

TEST(ConversionF16, EveryHalfPatternWidensExactly) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
  Tensor h = empty({65536}, TensorOptions(DType::F16));
  std::memcpy(h.raw_data(), all.data(), all.size() * 2);
  // Dense (threaded, then a length with a vector tail) and strided (the element loop).
  const std::vector<std::pair<std::string, Tensor>> forms = {
      {"dense", h}, {"tail", h.slice(0, 0, 65533).contiguous()},
      {"strided", h.reshape({256, 256}).t()}};
  for (const auto& [what, t] : forms) {
    const std::vector<uint16_t> in = u16_of(t);
    const std::vector<uint32_t> got = u32_of(t.to(DType::F32));
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t b = in[i];
      const double want = half_value(b);
      if (std::isnan(want)) {  // sign, all-ones exponent, payload in the top mantissa bits
        const uint32_t bits =
            (uint32_t(b & 0x8000) << 16) | 0x7f800000u | (uint32_t(b & 0x3ff) << 13);
        ASSERT_EQ(got[i], bits) << what << " at " << i << ": half bits 0x" << std::hex << b;
      } else {
        ASSERT_EQ(double(float_of(got[i])), want) << what << " at " << i;
      }
    }
  }
}

TEST(ConversionF16, Float32NarrowsToTheNearestHalf) {
  std::mt19937 rng(7);
  std::vector<uint32_t> bits(300007);
  // Random patterns over every exponent, then values around float16's edges.
  for (auto& b : bits) b = uint32_t(rng());
  const uint32_t specials[] = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,  // zeros, infinities
      0x7f800001u, 0xffc00001u, 0x7fffffffu, 0x7fc02000u,  // NaN payloads
      0x477fe000u, 0x477fefffu, 0x477ff000u, 0x47800000u,  // 65504, just below / at 65520
      0x33000000u, 0x33000001u, 0x337fffffu, 0x33800000u,  // half / just above the least subnormal
      0x38800000u, 0x387fffffu, 0x3f801000u, 0x3f803000u,  // least normal, ties to even
      0x3f800fffu, 0x3f801001u, 0x00000001u, 0x80400000u};
  for (size_t i = 0; i < std::size(specials); ++i) bits[i * 1009] = specials[i];
  // Magnitudes in float16's range are most of the interesting cases: a third of them rescaled.
  for (size_t i = 1; i < bits.size(); i += 3) bits[i] = (bits[i] & 0x81ffffffu) | 0x36000000u;
  Tensor x = f32_tensor(bits);
  const std::vector<std::pair<std::string, Tensor>> forms = {
      {"dense", x}, {"tail", x.slice(0, 0, 45).contiguous()},
      {"strided", x.slice(0, 0, 300000).reshape({600, 500}).t()}};
  for (const auto& [what, t] : forms) {
    const std::vector<uint32_t> in = u32_of(t);
    const std::vector<uint16_t> got = u16_of(t.to(DType::F16));
    for (size_t i = 0; i < in.size(); ++i) {
      const float f = float_of(in[i]);
      if (std::isnan(f)) {  // quiet, sign and the payload's top bits kept
        const uint16_t want =
            uint16_t(((in[i] >> 16) & 0x8000u) | 0x7e00u | ((in[i] >> 13) & 0x3ffu));
        ASSERT_EQ(got[i], want) << what << " at " << i << ": float32 bits 0x" << std::hex << in[i];
        continue;
      }
      const double want = nearest_half(f), g = half_value(got[i]);
      ASSERT_EQ(g, want) << what << " at " << i << ": float32 bits 0x" << std::hex << in[i];
      ASSERT_EQ(std::signbit(g), std::signbit(want)) << what << " at " << i;
    }
  }
}

TEST(ConversionBf16, NaNLanesAmongOrdinaryValuesNarrowAlike) {
  // A NaN every 37 values: some vector pairs hold one, most do not; lengths with and without
  // a tail, threaded and not.
  for (int64_t n : {int64_t(64), int64_t(77), int64_t(100003)}) {
    std::vector<uint32_t> bits(static_cast<size_t>(n));
    std::mt19937 rng{static_cast<uint32_t>(n)};
    for (int64_t i = 0; i < n; ++i)
      bits[size_t(i)] = i % 37 == 5 ? (0x7f800001u | uint32_t(rng() & 0x807fffffu))
                                    : bits_of(std::ldexp(float(rng() % 20000) - 10000.0f, -7));
    const std::vector<uint16_t> got = bf16_bits_of(f32_tensor(bits).to(DType::BF16));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[size_t(i)], round_to_bf16_bits(float_of(bits[size_t(i)])))
          << "n " << n << " at " << i << ": float32 bits 0x" << std::hex << bits[size_t(i)];
  }
}

}  // namespace
}  // namespace kiln::test
