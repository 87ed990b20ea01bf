// abs and neg of float32 and bfloat16 take the vector table (sign-bit operations) from the
// AVX2 level up (CTest reruns "*Unary*" at every level): every special value keeps its
// meaning (-0 from 0, infinities, NaN stays NaN), odd lengths reach the vector tails, and
// results equal the float64 fabs / negation exactly.
#include <cmath>
#include <limits>

#include "ops/test_util.h"

namespace kiln::test {
namespace {

TEST(UnarySignBits, AbsAndNegAreExactWithSpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0, -0.0, inf, -inf, 1e-40, -1e-40, 3.5, -2.25, 1e30, -1e30};
  for (int i = 0; i < 1000; ++i) v.push_back(std::sin(i * 0.7) * 100.0);
  v.push_back(NAN);
  for (DType dt : {DType::F32, DType::BF16}) {
    for (int64_t n : {int64_t(v.size()), int64_t(17), int64_t(5)}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      std::vector<double> part(v.end() - n, v.end());
      if (n == int64_t(v.size())) part = v;
      Tensor x = tensor_from(part, {n}).to(dt);
      const std::vector<double> xv = x.to_vector<double>();
      const std::vector<double> a = abs(x).to_vector<double>(), m = neg(x).to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(xv[size_t(i)])) {
          EXPECT_TRUE(std::isnan(a[size_t(i)]) && std::isnan(m[size_t(i)]));
          continue;
        }
        EXPECT_EQ(a[size_t(i)], std::fabs(xv[size_t(i)])) << xv[size_t(i)];
        EXPECT_FALSE(std::signbit(a[size_t(i)])) << xv[size_t(i)];
        EXPECT_EQ(m[size_t(i)], -xv[size_t(i)]) << xv[size_t(i)];
        EXPECT_NE(std::signbit(m[size_t(i)]), std::signbit(xv[size_t(i)])) << xv[size_t(i)];
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
