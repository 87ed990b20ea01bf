// exp, sigmoid and silu on float32 tensors over the whole float32 range, which take the
// vectorised kernel at the AVX2 (kiln's inline exp: the 8-entry table form in range, else the
// polynomial scaled by two powers of two, decision 0041) and AVX-512 (the 16-entry table form
// in range, else the polynomial on vscalefps: decisions 0151, 0027) levels, against float64
// math: a
// dense sweep, both ends of the normal range (overflow to infinity above 88.72, subnormal
// results below -87.34, 0 below -103.97), and special values.
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>

#include "kiln/backends/cpu/cpu_info.h"
#include "ops/accuracy_util.h"

namespace kiln::test {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
// float32's smallest normal: results below it are compared with an absolute tolerance of
// one subnormal step (the baseline and AVX2 paths may flush there).
const double kMinNormal = 1.1754943508222875e-38;

std::vector<double> sweep() {
  std::vector<double> xs;
  for (int i = -220000; i <= 180000; ++i) xs.push_back(double(float(i * 5e-4)));  // [-110, 90]
  for (double x : {88.72, 88.7228, 88.73, 89.0, -87.33, -87.34, -100.0, -103.9, -103.98,
                   -104.0, -105.0, -1e4, 1e4, -3e38, 3e38, 0.0, -0.0, 1e-30, -1e-30})
    xs.push_back(double(float(x)));
  return xs;
}

void expect_float32_close(double got, double want, const std::string& what) {
  if (std::isinf(want) || std::isnan(want)) {
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << what;
    else EXPECT_EQ(got, want) << what;
    return;
  }
  // Three float32 ulps of the result; subnormal results within 2^-149 or flushed to 0.
  const double tol = std::fabs(want) >= kMinNormal ? 3 * std::fabs(want) * 1.1920929e-7
                                                   : kMinNormal;
  ASSERT_NEAR(got, want, tol) << what;
}

TEST(ExpAccuracy, Float32OverTheWholeRange) {
  const std::vector<double> xs = sweep();
  Tensor x = tensor_from(xs, {int64_t(xs.size())}).to(DType::F32);
  const std::vector<double> e = exp(x).to_vector<double>(), s = sigmoid(x).to_vector<double>();
  const std::vector<double> si = silu(x).to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    // float64 exp beyond float32's range is rounded there: infinity above 88.72.
    const double want_exp = std::exp(v) > 3.4028234663852886e38 ? kInf : std::exp(v);
    expect_float32_close(e[i], want_exp, "exp(" + std::to_string(v) + ")");
    // sigmoid and silu divide by 1 + exp(-x) in float32 (as PyTorch): where exp(-x) overflows
    // (x below -88.72) both are 0, which the float64 values there (below 1e-36 for silu)
    // are not, so the reference follows float32 there.
    const bool overflow = std::exp(-v) > 3.4028234663852886e38;
    const double sig = overflow ? 0.0 : 1 / (1 + std::exp(-v));
    expect_float32_close(s[i], sig, "sigmoid(" + std::to_string(v) + ")");
    expect_float32_close(si[i], v * sig, "silu(" + std::to_string(v) + ")");
  }
}

// The exp op in ulps of the float64 result, over every 1009th float32 bit pattern in [0, 88.7)
// and the negatives of those below 87 (normal results): the AVX-512 level's 16-entry table
// form within 1.1 (this sweep finds 1.04; every float in its range: 1.07), the AVX2 level's
// 8-entry one and the baseline level's C library within 1 (0.86 and 0.50). A tighter check
// than the whole-range sweep's 3 ulps above.
TEST(ExpAccuracy, Float32UlpsOfEachLevel) {
  std::vector<float> v;
  uint32_t top;
  float edge = 88.7f;
  std::memcpy(&top, &edge, 4);
  for (uint32_t u = 0; u < top; u += 1009) {  // the bit patterns of [0, 88.7), and negated
    v.push_back(float_from_bits(u));
    if (float_from_bits(u) < 87.0f) v.push_back(-float_from_bits(u));
  }
  Tensor x = tensor_from(v, {int64_t(v.size())});
  const std::vector<float> got = exp(x).to_vector<float>();
  const double bound = cpu::isa_level() >= cpu::IsaLevel::Avx512 ? 1.1 : 1.0;
  double worst = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double want = std::exp(double(v[i]));
    const double err = std::fabs(double(got[i]) - want) / ulp_at(want);
    worst = std::max(worst, err);
    ASSERT_LE(err, bound) << "exp(" << v[i] << "): got " << got[i] << ", want " << want;
  }
  EXPECT_GT(worst, 0.0);  // rounded results, not a copy of the reference
  std::cout << "exp: at most " << worst << " ulp over " << v.size() << " values\n";
}

TEST(ExpAccuracy, SpecialValues) {
  Tensor x = tensor_from(std::vector<double>{kInf, -kInf, NAN, 0.0}, {4}).to(DType::F32);
  const std::vector<double> e = exp(x).to_vector<double>(), s = sigmoid(x).to_vector<double>();
  EXPECT_EQ(e[0], kInf);
  EXPECT_EQ(e[1], 0.0);
  EXPECT_TRUE(std::isnan(e[2]));
  EXPECT_EQ(e[3], 1.0);
  EXPECT_EQ(s[0], 1.0);
  EXPECT_EQ(s[1], 0.0);
  EXPECT_TRUE(std::isnan(s[2]));
  EXPECT_EQ(s[3], 0.5);
}

}  // namespace
}  // namespace kiln::test
