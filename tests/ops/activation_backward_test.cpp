// The fused activation derivatives (threshold_backward, clamp_backward, leaky_relu_backward,
// softplus_backward) against float64 references: every float dtype, lengths around the vector
// width and the 2048-value chunks, zeros, the parameters' own values, NaN and infinities,
// transposed operands (the element loop) and an expanded gradient (copied dense); autograd's
// use of them (gradcheck, and gradgradcheck through the op chains that create_graph keeps);
// bad input. The op test binary re-runs at each ISA level: the vector loops and the scalar.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "kiln/autograd/gradcheck.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/functional_activation.h"
#include "../../src/kiln/ops/activation_backward.h"
#include "../../src/kiln/ops/hard_sigmoid_family.h"
#include "ops/reduction_ref.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);
const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

struct Activation {
  std::string name;
  std::function<double(double g, double x)> ref;
  std::function<Tensor(const Tensor& g, const Tensor& x)> run;
  bool exact;  // a select of g or 0: equal bit for bit in every dtype
};

double sigmoid(double t) { return 1 / (1 + std::exp(-t)); }

std::vector<Activation> activations() {
  return {
      {"threshold 0", [](double g, double x) { return x <= 0 ? 0 : g; },
       [](const Tensor& g, const Tensor& x) { return threshold_backward(g, x, 0.0); }, true},
      {"threshold 0.5", [](double g, double x) { return x <= 0.5 ? 0 : g; },
       [](const Tensor& g, const Tensor& x) { return threshold_backward(g, x, 0.5); }, true},
      {"clamp [-1, 2]", [](double g, double x) { return x >= -1 && x <= 2 ? g : 0; },
       [](const Tensor& g, const Tensor& x) { return clamp_backward(g, x, -1.0, 2.0); }, true},
      {"clamp [0, -]", [](double g, double x) { return x >= 0 ? g : 0; },
       [](const Tensor& g, const Tensor& x) { return clamp_backward(g, x, 0.0, std::nullopt); },
       true},
      {"clamp [-, 6]", [](double g, double x) { return x <= 6 ? g : 0; },
       [](const Tensor& g, const Tensor& x) { return clamp_backward(g, x, std::nullopt, 6.0); },
       true},
      {"leaky_relu 0.1", [](double g, double x) { return x > 0 ? g : g * 0.1; },
       [](const Tensor& g, const Tensor& x) { return leaky_relu_backward(g, x, 0.1); }, false},
      {"softplus 1 20",
       [](double g, double x) { return x > 20 ? g : g * sigmoid(x); },
       [](const Tensor& g, const Tensor& x) { return softplus_backward(g, x, 1.0, 20.0); },
       false},
      {"softplus 2 3",
       [](double g, double x) { return 2 * x > 3 ? g : g * sigmoid(2 * x); },
       [](const Tensor& g, const Tensor& x) { return softplus_backward(g, x, 2.0, 3.0); },
       false},
      {"hardswish",
       [](double g, double x) { return x <= -3 ? 0 : x >= 3 ? g : g * (x / 3 + 0.5); },
       [](const Tensor& g, const Tensor& x) { return hardswish_backward(g, x); }, false},
      {"hardsigmoid", [](double g, double x) { return x > -3 && x < 3 ? g / 6 : 0; },
       [](const Tensor& g, const Tensor& x) { return hardsigmoid_backward(g, x); }, false},
  };
}

// The hard sigmoid family's ops take float32, bfloat16 and float64.
bool takes(const Activation& a, DType t) {
  return (a.name != "hardswish" && a.name != "hardsigmoid") || t != DType::F16;
}

// x: random in [-8, 8] plus the parameters' values, signed zeros, NaN and infinities.
std::vector<double> make_x(size_t n, uint32_t seed) {
  std::vector<double> x = random_values(n, -8, 8, seed);
  const double special[] = {0.0, -0.0, 0.5, -1.0, 2.0, 6.0, 1.5, 20.0, kNan, kInf, -kInf, 3.0,
                            -3.0};
  for (size_t i = 0; i < n && i < 13; ++i) x[(i * 37) % n] = special[i];
  return x;
}

double tol(DType t) {
  switch (t) {
    case DType::F64: return 1e-15;
    case DType::F32: return 4e-7;
    case DType::F16: return 1e-3;
    default: return 8e-3;
  }
}

void expect_matches(const Activation& a, const Tensor& got, const Tensor& g, const Tensor& x,
                    const std::string& what) {
  const std::vector<double> gv = g.to_vector<double>(), xv = x.to_vector<double>();
  const std::vector<double> v = got.to_vector<double>();
  ASSERT_EQ(v.size(), xv.size()) << what;
  ASSERT_EQ(got.dtype(), x.dtype()) << what;
  for (size_t i = 0; i < v.size(); ++i) {
    const double want = round_to(a.ref(gv[i], xv[i]), x.dtype());
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(v[i])) << what << " x = " << xv[i] << " g = " << gv[i];
    } else if (a.exact) {
      ASSERT_EQ(v[i], want) << what << " x = " << xv[i] << " g = " << gv[i];
    } else {
      // Relative to g too: hardswish's x / 3 + 0.5 cancels near x = -1.5.
      ASSERT_NEAR(v[i], want, tol(x.dtype()) * (std::fabs(want) + std::fabs(gv[i])) + 1e-30)
          << what << " x = " << xv[i] << " g = " << gv[i];
    }
  }
}

