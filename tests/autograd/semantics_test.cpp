// Autograd semantics as PyTorch defines them: leaves and grad_fn, accumulation, retain_graph,
// non-scalar outputs, autograd::grad with create_graph, grad modes, hooks, in-place checks.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/node.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

namespace ag = autograd;

Tensor param(std::vector<double> v, Shape shape = {}) {
  if (shape.empty() && v.size() != 1) shape = {int64_t(v.size())};
  Tensor t = tensor_from(v, shape);
  ag::set_requires_grad(t);
  return t;
}

TEST(Autograd, LeavesGradFnAndSimpleBackward) {
  Tensor x = param({1, 2, 3});
  EXPECT_TRUE(ag::is_leaf(x));
  Tensor y = (x * x).sum();
  EXPECT_FALSE(ag::is_leaf(y));
  EXPECT_TRUE(ag::requires_grad(y));
  ASSERT_NE(ag::grad_fn(y), nullptr);
  EXPECT_EQ(ag::grad_fn(y)->name(), "sumBackward");
  backward(y);
  EXPECT_EQ(ag::grad(x).to_vector<double>(), (std::vector<double>{2, 4, 6}));
  Tensor c = ones({3});
  EXPECT_FALSE(ag::requires_grad(c * ag::detach(x)));
  EXPECT_THROW(ag::set_requires_grad(c = arange(3), true), Error);  // integer tensor
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = param({2});
  backward(x * 3);
  backward(x * x);
  EXPECT_DOUBLE_EQ(ag::grad(x).item<double>(), 3 + 4);
}

// Gradients reaching one input twice are summed, in place where nothing else holds the first
// (engine.cpp's accumulate): the caller's gradient, a gradient passed on unchanged by add's
// backward, and a tensor a hook keeps must come out unchanged, and every sum right.
TEST(Autograd, GradientSumsLeaveOtherHoldersAlone) {
  {  // x + x with the caller's gradient: add's backward passes g itself to both uses of x
    Tensor x = param({1, 2, 3});
    Tensor g = tensor_from(std::vector<double>{1, 10, 100}, {3});
    backward(x + x, g);
    EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 10, 100}));
    EXPECT_EQ(ag::grad(x).to_vector<double>(), (std::vector<double>{2, 20, 200}));
  }
  {  // h used three times; a hook keeps the gradient reaching h
    Tensor x = param({1, 2, 3});
    Tensor h = x * 2.0;
    Tensor kept;
    ag::register_hook(h, [&](const Tensor& gh) {
      kept = gh;
      return Tensor();
    });
    Tensor y = (h * 3.0 + h * h + h).sum();  // dy/dh = 3 + 2h + 1
    backward(y);
    const std::vector<double> want_h{8, 12, 16};  // h = 2, 4, 6
    ASSERT_TRUE(kept.defined());
    EXPECT_EQ(kept.to_vector<double>(), want_h);
    EXPECT_EQ(ag::grad(x).to_vector<double>(), (std::vector<double>{16, 24, 32}));
  }
  {  // the sum grows in a buffer no one else sees: a large one, checked element by element
    Tensor x = param(std::vector<double>(4096, 0.5), {64, 64});
    Tensor y = (x * 2.0).sum() + (x * x).sum() + (x * 4.0).sum();  // 2 + 2x + 4 = 7
    backward(y);
    for (double v : ag::grad(x).to_vector<double>()) ASSERT_DOUBLE_EQ(v, 7.0);
  }
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = param({2});
  Tensor y = exp(x);
  backward(y, Tensor(), /*retain_graph=*/true);
  backward(y);
  EXPECT_NEAR(ag::grad(x).item<double>(), 2 * std::exp(2.0), 1e-12);
  try {
    backward(y);
    FAIL() << "third backward must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos);
  }
}

TEST(Autograd, NonScalarOutputsNeedGradOutputs) {
  Tensor x = param({1, 2});
  Tensor y = x * 2;
  EXPECT_THROW(backward(y), Error);
  backward(y, tensor_from(std::vector<double>{1, 10}));
  EXPECT_EQ(ag::grad(x).to_vector<double>(), (std::vector<double>{2, 20}));
  EXPECT_THROW(backward(param({1}) * 2, ones({3})), ShapeError);
}

TEST(Autograd, GradWithCreateGraphGivesHigherDerivatives) {
  Tensor x = param({1.5});
  Tensor y = pow(x, 3);
  auto g1 = ag::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  EXPECT_NEAR(g1[0].item<double>(), 3 * 1.5 * 1.5, 1e-12);
  auto g2 = ag::grad({g1[0]}, {x}, {}, std::nullopt, true);
  EXPECT_NEAR(g2[0].item<double>(), 6 * 1.5, 1e-12);
  auto g3 = ag::grad({g2[0]}, {x});
  EXPECT_NEAR(g3[0].item<double>(), 6, 1e-12);
  EXPECT_FALSE(ag::grad(x).defined());  // grad() does not touch .grad
  Tensor unused = param({1});
  EXPECT_THROW(ag::grad({pow(x, 2)}, {unused}), Error);
  auto r = ag::grad({pow(x, 2)}, {unused}, {}, std::nullopt, false, /*allow_unused=*/true);
  EXPECT_FALSE(r[0].defined());
}

