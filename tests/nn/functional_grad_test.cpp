// gradcheck (float64 finite differences) of every nn::functional layer and activation,
// with respect to each floating input.
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;

TEST(FunctionalGrad, Linear) {
  Tensor x = leaf({4, 3}, 1), w = leaf({2, 3}, 2), b = leaf({2}, 3);
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::linear(in[0], in[1], in[2]); }, (V{x, w, b}));
  Tensor x3 = leaf({2, 2, 3}, 4);
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::linear(in[0], in[1]); }, (V{x3, w}));
}

TEST(FunctionalGrad, Bilinear) {
  Tensor x1 = leaf({3, 2}, 5), x2 = leaf({3, 4}, 6), w = leaf({2, 2, 4}, 7), b = leaf({2}, 8);
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::bilinear(in[0], in[1], in[2], in[3]); },
                        (V{x1, x2, w, b}));
}

// (With padding_idx the padding row's gradient is 0 by design, not the true derivative:
// layers_test checks that case against a hand reference.)
TEST(FunctionalGrad, Embedding) {
  Tensor w = leaf({5, 3}, 9);
  Tensor idx = i64({0, 3, 3, 1, 4, 0}, {2, 3});
  KILN_EXPECT_GRADCHECK([&](const V& in) { return F::embedding(idx, in[0]); }, V{w});
  KILN_EXPECT_GRADCHECK([&](const V& in) { return F::embedding(idx, in[0], 2); }, V{w});  // 2 unused
}

TEST(FunctionalGrad, LayerNormRmsNormGroupNorm) {
  Tensor x = leaf({3, 2, 4}, 10, -2, 2), w = leaf({2, 4}, 11, 0.5, 1.5), b = leaf({2, 4}, 12);
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::layer_norm(in[0], {2, 4}, in[1], in[2], 1e-5); }, (V{x, w, b}));
  Tensor w1 = leaf({4}, 13, 0.5, 1.5);
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::rms_norm(in[0], {4}, in[1], 1e-6); },
                        (V{x, w1}));
  Tensor xg = leaf({2, 4, 3}, 14, -2, 2), wg = leaf({4}, 15, 0.5, 1.5), bg = leaf({4}, 16);
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::group_norm(in[0], 2, in[1], in[2], 1e-5); }, (V{xg, wg, bg}));
}

TEST(FunctionalGrad, BatchNormTrainingAndEval) {
  Tensor x = leaf({4, 3, 2}, 17, -2, 2), w = leaf({3}, 18, 0.5, 1.5), b = leaf({3}, 19);
  // Training without running statistics (the update would change them between calls).
  KILN_EXPECT_GRADCHECK(
      [](const V& in) {
        return F::batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      (V{x, w, b}));
  Tensor rm = f64({0.1, -0.2, 0.3}, {3}), rv = f64({0.5, 1.5, 2.0}, {3});
  KILN_EXPECT_GRADCHECK(
      [&](const V& in) { return F::batch_norm(in[0], rm, rv, in[1], in[2], false, 0.1, 1e-5); },
      (V{x, w, b}));
}

TEST(FunctionalGrad, DropoutWithAFixedGenerator) {
  Tensor x = leaf({5, 4}, 20);
  KILN_EXPECT_GRADCHECK(
      [](const V& in) {
        Generator g(123);  // the same mask on every call
        return F::dropout(in[0], 0.4, true, &g);
      },
      V{x});
}

TEST(FunctionalGrad, Activations) {
  Tensor x = leaf({3, 4}, 21, -2, 2);
  // Avoid the kinks of relu/leaky_relu at 0 (finite differences straddle them).
  Tensor xk = f64({-1.5, -0.7, -0.2, 0.3, 0.9, 1.7}, {2, 3});
  autograd::set_requires_grad(xk);
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::relu(in[0]); }, V{xk});
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::leaky_relu(in[0], 0.2); }, V{xk});
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::gelu(in[0]); }, V{x});
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::gelu(in[0], "tanh"); }, V{x});
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::silu(in[0]); }, V{x});
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::sigmoid(in[0]); }, V{x});
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::tanh(in[0]); }, V{x});
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::softmax(in[0], 1); }, V{x});
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::log_softmax(in[0], 0); }, V{x});
}

}  // namespace
}  // namespace kiln::nn

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;

// The fused layer_norm / rms_norm ops: second derivatives, and agreement with the composite
// formula written out with ops (the path mixed-dtype inputs take).
TEST(FunctionalGrad, FusedNormsSecondDerivativesAndCompositeAgreement) {
  Tensor x = leaf({3, 2, 4}, 40, -2, 2), w = leaf({2, 4}, 41, 0.5, 1.5), b = leaf({2, 4}, 42);
  auto ln = [](const V& in) { return F::layer_norm(in[0], {2, 4}, in[1], in[2], 1e-5); };
  auto r = autograd::gradgradcheck(ln, V{x, w, b});
  EXPECT_TRUE(r.ok) << r.message;
  Tensor w1 = leaf({4}, 43, 0.5, 1.5);
  auto rms = [](const V& in) { return F::rms_norm(in[0], {4}, in[1], 1e-6); };
  auto r2 = autograd::gradgradcheck(rms, V{x, w1});
  EXPECT_TRUE(r2.ok) << r2.message;
  // Composite references.
  Tensor mu = mean(x, {1, 2}, true);
  Tensor ref = (x - mu) * rsqrt(var(x, {1, 2}, 0, true) + 1e-5) * w + b;
  EXPECT_LT(max(abs(F::layer_norm(x, {2, 4}, w, b, 1e-5) - ref)).item<double>(), 1e-12);
  Tensor ref_rms = x * rsqrt(mean(x * x, {2}, true) + 1e-6) * w1;
  EXPECT_LT(max(abs(F::rms_norm(x, {4}, w1, 1e-6) - ref_rms)).item<double>(), 1e-12);
  // float32 and bfloat16 rows against the float64 result.
  for (DType t : {DType::F32, DType::BF16}) {
    Tensor y = F::layer_norm(x.to(t), {2, 4}, w.to(t), b.to(t), 1e-5).to(DType::F64);
    const double tol = t == DType::F32 ? 1e-5 : 3e-2;
    EXPECT_LT(max(abs(y - ref)).item<double>(), tol) << dtype_name(t);
  }
}

}  // namespace
}  // namespace kiln::nn
