// Optimizer base behaviour: zero_grad, closures, parameters without gradients, groups,
// state_dict contents and load errors.
#include "optim/quadratic.h"

namespace kiln::optim {
namespace {

using namespace test;

TEST(Optimizer, ZeroGradSetsToNoneOrZeroes) {
  Quadratic q;
  SGD opt(q.params(), {.lr = 0.1});
  backward(q.loss());
  ASSERT_TRUE(autograd::grad(q.w).defined());
  opt.zero_grad(false);
  EXPECT_EQ(autograd::grad(q.w).to_vector<double>(), (std::vector<double>{0, 0}));
  opt.zero_grad();
  EXPECT_FALSE(autograd::grad(q.w).defined());
  EXPECT_FALSE(autograd::grad(q.b).defined());
}

TEST(Optimizer, ParametersWithoutGradientsAreSkipped) {
  Quadratic q;
  Adam opt(q.params(), {.lr = 0.1});
  backward(sum(q.w * q.w));  // b gets no gradient
  opt.step();
  EXPECT_EQ(q.b.item<double>(), 0.5);
  EXPECT_EQ(opt.state(q.b), nullptr);
  ASSERT_NE(opt.state(q.w), nullptr);
  EXPECT_NE(q.w.to_vector<double>()[0], 1.0);
}

TEST(Optimizer, StepRunsTheClosureWithGradientsOn) {
  Quadratic q;
  SGD opt(q.params(), {.lr = 0.1});
  autograd::NoGradGuard ng;  // the closure still records
  Tensor loss = opt.step([&] {
    opt.zero_grad();
    Tensor l = q.loss();
    backward(l);
    return l;
  });
  EXPECT_NEAR(loss.item<double>(), 1.5 + 2.0 + 0.5 + 0.5 + 2.0, 1e-15);
  std::vector<double> g = gradient(initial_values());
  EXPECT_NEAR(q.w.to_vector<double>()[0], 1.0 - 0.1 * g[0], 1e-15);
}

TEST(Optimizer, GroupAndParameterErrors) {
  Quadratic q;
  EXPECT_THROW(SGD(std::vector<Tensor>{}), ValueError);
  EXPECT_THROW(SGD(std::vector<Tensor>{q.w, q.w}), ValueError);
  Tensor non_leaf = q.w * 2.0;
  EXPECT_THROW(SGD(std::vector<Tensor>{non_leaf}), ValueError);
  Tensor ints = zeros({2}, DType::I64);
  EXPECT_THROW(SGD(std::vector<Tensor>{ints}), TypeError);
  SGD opt(std::vector<Tensor>{q.w}, {.lr = 0.1});
  EXPECT_THROW(opt.add_param_group({{q.w}, {}}), ValueError);
  opt.add_param_group({{q.b}, {{"lr", 0.5}}});
  EXPECT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.5);
  EXPECT_THROW(opt.param_groups()[1].get("beta1"), ValueError);
}

TEST(Optimizer, StateDictSnapshotsGroupsAndState) {
  Quadratic q;
  SGD opt({ParamGroup{{q.w}, {}}, ParamGroup{{q.b}, {{"lr", 0.01}}}}, {.lr = 0.1, .momentum = 0.9});
  backward(q.loss());
  opt.step();
  OptimizerStateDict sd = opt.state_dict();
  ASSERT_EQ(sd.param_groups.size(), 2u);
  EXPECT_EQ(sd.param_groups[0].params, std::vector<int64_t>{0});
  EXPECT_EQ(sd.param_groups[1].params, std::vector<int64_t>{1});
  EXPECT_EQ(sd.param_groups[1].options.at("lr"), 0.01);
  ASSERT_EQ(sd.state.size(), 2u);
  Tensor buf = sd.state.at(0).buffers.at("momentum_buffer");
  std::vector<double> before = buf.to_vector<double>();
  // The snapshot does not change when training goes on.
  opt.zero_grad();
  backward(q.loss());
  opt.step();
  EXPECT_EQ(buf.to_vector<double>(), before);
}

TEST(Optimizer, LoadStateDictRejectsMismatchedGroups) {
  Quadratic q;
  SGD one(q.params(), {.lr = 0.1, .momentum = 0.9});
  backward(q.loss());
  one.step();
  OptimizerStateDict sd = one.state_dict();
  SGD two({ParamGroup{{q.w}, {}}, ParamGroup{{q.b}, {}}}, {.lr = 0.1});
  EXPECT_THROW(two.load_state_dict(sd), ValueError);
  Quadratic other;
  SGD three(std::vector<Tensor>{other.b, other.w}, {.lr = 0.1, .momentum = 0.9});  // swapped shapes
  EXPECT_THROW(three.load_state_dict(sd), ValueError);
  OptimizerStateDict bad = sd;
  bad.param_groups[0].options["lr"] = -1;
  SGD four(other.params(), {.lr = 0.1, .momentum = 0.9});
  EXPECT_THROW(four.load_state_dict(bad), ValueError);
  four.load_state_dict(sd);
  EXPECT_EQ(four.state(other.w)->buffers.at("momentum_buffer").to_vector<double>(),
            sd.state.at(0).buffers.at("momentum_buffer").to_vector<double>());
}

}  // namespace
}  // namespace kiln::optim