TEST(Autograd, NoGradAndInferenceMode) {
  Tensor x = param({1, 2});
  {
    ag::NoGradGuard ng;
    Tensor y = x * 2;
    EXPECT_FALSE(ag::requires_grad(y));
    {
      ag::EnableGradGuard eg;
      EXPECT_TRUE(ag::requires_grad(x * 2));
    }
  }
  {
    ag::InferenceMode im;
    EXPECT_TRUE(ag::is_inference_mode_enabled());
    EXPECT_FALSE(ag::requires_grad(x * 2));
  }
  EXPECT_TRUE(ag::is_grad_enabled());
  EXPECT_FALSE(ag::is_inference_mode_enabled());
}

TEST(Autograd, HooksSeeAndReplaceGradients) {
  Tensor x = param({1, 2});
  Tensor y = x * 3;
  std::vector<double> seen;
  ag::register_hook(y, [&](const Tensor& g) {
    seen = g.to_vector<double>();
    return g * 2;  // doubles the gradient flowing on
  });
  ag::register_hook(x, [](const Tensor& g) { return g + 1; });
  backward(y.sum());
  EXPECT_EQ(seen, (std::vector<double>{1, 1}));
  EXPECT_EQ(ag::grad(x).to_vector<double>(), (std::vector<double>{7, 7}));
}

TEST(Autograd, RetainGradOnNonLeaf) {
  Tensor x = param({1, 2});
  Tensor y = x * 3;
  ag::retain_grad(y);
  backward((y * y).sum());
  EXPECT_EQ(ag::grad(y).to_vector<double>(), (std::vector<double>{6, 12}));
  EXPECT_EQ(ag::grad(x).to_vector<double>(), (std::vector<double>{18, 36}));
}

TEST(Autograd, InPlaceOnSavedTensorIsDetected) {
  Tensor x = param({1, 2});
  Tensor y = x * 2;
  Tensor z = exp(y);  // saves its output
  z.mul_(full({}, 2.0, DType::F64));  // modifies the saved output
  try {
    backward(z.sum());
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("modified by an inplace operation"), std::string::npos) << m;
    EXPECT_NE(m.find("exp"), std::string::npos) << m;
  }
}

TEST(Autograd, InPlaceOpsOnNonLeavesAreDifferentiated) {
  Tensor x = param({1, 2, 3});
  Tensor y = x * 2;
  y.add_(x * x);  // y = 2x + x^2
  y.mul_(full({}, 3.0, DType::F64));
  backward(y.sum());
  EXPECT_EQ(ag::grad(x).to_vector<double>(), (std::vector<double>{12, 18, 24}));
  Tensor leaf = param({1});
  EXPECT_THROW(leaf.add_(ones({}, DType::F64)), Error);
  ag::NoGradGuard ng;
  leaf.add_(ones({}, DType::F64));  // allowed without grad
  EXPECT_EQ(leaf.item<double>(), 2.0);
}

TEST(Autograd, BackwardThroughViewsAndBroadcasting) {
  Tensor x = param({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = x.t().narrow(0, 1, 2) * tensor_from(std::vector<double>{1, 10});
  backward(y.sum());
  EXPECT_EQ(ag::grad(x).to_vector<double>(), (std::vector<double>{0, 1, 1, 0, 10, 10}));
}

TEST(Autograd, IntegerAndBoolOutputsDoNotRequireGrad) {
  Tensor x = param({1, -2});
  EXPECT_FALSE(ag::requires_grad(gt(x, 0.0)));
  EXPECT_FALSE(ag::requires_grad(argmax(x)));
}

TEST(Autograd, DetachSharesDataButNotHistory) {
  Tensor x = param({1, 2});
  Tensor d = ag::detach(x * 2);
  EXPECT_FALSE(ag::requires_grad(d));
  Tensor y = x * 2;
  Tensor dy = ag::detach(y);
  EXPECT_TRUE(dy.shares_storage_with(y));
}

// autograd::grad runs only the nodes that lead to the requested inputs: here the second
// pass reaches trigamma's node (the derivative of digamma) only on the branch towards x, so
// asking for u alone gives trigamma(x); asking for x runs it too (its derivative,
// polygamma(2, x), was missing before session 38: this test then expected an error there).
TEST(Autograd, GradSkipsNodesThatDoNotLeadToTheInputs) {
  Tensor x = tensor_from(std::vector<double>{1.5, 2.5}, {2}, TensorOptions(DType::F64));
  autograd::set_requires_grad(x);
  Tensor u = ones({2}, TensorOptions(DType::F64));
  autograd::set_requires_grad(u);
  Tensor g = autograd::grad({digamma(x)}, {x}, {u}, std::nullopt, /*create_graph=*/true)[0];
  Tensor gu = autograd::grad({sum(g)}, {u}, {}, /*retain_graph=*/true)[0];
  EXPECT_NEAR(gu.data_ptr<double>()[0], 0.9348022005446793, 1e-12);  // trigamma(1.5) = pi^2/2 - 4
  EXPECT_NEAR(gu.data_ptr<double>()[1], 0.4903577561002349, 1e-12);  // trigamma(2.5) = pi^2/2 - 4 - 4/9
  Tensor gx = autograd::grad({sum(g)}, {x})[0];
  EXPECT_NEAR(gx.data_ptr<double>()[0], -0.8287966442343201, 1e-12);  // polygamma(2, 1.5)
  EXPECT_NEAR(gx.data_ptr<double>()[1], -0.23620405164172736, 1e-12);  // polygamma(2, 2.5)
}

}  // namespace
}  // namespace kiln
