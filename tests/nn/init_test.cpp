// nn::init: gains, fans, bounds and moments of each initialiser, generator determinism,
// truncation and orthogonality.
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;

struct Moments {
  double mean, std, min, max;
};
Moments moments(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  double m = 0, s = 0, lo = 1e300, hi = -1e300;
  for (double x : v) {
    m += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  m /= double(v.size());
  for (double x : v) s += (x - m) * (x - m);
  return {m, std::sqrt(s / double(v.size())), lo, hi};
}

TEST(Init, GainsAndFans) {
  EXPECT_DOUBLE_EQ(init::calculate_gain("linear"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("selu"), 0.75);
  EXPECT_THROW(init::calculate_gain("swish"), ValueError);
  auto f = init::calculate_fan_in_and_fan_out(empty({8, 4, 3, 3}));
  EXPECT_EQ(f.fan_in, 36);
  EXPECT_EQ(f.fan_out, 72);
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(empty({5})), ValueError);
}

TEST(Init, UniformAndNormalAreDeterministicPerGenerator) {
  Tensor a = empty({1000}), b = empty({1000});
  Generator g1(7), g2(7);
  init::uniform_(a, -2, 3, &g1);
  init::uniform_(b, -2, 3, &g2);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  Moments m = moments(a);
  EXPECT_GE(m.min, -2);
  EXPECT_LT(m.max, 3);
  EXPECT_NEAR(m.mean, 0.5, 0.15);
  Tensor n = empty({20000}, DType::F64);
  Generator g3(8);
  init::normal_(n, 1.5, 0.5, &g3);
  m = moments(n);
  EXPECT_NEAR(m.mean, 1.5, 0.02);
  EXPECT_NEAR(m.std, 0.5, 0.02);
  EXPECT_THROW(init::uniform_(a, 1, 0), ValueError);
  Tensor ints = zeros({3}, DType::I32);
  EXPECT_THROW(init::normal_(ints), TypeError);
}

TEST(Init, ConstantsAndEye) {
  Tensor t = empty({2, 3});
  autograd::set_requires_grad(t);
  init::constant_(t, 2.5);  // in place on a parameter: no autograd error
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 2.5));
  init::zeros_(t);
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 0.0));
  init::ones_(t);
  EXPECT_EQ(t.to_vector<double>(), std::vector<double>(6, 1.0));
  init::eye_(t);
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  EXPECT_FALSE(autograd::grad_fn(t));
}

TEST(Init, XavierBoundsAndStd) {
  Tensor w = empty({300, 200}, DType::F64);
  Generator g(1);
  init::xavier_uniform_(w, 2.0, &g);
  double a = 2.0 * std::sqrt(6.0 / 500.0);
  Moments m = moments(w);
  EXPECT_GE(m.min, -a);
  EXPECT_LE(m.max, a);
  EXPECT_NEAR(m.std, a / std::sqrt(3.0), 0.01 * a);
  init::xavier_normal_(w, 1.0, &g);
  EXPECT_NEAR(moments(w).std, std::sqrt(2.0 / 500.0), 0.01 * std::sqrt(2.0 / 500.0));
}

TEST(Init, KaimingModesAndNonlinearities) {
  Tensor w = empty({100, 400}, DType::F64);  // fan_in 400, fan_out 100
  Generator g(2);
  init::kaiming_uniform_(w, 0, init::FanMode::FanIn, "relu", &g);
  double bound = std::sqrt(2.0) * std::sqrt(3.0 / 400.0);
  Moments m = moments(w);
  EXPECT_GE(m.min, -bound);
  EXPECT_LE(m.max, bound);
  EXPECT_GT(m.max, 0.99 * bound);
  init::kaiming_uniform_(w, 0, init::FanMode::FanOut, "tanh", &g);
  bound = 5.0 / 3.0 * std::sqrt(3.0 / 100.0);
  m = moments(w);
  EXPECT_LE(m.max, bound);
  EXPECT_GT(m.max, 0.99 * bound);
  init::kaiming_normal_(w, 0, init::FanMode::FanIn, "relu", &g);
  double std = std::sqrt(2.0 / 400.0);
  EXPECT_NEAR(moments(w).std, std, 0.02 * std);
  init::kaiming_normal_(w, 0.2, init::FanMode::FanOut, "leaky_relu", &g);
  std = std::sqrt(2.0 / 1.04) / std::sqrt(100.0);
  EXPECT_NEAR(moments(w).std, std, 0.02 * std);
}

TEST(Init, TruncNormalStaysInsideAndHasTheTruncatedMoments) {
  Tensor t = empty({20000}, DType::F64);
  Generator g(3);
  init::trunc_normal_(t, 0.0, 1.0, -2.0, 2.0, &g);
  Moments m = moments(t);
  EXPECT_GE(m.min, -2.0);
  EXPECT_LE(m.max, 2.0);
  EXPECT_NEAR(m.mean, 0.0, 0.02);
  // Standard normal truncated to [-2, 2]: variance 1 - 2 * 2 * phi(2) / (Phi(2) - Phi(-2)).
  double phi2 = std::exp(-2.0) / std::sqrt(2 * M_PI);
  double mass = std::erf(2.0 / std::sqrt(2.0));
  EXPECT_NEAR(m.std, std::sqrt(1 - 4 * phi2 / mass), 0.01);
  // A narrow window far in the tail works too (no rejection loop).
  Tensor tail = empty({1000}, DType::F64);
  init::trunc_normal_(tail, 0.0, 1.0, 3.0, 3.5, &g);
  m = moments(tail);
  EXPECT_GE(m.min, 3.0);
  EXPECT_LE(m.max, 3.5);
  EXPECT_THROW(init::trunc_normal_(tail, 0, 1, 1, -1), ValueError);
}

void expect_orthonormal_rows(const Tensor& w, double gain) {
  Tensor g = matmul(w, w.t()) / (gain * gain);
  int64_t n = w.size(0);
  std::vector<double> v = g.to_vector<double>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      EXPECT_NEAR(v[size_t(i * n + j)], i == j ? 1.0 : 0.0, 1e-12) << i << "," << j;
}

TEST(Init, OrthogonalRowsOrColumns) {
  Generator g(4);
  Tensor wide = empty({3, 7}, DType::F64);
  init::orthogonal_(wide, 1.0, &g);
  expect_orthonormal_rows(wide, 1.0);
  Tensor tall = empty({6, 4}, DType::F64);
  init::orthogonal_(tall, 2.0, &g);
  expect_orthonormal_rows(tall.t().contiguous(), 2.0);
  Tensor conv = empty({4, 2, 3}, DType::F64);
  init::orthogonal_(conv, 1.0, &g);
  expect_orthonormal_rows(conv.reshape({4, 6}), 1.0);
  Tensor vec = empty({3});
  EXPECT_THROW(init::orthogonal_(vec, 1.0), ValueError);
}

}  // namespace
}  // namespace kiln::nn
