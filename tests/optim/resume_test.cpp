// Optimizer + scheduler state dicts resume training bit-exactly: 10 steps in one run equal
// 5 steps, a save, a restore into freshly built objects and 5 more steps, bit for bit.
#include <cstring>

#include "kiln/nn/nn.h"
#include "optim/quadratic.h"

namespace kiln::optim {
namespace {

using MakeOpt = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>;
using MakeSched = std::function<std::unique_ptr<LRScheduler>(Optimizer&)>;

std::shared_ptr<nn::Sequential> make_model(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 8),
                                          std::make_shared<nn::Tanh>(),
                                          std::make_shared<nn::Linear>(8, 2));
}

void train_step(nn::Sequential& model, Optimizer& opt, LRScheduler& sched, int step) {
  Generator g(1000 + uint64_t(step));
  Tensor x = randn({16, 3}, DType::F32, &g);
  Tensor y = randint(0, 2, {16}, DType::I64, &g);
  opt.zero_grad();
  backward(nn::functional::cross_entropy(model.forward(x), y));
  opt.step();
  sched.step();
}

std::vector<uint32_t> bits(const nn::Module& m) {
  std::vector<uint32_t> out;
  for (const auto& p : m.parameters())
    for (float v : p.to_vector<float>()) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      out.push_back(u);
    }
  return out;
}

void expect_bit_exact_resume(const MakeOpt& make_opt, const MakeSched& make_sched,
                             const std::string& what) {
  auto model = make_model(7);
  auto opt = make_opt(model->parameters());
  auto sched = make_sched(*opt);
  nn::StateDict saved_model;
  OptimizerStateDict saved_opt;
  SchedulerStateDict saved_sched;
  for (int s = 1; s <= 10; ++s) {
    train_step(*model, *opt, *sched, s);
    if (s == 5) {
      for (const auto& [k, v] : model->state_dict()) saved_model.insert(k, v.clone());
      saved_opt = opt->state_dict();
      saved_sched = sched->state_dict();
    }
  }
  auto model2 = make_model(99);  // different initial weights, overwritten by the load
  auto opt2 = make_opt(model2->parameters());
  auto sched2 = make_sched(*opt2);
  model2->load_state_dict(saved_model);
  opt2->load_state_dict(saved_opt);
  sched2->load_state_dict(saved_sched);
  for (int s = 6; s <= 10; ++s) train_step(*model2, *opt2, *sched2, s);
  EXPECT_EQ(bits(*model), bits(*model2)) << what;
  EXPECT_EQ(sched->get_last_lr(), sched2->get_last_lr()) << what;
  EXPECT_EQ(sched->last_epoch(), sched2->last_epoch()) << what;
  EXPECT_EQ(opt->param_groups()[0].options, opt2->param_groups()[0].options) << what;
  // The run changed the weights (a resume of a no-op would prove nothing).
  EXPECT_NE(bits(*model), bits(*make_model(7))) << what;
}

TEST(Resume, SgdNesterovWithStepLR) {
  expect_bit_exact_resume(
      [](std::vector<Tensor> ps) {
        return std::make_unique<SGD>(ps, SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true});
      },
      [](Optimizer& o) { return std::make_unique<StepLR>(o, 3, 0.5); }, "SGD + StepLR");
}

TEST(Resume, SgdWithMultiStepLR) {
  expect_bit_exact_resume(
      [](std::vector<Tensor> ps) {
        return std::make_unique<SGD>(ps, SGDOptions{.lr = 0.1, .momentum = 0.5, .dampening = 0.1});
      },
      [](Optimizer& o) { return std::make_unique<MultiStepLR>(o, std::vector<int64_t>{4, 7}); },
      "SGD + MultiStepLR");
}

TEST(Resume, AdamAmsgradWithCosineAnnealing) {
  expect_bit_exact_resume(
      [](std::vector<Tensor> ps) {
        return std::make_unique<Adam>(ps, AdamOptions{.lr = 0.01, .weight_decay = 0.01, .amsgrad = true});
      },
      [](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 6, 1e-4); },
      "Adam + CosineAnnealingLR");
}

TEST(Resume, AdamWWithLinearWarmup) {
  expect_bit_exact_resume(
      [](std::vector<Tensor> ps) { return std::make_unique<AdamW>(ps, AdamWOptions{.lr = 0.01}); },
      [](Optimizer& o) { return std::make_unique<LinearLR>(o, 0.1, 1.0, 8); }, "AdamW + LinearLR");
}

TEST(Resume, AdamWithOneCycle) {
  expect_bit_exact_resume(
      [](std::vector<Tensor> ps) { return std::make_unique<Adam>(ps, AdamOptions{.lr = 0.01}); },
      [](Optimizer& o) { return std::make_unique<OneCycleLR>(o, 0.05, 10); }, "Adam + OneCycleLR");
}

TEST(Resume, RMSpropCenteredWithOneCycle) {
  expect_bit_exact_resume(
      [](std::vector<Tensor> ps) {
        return std::make_unique<RMSprop>(ps, RMSpropOptions{.lr = 0.01, .momentum = 0.5, .centered = true});
      },
      [](Optimizer& o) {
        return std::make_unique<OneCycleLR>(o, 0.02, 12, OneCycleOptions{.three_phase = true});
      },
      "RMSprop + OneCycleLR");
}

TEST(Resume, AdagradWithExponentialLR) {
  expect_bit_exact_resume(
      [](std::vector<Tensor> ps) {
        return std::make_unique<Adagrad>(ps, AdagradOptions{.lr = 0.05, .lr_decay = 0.01});
      },
      [](Optimizer& o) { return std::make_unique<ExponentialLR>(o, 0.95); }, "Adagrad + ExponentialLR");
}

}  // namespace
}  // namespace kiln::optim
