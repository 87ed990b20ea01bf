// Saved-tensor hooks: every tensor the graph saves goes through pack, backward reads it back
// through unpack; gradients are checked against float64 formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/node.h"
#include "kiln/autograd/saved_tensor_hooks.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

namespace ag = autograd;

// Keeps a copy of each saved tensor (so the graph holds no reference to the original) and
// counts the calls.
struct CopyingHooks : ag::SavedTensorHooks {
  struct Packed : ag::PackedTensor {
    Tensor copy;
    int* unpacks;
    Tensor unpack() override {
      ++*unpacks;
      return copy;
    }
  };
  int packs = 0, unpacks = 0;
  bool saw_grad_mode = false;
  std::shared_ptr<ag::PackedTensor> pack(const Tensor& t) override {
    ++packs;
    saw_grad_mode = saw_grad_mode || ag::is_grad_enabled();
    auto p = std::make_shared<Packed>();
    p->copy = ag::detach(t).clone();
    p->unpacks = &unpacks;
    return p;
  }
};

Tensor leaf(std::vector<double> v) {
  Tensor t = tensor_from(v, {int64_t(v.size())});
  ag::set_requires_grad(t);
  return t;
}

TEST(SavedTensorHooks, PackAndUnpackCarryTheSavedValues) {
  auto hooks = std::make_shared<CopyingHooks>();
  Tensor x = leaf({0.5, -1.0, 2.0});
  Tensor y;
  {
    ag::SavedTensorHooksGuard guard(hooks);
    y = (exp(x) * x).sum();
  }
  EXPECT_GT(hooks->packs, 0);
  EXPECT_FALSE(hooks->saw_grad_mode);  // hooks run outside the graph
  backward(y);
  EXPECT_GT(hooks->unpacks, 0);
  auto g = ag::grad(x).to_vector<double>();
  std::vector<double> xs = {0.5, -1.0, 2.0};
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(g[i], std::exp(xs[i]) * (xs[i] + 1.0), 1e-12);  // d/dx x e^x
}

TEST(SavedTensorHooks, PackedCopiesOutliveInPlaceWrites) {
  auto hooks = std::make_shared<CopyingHooks>();
  Tensor x = leaf({0.25, 1.5});
  Tensor e;
  {
    ag::SavedTensorHooksGuard guard(hooks);
    e = exp(x);
  }
  Tensor loss = e.sum();
  {
    ag::NoGradGuard ng;
    e.add_(full_like(e, 100.0));  // without hooks this is the in-place error; the copies keep the values
  }
  backward(loss);
  auto g = ag::grad(x).to_vector<double>();
  EXPECT_NEAR(g[0], std::exp(0.25), 1e-12);
  EXPECT_NEAR(g[1], std::exp(1.5), 1e-12);
}

TEST(SavedTensorHooks, WithoutHooksInPlaceWriteIsStillAnError) {
  Tensor x = leaf({0.25, 1.5});
  Tensor e = exp(x);
  Tensor loss = e.sum();
  {
    ag::NoGradGuard ng;
    e.add_(ones_like(e));
  }
  EXPECT_THROW(backward(loss), Error);
}

TEST(SavedTensorHooks, DoubleBackwardReachesTheLeafThroughUnpackedTensors) {
  auto hooks = std::make_shared<CopyingHooks>();
  Tensor x = leaf({1.5, -2.0});
  Tensor y;
  {
    ag::SavedTensorHooksGuard guard(hooks);
    y = (x * x * x).sum();
  }
  auto g = ag::grad({y}, {x}, {}, true, true)[0];  // 3 x^2, differentiable
  auto gv = g.to_vector<double>();
  EXPECT_NEAR(gv[0], 3 * 1.5 * 1.5, 1e-12);
  backward(g.sum());
  auto h = ag::grad(x).to_vector<double>();  // 6 x
  EXPECT_NEAR(h[0], 9.0, 1e-12);
  EXPECT_NEAR(h[1], -12.0, 1e-12);
}

struct WrongShapeHooks : ag::SavedTensorHooks {
  struct Packed : ag::PackedTensor {
    Tensor unpack() override { return zeros({5}); }
  };
  std::shared_ptr<ag::PackedTensor> pack(const Tensor&) override {
    return std::make_shared<Packed>();
  }
};

TEST(SavedTensorHooks, UnpackMustGiveBackTheSavedShape) {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor y;
  {
    ag::SavedTensorHooksGuard guard(std::make_shared<WrongShapeHooks>());
    y = exp(x).sum();
  }
  try {
    backward(y);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unpack hook returned a tensor of shape [5]"),
              std::string::npos) << e.what();
  }
}

TEST(SavedTensorHooks, InnermostHooksApplyAndPopRestores) {
  auto outer = std::make_shared<CopyingHooks>();
  auto inner = std::make_shared<CopyingHooks>();
  Tensor x = leaf({1.0});
  {
    ag::SavedTensorHooksGuard g1(outer);
    {
      ag::SavedTensorHooksGuard g2(inner);
      (void)exp(x);
    }
    EXPECT_EQ(outer->packs, 0);
    EXPECT_GT(inner->packs, 0);
    int before = inner->packs;
    (void)exp(x);
    EXPECT_GT(outer->packs, 0);
    EXPECT_EQ(inner->packs, before);
  }
  EXPECT_EQ(ag::current_saved_tensor_hooks(), nullptr);
  EXPECT_THROW(ag::pop_saved_tensor_hooks(), Error);
}

TEST(SavedTensorHooks, HooksArePerThread) {
  auto hooks = std::make_shared<CopyingHooks>();
  ag::SavedTensorHooksGuard guard(hooks);
  std::thread other([] {
    Tensor x = leaf({1.0});
    (void)exp(x);
    EXPECT_EQ(ag::current_saved_tensor_hooks(), nullptr);
  });
  other.join();
  EXPECT_EQ(hooks->packs, 0);
}

TEST(SavedTensorHooks, DisablingRefusesHooksWithTheGivenMessage) {
  auto previous = ag::set_saved_tensor_hooks_disabled(std::string("no hooks here"));
  EXPECT_FALSE(previous.has_value());
  try {
    ag::push_saved_tensor_hooks(std::make_shared<CopyingHooks>());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no hooks here"), std::string::npos);
  }
  ag::set_saved_tensor_hooks_disabled(std::nullopt);
  ag::SavedTensorHooksGuard guard(std::make_shared<CopyingHooks>());
  EXPECT_THROW(ag::set_saved_tensor_hooks_disabled(std::string("busy")), Error);
}

}  // namespace
}  // namespace kiln
