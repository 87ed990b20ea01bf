// bf16/f16 conversions: round to nearest even, NaN/Inf/subnormals, checked exhaustively
// against a float64 reference that decodes every 16-bit pattern independently.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/core/half.h"

namespace kiln {
namespace {

// Independent decoders: value of a 16-bit pattern from its fields, in double.
double decode_half(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) v = mant ? NAN : INFINITY;
  else if (exp == 0) v = std::ldexp(double(mant), -24);
  else v = std::ldexp(double(mant | 0x400), exp - 25);
  return sign ? -v : v;
}
double decode_bf16(uint16_t b) {
  int sign = b >> 15, exp = (b >> 7) & 0xff, mant = b & 0x7f;
  double v;
  if (exp == 0xff) v = mant ? NAN : INFINITY;
  else if (exp == 0) v = std::ldexp(double(mant), -133);
  else v = std::ldexp(double(mant | 0x80), exp - 134);
  return sign ? -v : v;
}

// The correctly rounded (nearest, ties to even) 16-bit pattern for x, found by search over
// all finite patterns of the format: independent of the conversion code under test.
template <typename Decode>
uint16_t nearest_even(double x, Decode decode, uint16_t max_finite_bits) {
  uint16_t best = 0;
  double best_err = INFINITY;
  for (uint32_t b = 0; b <= max_finite_bits; ++b) {
    for (int s = 0; s < 2; ++s) {
      uint16_t bits = uint16_t(b | (s << 15));
      double err = std::fabs(decode(bits) - x);
      bool better = err < best_err ||
                    (err == best_err && (bits & 1) == 0 && (best & 1) == 1);
      if (better && !(x > 0 && s) && !(x < 0 && !s)) {
        best = bits;
        best_err = err;
      }
    }
  }
  return best;
}

TEST(Half, DecodesEveryPatternExactly) {
  for (uint32_t b = 0; b < 65536; ++b) {
    double want = decode_half(uint16_t(b));
    float got = Half::from_bits(uint16_t(b));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << b;
    else EXPECT_EQ(double(got), want) << "bits " << b;
  }
}

TEST(Half, RoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    Half h = Half::from_bits(uint16_t(b));
    Half back{static_cast<float>(h)};
    if (std::isnan(float(h))) EXPECT_TRUE(std::isnan(float(back)));
    else EXPECT_EQ(back.bits, h.bits) << "bits " << b;
  }
}

TEST(Half, RoundsToNearestEvenAtMidpointsAndSubnormals) {
  // Midpoints between consecutive halfs (exactly representable in float) tie to even.
  for (uint32_t b = 0; b < 0x7bff; b += 7) {
    double lo = decode_half(uint16_t(b)), hi = decode_half(uint16_t(b + 1));
    float mid = float((lo + hi) / 2);
    ASSERT_EQ(double(mid), (lo + hi) / 2);
    uint16_t want = (b & 1) ? uint16_t(b + 1) : uint16_t(b);
    EXPECT_EQ(Half(mid).bits, want) << "midpoint after bits " << b;
    EXPECT_EQ(Half(-mid).bits, want | 0x8000) << "negative midpoint after bits " << b;
  }
  EXPECT_EQ(Half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Half(65519.0f).bits, 0x7bff);  // below the midpoint to inf
  EXPECT_EQ(Half(65520.0f).bits, 0x7c00);  // ties to even: infinity
  EXPECT_EQ(Half(1e10f).bits, 0x7c00);
  EXPECT_EQ(Half(-INFINITY).bits, 0xfc00);
  EXPECT_TRUE(std::isnan(float(Half(NAN))));
  EXPECT_EQ(Half(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(Half(std::ldexp(1.0f, -25)).bits, 0x0000);  // half of it ties to even (0)
  EXPECT_EQ(Half(std::ldexp(1.5f, -25)).bits, 0x0001);
  EXPECT_EQ(Half(std::ldexp(3.0f, -25)).bits, 0x0002);  // 1.5 ulp ties to even (2)
  EXPECT_EQ(Half(-0.0f).bits, 0x8000);
}

TEST(Half, RandomFloatsRoundCorrectly) {
  uint32_t state = 12345;
  for (int i = 0; i < 300; ++i) {
    state = state * 1664525u + 1013904223u;
    float x = std::ldexp(float(state % 100000) / 100000.0f, int(state % 40) - 26);
    uint16_t want = nearest_even(double(x), decode_half, 0x7bff);
    EXPECT_EQ(Half(x).bits, want) << "x=" << x;
  }
}

TEST(BFloat16, DecodesAndRoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    double want = decode_bf16(uint16_t(b));
    float got = BFloat16::from_bits(uint16_t(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
      EXPECT_TRUE(std::isnan(float(BFloat16(got))));
    } else {
      EXPECT_EQ(double(got), want) << "bits " << b;
      EXPECT_EQ(BFloat16(got).bits, uint16_t(b));
    }
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  // 1 + 2^-8 is the midpoint between 1 and the next bf16 (1 + 2^-7): ties to even (1).
  EXPECT_EQ(BFloat16(1.0f + std::ldexp(1.0f, -8)).bits, BFloat16(1.0f).bits);
  // 1 + 3*2^-8 is the midpoint between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(float(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(float(BFloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))),
            1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::max()).bits, 0x7f80);  // overflows to inf
  EXPECT_TRUE(std::isnan(float(BFloat16(NAN))));
  EXPECT_TRUE(std::isnan(float(BFloat16(-NAN))));
  float sub = std::ldexp(1.0f, -130);  // float subnormal: bf16 keeps it
  EXPECT_EQ(float(BFloat16(sub)), sub);
}

}  // namespace
}  // namespace kiln
