// gelu_backward (grad_output * gelu'(x), both forms) against the float64 derivative: the
// float32 / bfloat16 vector path (contiguous), the element path (transposed operands,
// float64), autograd's use of it, the differentiable op chain it leaves for create_graph, and
// bad input.
#include <cmath>
#include <string>

#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

double gelu_grad_ref(double x, bool tanh_form) {
  if (tanh_form) {
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    const double t = std::tanh(k * (x + c * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x);
  }
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

// float32 tolerances: relative 2e-6, and 1e-6 absolute per unit of g, because both forms
// compute 1 + erf or 1 + tanh, which cancel for negative x, as PyTorch 2.13's float32 kernel
// does: from x = -5.17 tanh rounds to -1 and both give 0 where the derivative is -5.0e-7.
// x dense over [-10, 10] plus tails, g random in [-2, 2]; rows x cols.
struct Case {
  std::vector<double> x, g;
  int64_t rows = 0, cols = 0;
};
Case make_case() {
  Case c;
  for (int i = -50000; i <= 50000; ++i) c.x.push_back(double(float(i * 2e-4)));
  for (double v : {-30.0, -12.0, 12.0, 30.0, 0.0, -0.0, 1e-30}) c.x.push_back(v);
  while (c.x.size() % 7) c.x.push_back(0.5);
  c.rows = 7;
  c.cols = int64_t(c.x.size()) / 7;
  c.g = random_values(c.x.size(), -2, 2, 11);
  return c;
}

void expect_matches(const Tensor& got, const Case& c, const std::vector<double>& xs,
                    const std::vector<double>& gs, bool tanh_form, double rtol, double atol) {
  const std::vector<double> v = got.to_vector<double>();
  ASSERT_EQ(v.size(), xs.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double want = gs[i] * gelu_grad_ref(xs[i], tanh_form);
    ASSERT_NEAR(v[i], want, rtol * std::fabs(want) + atol * std::fabs(gs[i]))
        << "x = " << xs[i] << " g = " << gs[i];
  }
  (void)c;
}

TEST(GeluBackward, Float32VectorPathMatchesFloat64) {
  const Case c = make_case();
  for (std::string form : {"none", "tanh"}) {
    SCOPED_TRACE(form);
    for (DeviceType type : test_device_types()) {
      const Device d(type, 0);
      Tensor x = make(c.x, {c.rows, c.cols}, DType::F32, d);
      Tensor g = make(c.g, {c.rows, c.cols}, DType::F32, d);
      const std::vector<double> xs = x.to_vector<double>(), gs = g.to_vector<double>();
      expect_matches(gelu_backward(g, x, form), c, xs, gs, form == "tanh", 2e-6, 1e-6);
    }
  }
}

TEST(GeluBackward, TransposedBFloat16AndFloat64TakeTheElementPath) {
  const Case c = make_case();
  for (std::string form : {"none", "tanh"}) {
    SCOPED_TRACE(form);
    // Transposed float32: values laid out [cols, rows], viewed [rows, cols].
    Tensor xt = transpose(make(c.x, {c.cols, c.rows}, DType::F32, kCpu), 0, 1);
    Tensor gt = transpose(make(c.g, {c.cols, c.rows}, DType::F32, kCpu), 0, 1);
    expect_matches(gelu_backward(gt, xt, form), c, xt.to_vector<double>(),
                   gt.to_vector<double>(), form == "tanh", 2e-6, 1e-6);
    Tensor x64 = make(c.x, {c.rows, c.cols}, DType::F64, kCpu);
    Tensor g64 = make(c.g, {c.rows, c.cols}, DType::F64, kCpu);
    expect_matches(gelu_backward(g64, x64, form), c, c.x, c.g, form == "tanh", 1e-12, 1e-14);
    Tensor xb = transpose(make(c.x, {c.cols, c.rows}, DType::BF16, kCpu), 0, 1);
    Tensor gb = transpose(make(c.g, {c.cols, c.rows}, DType::BF16, kCpu), 0, 1);
    expect_matches(gelu_backward(gb, xb, form), c, xb.to_vector<double>(),
                   gb.to_vector<double>(), form == "tanh", 8e-3, 8e-3);
  }
}

// A gradient expanded from one value per row (what sum() and mean() pass back: stride 0 along
// the row) is copied dense and takes the vector path: float32 and bfloat16 against float64.
TEST(GeluBackward, ExpandedGradientMatchesFloat64) {
  const Case c = make_case();
  for (std::string form : {"none", "tanh"}) {
    SCOPED_TRACE(form);
    for (DType dt : {DType::F32, DType::BF16}) {
      const Tensor x = make(c.x, {c.rows, c.cols}, dt, kCpu);
      const Tensor g = expand(make(random_values(size_t(c.rows), -2, 2, 5), {c.rows, 1}, dt, kCpu),
                              {c.rows, c.cols});
      ASSERT_FALSE(g.is_contiguous());
      const double tol = dt == DType::F32 ? 2e-6 : 8e-3;
      expect_matches(gelu_backward(g, x, form), c, x.to_vector<double>(), g.to_vector<double>(),
                     form == "tanh", tol, dt == DType::F32 ? 1e-6 : 8e-3);
    }
  }
}

// Contiguous bfloat16 (autocast training's activations) takes the float32 vector path on the
// widened chunks, rounded once: bit for bit the float32 result on the widened values rounded
// to bfloat16 (at the baseline level both take the element loop, in float, so too).
TEST(GeluBackward, Bfloat16IsTheFloat32ResultRoundedOnce) {
  const Case c = make_case();
  for (std::string form : {"none", "tanh"}) {
    SCOPED_TRACE(form);
    Tensor xb = make(c.x, {c.rows, c.cols}, DType::BF16, kCpu);
    Tensor gb = make(c.g, {c.rows, c.cols}, DType::BF16, kCpu);
    const Tensor got = gelu_backward(gb, xb, form);
    ASSERT_EQ(got.dtype(), DType::BF16);
    expect_matches(got, c, xb.to_vector<double>(), gb.to_vector<double>(), form == "tanh", 8e-3,
                   8e-3);
    const Tensor want = gelu_backward(gb.to(DType::F32), xb.to(DType::F32), form).to(DType::BF16);
    const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(a[i], b[i]) << "x = " << xb.to_vector<double>()[i];
  }
}

// Autograd takes the fused op for float32 without create_graph; with create_graph it records
// the op chain, whose second derivative must still be right.
TEST(GeluBackward, AutogradFirstAndSecondDerivatives) {
  const std::vector<double> xv = random_values(4096, -5, 5, 3), gv = random_values(4096, -1, 1, 4);
  for (std::string form : {"none", "tanh"}) {
    SCOPED_TRACE(form);
    Tensor x = make(xv, {64, 64}, DType::F32, kCpu);
    autograd::set_requires_grad(x);
    Tensor g = make(gv, {64, 64}, DType::F32, kCpu);
    const std::vector<double> xs = x.to_vector<double>(), gs = g.to_vector<double>();
    auto first = autograd::grad({gelu(x, form)}, {x}, {g});
    expect_matches(first[0], Case{}, xs, gs, form == "tanh", 2e-6, 1e-6);
    auto with_graph = autograd::grad({gelu(x, form)}, {x}, {g}, true, /*create_graph=*/true);
    expect_matches(with_graph[0], Case{}, xs, gs, form == "tanh", 2e-5, 2e-6);
    // d/dx sum(g * gelu'(x)) = g * gelu''(x): central differences of the float64 derivative.
    auto second = autograd::grad({sum(with_graph[0])}, {x});
    const std::vector<double> v = second[0].to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) {
      const double h = 1e-5, xi = xs[i];
      const double want = gs[i] * (gelu_grad_ref(xi + h, form == "tanh") -
                                   gelu_grad_ref(xi - h, form == "tanh")) / (2 * h);
      ASSERT_NEAR(v[i], want, 2e-4 * std::fabs(want) + 2e-5) << "x = " << xi;
    }
  }
}

TEST(GeluBackward, BadInputIsAClearError) {
  Tensor x = make({1, 2, 3, 4}, {2, 2}, DType::F32, kCpu);
  Tensor g3 = make({1, 2, 3}, {3}, DType::F32, kCpu);
  EXPECT_THROW(gelu_backward(g3, x), ValueError);
  EXPECT_THROW(gelu_backward(x, x, "cubic"), ValueError);
  EXPECT_THROW(gelu_backward(x.to(DType::F64), x), TypeError);
  Tensor i = make({1, 2, 3, 4}, {2, 2}, DType::I64, kCpu);
  EXPECT_THROW(gelu_backward(i, i), TypeError);
}

}  // namespace
}  // namespace kiln::test
