// In-place ops on views of tensors in the autograd graph (CopySlices), against gradients
// worked out by hand and against gradcheck of the same function written without views.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/gradcheck.h"
#include "kiln/autograd/node.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

namespace ag = autograd;

Tensor param(std::vector<double> v, Shape shape) {
  Tensor t = tensor_from(v, shape, TensorOptions(DType::F64));
  ag::set_requires_grad(t);
  return t;
}

TEST(InPlaceOnView, MulOfASliceRoutesGradientsThroughTheBase) {
  Tensor x = param({1, 2, 3, 4}, {4});
  Tensor w = param({10}, {1});
  Tensor y = x * 1.0;           // non-leaf base
  Tensor part = y.slice(0, 1, 3);  // y[1:3]
  part.mul_(w);                 // y = [x0, 10 x1, 10 x2, x3]
  EXPECT_EQ(ag::grad_fn(y)->name(), "CopySlices");
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 20, 30, 4}));
  Tensor loss = (y * tensor_from<double>({1, 2, 3, 4}, {4}, TensorOptions(DType::F64))).sum();
  backward(loss);
  // d/dx = [1, 2*10, 3*10, 4]; d/dw = 2*x1 + 3*x2 = 4 + 9.
  EXPECT_EQ(ag::grad(x).to_vector<double>(), (std::vector<double>{1, 20, 30, 4}));
  EXPECT_EQ(ag::grad(w).to_vector<double>(), (std::vector<double>{13}));
}

TEST(InPlaceOnView, CopyIntoAViewOfATensorWithoutHistory) {
  Tensor w = param({5, 6}, {2});
  Tensor buf = zeros({2, 3}, DType::F64);  // no grad
  buf.select(1, 1).copy_(w);               // buf[:, 1] = w
  EXPECT_TRUE(ag::requires_grad(buf));
  backward((buf * buf).sum());
  EXPECT_EQ(ag::grad(w).to_vector<double>(), (std::vector<double>{10, 12}));
}

TEST(InPlaceOnView, OverwrittenValuesGetNoGradient) {
  Tensor x = param({1, 2, 3}, {3});
  Tensor y = x * 2.0;
  y.slice(0, 0, 2).fill_(7.0);  // y[0:2] = 7: x0 and x1 no longer matter
  backward(y.sum());
  EXPECT_EQ(ag::grad(x).to_vector<double>(), (std::vector<double>{0, 0, 2}));
}

TEST(InPlaceOnView, TheViewItselfStaysDifferentiable) {
  Tensor x = param({1, 2, 3, 4}, {2, 2});
  Tensor y = sin(x);  // (exp would fail: it saves its output, which add_ then modifies)
  Tensor row = y.select(0, 1);
  row.add_(ones_like(row));
  backward(row.sum() * 3.0);  // only row 1 of y, through sin
  auto g = ag::grad(x).to_vector<double>();
  EXPECT_EQ(g[0], 0);
  EXPECT_EQ(g[1], 0);
  EXPECT_NEAR(g[2], 3 * std::cos(3.0), 1e-12);
  EXPECT_NEAR(g[3], 3 * std::cos(4.0), 1e-12);
}

TEST(InPlaceOnView, GradcheckAgainstTheSameFunctionWithoutViews) {
  Tensor x = param({0.3, -0.7, 1.1, 0.4, -0.2, 0.9}, {2, 3});
  Tensor w = param({0.5, -1.5, 2.0}, {3});
  auto with_views = [](const std::vector<Tensor>& in) {
    Tensor y = sin(in[0]);
    y.select(0, 1).mul_(in[1]);       // row 1 *= w
    y.slice(1, 0, 2).add_(in[1].slice(0, 0, 1));  // columns 0, 1 += w0
    return (y * y).sum();
  };
  auto r = ag::gradcheck(with_views, {x, w});
  EXPECT_TRUE(r.ok) << r.message;
  auto r2 = ag::gradgradcheck(with_views, {x, w});
  EXPECT_TRUE(r2.ok) << r2.message;
}

TEST(InPlaceOnView, ModifyingASavedOutputThroughAViewIsDetected) {
  Tensor x = param({1, 2}, {2});
  Tensor y = exp(x);  // exp's derivative uses its output
  y.slice(0, 0, 1).mul_(full_like(y.slice(0, 0, 1), 2.0));
  EXPECT_THROW(backward(y.sum()), Error);
}

TEST(InPlaceOnView, ViewOfALeafThatRequiresGradIsAnError) {
  Tensor x = param({1, 2, 3}, {3});
  Tensor v = x.slice(0, 0, 2);
  try {
    v.mul_(full_like(v, 2.0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a view of a leaf Variable that requires grad"),
              std::string::npos) << e.what();
  }
  {
    ag::NoGradGuard ng;  // allowed without grad mode, as in PyTorch
    v.mul_(full_like(v, 2.0));
  }
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{2, 4, 3}));
}

}  // namespace
}  // namespace kiln
