// gradcheck (float64 finite differences) for every differentiable op, and gradgradcheck
// (double backward) for the elementwise ops and matmul.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/gradcheck.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using V = std::vector<Tensor>;

Tensor leaf(const Shape& shape, double lo, double hi, uint64_t seed) {
  Generator g(seed);
  Tensor t = rand(shape, TensorOptions(DType::F64), &g) * (hi - lo) + lo;
  t = t.contiguous();
  autograd::set_requires_grad(t);
  return t;
}

struct UnaryGrad {
  const char* name;
  Tensor (*fn)(const Tensor&);
  double lo, hi;
};

Tensor gelu_erf(const Tensor& x) { return gelu(x); }
Tensor gelu_tanh(const Tensor& x) { return gelu(x, "tanh"); }
Tensor softplus2(const Tensor& x) { return softplus(x, 2, 3); }
Tensor clamp_mid(const Tensor& x) { return clamp(x, -0.5, 0.5); }

const UnaryGrad kUnary[] = {
    {"neg", neg, -2, 2},           {"abs", abs, 0.1, 2},         {"exp", exp, -2, 2},
    {"exp2", exp2, -2, 2},         {"log", log, 0.5, 3},         {"log2", log2, 0.5, 3},
    {"log1p", log1p, -0.5, 2},     {"expm1", expm1, -2, 2},      {"sqrt", sqrt, 0.5, 3},
    {"rsqrt", rsqrt, 0.5, 3},      {"sin", sin, -3, 3},          {"cos", cos, -3, 3},
    {"tan", tan, -1, 1},           {"tanh", tanh, -2, 2},        {"sigmoid", sigmoid, -3, 3},
    {"relu", relu, 0.1, 2},        {"silu", silu, -3, 3},        {"erf", erf, -2, 2},
    {"reciprocal", reciprocal, 0.5, 3}, {"gelu", gelu_erf, -3, 3}, {"gelu_tanh", gelu_tanh, -3, 3},
    {"softplus", softplus2, -2, 2}, {"clamp", clamp_mid, -0.4, 0.4},
};

TEST(Gradcheck, UnaryOpsFirstAndSecondOrder) {
  uint64_t seed = 1;
  for (const auto& c : kUnary) {
    Tensor x = leaf({2, 3}, c.lo, c.hi, seed++);
    auto fn = [&c](const V& in) { return c.fn(in[0]); };
    auto r = gradcheck(fn, {x});
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
    auto r2 = gradgradcheck(fn, {x});
    EXPECT_TRUE(r2.ok) << c.name << " (double backward): " << r2.message;
  }
}

TEST(Gradcheck, BinaryOpsWithBroadcasting) {
  Tensor a = leaf({2, 3}, 0.5, 2, 10), b = leaf({3}, 0.5, 2, 11);
  struct Case {
    const char* name;
    std::function<Tensor(const V&)> fn;
  } cases[] = {
      {"add", [](const V& v) { return add(v[0], v[1], 2.5); }},
      {"sub", [](const V& v) { return sub(v[0], v[1], 0.5); }},
      {"mul", [](const V& v) { return mul(v[0], v[1]); }},
      {"div", [](const V& v) { return div(v[0], v[1]); }},
      {"pow", [](const V& v) { return pow(v[0], v[1]); }},
      {"atan2", [](const V& v) { return atan2(v[0], v[1]); }},
      {"maximum", [](const V& v) { return maximum(v[0], v[1] * 1.3); }},
      {"minimum", [](const V& v) { return minimum(v[0], v[1] * 1.3); }},
      {"fmod", [](const V& v) { return fmod(v[0] * 3, v[1]); }},
      {"remainder", [](const V& v) { return remainder(v[0] * 3, v[1]); }},
      {"scalar ops", [](const V& v) { return (v[0] * 2 + 1) / (3 - v[1]); }},
  };
  for (const auto& c : cases) {
    auto r = gradcheck(c.fn, {a, b});
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
    auto r2 = gradgradcheck(c.fn, {a, b});
    EXPECT_TRUE(r2.ok) << c.name << " (double backward): " << r2.message;
  }
}

TEST(Gradcheck, TernaryOps) {
  Tensor a = leaf({2, 3}, -1, 1, 20), b = leaf({2, 3}, -1, 1, 21), w = leaf({3}, 0.5, 1.5, 22);
  EXPECT_TRUE(gradcheck([](const V& v) { return where(gt(v[0], v[1]), v[0], v[1] * 2); }, {a, b}).ok);
  EXPECT_TRUE(gradcheck([](const V& v) { return lerp(v[0], v[1], v[2]); }, {a, b, w}).ok);
  EXPECT_TRUE(gradcheck([](const V& v) { return addcmul(v[0], v[1], v[2], 0.5); }, {a, b, w}).ok);
  EXPECT_TRUE(gradcheck([](const V& v) { return addcdiv(v[0], v[1], v[2], 0.5); }, {a, b, w}).ok);
}

