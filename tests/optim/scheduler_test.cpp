// LR schedulers: each schedule against its closed form (computed here), OneCycleLR's
// momentum cycling, and errors.
#include "optim/quadratic.h"

namespace kiln::optim {
namespace {

using namespace test;

// Steps the scheduler n times and compares the lr of every epoch 0..n with want(epoch).
template <typename Want>
void expect_schedule(Optimizer& opt, LRScheduler& s, int n, Want want, double tol,
                     const std::string& what) {
  for (int e = 0; e <= n; ++e) {
    if (e > 0) {
      opt.step();
      s.step();
    }
    double lr = opt.param_groups()[0].lr();
    EXPECT_NEAR(lr, want(e), tol * std::fabs(want(e)) + 1e-300) << what << " epoch " << e;
    EXPECT_EQ(s.get_last_lr()[0], lr);
    EXPECT_EQ(s.last_epoch(), e);
  }
}

TEST(Schedulers, StepAndMultiStep) {
  Quadratic q;
  SGD opt(q.params(), {.lr = 0.8});
  StepLR s(opt, 3, 0.5);
  expect_schedule(opt, s, 10, [](int e) { return 0.8 * std::pow(0.5, e / 3); }, 1e-15, "StepLR");
  Quadratic q2;
  SGD opt2(q2.params(), {.lr = 1.0});
  MultiStepLR m(opt2, {2, 5, 5}, 0.1);
  expect_schedule(opt2, m, 8, [](int e) { return std::pow(0.1, (e >= 2) + 2 * (e >= 5)); }, 1e-15,
                  "MultiStepLR");
}

TEST(Schedulers, Exponential) {
  Quadratic q;
  SGD opt(q.params(), {.lr = 0.3});
  ExponentialLR s(opt, 0.9);
  expect_schedule(opt, s, 12, [](int e) { return 0.3 * std::pow(0.9, e); }, 1e-14, "ExponentialLR");
}

TEST(Schedulers, CosineAnnealingIncludingTheRestartBranch) {
  Quadratic q;
  SGD opt(q.params(), {.lr = 0.5});
  CosineAnnealingLR s(opt, 4, 0.01);
  expect_schedule(opt, s, 12,
                  [](int e) { return 0.01 + (0.5 - 0.01) * (1 + std::cos(M_PI * e / 4.0)) / 2; },
                  1e-12, "CosineAnnealingLR");
}

TEST(Schedulers, LinearWarmup) {
  Quadratic q;
  Adam opt(q.params(), {.lr = 0.2});
  LinearLR s(opt, 0.25, 1.0, 4);
  EXPECT_EQ(opt.param_groups()[0].get("initial_lr"), 0.2);
  expect_schedule(opt, s, 8,
                  [](int e) { return 0.2 * (0.25 + 0.75 * std::min(e, 4) / 4.0); }, 1e-14,
                  "LinearLR");
  EXPECT_THROW(LinearLR(opt, 0.0), ValueError);
}

// PyTorch's OneCycleLR schedule written out: phases end at pct_start * total - 1 and
// total - 1 (three-phase: also 2 * pct_start * total - 2).
struct OneCycleRef {
  double max_lr, pct, div, final_div;
  int total;
  bool cos = true, three = false;
  double anneal(double a, double b, double t) const {
    return cos ? b + (a - b) / 2 * (std::cos(M_PI * t) + 1) : a + (b - a) * t;
  }
  std::pair<double, double> at(int step, double base_m = 0.85, double max_m = 0.95) const {
    double init = max_lr / div, min_lr = init / final_div, s = step;
    double e1 = pct * total - 1, e2 = 2 * pct * total - 2, e3 = total - 1.0;
    if (s <= e1) return {anneal(init, max_lr, s / e1), anneal(max_m, base_m, s / e1)};
    if (!three) return {anneal(max_lr, min_lr, (s - e1) / (e3 - e1)), anneal(base_m, max_m, (s - e1) / (e3 - e1))};
    if (s <= e2) return {anneal(max_lr, init, (s - e1) / (e2 - e1)), anneal(base_m, max_m, (s - e1) / (e2 - e1))};
    return {anneal(init, min_lr, (s - e2) / (e3 - e2)), max_m};
  }
};

TEST(Schedulers, OneCycleCosineWithMomentumCycling) {
  Quadratic q;
  SGD opt(q.params(), {.lr = 0.1, .momentum = 0.9});
  OneCycleLR s(opt, 1.0, 10);
  OneCycleRef ref{1.0, 0.3, 25, 1e4, 10};
  for (int e = 0; e <= 10; ++e) {
    if (e > 0) {
      opt.step();
      s.step();
    }
    auto [lr, m] = ref.at(e);
    EXPECT_NEAR(opt.param_groups()[0].lr(), lr, 1e-14 * std::fabs(lr)) << "epoch " << e;
    EXPECT_NEAR(opt.param_groups()[0].get("momentum"), m, 1e-14) << "epoch " << e;
  }
  EXPECT_THROW(s.step(), ValueError);  // past total_steps
}

TEST(Schedulers, OneCycleThreePhaseLinearOnAdamBeta1) {
  Quadratic q;
  Adam opt(q.params(), {.lr = 0.1});
  OneCycleLR s(opt, 0.5, 20, {.pct_start = 0.25, .anneal_strategy = "linear", .three_phase = true});
  OneCycleRef ref{0.5, 0.25, 25, 1e4, 20, false, true};
  for (int e = 0; e <= 20; ++e) {
    if (e > 0) {
      opt.step();
      s.step();
    }
    auto [lr, m] = ref.at(e);
    EXPECT_NEAR(opt.param_groups()[0].lr(), lr, 1e-13 * std::fabs(lr)) << "epoch " << e;
    EXPECT_NEAR(opt.param_groups()[0].get("beta1"), m, 1e-14) << "epoch " << e;
  }
}

TEST(Schedulers, OneCycleWithoutMomentumSupportNeedsCycleMomentumOff) {
  Quadratic q;
  Adagrad opt(q.params(), {.lr = 0.1});
  EXPECT_THROW(OneCycleLR(opt, 1.0, 10), ValueError);
  OneCycleLR s(opt, 1.0, 10, {.cycle_momentum = false});
  EXPECT_NEAR(opt.param_groups()[0].lr(), 0.04, 1e-16);
}

TEST(Schedulers, PerGroupBaseLearningRates) {
  Quadratic q;
  SGD opt({ParamGroup{{q.w}, {{"lr", 1.0}}}, ParamGroup{{q.b}, {{"lr", 0.1}}}});
  StepLR s(opt, 1, 0.5);
  s.step();
  s.step();
  EXPECT_EQ(s.get_last_lr(), (std::vector<double>{0.25, 0.025}));
  EXPECT_EQ(s.base_lrs(), (std::vector<double>{1.0, 0.1}));
  EXPECT_THROW(StepLR(opt, 0), ValueError);
  SGD fresh(q.params(), {.lr = 0.1});
  EXPECT_THROW(StepLR(fresh, 2, 0.1, 5), ValueError);  // resuming needs initial_lr
}

}  // namespace
}  // namespace kiln::optim
