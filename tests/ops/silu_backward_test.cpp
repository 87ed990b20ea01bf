// silu_backward (grad_output * silu'(x)) against the float64 derivative: the float32 /
// bfloat16 vector path (contiguous, and an expanded gradient copied dense), the element path
// (transposed operands, float64), float16, autograd's use of it, the differentiable op chain it leaves
// for create_graph, and bad input.
#include <cmath>
#include <string>

#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

double silu_grad_ref(double x) {
  const double s = 1 / (1 + std::exp(-x));
  return s * (1 + x * (1 - s));
}

// x dense over [-20, 20] plus tails (sigmoid saturating at both ends), g random in [-2, 2].
struct Case {
  std::vector<double> x, g;
  int64_t rows = 0, cols = 0;
};
Case make_case() {
  Case c;
  for (int i = -50000; i <= 50000; ++i) c.x.push_back(double(float(i * 4e-4)));
  for (double v : {-100.0, -88.0, 88.0, 100.0, 0.0, -0.0, 1e-30}) c.x.push_back(v);
  while (c.x.size() % 7) c.x.push_back(0.5);
  c.rows = 7;
  c.cols = int64_t(c.x.size()) / 7;
  c.g = random_values(c.x.size(), -2, 2, 11);
  return c;
}

// Relative tolerance rtol and absolute atol per unit of g: s (1 + x (1 - s)) cancels to about
// 1e-7 of its terms near x = -1.28 (its zero) and for large negative x.
// floor: an absolute bound for float16, whose subnormal results are 6e-8 apart.
void expect_matches(const Tensor& got, const std::vector<double>& xs,
                    const std::vector<double>& gs, double rtol, double atol, double floor = 0) {
  const std::vector<double> v = got.to_vector<double>();
  ASSERT_EQ(v.size(), xs.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double want = gs[i] * silu_grad_ref(xs[i]);
    ASSERT_NEAR(v[i], want, rtol * std::fabs(want) + atol * std::fabs(gs[i]) + floor)
        << "x = " << xs[i] << " g = " << gs[i];
  }
}

TEST(SiluBackward, Float32VectorPathMatchesFloat64) {
  const Case c = make_case();
  const Tensor x = make(c.x, {c.rows, c.cols}, DType::F32, kCpu);
  const Tensor g = make(c.g, {c.rows, c.cols}, DType::F32, kCpu);
  expect_matches(silu_backward(g, x), x.to_vector<double>(), g.to_vector<double>(), 4e-6, 1e-6);
}

// Transposed float32 (an output of the same layout: the element loop), float64 (the element
// loop in double) and float16 (computed in float32, rounded once).
TEST(SiluBackward, TransposedFloat64AndFloat16) {
  const Case c = make_case();
  Tensor xt = transpose(make(c.x, {c.cols, c.rows}, DType::F32, kCpu), 0, 1);
  Tensor gt = transpose(make(c.g, {c.cols, c.rows}, DType::F32, kCpu), 0, 1);
  expect_matches(silu_backward(gt, xt), xt.to_vector<double>(), gt.to_vector<double>(), 4e-6,
                 1e-6);
  Tensor x64 = make(c.x, {c.rows, c.cols}, DType::F64, kCpu);
  Tensor g64 = make(c.g, {c.rows, c.cols}, DType::F64, kCpu);
  expect_matches(silu_backward(g64, x64), c.x, c.g, 1e-12, 1e-15);
  Tensor xh = make(c.x, {c.rows, c.cols}, DType::F16, kCpu);
  Tensor gh = make(c.g, {c.rows, c.cols}, DType::F16, kCpu);
  expect_matches(silu_backward(gh, xh), xh.to_vector<double>(), gh.to_vector<double>(), 2e-3,
                 2e-3, 6e-8);
}

// The gradient of x.silu().sum(): sum's ones expanded with stride 0.
TEST(SiluBackward, ExpandedGradientMatchesFloat64) {
  const Case c = make_case();
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor x = make(c.x, {c.rows, c.cols}, dt, kCpu);
    const Tensor g = expand(make(random_values(size_t(c.rows), -2, 2, 5), {c.rows, 1}, dt, kCpu),
                            {c.rows, c.cols});
    ASSERT_FALSE(g.is_contiguous());
    const double tol = dt == DType::F32 ? 4e-6 : 8e-3;
    expect_matches(silu_backward(g, x), x.to_vector<double>(), g.to_vector<double>(), tol,
                   dt == DType::F32 ? 1e-6 : 8e-3);
  }
}

// bfloat16 is computed in float32 on the widened values and rounded once: bit for bit the
// float32 result rounded (at the baseline level both take the element loop, in float).
TEST(SiluBackward, Bfloat16IsTheFloat32ResultRoundedOnce) {
  const Case c = make_case();
  Tensor xb = make(c.x, {c.rows, c.cols}, DType::BF16, kCpu);
  Tensor gb = make(c.g, {c.rows, c.cols}, DType::BF16, kCpu);
  const Tensor got = silu_backward(gb, xb);
  ASSERT_EQ(got.dtype(), DType::BF16);
  expect_matches(got, xb.to_vector<double>(), gb.to_vector<double>(), 8e-3, 8e-3);
  const Tensor want = silu_backward(gb.to(DType::F32), xb.to(DType::F32)).to(DType::BF16);
  const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "x = " << c.x[i];
}

// Autograd takes the fused op without create_graph; with create_graph it records the op
// chain, whose second derivative must still be right.
TEST(SiluBackward, AutogradFirstAndSecondDerivatives) {
  const std::vector<double> xv = random_values(4096, -8, 8, 3), gv = random_values(4096, -1, 1, 4);
  Tensor x = make(xv, {64, 64}, DType::F32, kCpu);
  autograd::set_requires_grad(x);
  Tensor g = make(gv, {64, 64}, DType::F32, kCpu);
  const std::vector<double> xs = x.to_vector<double>(), gs = g.to_vector<double>();
  auto first = autograd::grad({silu(x)}, {x}, {g});
  expect_matches(first[0], xs, gs, 4e-6, 1e-6);
  auto with_graph = autograd::grad({silu(x)}, {x}, {g}, true, /*create_graph=*/true);
  expect_matches(with_graph[0], xs, gs, 2e-5, 2e-6);
  auto second = autograd::grad({sum(with_graph[0])}, {x});
  const std::vector<double> v = second[0].to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    const double h = 1e-5, xi = xs[i];
    const double want = gs[i] * (silu_grad_ref(xi + h) - silu_grad_ref(xi - h)) / (2 * h);
    ASSERT_NEAR(v[i], want, 2e-4 * std::fabs(want) + 2e-5) << "x = " << xi;
  }
}

TEST(SiluBackward, BadInputIsAClearError) {
  Tensor x = make({1, 2, 3, 4}, {2, 2}, DType::F32, kCpu);
  Tensor g3 = make({1, 2, 3}, {3}, DType::F32, kCpu);
  EXPECT_THROW(silu_backward(g3, x), ValueError);
  EXPECT_THROW(silu_backward(x.to(DType::F64), x), TypeError);
  Tensor i = make({1, 2, 3, 4}, {2, 2}, DType::I64, kCpu);
  EXPECT_THROW(silu_backward(i, i), TypeError);
}

}  // namespace
}  // namespace kiln::test