TEST(Gradcheck, Reductions) {
  Tensor x = leaf({3, 4}, -2, 2, 30);
  Tensor pos = leaf({2, 3}, 0.5, 2, 31);
  struct Case {
    const char* name;
    std::function<Tensor(const V&)> fn;
    Tensor input;
  } cases[] = {
      {"sum", [](const V& v) { return sum(v[0]); }, x},
      {"sum dims", [](const V& v) { return sum(v[0], {1}, false); }, x},
      {"sum keepdim", [](const V& v) { return sum(v[0], {0}, true); }, x},
      {"mean", [](const V& v) { return mean(v[0], {0, 1}, false); }, x},
      {"prod", [](const V& v) { return prod(v[0], 1); }, pos},
      {"amax", [](const V& v) { return amax(v[0], {1}); }, x},
      {"amin", [](const V& v) { return amin(v[0], {0}, true); }, x},
      {"max.dim", [](const V& v) { return std::get<0>(max(v[0], 1)); }, x},
      {"min.dim", [](const V& v) { return std::get<0>(min(v[0], 0, true)); }, x},
      {"var", [](const V& v) { return var(v[0], {1}); }, x},
      {"std", [](const V& v) { return kiln::std(v[0], {0}, 0); }, x},
      {"norm2", [](const V& v) { return norm(v[0]); }, x},
      {"norm1", [](const V& v) { return norm(v[0], 1, {1}); }, x},
      {"norm3", [](const V& v) { return norm(v[0], 3, {0}); }, x},
      {"norm_inf", [](const V& v) { return norm(v[0], INFINITY, {1}); }, x},
      {"logsumexp", [](const V& v) { return logsumexp(v[0], {1}); }, x},
      {"cumsum", [](const V& v) { return cumsum(v[0], 1); }, x},
      {"softmax", [](const V& v) { return softmax(v[0], 1); }, x},
      {"log_softmax", [](const V& v) { return log_softmax(v[0], 0); }, x},
  };
  for (const auto& c : cases) {
    auto r = gradcheck(c.fn, {c.input});
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  }
}

TEST(Gradcheck, MatrixProductsFirstAndSecondOrder) {
  struct Case {
    const char* name;
    std::function<Tensor(const V&)> fn;
    V inputs;
  } cases[] = {
      {"mm", [](const V& v) { return mm(v[0], v[1]); }, {leaf({2, 3}, -1, 1, 40), leaf({3, 4}, -1, 1, 41)}},
      {"bmm", [](const V& v) { return bmm(v[0], v[1]); }, {leaf({2, 2, 3}, -1, 1, 42), leaf({2, 3, 2}, -1, 1, 43)}},
      {"matmul 1d-2d", [](const V& v) { return matmul(v[0], v[1]); }, {leaf({3}, -1, 1, 44), leaf({3, 2}, -1, 1, 45)}},
      {"matmul 2d-1d", [](const V& v) { return matmul(v[0], v[1]); }, {leaf({2, 3}, -1, 1, 46), leaf({3}, -1, 1, 47)}},
      {"matmul 1d-1d", [](const V& v) { return matmul(v[0], v[1]); }, {leaf({3}, -1, 1, 48), leaf({3}, -1, 1, 49)}},
      {"matmul batched broadcast", [](const V& v) { return matmul(v[0], v[1]); },
       {leaf({2, 1, 2, 3}, -1, 1, 50), leaf({3, 3, 2}, -1, 1, 51)}},
      {"addmm", [](const V& v) { return addmm(v[0], v[1], v[2], 0.5, 2); },
       {leaf({4}, -1, 1, 52), leaf({2, 3}, -1, 1, 53), leaf({3, 4}, -1, 1, 54)}},
      {"baddbmm", [](const V& v) { return baddbmm(v[0], v[1], v[2], 0.5, 2); },
       {leaf({2, 2, 2}, -1, 1, 55), leaf({2, 2, 3}, -1, 1, 56), leaf({2, 3, 2}, -1, 1, 57)}},
      {"dot", [](const V& v) { return dot(v[0], v[1]); }, {leaf({4}, -1, 1, 58), leaf({4}, -1, 1, 59)}},
      {"linear", [](const V& v) { return linear(v[0], v[1], v[2]); },
       {leaf({2, 3}, -1, 1, 60), leaf({4, 3}, -1, 1, 61), leaf({4}, -1, 1, 62)}},
      // Column-major operands take the transposed gradient products (d_mm's layout rule).
      {"mm column-major", [](const V& v) { return mm(v[0].t(), v[1].t()); },
       {leaf({3, 2}, -1, 1, 63), leaf({4, 3}, -1, 1, 64)}},
      {"addmm column-major", [](const V& v) { return addmm(v[0], v[1].t(), v[2].t(), 0.5, 2); },
       {leaf({4}, -1, 1, 65), leaf({3, 2}, -1, 1, 66), leaf({4, 3}, -1, 1, 67)}},
  };
  for (const auto& c : cases) {
    auto r = gradcheck(c.fn, c.inputs);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
    auto r2 = gradgradcheck(c.fn, c.inputs);
    EXPECT_TRUE(r2.ok) << c.name << " (double backward): " << r2.message;
  }
}

