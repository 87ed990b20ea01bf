// Adam and AdamW: the first three steps against hand-written float64 references of
// torch.optim.Adam / AdamW (bias correction, L2 vs decoupled weight decay, amsgrad, maximize).
#include "optim/quadratic.h"

namespace kiln::optim {
namespace {

using namespace test;

struct AdamRef {
  double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false, amsgrad = false, maximize = false;
  std::vector<double> m{}, v{}, vmax{};
  void operator()(std::vector<double>& p, const std::vector<double>& grad, int step) {
    if (m.empty()) m = v = vmax = std::vector<double>(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = maximize ? -grad[i] : grad[i];
      if (decoupled) p[i] *= 1 - lr * weight_decay;
      else g += weight_decay * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      vmax[i] = std::max(vmax[i], v[i]);
      double m_hat = m[i] / (1 - std::pow(beta1, step));
      double v_used = amsgrad ? vmax[i] : v[i];
      double denom = std::sqrt(v_used) / std::sqrt(1 - std::pow(beta2, step)) + eps;
      p[i] -= lr * m_hat / denom;
    }
  }
};

TEST(Adam, FirstThreeSteps) {
  auto make = [](AdamOptions o) {
    return [o](const std::vector<Tensor>& ps) { return std::make_unique<Adam>(ps, o); };
  };
  expect_matches_reference(make({.lr = 0.1}), AdamRef{.lr = 0.1}, "default betas");
  expect_matches_reference(make({.lr = 0.05, .beta1 = 0.8, .beta2 = 0.9, .eps = 1e-3}),
                           AdamRef{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.9, .eps = 1e-3}, "betas");
  expect_matches_reference(make({.lr = 0.1, .weight_decay = 0.3}),
                           AdamRef{.lr = 0.1, .weight_decay = 0.3}, "L2 weight decay");
  expect_matches_reference(make({.lr = 0.1, .beta2 = 0.5, .amsgrad = true}),
                           AdamRef{.lr = 0.1, .beta2 = 0.5, .amsgrad = true}, "amsgrad", 5);
  expect_matches_reference(make({.lr = 0.1, .maximize = true}),
                           AdamRef{.lr = 0.1, .maximize = true}, "maximize");
}

TEST(AdamW, FirstThreeStepsWithDecoupledWeightDecay) {
  auto make = [](AdamWOptions o) {
    return [o](const std::vector<Tensor>& ps) { return std::make_unique<AdamW>(ps, o); };
  };
  expect_matches_reference(make({.lr = 0.1}),
                           AdamRef{.lr = 0.1, .weight_decay = 1e-2, .decoupled = true},
                           "default weight decay 0.01");
  expect_matches_reference(make({.lr = 0.1, .weight_decay = 0.5, .amsgrad = true}),
                           AdamRef{.lr = 0.1, .weight_decay = 0.5, .decoupled = true, .amsgrad = true},
                           "amsgrad");
}

TEST(Adam, StateHoldsStepAndMoments) {
  Quadratic q;
  Adam opt(q.params(), {.lr = 0.1, .amsgrad = true});
  EXPECT_EQ(opt.state(q.w), nullptr);
  backward(q.loss());
  opt.step();
  const ParamState* st = opt.state(q.w);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->step, 1);
  EXPECT_EQ(st->buffers.size(), 3u);
  std::vector<double> g = gradient(initial_values());
  std::vector<double> m = st->buffers.at("exp_avg").to_vector<double>();
  std::vector<double> v = st->buffers.at("exp_avg_sq").to_vector<double>();
  EXPECT_NEAR(m[0], 0.1 * g[0], 1e-15);
  EXPECT_NEAR(v[1], 0.001 * g[1] * g[1], 1e-15);
  EXPECT_THROW(Adam(q.params(), {.beta1 = 1.0}), ValueError);
  EXPECT_THROW(Adam(q.params(), {.eps = -1}), ValueError);
}

}  // namespace
}  // namespace kiln::optim