TEST(ActivationBackward, EveryDtypeAndLengthMatchesFloat64) {
  uint32_t seed = 60;
  for (const Activation& a : activations())
    for (DType t : float_dtypes())
      for (int64_t n : {1, 7, 16, 17, 33, 2048, 2053, 5000}) {
        if (!takes(a, t)) continue;
        const std::string what =
            a.name + " " + std::string(dtype_name(t)) + " n=" + std::to_string(n);
        const Tensor x = make(make_x(size_t(n), seed++), {n}, t, kCpu);
        const Tensor g = make(random_values(size_t(n), -2, 2, seed++), {n}, t, kCpu);
        expect_matches(a, a.run(g, x), g, x, what);
      }
}

// Transposed operands (the element loop, an output of their layout) and the gradient of
// sum() (ones expanded with stride 0, copied dense for the vector loop).
TEST(ActivationBackward, TransposedAndExpandedOperands) {
  for (const Activation& a : activations())
    for (DType t : {DType::F32, DType::BF16}) {
      if (!takes(a, t)) continue;
      const std::string what = a.name + " " + std::string(dtype_name(t));
      const Tensor x = make(make_x(40 * 70, 3), {40, 70}, t, kCpu).transpose(0, 1);
      const Tensor g = make(random_values(40 * 70, -2, 2, 4), {40, 70}, t, kCpu).transpose(0, 1);
      expect_matches(a, a.run(g, x), g, x, what + " transposed");
      const Tensor xd = x.contiguous();
      const Tensor ones = make({1.5}, {1, 1}, t, kCpu).expand({70, 40});
      expect_matches(a, a.run(ones, xd), ones, xd, what + " expanded gradient");
    }
}

// Autograd's derivatives: the fused ops in a plain backward, the op chains under create_graph
// (gradgradcheck). Away from the kinks, where finite differences are meaningless.
TEST(ActivationBackward, AutogradFirstAndSecondDerivatives) {
  namespace F = nn::functional;
  std::vector<double> xs = random_values(24, -3, 3, 9);
  for (double& v : xs)
    if (std::fabs(v) < 0.05 || std::fabs(v - 6) < 0.05 || std::fabs(v - 1) < 0.05) v += 0.2;
  Tensor x = make(xs, {4, 6}, DType::F64, kCpu);
  autograd::set_requires_grad(x);
  const std::vector<std::pair<std::string, autograd::TensorFn>> fns = {
      {"relu", [](const std::vector<Tensor>& in) { return relu(in[0]) * in[0]; }},
      {"relu6", [](const std::vector<Tensor>& in) { return F::relu6(in[0] * 3.0) * in[0]; }},
      {"clamp", [](const std::vector<Tensor>& in) { return clamp(in[0], -1.0, 1.0) * in[0]; }},
      {"leaky_relu",
       [](const std::vector<Tensor>& in) { return F::leaky_relu(in[0], 0.2) * in[0]; }},
      {"softplus", [](const std::vector<Tensor>& in) { return softplus(in[0], 2.0, 3.0); }},
  };
  for (const auto& [name, fn] : fns) {
    auto first = autograd::gradcheck(fn, {x});
    EXPECT_TRUE(first.ok) << name << ": " << first.message;
    auto second = autograd::gradgradcheck(fn, {x});
    EXPECT_TRUE(second.ok) << name << ": " << second.message;
  }
}

// The forward ops: each step rounded as the op sequence (x + 3, clamp, times x, over 6),
// bfloat16 computed in float32 and rounded once.
TEST(ActivationBackward, HardSigmoidFamilyForward) {
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (int64_t n : {5, 16, 2053}) {
      const Tensor x = make(make_x(size_t(n), 21), {n}, t, kCpu);
      for (bool swish : {false, true}) {
        const Tensor y = swish ? hardswish_op(x) : hardsigmoid_op(x);
        const std::vector<double> got = y.to_vector<double>();
        const std::vector<double> xv = x.to_vector<double>();
        for (size_t i = 0; i < xv.size(); ++i) {
          double want;
          if (t != DType::F64) {  // float32 steps; bfloat16 rounded once at the end
            const float xf = float(xv[i]);
            float c = xf + 3.0f;
            if (!std::isnan(c)) c = std::min(std::max(c, 0.0f), 6.0f);
            want = round_to(double((swish ? xf * c : c) / 6.0f), t);
          } else {
            double c = xv[i] + 3;
            if (!std::isnan(c)) c = std::min(std::max(c, 0.0), 6.0);
            want = (swish ? xv[i] * c : c) / 6;
          }
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got[i])) << "x = " << xv[i];
          } else {
            EXPECT_EQ(got[i], want) << (swish ? "hardswish" : "hardsigmoid") << " x = " << xv[i];
          }
        }
      }
    }
}

TEST(ActivationBackward, RejectsBadInput) {
  const Tensor x = make({1, 2, 3}, {3}, DType::F32, kCpu);
  expect_error<TypeError>([&] { threshold_backward(x.to(DType::F64), x, 0.0); },
                          {"threshold_backward", "one floating dtype", "float64 and float32"});
  expect_error<ValueError>(
      [&] { leaky_relu_backward(make({1, 2}, {2}, DType::F32, kCpu), x, 0.1); },
      {"leaky_relu_backward", "self's shape [3], got [2]"});
  expect_error<TypeError>([&] { clamp_backward(x.to(DType::I64), x.to(DType::I64), 0.0, 1.0); },
                          {"clamp_backward", "int64"});
  expect_error<TypeError>([&] { hardswish_op(x.to(DType::F16)); },
                          {"hardswish", "float32, bfloat16 or float64", "float16"});
}

}  // namespace
}  // namespace kiln::test
