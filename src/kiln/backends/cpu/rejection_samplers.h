#pragma once
// Scalar samplers whose number of draws per value is not fixed (rejection and inversion
// loops): Gamma(alpha, 1), Poisson(lambda), Binomial(n, p), and the implicit
// reparameterisation derivative d x / d alpha of a Gamma(alpha, 1) sample. All math in double.
//
// Each value takes its uniforms from its own ElementStream, so a value depends only on
// (seed, offset, its index), never on how many draws its neighbours needed or on threads.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kiln/runtime/generator.h"
#include "special_functions.h"

namespace kiln::cpu {

// The draws of element i: words of philox4x32(seed, offset + i, j) for j = 0, 1, 2, ...
// Block j = 0 is the one the op reserved for element i; the blocks with j >= 1 use the high
// 64 bits of the counter, which the fixed-draw ops (random_kernels.cpp) always leave 0, so no
// other op ever produces them. A stream is thus unbounded without reserving more.
class ElementStream {
 public:
  ElementStream(uint64_t seed, uint64_t counter) : seed_(seed), counter_(counter) {}

  // Uniform in [0, 1) with 53 bits.
  double uniform() { return uint64_to_unit_double(next64()); }
  // Uniform in (0, 1): the midpoints of the 2^53 cells, so log() is finite.
  double uniform_open() { return (double(next64() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  // Standard normal (Box-Muller; the pair's second value is kept for the next call).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2 * std::log(uniform_open()));
    const double t = 2 * kSpecialPi * uniform();
    spare_ = r * std::sin(t);
    has_spare_ = true;
    return r * std::cos(t);
  }

 private:
  uint64_t next64() {
    if (used_ == 4) {
      words_ = philox4x32(seed_, counter_, block_++);
      used_ = 0;
    }
    const uint64_t v = uint64_t(words_[size_t(used_)]) | uint64_t(words_[size_t(used_) + 1]) << 32;
    used_ += 2;
    return v;
  }

  uint64_t seed_, counter_, block_ = 0;
  std::array<uint32_t, 4> words_{};
  int used_ = 4;
  bool has_spare_ = false;
  double spare_ = 0;
};

// Gamma(alpha, 1) for alpha > 0 (alpha = inf gives inf): Marsaglia and Tsang's squeeze
// method (2000) for alpha >= 1; below 1 a Gamma(alpha + 1) sample times U^(1 / alpha), with
// the power taken in logs (tiny alpha underflows to 0; the kernel clamps to the dtype's
// smallest normal, as PyTorch).
inline double sample_standard_gamma(double alpha, ElementStream& s) {
  if (std::isinf(alpha)) return alpha;
  double log_scale = 0;
  if (alpha < 1) {
    log_scale = std::log(s.uniform_open()) / alpha;
    alpha += 1;
  }
  const double d = alpha - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  for (;;) {
    const double x = s.normal(), v1 = 1 + c * x;
    if (v1 <= 0) continue;
    const double v = v1 * v1 * v1, u = s.uniform_open(), x2 = x * x;
    if (u < 1 - 0.0331 * x2 * x2 || std::log(u) < 0.5 * x2 + d * (1 - v + std::log(v)))
      return d * v * std::exp(log_scale);
  }
}

// Poisson(lambda), lambda finite and >= 0. Below 10: the product of uniforms until it drops
// under exp(-lambda) (about lambda + 1 draws). From 10: Hormann's transformed rejection with
// squeeze (PTRS, 1993), about 1.2 pairs of draws whatever lambda.
inline double sample_poisson(double lambda, ElementStream& s) {
  if (lambda == 0) return 0;
  if (lambda < 10) {
    const double limit = std::exp(-lambda);
    double k = 0, prod = s.uniform();
    while (prod > limit) {
      prod *= s.uniform();
      k += 1;
    }
    return k;
  }
  const double slam = std::sqrt(lambda), loglam = std::log(lambda);
  const double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
  const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
  for (;;) {
    const double u = s.uniform() - 0.5, v = s.uniform(), us = 0.5 - std::fabs(u);
    const double k = std::floor((2 * a / us + b) * u + lambda + 0.43);
    if (us >= 0.07 && v <= vr) return k;
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b) <=
        -lambda + k * loglam - log_gamma(k + 1))
      return k;
  }
}

// Binomial(n, p) for an integer n >= 0 and p in [0, 1]. p > 1/2 samples n - B(n, 1 - p) so
// the loops see p <= 1/2. Mean n p < 10: inversion by the recurrence of the probabilities (at
// most a few dozen steps). Otherwise Hormann's BTRS (1993): transformed rejection with
// squeeze, a constant expected number of draws. The constants depend on (n, p) only and cost
// three log-gammas, so a kernel keeps one BinomialSampler while the parameters repeat
// (constant or broadcast parameters): binomial(200, 0.3) of 1M values 91 -> 36 ms.
class BinomialSampler {
 public:
  BinomialSampler(double n, double p) : n_(n), p_(p) {
    flip_ = p > 0.5;
    const double pp = flip_ ? 1 - p : p, q = 1 - pp;
    inversion_ = n * pp < 10;
    if (n == 0 || pp == 0) return;
    if (inversion_) {
      ratio_ = pp / q;
      a_ = (n + 1) * ratio_;
      r0_ = std::exp(n * std::log1p(-pp));
      return;
    }
    const double spq = std::sqrt(n * pp * q);
    b_ = 1.15 + 2.53 * spq;
    a_ = -0.0873 + 0.0248 * b_ + 0.01 * pp;
    c_ = n * pp + 0.5;
    alpha_ = (2.83 + 5.1 / b_) * spq;
    vr_ = 0.92 - 4.2 / b_;
    lpq_ = std::log(pp / q);
    m_ = std::floor((n + 1) * pp);
    h_ = log_gamma(m_ + 1) + log_gamma(n - m_ + 1);
  }
  bool same(double n, double p) const { return n == n_ && p == p_; }

