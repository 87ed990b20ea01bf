// The samplers with a variable number of draws per value (_standard_gamma, poisson,
// binomial) and _standard_gamma_grad: moments against the exact float64 values with bounds
// of about six standard errors (fixed seeds, so a correct sampler passes deterministically),
// reproducibility across seeds, threads and devices, broadcasting, edge parameters, errors.
#include <cmath>
#include <functional>
#include <limits>

#include "kiln/runtime/threads.h"
#include "ops/test_util.h"

namespace kiln {
namespace {

using test::OnEachDevice;
using test::values;

constexpr int64_t kN = 60000;

struct Moments {
  double mean, var;
};
Moments moments(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  const double mean = s / double(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return {mean, ss / double(v.size() - 1)};
}

// Sample mean within six standard errors of `mean`; sample variance within six standard
// errors of `var` (the variance's standard error taken from the sample fourth moment).
void expect_moments(const std::vector<double>& v, double mean, double var,
                    const std::string& what) {
  const Moments m = moments(v);
  const double n = double(v.size());
  EXPECT_NEAR(m.mean, mean, 6 * std::sqrt(var / n) + 1e-12) << what;
  double m4 = 0;
  for (double x : v) m4 += std::pow(x - m.mean, 4);
  m4 /= n;
  EXPECT_NEAR(m.var, var, 6 * std::sqrt(std::max(m4 - m.var * m.var, 0.0) / n) + 1e-12) << what;
}

Tensor full_of(double value, int64_t n, DType dt, Device dev) {
  return full({n}, value, TensorOptions(dt, dev));
}

class RandomSampling : public OnEachDevice {};

TEST_P(RandomSampling, GammaMomentsAcrossShapes) {
  Generator g(11);
  for (double alpha : {0.05, 0.3, 1.0, 2.5, 9.0, 400.0}) {
    for (DType dt : {DType::F64, DType::F32}) {
      auto v = values(standard_gamma(full_of(alpha, kN, dt, device()), &g));
      expect_moments(v, alpha, alpha, "Gamma(" + std::to_string(alpha) + ") " +
                                        std::string(dtype_name(dt)));
      for (double x : v) ASSERT_GT(x, 0) << alpha;
    }
  }
}

TEST_P(RandomSampling, GammaTinyConcentrationClampsToSmallestNormal) {
  Generator g(3);
  auto v = values(standard_gamma(full_of(1e-4, 2000, DType::F32, device()), &g));
  double smallest = *std::min_element(v.begin(), v.end());
  EXPECT_EQ(smallest, double(std::numeric_limits<float>::min()));  // some underflow at 1e-4
  auto inf = values(standard_gamma(full_of(INFINITY, 3, DType::F64, device()), &g));
  for (double x : inf) EXPECT_TRUE(std::isinf(x));
}

TEST_P(RandomSampling, PoissonMomentsBothRegimes) {
  Generator g(5);
  for (double rate : {0.0, 0.2, 4.0, 9.99, 10.0, 37.5, 2e4, 1e9}) {
    auto v = values(poisson(full_of(rate, kN, DType::F64, device()), &g));
    expect_moments(v, rate, rate, "Poisson(" + std::to_string(rate) + ")");
    for (double x : v) ASSERT_EQ(x, std::floor(x));
  }
}

TEST_P(RandomSampling, BinomialMomentsAllRegimesAndBroadcast) {
  Generator g(9);
  struct Case {
    double n, p;
  };
  // inversion (n p < 10), BTRS, p > 1/2 by symmetry, huge counts, degenerate ends
  for (Case c : {Case{10, 0.3}, Case{200, 0.01}, Case{100, 0.5}, Case{1000, 0.93},
                 Case{3e9, 0.25}, Case{7, 1.0}, Case{0, 0.4}, Case{50, 0.0}}) {
    auto v = values(binomial(full_of(c.n, kN, DType::F64, device()),
                             full({1}, c.p, TensorOptions(DType::F64, device())), &g));
    expect_moments(v, c.n * c.p, c.n * c.p * (1 - c.p),
                   "Binomial(" + std::to_string(c.n) + ", " + std::to_string(c.p) + ")");
    for (double x : v) {
      ASSERT_GE(x, 0);
      ASSERT_LE(x, c.n);
      ASSERT_EQ(x, std::floor(x));
    }
  }
  // broadcast: [3, 1] counts with [4] probabilities -> [3, 4]
  Tensor out = binomial(full({3, 1}, 5.0, device()), full({4}, 0.5, device()), &g);
  EXPECT_EQ(out.shape(), Shape({3, 4}));
}

TEST_P(RandomSampling, ValuesDependOnSeedAndIndexOnly) {
  for (DType dt : test::float_dtypes()) {
    auto draw = [&](int threads) {
      const int saved = get_num_threads();
      set_num_threads(threads);
      Generator g(1234);
      Tensor alpha = full_of(1.7, 20000, dt, device());
      auto a = values(standard_gamma(alpha, &g));
      auto b = values(poisson(full_of(12.0, 20000, dt, device()), &g));
      auto c = values(binomial(full_of(40.0, 20000, dt, device()),
                               full_of(0.3, 20000, dt, device()), &g));
      set_num_threads(saved);
      a.insert(a.end(), b.begin(), b.end());
      a.insert(a.end(), c.begin(), c.end());
      return a;
    };
    EXPECT_EQ(draw(1), draw(2)) << dtype_name(dt);
  }
  // A strided view samples what its contiguous copy samples.
  Tensor base = full({64, 2}, 3.0, device());
  Generator g1(77), g2(77);
  EXPECT_EQ(values(poisson(base.select(1, 0), &g1)),
            values(poisson(base.select(1, 0).contiguous(), &g2)));
  // Consecutive calls continue the stream: different values.
  Generator g(5);
  EXPECT_NE(values(standard_gamma(full_of(2.0, 16, DType::F64, device()), &g)),
            values(standard_gamma(full_of(2.0, 16, DType::F64, device()), &g)));
}

TEST_P(RandomSampling, GammaGradMatchesTheImplicitDerivative) {
  // d x / d alpha = -(dP/dalpha) / (dP/dx); here dP/dalpha by central differences of P
  // computed by a long-double integration of the density (independent of the kernel's
  // series and continued fraction). Points span both of its regions and the tails.
  auto P = [](long double a, long double x) {
    // int_0^x t^(a-1) e^-t dt / Gamma(a) by Simpson's rule: over t for a >= 1 (a smooth
    // integrand), else over u with t = x u^(1/a), which turns it into x^a / a e^(-x u^(1/a)).
    const int steps = 20000;  // even
    auto f = [&](long double s) {
      return a >= 1 ? std::pow(s * x, a - 1) * std::exp(-s * x) * x
                    : std::pow(x, a) / a * std::exp(-x * std::pow(s, 1 / a));
    };
    long double sum = f(0) + f(1);
    for (int i = 1; i < steps; ++i) sum += (i % 2 ? 4 : 2) * f((long double)i / steps);
    return sum / (3 * steps) / std::exp(std::lgamma(a));
  };
  struct Pt {
    double a, x;
  };
  for (Pt pt : {Pt{0.5, 0.3}, Pt{2.0, 2.5}, Pt{2.0, 0.1}, Pt{7.0, 15.0}, Pt{30.0, 22.0},
                Pt{0.2, 1e-4}, Pt{3.0, 9.0}}) {
    const long double h = 1e-3L * pt.a;
    const long double dPda = (P(pt.a + h, pt.x) - P(pt.a - h, pt.x)) / (2 * h);
    const long double a = pt.a, x = pt.x;
    const long double density = std::exp((a - 1) * std::log(x) - x - std::lgamma(a));
    const double expected = double(-dPda / density);
    Tensor got = standard_gamma_grad(full({1}, pt.a, TensorOptions(DType::F64, device())),
                                     full({1}, pt.x, TensorOptions(DType::F64, device())));
    EXPECT_NEAR(values(got)[0], expected, 2e-5 * std::fabs(expected) + 1e-9)
        << "alpha " << pt.a << " x " << pt.x;
  }
}

TEST_P(RandomSampling, GammaIsDifferentiableInAlpha) {
  // E[d x / d alpha] = d E[x] / d alpha = 1 for Gamma(alpha, 1).
  Generator g(21);
  for (double alpha : {0.4, 3.0, 50.0}) {
    Tensor a = full_of(alpha, kN, DType::F64, device());
    autograd::set_requires_grad(a, true);
    Tensor x = standard_gamma(a, &g);
    backward(sum(x));
    auto d = values(autograd::grad(a));
    expect_moments(d, 1.0, moments(d).var, "E[dx/dalpha] at " + std::to_string(alpha));
  }
}

TEST_P(RandomSampling, BadParametersAreErrors) {
  // Parameter values are checked by the kernel: on devices the error surfaces when the
  // result is read (values()).
  Generator g(1);
  auto t = [&](std::vector<double> v) {
    return test::make(v, {int64_t(v.size())}, DType::F64, device());
  };
  EXPECT_THROW(values(standard_gamma(t({1.0, 0.0}), &g)), Error);
  EXPECT_THROW(values(standard_gamma(t({-2.0}), &g)), Error);
  EXPECT_THROW(values(standard_gamma(t({NAN}), &g)), Error);
  EXPECT_THROW(values(poisson(t({3.0, -1.0}), &g)), Error);
  EXPECT_THROW(values(poisson(t({INFINITY}), &g)), Error);
  EXPECT_THROW(values(poisson(t({NAN}), &g)), Error);
  EXPECT_THROW(values(binomial(t({2.5}), t({0.5}), &g)), Error);
  EXPECT_THROW(values(binomial(t({-1}), t({0.5}), &g)), Error);
  EXPECT_THROW(values(binomial(t({NAN}), t({0.5}), &g)), Error);
  EXPECT_THROW(values(binomial(t({3}), t({1.5}), &g)), Error);
  EXPECT_THROW(values(binomial(t({3}), t({NAN}), &g)), Error);
  EXPECT_THROW(binomial(t({3, 4}), t({0.1, 0.2, 0.3}), &g), Error);  // shapes do not broadcast
  EXPECT_THROW(poisson(full({2}, 1, TensorOptions(DType::I64, device())), &g),
               NotImplementedError);
  // Empty tensors sample nothing.
  EXPECT_EQ(poisson(t({}), &g).numel(), 0);
}

KILN_INSTANTIATE_ON_EACH_DEVICE(RandomSampling);

}  // namespace
}  // namespace kiln
