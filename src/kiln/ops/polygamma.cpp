// polygamma(n, x) for n >= 2, composed of elementwise ops (n = 0 and 1 are the digamma and
// trigamma kernels): psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x), the Hurwitz zeta being the
// series sum_k (x + k)^-s, s = n + 1, summed directly over its first K terms and by the
// Euler-Maclaurin formula from a = x + K on:
//   a^(1-s) / (s-1) + a^-s / 2 + sum_j B_2j / (2j)! * s (s+1) ... (s+2j-2) * a^(-s-2j+1).
// With a >= 10 and six Bernoulli terms the tail is exact to double rounding. Like torch, a
// negative non-integer x sums the same series (no reflection) and poles give +-inf. Computed
// in float64, returned in x's float dtype; autograd differentiates the composition.
#include <cmath>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/reduction.h"
#include "kiln/tensor/tensor.h"

namespace kiln {

namespace {

// B_2j / (2j)! for j = 1..6.
constexpr double kBernoulliOverFactorial[] = {
    1.0 / 6 / 2, -1.0 / 30 / 24, 1.0 / 42 / 720, -1.0 / 30 / 40320, 5.0 / 66 / 3628800,
    -691.0 / 2730 / 479001600};

// Terms summed directly: enough that x + K >= 10 for the smallest finite x (at least 16).
int64_t direct_terms(const Tensor& x) {
  if (x.numel() == 0) return 16;
  const double lo = min(where(isfinite(x), x, Scalar(INFINITY))).item<double>();
  if (!std::isfinite(lo) || lo >= -6) return 16;
  return 16 + int64_t(std::ceil(std::min(-lo, 1e5)));
}

}  // namespace

Tensor polygamma_series(int64_t n, const Tensor& input) {
  const DType out_dtype = is_floating(input.dtype()) ? input.dtype() : default_float_dtype();
  const Tensor x = input.to(DType::F64);
  const double s = double(n + 1);
  const int64_t K = direct_terms(x);
  Tensor sum = zeros_like(x);
  for (int64_t k = 0; k < K; ++k) sum = sum + pow(x + Scalar(double(k)), Scalar(-s));
  const Tensor a = x + Scalar(double(K));
  Tensor tail = pow(a, Scalar(1 - s)) / Scalar(s - 1) + pow(a, Scalar(-s)) * Scalar(0.5);
  double rising = s;  // s (s+1) ... (s+2j-2)
  for (int j = 1; j <= 6; ++j) {
    tail = tail + pow(a, Scalar(-s - 2 * j + 1)) * Scalar(kBernoulliOverFactorial[j - 1] * rising);
    rising *= (s + 2 * j - 1) * (s + 2 * j);
  }
  const double sign_factorial = (n % 2 == 1 ? 1.0 : -1.0) * std::tgamma(s);  // (-1)^(n+1) n!
  return ((sum + tail) * Scalar(sign_factorial)).to(out_dtype);
}

}  // namespace kiln