  double operator()(ElementStream& s) const {
    const double k = draw(s);
    return flip_ ? n_ - k : k;
  }

 private:
  double draw(ElementStream& s) const {
    const double pp = flip_ ? 1 - p_ : p_;
    if (n_ == 0 || pp == 0) return 0;
    if (inversion_) {
      for (;;) {  // restarts only when rounding leaves u unspent past k = n
        double u = s.uniform(), r = r0_, k = 0;
        while (u > r && k < n_) {
          u -= r;
          k += 1;
          r *= a_ / k - ratio_;
        }
        if (u <= r) return k;
      }
    }
    for (;;) {
      const double u = s.uniform() - 0.5, v = s.uniform(), us = 0.5 - std::fabs(u);
      const double k = std::floor((2 * a_ / us + b_) * u + c_);
      if (k < 0 || k > n_) continue;
      if (us >= 0.07 && v <= vr_) return k;
      if (std::log(v * alpha_ / (a_ / (us * us) + b_)) <=
          h_ - log_gamma(k + 1) - log_gamma(n_ - k + 1) + (k - m_) * lpq_)
        return k;
    }
  }

  double n_, p_;
  bool flip_ = false, inversion_ = false;
  double ratio_ = 0, a_ = 0, r0_ = 0, b_ = 0, c_ = 0, alpha_ = 0, vr_ = 0, lpq_ = 0, m_ = 0,
         h_ = 0;
};

// d x / d alpha for a Gamma(alpha, 1) sample x: -(dP/dalpha) / (dP/dx), P(alpha, x) the
// regularised lower incomplete gamma function (implicit reparameterisation, Figurnov et al.
// 2018). dP/dx is the density; both derivatives are written relative to it, so e^-x and
// Gamma(alpha) cancel and tails stay finite:
// - x < alpha + 1: P = x^alpha e^-x / Gamma(alpha + 1) * S, S = sum_n x^n / prod_k (alpha + k);
//   -(dP/dalpha) / density = -(x / alpha) (S (log x - psi(alpha + 1)) + dS/dalpha);
// - otherwise Q = 1 - P = x^alpha e^-x / Gamma(alpha) * H, H Legendre's continued fraction
//   (evaluated by the modified Lentz method on value-and-derivative pairs);
//   dQ/dalpha / density = x (H (log x - psi(alpha)) + dH/dalpha);
// - alpha >= 1e5, where both need thousands of terms: the Wilson-Hilferty form
//   x = alpha (1 - 1/(9 alpha) + z / (3 sqrt alpha))^3 differentiated at fixed z (its
//   relative error there is below 1e-8).
inline double standard_gamma_grad(double alpha, double x) {
  if (!(x > 0) || std::isinf(x) || !(alpha > 0)) return x == 0 ? 0.0 : std::nan("");
  const double log_x = std::log(x);
  if (alpha >= 1e5) {
    const double sa = std::sqrt(alpha);
    const double w = std::cbrt(x / alpha);  // = 1 - 1/(9 alpha) + z / (3 sqrt alpha)
    const double z = (w - 1 + 1 / (9 * alpha)) * 3 * sa;
    const double dw = 1 / (9 * alpha * alpha) - z / (6 * alpha * sa);
    return w * w * w + 3 * alpha * w * w * dw;
  }
  constexpr int kMaxTerms = 100000;
  if (x < alpha + 1) {
    double term = 1, harmonic = 0, sum = 1, dsum = 0;  // n = 0: term 1, d term / d alpha 0
    for (int n = 1; n < kMaxTerms; ++n) {
      term *= x / (alpha + n);
      harmonic += 1 / (alpha + n);
      sum += term;
      dsum -= term * harmonic;  // d/dalpha of the log of term n is -sum_k 1/(alpha + k)
      if (term < sum * 1e-17 && term * harmonic <= std::fabs(dsum) * 1e-17) break;
    }
    return -(x / alpha) * (sum * (log_x - digamma(alpha + 1)) + dsum);
  }
  // Pairs (value, d/dalpha) through the Lentz recurrence.
  struct D {
    double v, d;
  };
  auto mul = [](D a, D b) { return D{a.v * b.v, a.d * b.v + a.v * b.d}; };
  auto inv = [](D a) { return D{1 / a.v, -a.d / (a.v * a.v)}; };
  constexpr double kTiny = 1e-300;
  D b{x + 1 - alpha, -1}, c{1 / kTiny, 0}, d = inv(b), h = d;
  for (int i = 1; i < kMaxTerms; ++i) {
    const D an{-i * (i - alpha), double(i)};
    b.v += 2;
    d = D{an.v * d.v + b.v, an.d * d.v + an.v * d.d + b.d};
    if (std::fabs(d.v) < kTiny) d = D{kTiny, 0};
    const D an_over_c = mul(an, inv(c));
    c = D{b.v + an_over_c.v, b.d + an_over_c.d};
    if (std::fabs(c.v) < kTiny) c = D{kTiny, 0};
    d = inv(d);
    const D del = mul(d, c);
    h = mul(h, del);
    if (std::fabs(del.v - 1) < 1e-15 && std::fabs(del.d) <= 1e-15 * std::fabs(h.d / h.v) + 1e-300)
      break;
  }
  return x * (h.v * (log_x - digamma(alpha)) + h.d);
}

}  // namespace kiln::cpu
