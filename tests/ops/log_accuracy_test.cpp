// log of float32 and bfloat16 tensors against float64 log. From the AVX2 level up the vector
// table's own log runs (decision 0133: the argument split into m 2^e, a degree-8 polynomial
// for log1p(m - 1); an emulation over every float in [0.5, 2) found at most 0.84 ulps); the
// baseline level takes the C library's logf. The isa_* CTest reruns cover every level.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kiln/backends/cpu/cpu_info.h"
#include "ops/accuracy_util.h"

namespace kiln::test {
namespace {

// Every 4093rd positive bit pattern (subnormals and the whole normal range), every float in
// [0.7, 1.5] near the split at sqrt(2) and around 1 (where log is smallest relative to its
// argument), powers of two; an odd count, so the vector tail runs too, and enough values to
// be split over the threads. Within 1 ulp at every level.
TEST(UnaryLogAccuracy, Float32WithinOneUlp) {
  std::vector<float> v;
  for (uint32_t u = 1; u < 0x7F800000u; u += 4093) v.push_back(float_from_bits(u));
  for (float x = 0.99f; x < 1.01f; x = std::nextafter(x, 2.0f)) v.push_back(x);
  for (float x = 1.41f; x < 1.42f; x = std::nextafter(x, 2.0f)) v.push_back(x);
  for (float x = 0.70f; x < 0.71f; x = std::nextafter(x, 2.0f)) v.push_back(x);
  for (int k = -149; k <= 127; ++k) v.push_back(std::ldexp(1.0f, k));
  if (v.size() % 2 == 0) v.push_back(3.0f);
  Tensor x = tensor_from(v, {int64_t(v.size())});
  const std::vector<float> got = log(x).to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double want = std::log(double(v[i]));
    if (want == 0) {
      ASSERT_EQ(got[i], 0.0f) << "log(" << v[i] << ")";
      continue;
    }
    const double err = std::fabs(double(got[i]) - want) / ulp_at(want);
    worst = std::max(worst, err);
    ASSERT_LE(err, 1.0) << "log(" << v[i] << "): got " << got[i] << ", want " << want;
  }
  EXPECT_GT(worst, 0.0);  // the comparison saw rounded results, not a copy of the reference
}

TEST(UnaryLogAccuracy, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in{0.0f, -0.0f, inf, -inf, NAN, -1.0f, -1e-40f, 1.0f, 1e-45f, 2.0f};
  Tensor x = tensor_from(in, {int64_t(in.size())});
  const std::vector<float> got = log(x).to_vector<float>();
  EXPECT_EQ(got[0], -inf);
  EXPECT_EQ(got[1], -inf);
  EXPECT_EQ(got[2], inf);
  EXPECT_TRUE(std::isnan(got[3]));
  EXPECT_TRUE(std::isnan(got[4]));
  EXPECT_TRUE(std::isnan(got[5]));
  EXPECT_TRUE(std::isnan(got[6]));
  EXPECT_EQ(got[7], 0.0f);
  EXPECT_FLOAT_EQ(got[8], float(std::log(double(1e-45f))));
  EXPECT_FLOAT_EQ(got[9], float(std::log(2.0)));
}

// bfloat16: computed in float32 and rounded once, so within one bfloat16 ulp of the float64
// log of the bfloat16 input, over positive values from 1e-30 to 1e30.
TEST(UnaryLogAccuracy, Bfloat16WithinOneUlp) {
  std::vector<double> v;
  for (int i = 0; i < 40000; ++i) v.push_back(std::exp(-69.0 + 138.0 * i / 40000.0));
  Tensor x = tensor_from(v, {200, 200}).to(DType::BF16);
  for (const Tensor& in : {x, x.t()}) {
    const std::vector<double> xs = in.to(DType::F64).to_vector<double>();
    const std::vector<double> got = log(in).to(DType::F64).to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = std::log(xs[i]);
      ASSERT_LE(std::fabs(got[i] - want), std::fabs(want) * std::ldexp(1.0, -8) + 1e-38)
          << "log(" << xs[i] << ")";
    }
  }
}

}  // namespace
}  // namespace kiln::test
