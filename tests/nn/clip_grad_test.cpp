// clip_grad_norm_ (2-norm, inf-norm, other p) and clip_grad_value_ against hand-computed
// references.
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;

std::vector<Tensor> params_with_grads(const std::vector<std::vector<double>>& grads) {
  std::vector<Tensor> ps;
  for (const auto& g : grads) {
    Tensor p = zeros({int64_t(g.size())}, DType::F64);
    autograd::set_requires_grad(p);
    autograd::set_grad(p, f64(g, {int64_t(g.size())}));
    ps.push_back(p);
  }
  return ps;
}

TEST(ClipGradNorm, TwoNormScalesAllGradients) {
  std::vector<std::vector<double>> g = {{3.0, -4.0}, {12.0}};
  auto ps = params_with_grads(g);
  Tensor no_grad = zeros({2}, DType::F64);  // a parameter without a gradient is skipped
  autograd::set_requires_grad(no_grad);
  ps.push_back(no_grad);
  Tensor total = utils::clip_grad_norm_(ps, 6.5);
  expect_scalar(total, 13.0, 1e-15);
  double coef = 6.5 / (13.0 + 1e-6);
  expect_values(autograd::grad(ps[0]), {2}, {3.0 * coef, -4.0 * coef}, 1e-15);
  expect_values(autograd::grad(ps[1]), {1}, {12.0 * coef}, 1e-15);
  EXPECT_FALSE(autograd::grad(no_grad).defined());
}

TEST(ClipGradNorm, UnderTheLimitLeavesGradientsAlone) {
  auto ps = params_with_grads({{0.3, 0.4}});
  Tensor total = utils::clip_grad_norm_(ps, 1.0);
  expect_scalar(total, 0.5, 1e-15);
  expect_values(autograd::grad(ps[0]), {2}, {0.3, 0.4}, 0);
}

TEST(ClipGradNorm, InfAndOtherNorms) {
  auto ps = params_with_grads({{1.0, -7.0}, {2.0, 3.0}});
  Tensor total = utils::clip_grad_norm_(ps, 3.5, INFINITY);
  expect_scalar(total, 7.0, 1e-15);
  double coef = 3.5 / (7.0 + 1e-6);
  expect_values(autograd::grad(ps[0]), {2}, {coef, -7.0 * coef}, 1e-15);
  auto ps1 = params_with_grads({{1.0, -2.0}, {3.0}});
  expect_scalar(utils::clip_grad_norm_(ps1, 100.0, 1.0), 6.0, 1e-15);
  auto ps3 = params_with_grads({{1.0, -2.0}, {3.0}});
  expect_scalar(utils::clip_grad_norm_(ps3, 100.0, 3.0), std::cbrt(36.0), 1e-14);
}

TEST(ClipGradNorm, EdgeCases) {
  std::vector<Tensor> none;
  expect_scalar(utils::clip_grad_norm_(none, 1.0), 0.0, 0);
  auto bad = params_with_grads({{INFINITY, 1.0}});
  EXPECT_THROW(utils::clip_grad_norm_(bad, 1.0, 2.0, true), Error);
  EXPECT_THROW(utils::clip_grad_norm_(bad, 1.0, -1.0), ValueError);
}

TEST(ClipGradValue, ClampsEachElement) {
  auto ps = params_with_grads({{-3.0, 0.2, 5.0}, {0.9, -0.4}});
  utils::clip_grad_value_(ps, 0.5);
  expect_values(autograd::grad(ps[0]), {3}, {-0.5, 0.2, 0.5}, 0);
  expect_values(autograd::grad(ps[1]), {2}, {0.5, -0.4}, 0);
  EXPECT_THROW(utils::clip_grad_value_(ps, -1), ValueError);
}

TEST(ClipGradNorm, WorksOnModuleGradients) {
  manual_seed(5);
  Linear lin(4, 3);
  backward((lin.forward(randn({8, 4})) * 100.0).sum());
  double sq = 0;
  for (const auto& p : lin.parameters())
    for (double v : autograd::grad(p).to_vector<double>()) sq += v * v;
  Tensor total = utils::clip_grad_norm_(lin.parameters(), 1.0);
  EXPECT_NEAR(total.item<double>(), std::sqrt(sq), 1e-4 * std::sqrt(sq));
  double after = 0;
  for (const auto& p : lin.parameters())
    for (double v : autograd::grad(p).to_vector<double>()) after += v * v;
  EXPECT_NEAR(std::sqrt(after), 1.0, 1e-4);
}

}  // namespace
}  // namespace kiln::nn
