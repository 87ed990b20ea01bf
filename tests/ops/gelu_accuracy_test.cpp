// GELU (erf form, and the tanh form) on float32 and bfloat16 tensors, which take the vectorised
// kernel at the AVX2 and AVX-512 levels (piecewise polynomials of Q(|x|) with an absolute error
// below 6e-8: AVX2 8 intervals of degree 7, AVX-512 32 of degree 4), against
// the float64 formula x * Phi(x) over a dense sweep, the far tails and special values. The
// absolute floor allows the scalar (baseline) path's 0.5 * x * (1 + erf(x / sqrt 2)) in
// float32 (PyTorch's formula), whose 1 + erf cancels in the negative tail.
#include <cmath>
#include <limits>
#include <string>

#include "ops/test_util.h"

namespace kiln::test {
namespace {

double gelu_ref(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

TEST(GeluAccuracy, Float32MatchesFloat64WithinFewUlps) {
  std::vector<double> xs;
  for (int i = -200000; i <= 200000; ++i) xs.push_back(double(float(i * 5e-5)));  // [-10, 10]
  for (double x : {-30.0, -15.0, -12.5, 12.5, 30.0, 1e-30, -1e-30, 0.0, -0.0, 3e38, -3e38})
    xs.push_back(x);
  Tensor y = gelu(tensor_from(xs, {int64_t(xs.size())}).to(DType::F32));
  std::vector<double> got = y.to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = gelu_ref(xs[i]);
    // 6 float32 ulps of the result plus 2e-7 absolute.
    const double tol = 6 * std::fabs(want) * 1.1920929e-7 + 2e-7;
    ASSERT_NEAR(got[i], want, tol) << "x = " << xs[i];
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> special = gelu(tensor_from(std::vector<double>{inf, NAN}, {2}).to(DType::F32))
                                    .to_vector<double>();
  EXPECT_EQ(special[0], inf);
  EXPECT_TRUE(std::isnan(special[1]));
}

// The tanh approximation, against its own formula in float64 (x * sigmoid(2u), exact
// algebra for 0.5 x (1 + tanh(u))); the absolute floor again covers the scalar path's
// cancellation in the negative tail.
double gelu_tanh_ref(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}

TEST(GeluAccuracy, TanhFormFloat32MatchesFloat64) {
  std::vector<double> xs;
  for (int i = -200000; i <= 200000; ++i) xs.push_back(double(float(i * 5e-5)));  // [-10, 10]
  for (double x : {-30.0, -15.0, 12.5, 30.0, 1e-30, -1e-30, 0.0, -0.0, 3e38, -3e38})
    xs.push_back(x);
  Tensor y = gelu(tensor_from(xs, {int64_t(xs.size())}).to(DType::F32), "tanh");
  std::vector<double> got = y.to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = gelu_tanh_ref(xs[i]);
    const double tol = 6 * std::fabs(want) * 1.1920929e-7 + 2e-7;
    ASSERT_NEAR(got[i], want, tol) << "x = " << xs[i];
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> special =
      gelu(tensor_from(std::vector<double>{inf, NAN, -inf}, {3}).to(DType::F32), "tanh")
          .to_vector<double>();
  EXPECT_EQ(special[0], inf);
  EXPECT_TRUE(std::isnan(special[1]));
  EXPECT_TRUE(std::isnan(special[2]));  // -inf * 0, as PyTorch's 0.5 x (1 + tanh(u))
}

// The AVX-512 kernels switch polynomial every 0.1875 and treat Q as 0 from |x| = 6 (decision
// 0024): each edge and the floats either side of it, both signs, and the huge and infinite
// arguments whose product with Q must not leak the last polynomial's value; both forms.
TEST(GeluAccuracy, Float32AtThePolynomialEdges) {
  std::vector<double> xs;
  for (int k = 0; k <= 34; ++k) {
    const float edge = float(k) * 0.1875f;
    for (float x : {std::nextafter(edge, 0.0f), edge, std::nextafter(edge, 100.0f)})
      for (float sign : {1.0f, -1.0f}) xs.push_back(double(sign * x));
  }
  const double inf = std::numeric_limits<double>::infinity();
  for (std::string form : {"none", "tanh"}) {
    SCOPED_TRACE(form);
    auto ref = form == "tanh" ? gelu_tanh_ref : gelu_ref;
    std::vector<double> got =
        gelu(tensor_from(xs, {int64_t(xs.size())}).to(DType::F32), form).to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = ref(xs[i]);
      ASSERT_NEAR(got[i], want, 6 * std::fabs(want) * 1.1920929e-7 + 2e-7) << "x = " << xs[i];
    }
    std::vector<double> special =
        gelu(tensor_from(std::vector<double>{-1e30, 1e30, -inf, -6.0, 6.0}, {5}).to(DType::F32),
             form)
            .to_vector<double>();
    EXPECT_EQ(special[0], 0.0);
    EXPECT_FLOAT_EQ(special[1], 1e30);
    EXPECT_TRUE(std::isnan(special[2]));  // -inf * 0, as 0.5 x (1 + erf(x / sqrt 2))
    EXPECT_NEAR(special[3], ref(-6.0), 2e-7);
    EXPECT_FLOAT_EQ(special[4], 6.0);
  }
}

TEST(GeluAccuracy, BFloat16RoundsTheFloat32Result) {
  std::vector<double> xs;
  for (int i = -4000; i <= 4000; ++i) xs.push_back(double(i) * 2.5e-3);
  Tensor x = tensor_from(xs, {int64_t(xs.size())}).to(DType::BF16);
  std::vector<double> xr = x.to_vector<double>(), got = gelu(x).to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i)
    ASSERT_NEAR(got[i], gelu_ref(xr[i]), std::fabs(gelu_ref(xr[i])) * 8e-3 + 2e-7) << xr[i];
}

}  // namespace
}  // namespace kiln::test
