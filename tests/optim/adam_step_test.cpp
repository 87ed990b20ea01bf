// adam_step_ (the fused Adam / AdamW update): bit for bit the float32 op sequence it replaces
// (torch.optim.Adam's single-tensor order) over several steps, both branches of lerp's formula,
// maximize and decoupled decay, on each device; within float32 rounding of a float64
// reference; and a clear error for what it does not take.
#include <cmath>
#include <cstring>

#include "kiln/ops/adam_step.h"
#include "ops/test_util.h"

namespace kiln::optim {
namespace {

using kiln::test::random_values;
using kiln::test::test_device_types;

struct Config {
  double lr, beta1, beta2, eps, weight_decay;
  bool maximize;
};

AdamStepScalars scalars_for(const Config& c, int step) {
  AdamStepScalars s;
  s.decay = c.weight_decay != 0 ? 1 - c.lr * c.weight_decay : 1.0;
  s.lerp_weight = 1 - c.beta1;
  s.beta2 = c.beta2;
  s.one_minus_beta2 = 1 - c.beta2;
  s.bias_correction2_sqrt = std::sqrt(1 - std::pow(c.beta2, step));
  s.eps = c.eps;
  s.neg_step_size = -c.lr / (1 - std::pow(c.beta1, step));
  s.maximize = c.maximize;
  return s;
}

// The op sequence of python/kiln/optim/adam.py (decoupled decay).
void op_sequence(Tensor& p, const Tensor& grad, Tensor& m, Tensor& v, const AdamStepScalars& s,
                 bool decay) {
  Tensor g = s.maximize ? neg(grad) : grad;
  if (decay) mul_(p, Scalar(s.decay));
  m.copy_(lerp(m, g, Scalar(s.lerp_weight)));
  mul_(v, Scalar(s.beta2));
  addcmul_(v, g, g, s.one_minus_beta2);
  Tensor denom = div(sqrt(v), Scalar(s.bias_correction2_sqrt));
  add_(denom, Scalar(s.eps));
  addcdiv_(p, m, denom, s.neg_step_size);
}

std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<float> f = t.to_vector<float>();
  std::vector<uint32_t> b(f.size());
  std::memcpy(b.data(), f.data(), f.size() * sizeof(float));
  return b;
}

TEST(AdamStep, BitForBitTheOpSequenceAndCloseToFloat64) {
  const int64_t n = 100003;  // odd: every thread's piece and the vector loops' tails
  const std::vector<double> p0 = random_values(size_t(n), -1, 1, 1);
  const Config configs[] = {{1e-3, 0.9, 0.999, 1e-8, 0.01, false},
                            {3e-2, 0.3, 0.99, 1e-6, 0.0, true},  // lerp's other branch
                            {1e-2, 0.9, 0.95, 1e-8, 0.1, false}};
  for (DeviceType type : test_device_types()) {
    const Device d(type, 0);
    for (const Config& c : configs) {
      SCOPED_TRACE(::testing::Message() << device_type_name(type) << " lr " << c.lr);
      const TensorOptions f32(DType::F32, d);
      Tensor p = tensor_from(p0, {n}, f32), m = zeros({n}, f32), v = zeros({n}, f32);
      Tensor rp = p.clone(), rm = m.clone(), rv = v.clone();
      std::vector<double> dp = p.to_vector<double>();
      std::vector<double> dm(static_cast<size_t>(n), 0.0), dv(static_cast<size_t>(n), 0.0);
      for (int step = 1; step <= 3; ++step) {
        const Tensor g = tensor_from(random_values(size_t(n), -2, 2, 10 + step), {n}, f32);
        const AdamStepScalars s = scalars_for(c, step);
        ASSERT_TRUE(adam_step_supported(p, g, m, v));
        adam_step_(p, g, m, v, s);
        op_sequence(rp, g, rm, rv, s, c.weight_decay != 0);
        ASSERT_EQ(bits(p), bits(rp)) << "step " << step;
        ASSERT_EQ(bits(m), bits(rm)) << "step " << step;
        ASSERT_EQ(bits(v), bits(rv)) << "step " << step;
        // float64 AdamW on the same float32 gradients.
        const std::vector<double> gv = g.to_vector<double>();
        for (size_t i = 0; i < size_t(n); ++i) {
          const double gi = c.maximize ? -gv[i] : gv[i];
          dp[i] *= 1 - c.lr * c.weight_decay;
          dm[i] = c.beta1 * dm[i] + (1 - c.beta1) * gi;
          dv[i] = c.beta2 * dv[i] + (1 - c.beta2) * gi * gi;
          const double denom =
              std::sqrt(dv[i]) / std::sqrt(1 - std::pow(c.beta2, step)) + c.eps;
          dp[i] -= c.lr / (1 - std::pow(c.beta1, step)) * dm[i] / denom;
        }
        const std::vector<double> got = p.to_vector<double>();
        for (size_t i = 0; i < size_t(n); ++i)
          ASSERT_NEAR(got[i], dp[i], 1e-6 + 1e-5 * std::fabs(dp[i])) << "i " << i;
      }
    }
  }
}

TEST(AdamStep, RefusesWhatItDoesNotTake) {
  Tensor p = zeros({4}), g = zeros({4}), m = zeros({4}), v = zeros({4});
  Tensor p64 = zeros({4}, TensorOptions(DType::F64)), g5 = zeros({5});
  Tensor strided = zeros({8}).slice(0, 0, 8, 2);
  EXPECT_FALSE(adam_step_supported(p64, g, m, v));
  EXPECT_FALSE(adam_step_supported(p, g5, m, v));
  EXPECT_FALSE(adam_step_supported(p, strided, m, v));
  EXPECT_THROW(adam_step_(p64, g, m, v, AdamStepScalars{}), ValueError);
  EXPECT_THROW(adam_step_(p, g5, m, v, AdamStepScalars{}), ValueError);
}

}  // namespace
}  // namespace kiln::optim
