#pragma once
// Special functions the C++ library has no form of: digamma, trigamma and the inverse error
// function, in double precision for every float dtype (float / bfloat16 / float16 round the
// double result once). Conventions are PyTorch's: digamma(0) = -inf, digamma at a negative
// integer = NaN, erfinv(+-1) = +-inf, erfinv outside [-1, 1] = NaN.
#include <cmath>
#include <limits>

namespace kiln::cpu {

constexpr double kSpecialPi = 3.14159265358979323846;

// log |gamma(x)| through lgamma_r: std::lgamma writes the global signgam, which the kernel's
// threads would race on.
inline double log_gamma(double x) {
  int sign = 0;
  return ::lgamma_r(x, &sign);
}

// psi(x): the reflection psi(1 - x) - pi / tan(pi x) below 0, the recurrence
// psi(x) = psi(x + 1) - 1 / x up to 10, then the asymptotic series in 1 / x^2.
inline double digamma(double x) {
  if (x == 0) return std::copysign(std::numeric_limits<double>::infinity(), -x);
  if (x < 0) {
    if (x == std::floor(x)) return std::numeric_limits<double>::quiet_NaN();
    return digamma(1 - x) - kSpecialPi / std::tan(kSpecialPi * x);
  }
  double r = 0;
  while (x < 10) {  // from 10 the series' first omitted term is below 1e-17
    r -= 1 / x;
    x += 1;
  }
  const double f = 1 / (x * x);
  const double series =
      f * (1.0 / 12 -
           f * (1.0 / 120 -
                f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132 - f * (691.0 / 32760))))));
  return r + std::log(x) - 0.5 / x - series;
}

// psi'(x) (polygamma(1, x)): the reflection pi^2 / sin^2(pi x) - psi'(1 - x) below 0, the
// recurrence psi'(x) = psi'(x + 1) + 1 / x^2 up to 10, then the asymptotic series.
inline double trigamma(double x) {
  if (x <= 0 && x == std::floor(x)) return std::numeric_limits<double>::infinity();
  if (x < 0) {
    const double s = std::sin(kSpecialPi * x);
    return kSpecialPi * kSpecialPi / (s * s) - trigamma(1 - x);
  }
  double r = 0;
  while (x < 10) {
    r += 1 / (x * x);
    x += 1;
  }
  const double f = 1 / (x * x);
  const double series =
      1 / x + f / 2 +
      f / x * (1.0 / 6 - f * (1.0 / 30 - f * (1.0 / 42 - f * (1.0 / 30 - f * (5.0 / 66)))));
  return r + series;
}

// erfinv(y): Giles' single-precision approximation ("Approximating the erfinv function",
// 2010) as the start, then two Newton steps on erf(x) - y in double.
inline double erfinv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return std::numeric_limits<double>::quiet_NaN();
  if (y == 1 || y == -1) return std::copysign(std::numeric_limits<double>::infinity(), y);
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5) {
    w -= 2.5;
    double p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941})
      p = c + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3;
    double p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682})
      p = c + p * w;
    x = p * y;
  }
  for (int i = 0; i < 2; ++i)
    x -= (std::erf(x) - y) / (2 / std::sqrt(kSpecialPi) * std::exp(-x * x));
  return x;
}

}  // namespace kiln::cpu
