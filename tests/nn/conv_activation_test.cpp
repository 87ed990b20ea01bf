// convolution_activation (kiln/ops/conv.h): the convolution's output through Relu, Clip,
// HardSigmoid or HardSwish in one op. Checked against the plain convolution's output with the
// activation applied in float64 here, for float32, bfloat16 and float16, contiguous and
// channels-last, grouped; oneDNN's post-ops in the plain run, kiln's own kernels in the ISA
// reruns (CTest's isa_*_conv, KILN_ONEDNN=0).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kiln/ops/conv.h"
#include "nn/nn_test_util.h"

namespace kiln::nn::test {
namespace {

double activate(double x, const ConvEpilogue& e) {
  switch (e.activation) {
    case ConvActivation::Relu: return std::max(x, 0.0);
    case ConvActivation::Clip: return std::min(std::max(x, e.alpha), e.beta);
    case ConvActivation::HardSigmoid: return std::clamp(e.alpha * x + e.beta, 0.0, 1.0);
    case ConvActivation::HardSwish: return x * std::clamp(x + 3.0, 0.0, 6.0) / 6.0;
    case ConvActivation::None: break;
  }
  return x;
}

TEST(ConvActivation, EveryActivationOnEveryLayoutAndDtype) {
  const std::vector<ConvEpilogue> epilogues = {{ConvActivation::Relu, 0, 0},
                                               {ConvActivation::Clip, -0.5, 1.25},
                                               {ConvActivation::HardSigmoid, 0.2, 0.5},
                                               {ConvActivation::HardSwish, 0, 0}};
  struct Case { int64_t N, C, H, W, O, groups; };
  for (const Case& c :
       {Case{2, 5, 7, 9, 12, 1}, Case{1, 8, 6, 5, 8, 8}, Case{1, 3, 33, 17, 20, 1}}) {
    Tensor x = f64(rand_vals(size_t(c.N * c.C * c.H * c.W), 61), {c.N, c.C, c.H, c.W});
    Tensor w = f64(rand_vals(size_t(c.O * (c.C / c.groups) * 9), 62), {c.O, c.C / c.groups, 3, 3});
    Tensor b = f64(rand_vals(size_t(c.O), 63), {c.O});
    ConvOptions o;
    o.padding = {1};
    o.groups = c.groups;
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      for (bool cl : {false, true}) {
        Tensor xd = x.to(dt);
        if (cl) xd = xd.contiguous(MemoryFormat::ChannelsLast);
        // The plain convolution's values, rounded to dt as the fused op's product is.
        const std::vector<double> plain =
            convolution(xd, w.to(dt), b.to(dt), o).to(DType::F64).to_vector<double>();
        for (const ConvEpilogue& e : epilogues) {
          Tensor y = convolution_activation(xd, w.to(dt), b.to(dt), o, e);
          const std::string what = std::string(dtype_name(dt)) + (cl ? " channels-last" : "") +
                                   " activation " + std::to_string(int64_t(e.activation)) +
                                   " groups " + std::to_string(c.groups);
          ASSERT_EQ(y.dtype(), dt) << what;
          if (cl) EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast)) << what;
          const std::vector<double> got = y.to(DType::F64).to_vector<double>();
          ASSERT_EQ(got.size(), plain.size());
          // float32: a few units of rounding (oneDNN computes hard swish in its own order);
          // bfloat16 / float16 (computed in float32, decision 0064): the activation's result
          // rounded once more, one unit of 2^-8 / 2^-11.
          const double rel = dt == DType::F32 ? 1e-5 : dt == DType::BF16 ? 1.2e-2 : 2e-3;
          const double abs = dt == DType::F32 ? 1e-6 : dt == DType::BF16 ? 1e-2 : 2e-3;
          for (size_t i = 0; i < got.size(); ++i) {
            const double want = activate(plain[i], e);
            ASSERT_NEAR(got[i], want, rel * std::abs(want) + abs)
                << what << " at " << i;
          }
        }
      }
    }
  }
}

TEST(ConvActivation, NoneIsThePlainConvolutionAndUnknownIsAnError) {
  Tensor x = f64(rand_vals(2 * 3 * 5 * 5, 64), {2, 3, 5, 5}).to(DType::F32);
  Tensor w = f64(rand_vals(4 * 3 * 9, 65), {4, 3, 3, 3}).to(DType::F32);
  ConvOptions o;
  EXPECT_EQ(convolution_activation(x, w, Tensor(), o, {}).to_vector<double>(),
            convolution(x, w, Tensor(), o).to_vector<double>());
  ConvEpilogue bad{ConvActivation(9), 0, 0};
  EXPECT_THROW(convolution_activation(x, w, Tensor(), o, bad), ValueError);
}

}  // namespace
}  // namespace kiln::nn::test
