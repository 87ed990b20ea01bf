// RMSprop and Adagrad: the first three steps against hand-written float64 references of
// torch.optim.RMSprop / Adagrad.
#include "optim/quadratic.h"

namespace kiln::optim {
namespace {

using namespace test;

struct RMSpropRef {
  double lr, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
  bool centered = false, maximize = false;
  std::vector<double> sq{}, ga{}, buf{};
  void operator()(std::vector<double>& p, const std::vector<double>& grad, int) {
    if (sq.empty()) sq = ga = buf = std::vector<double>(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = (maximize ? -grad[i] : grad[i]) + weight_decay * p[i];
      sq[i] = alpha * sq[i] + (1 - alpha) * g * g;
      double avg;
      if (centered) {
        ga[i] = alpha * ga[i] + (1 - alpha) * g;
        avg = std::sqrt(sq[i] - ga[i] * ga[i]) + eps;
      } else {
        avg = std::sqrt(sq[i]) + eps;
      }
      if (momentum > 0) {
        buf[i] = momentum * buf[i] + g / avg;
        p[i] -= lr * buf[i];
      } else {
        p[i] -= lr * g / avg;
      }
    }
  }
};

TEST(RMSprop, FirstThreeSteps) {
  auto make = [](RMSpropOptions o) {
    return [o](const std::vector<Tensor>& ps) { return std::make_unique<RMSprop>(ps, o); };
  };
  expect_matches_reference(make({.lr = 0.01}), RMSpropRef{.lr = 0.01}, "plain");
  expect_matches_reference(make({.lr = 0.01, .alpha = 0.9, .momentum = 0.7}),
                           RMSpropRef{.lr = 0.01, .alpha = 0.9, .momentum = 0.7}, "momentum");
  expect_matches_reference(make({.lr = 0.01, .alpha = 0.8, .centered = true}),
                           RMSpropRef{.lr = 0.01, .alpha = 0.8, .centered = true}, "centered");
  expect_matches_reference(
      make({.lr = 0.02, .eps = 1e-4, .weight_decay = 0.1, .momentum = 0.5, .centered = true,
            .maximize = true}),
      RMSpropRef{.lr = 0.02, .eps = 1e-4, .weight_decay = 0.1, .momentum = 0.5, .centered = true,
                 .maximize = true},
      "everything");
}

struct AdagradRef {
  double lr, lr_decay = 0, weight_decay = 0, init = 0, eps = 1e-10;
  bool maximize = false;
  std::vector<double> sum{};
  void operator()(std::vector<double>& p, const std::vector<double>& grad, int step) {
    if (sum.empty()) sum.assign(p.size(), init);
    double clr = lr / (1 + (step - 1) * lr_decay);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = (maximize ? -grad[i] : grad[i]) + weight_decay * p[i];
      sum[i] += g * g;
      p[i] -= clr * g / (std::sqrt(sum[i]) + eps);
    }
  }
};

TEST(Adagrad, FirstThreeSteps) {
  auto make = [](AdagradOptions o) {
    return [o](const std::vector<Tensor>& ps) { return std::make_unique<Adagrad>(ps, o); };
  };
  expect_matches_reference(make({.lr = 0.1}), AdagradRef{.lr = 0.1}, "plain");
  expect_matches_reference(
      make({.lr = 0.1, .lr_decay = 0.5, .weight_decay = 0.2, .initial_accumulator_value = 0.3}),
      AdagradRef{.lr = 0.1, .lr_decay = 0.5, .weight_decay = 0.2, .init = 0.3}, "decays");
  expect_matches_reference(make({.lr = 0.05, .eps = 1e-3, .maximize = true}),
                           AdagradRef{.lr = 0.05, .eps = 1e-3, .maximize = true}, "maximize");
}

}  // namespace
}  // namespace kiln::optim
