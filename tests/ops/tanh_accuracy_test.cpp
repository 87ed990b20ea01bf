// tanh of float32 and bfloat16 tensors against float64 tanh. From the AVX2 level up the vector
// table's own two-piece approximation runs (decision 0039; an offline sweep of every float in
// [0, 10) found at most 1.03 ulps at AVX-512 and 1.06 at AVX2); the baseline level takes the C
// library's tanhf. The isa_* CTest reruns cover every level.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kiln/backends/cpu/cpu_info.h"
#include "ops/accuracy_util.h"

namespace kiln::test {
namespace {

// Every 4093rd bit pattern of the positive floats (both pieces, the blend at 0.75, the cap at
// 9.5, subnormals) and their negatives, every float near the blend, plus edges; an odd count,
// so the vector tail runs too, and enough values to be split over the threads. The vector
// code within 1.25 ulps (its sweep maximum is 1.06); the C library's tanh at the baseline
// level within 3 (it reaches 2.07 here).
TEST(UnaryTanhAccuracy, Float32WithinTheBoundOfEachLevel) {
  std::vector<float> v;
  for (uint32_t u = 0; u < 0x7F800000u; u += 4093) {
    v.push_back(float_from_bits(u));
    v.push_back(-float_from_bits(u));
  }
  for (float x = 0.70f; x < 0.80f; x = std::nextafter(x, 1.0f)) v.push_back(x);
  for (float x : {0.74999994f, 0.75f, 0.75000006f, 9.4999990f, 9.5f, 9.5000010f, 9.0f, 1e-45f,
                  1e-38f, 0.5f, 2.5f, 44.5f, 89.0f, 1e30f})
    v.push_back(x);
  if (v.size() % 2 == 0) v.push_back(0.125f);
  Tensor x = tensor_from(v, {int64_t(v.size())});
  const std::vector<float> got = tanh(x).to_vector<float>();
  const double bound = cpu::isa_level() >= cpu::IsaLevel::Avx2 ? 1.25 : 3.0;
  double worst = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double want = std::tanh(double(v[i]));
    const double err = std::fabs(double(got[i]) - want) / ulp_at(want);
    worst = std::max(worst, err);
    ASSERT_LE(err, bound) << "tanh(" << v[i] << "): got " << got[i] << ", want " << want;
    ASSERT_EQ(std::signbit(got[i]), std::signbit(v[i])) << v[i];
  }
  EXPECT_GT(worst, 0.0);  // the comparison saw rounded results, not a copy of the reference
}

TEST(UnaryTanhAccuracy, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = tensor_from(std::vector<float>{0.0f, -0.0f, inf, -inf, NAN, -NAN, 20.0f, -20.0f},
                         {8});
  const std::vector<float> got = tanh(x).to_vector<float>();
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_FALSE(std::signbit(got[0]));
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_TRUE(std::signbit(got[1]));
  EXPECT_EQ(got[2], 1.0f);
  EXPECT_EQ(got[3], -1.0f);
  EXPECT_TRUE(std::isnan(got[4]));
  EXPECT_TRUE(std::isnan(got[5]));
  EXPECT_EQ(got[6], 1.0f);
  EXPECT_EQ(got[7], -1.0f);
}

// bfloat16: computed in float32 and rounded once, so within half a bfloat16 ulp of the float64
// value plus the float32 error (well inside one bfloat16 ulp, 2^-8 relative), at a threaded
// size and in a transposed layout.
TEST(UnaryTanhAccuracy, Bfloat16WithinOneUlp) {
  expect_bf16_within_one_ulp(
      "tanh", [](const Tensor& t) { return tanh(t); }, [](double x) { return std::tanh(x); },
      6.0, 0.8);
}

}  // namespace
}  // namespace kiln::test
