// SGD's first three steps against hand-written float64 references of torch.optim.SGD.
#include "optim/quadratic.h"

namespace kiln::optim {
namespace {

using namespace test;

struct SgdRef {
  double lr, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
  std::vector<double> buf{};
  void operator()(std::vector<double>& p, const std::vector<double>& grad, int step) {
    if (buf.empty()) buf.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = maximize ? -grad[i] : grad[i];
      g += weight_decay * p[i];
      if (momentum != 0) {
        buf[i] = step == 1 ? g : momentum * buf[i] + (1 - dampening) * g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
};

template <typename R>
void check(const SGDOptions& o, R ref, const std::string& what) {
  expect_matches_reference(
      [&](const std::vector<Tensor>& ps) { return std::make_unique<SGD>(ps, o); }, ref, what);
}

TEST(SGD, PlainStep) { check({.lr = 0.1}, SgdRef{.lr = 0.1}, "plain"); }

TEST(SGD, MomentumAndDampening) {
  check({.lr = 0.05, .momentum = 0.9}, SgdRef{.lr = 0.05, .momentum = 0.9}, "momentum");
  check({.lr = 0.05, .momentum = 0.8, .dampening = 0.3},
        SgdRef{.lr = 0.05, .momentum = 0.8, .dampening = 0.3}, "dampening");
}

TEST(SGD, NesterovWeightDecayMaximize) {
  check({.lr = 0.05, .momentum = 0.9, .nesterov = true},
        SgdRef{.lr = 0.05, .momentum = 0.9, .nesterov = true}, "nesterov");
  check({.lr = 0.1, .momentum = 0.5, .weight_decay = 0.2},
        SgdRef{.lr = 0.1, .momentum = 0.5, .weight_decay = 0.2}, "weight decay");
  check({.lr = 0.02, .weight_decay = 0.1, .maximize = true},
        SgdRef{.lr = 0.02, .weight_decay = 0.1, .maximize = true}, "maximize");
}

TEST(SGD, ParameterGroupsHaveTheirOwnOptions) {
  Quadratic q;
  SGD opt({ParamGroup{{q.w}, {}}, ParamGroup{{q.b}, {{"lr", 0.01}, {"momentum", 0.5}}}},
          {.lr = 0.1});
  EXPECT_EQ(opt.param_groups()[0].lr(), 0.1);
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.01);
  EXPECT_EQ(opt.param_groups()[0].get("momentum"), 0.0);
  EXPECT_EQ(opt.param_groups()[1].get("weight_decay"), 0.0);  // from the defaults
  std::vector<double> p = initial_values(), buf_b;
  for (int s = 1; s <= 3; ++s) {
    opt.zero_grad();
    backward(q.loss());
    opt.step();
    std::vector<double> g = gradient(p);
    p[0] -= 0.1 * g[0];
    p[1] -= 0.1 * g[1];
    double bb = s == 1 ? g[2] : 0.5 * buf_b[0] + g[2];
    buf_b = {bb};
    p[2] -= 0.01 * bb;
    std::vector<double> got = q.values();
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got[i], p[i], 1e-14) << "step " << s << " value " << i;
  }
}

TEST(SGD, InvalidOptions) {
  Quadratic q;
  EXPECT_THROW(SGD(q.params(), {.lr = -1}), ValueError);
  EXPECT_THROW(SGD(q.params(), {.lr = 0.1, .nesterov = true}), ValueError);
  EXPECT_THROW(SGD(q.params(), {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
               ValueError);
  EXPECT_THROW(SGD(std::vector<ParamGroup>{ParamGroup{{q.w}, {{"betas", 0.9}}}}), ValueError);
}

}  // namespace
}  // namespace kiln::optim