// The gradient of a column-major operand comes out in its layout, so a Linear weight's
// gradient is row-major like the weight (no transposing copy) and holds the float64 values.
TEST(Gradcheck, MatrixProductGradientsKeepTheOperandLayout) {
  const int64_t M = 5, K = 3, N = 4;
  Tensor x = leaf({M, K}, -1, 1, 70), w = leaf({N, K}, -1, 1, 71), b = leaf({N}, -1, 1, 72);
  Generator gen(73);
  const Tensor g = rand({M, N}, TensorOptions(DType::F64), &gen);
  // autograd::grad returns the gradients as the backward computes them (backward's .grad
  // would be made contiguous on accumulation either way).
  const std::vector<Tensor> grads = autograd::grad({addmm(b, x, w.t())}, {x, w}, {g});
  ASSERT_EQ(grads.size(), 2u);
  const Tensor xg = grads[0], wg = grads[1];
  ASSERT_TRUE(wg.defined() && xg.defined());
  EXPECT_TRUE(wg.is_contiguous()) << "strides " << wg.stride(0) << ", " << wg.stride(1);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      double want = 0;  // dW[n, k] = sum_m g[m, n] x[m, k]
      for (int64_t m = 0; m < M; ++m) want += g[m][n].item<double>() * x[m][k].item<double>();
      EXPECT_NEAR(wg[n][k].item<double>(), want, 1e-12) << n << ", " << k;
    }
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      double want = 0;  // dx[m, k] = sum_n g[m, n] W[n, k]
      for (int64_t n = 0; n < N; ++n) want += g[m][n].item<double>() * w[n][k].item<double>();
      EXPECT_NEAR(xg[m][k].item<double>(), want, 1e-12) << m << ", " << k;
    }
}

TEST(Gradcheck, ViewsAndCopies) {
  Tensor x = leaf({3, 4}, -1, 1, 70);
  struct Case {
    const char* name;
    std::function<Tensor(const V&)> fn;
  } cases[] = {
      {"view", [](const V& v) { return v[0].view({4, 3}) * 2; }},
      {"reshape of transpose", [](const V& v) { return v[0].t().reshape({12}); }},
      {"permute", [](const V& v) { return v[0].unsqueeze(0).permute({2, 0, 1}) * 3; }},
      {"expand", [](const V& v) { return v[0].unsqueeze(0).expand({2, 3, 4}); }},
      {"slice step", [](const V& v) { return v[0].slice(1, 0, 4, 2); }},
      {"select", [](const V& v) { return v[0].select(0, 1); }},
      {"narrow", [](const V& v) { return v[0].narrow(1, 1, 2); }},
      {"squeeze", [](const V& v) { return v[0].unsqueeze(1).squeeze(); }},
      {"diagonal", [](const V& v) { return v[0].diagonal(1); }},
      {"unfold overlapping", [](const V& v) { return v[0].unfold(1, 2, 1); }},
      {"as_strided overlapping", [](const V& v) { return v[0].as_strided({3, 3}, {2, 1}, 1); }},
      {"flatten", [](const V& v) { return v[0].flatten(); }},
      {"to float32 and back", [](const V& v) { return v[0].to(DType::F32).to(DType::F64) * 1.0; }},
      {"clone", [](const V& v) { return v[0].clone(); }},
  };
  for (const auto& c : cases) {
    bool through_f32 = c.name == std::string("to float32 and back");
    auto r = gradcheck(c.fn, {x}, through_f32 ? 1e-3 : 1e-6, through_f32 ? 1e-3 : 1e-5);
    EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  }
}

}  // namespace
}  // namespace kiln
