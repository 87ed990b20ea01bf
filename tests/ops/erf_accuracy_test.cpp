// erf of float32 and bfloat16 tensors against float64 erf. From the AVX2 level up the vector
// table's own two-piece approximation runs (decision 0038; an offline sweep of every positive
// float found at most 1.05 ulps at AVX-512 and 1.0 at AVX2 in a 1-in-16 sample); the baseline
// level takes the C library's erff. The isa_* CTest reruns cover every level.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ops/accuracy_util.h"

namespace kiln::test {
namespace {

// Every 4093rd bit pattern of the positive floats (both pieces, the blend at 1, the cap at
// 3.92, subnormals) and their negatives, plus the edges of each piece; an odd count, so the
// vector tail runs too, and enough values to be split over the threads.
TEST(UnaryErfAccuracy, Float32WithinOneAndAQuarterUlp) {
  std::vector<float> v;
  for (uint32_t u = 0; u < 0x7F800000u; u += 4093) {
    v.push_back(float_from_bits(u));
    v.push_back(-float_from_bits(u));
  }
  for (float x : {0.99999994f, 1.0f, 1.0000001f, 3.9199998f, 3.92f, 3.9200001f, 1e-45f,
                  1e-38f, 0.5f, 2.5f, 6.0f, 1e30f})
    v.push_back(x);
  v.push_back(0.125f);
  ASSERT_EQ(v.size() % 2, 1u);
  Tensor x = tensor_from(v, {int64_t(v.size())});
  const std::vector<float> got = erf(x).to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double want = std::erf(double(v[i]));
    const double err = std::fabs(double(got[i]) - want) / ulp_at(want);
    worst = std::max(worst, err);
    ASSERT_LE(err, 1.25) << "erf(" << v[i] << "): got " << got[i] << ", want " << want;
    ASSERT_EQ(std::signbit(got[i]), std::signbit(v[i])) << v[i];
  }
  EXPECT_GT(worst, 0.0);  // the comparison saw rounded results, not a copy of the reference
}

TEST(UnaryErfAccuracy, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = tensor_from(std::vector<float>{0.0f, -0.0f, inf, -inf, NAN, 10.0f, -10.0f}, {7});
  const std::vector<float> got = erf(x).to_vector<float>();
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_FALSE(std::signbit(got[0]));
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_TRUE(std::signbit(got[1]));
  EXPECT_EQ(got[2], 1.0f);
  EXPECT_EQ(got[3], -1.0f);
  EXPECT_TRUE(std::isnan(got[4]));
  EXPECT_EQ(got[5], 1.0f);
  EXPECT_EQ(got[6], -1.0f);
}

// bfloat16: computed in float32 and rounded once, so within half a bfloat16 ulp of the float64
// value plus the float32 error (well inside one bfloat16 ulp, 2^-8 relative), at a threaded
// size and in a transposed layout.
TEST(UnaryErfAccuracy, Bfloat16WithinOneUlp) {
  expect_bf16_within_one_ulp(
      "erf", [](const Tensor& t) { return erf(t); }, [](double x) { return std::erf(x); },
      4.5, 0.9);
}

}  // namespace
}  // namespace kiln::test
