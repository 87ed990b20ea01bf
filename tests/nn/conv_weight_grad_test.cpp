// convolution_weight_grad in float32 and bfloat16, with oneDNN's backward-weights primitive
// (decision 0050, where kiln is built with oneDNN and the level takes the dtype) and with
// kiln's own im2col kernel (oneDNN switched off), against float64 sums (conv_ref.h): plain,
// strided, padded, dilated, grouped and depthwise layers, a 1x1 layer, odd sizes.
#include <cmath>
#include <string>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/backends/cpu/onednn.h"
#include "kiln/ops/conv.h"
#include "nn/conv_ref.h"
#include "nn/nn_test_util.h"

namespace kiln::nn::test {
namespace {

// Restores the oneDNN switch at the end of a test.
struct OnednnSetting {
  bool before = cpu::onednn_enabled();
  ~OnednnSetting() { cpu::set_onednn_enabled(before); }
};

const std::vector<Conv2dCase> kCases = {
    {2, 16, 12, 10, 24, 3, 3, 1, 1, 1, 1},           // 3x3, padding 1
    {3, 8, 9, 11, 16, 1, 1, 2, 2},                   // 1x1, stride 2, odd sizes
    {2, 12, 13, 9, 18, 3, 2, 2, 1, 1, 0, 2, 1, 3},   // strided, dilated, 3 groups
    {2, 16, 10, 10, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16}, // depthwise
    {1, 3, 20, 18, 8, 5, 5, 2, 2, 2, 2},             // a first layer: 3 channels, 5x5
};

std::string describe(const Conv2dCase& c) {
  return std::to_string(c.N) + "x" + std::to_string(c.C) + "x" + std::to_string(c.H) + "x" +
         std::to_string(c.W) + " -> " + std::to_string(c.O) + ", k " + std::to_string(c.KH) +
         "x" + std::to_string(c.KW) + ", stride " + std::to_string(c.sh) + ", groups " +
         std::to_string(c.groups);
}

// dW for case c in dtype, checked against the float64 sum of the (dtype-rounded) operands:
// float32 within 1e-5 of the sum of absolute products; bfloat16 also within its own rounding
// of the result (2^-8 relative) — a sum rounded to bfloat16 along the way would miss that.
void check(const Conv2dCase& c, DType dtype, const std::string& path) {
  const int64_t OH = conv_out(c.H, c.KH, c.sh, c.ph, c.dh);
  const int64_t OW = conv_out(c.W, c.KW, c.sw, c.pw, c.dw);
  Tensor x = f64(rand_vals(size_t(c.N * c.C * c.H * c.W), 31), {c.N, c.C, c.H, c.W}).to(dtype);
  Tensor gy = f64(rand_vals(size_t(c.N * c.O * OH * OW), 32), {c.N, c.O, OH, OW}).to(dtype);
  ConvOptions o;
  o.stride = {c.sh, c.sw};
  o.padding = {c.ph, c.pw};
  o.dilation = {c.dh, c.dw};
  o.groups = c.groups;
  const Shape wshape{c.O, c.C / c.groups, c.KH, c.KW};
  const size_t plans_before = cpu::onednn_plans_made();
  const Tensor dw = convolution_weight_grad(x, gy, wshape, o);
  // oneDNN takes every case where it is in use for the dtype: its first call of a shape makes
  // a plan (these shapes are used nowhere else in this program).
  const bool onednn_dtype =
      dtype == DType::F32 || cpu::isa_level() >= cpu::IsaLevel::Avx512Vnni;
  if (cpu::onednn_enabled() && onednn_dtype)
    EXPECT_GT(cpu::onednn_plans_made(), plans_before) << path << ", " << describe(c);
  ASSERT_EQ(dw.shape(), wshape);
  ASSERT_EQ(dw.dtype(), dtype);
  std::vector<double> abs;
  const std::vector<double> want = ref_conv2d_weight_grad(
      c, x.to(DType::F64).to_vector<double>(), gy.to(DType::F64).to_vector<double>(), &abs);
  const std::vector<double> got = dw.to(DType::F64).to_vector<double>();
  const double rel = dtype == DType::BF16 ? std::ldexp(1.0, -8) : 0.0;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), 1e-5 * abs[i] + rel * std::abs(want[i]) + 1e-30)
        << path << ", " << dtype_name(dtype) << ", " << describe(c) << ", element " << i
        << ": got " << got[i] << ", want " << want[i];
}

TEST(ConvWeightGrad, OnednnAndOwnKernelMatchTheFloat64Sum) {
  OnednnSetting restore;
  for (bool onednn : {true, false}) {
    cpu::set_onednn_enabled(onednn);
    for (const Conv2dCase& c : kCases)
      for (DType dtype : {DType::F32, DType::BF16})
        check(c, dtype, onednn ? "oneDNN allowed" : "own kernel");
  }
}

// 1-D and 3-D layers take the same path with one and three spatial dims.
TEST(ConvWeightGrad, OneAndThreeSpatialDims) {
  OnednnSetting restore;
  for (bool onednn : {true, false}) {
    cpu::set_onednn_enabled(onednn);
    // 1-D: [2, 6, 17] -> 10 channels, kernel 3, padding 1, as a 2-D case of height 1.
    Conv2dCase c1{2, 6, 1, 17, 10, 1, 3, 1, 1, 0, 1};
    Tensor x = f64(rand_vals(2 * 6 * 17, 41), {2, 6, 17});
    Tensor gy = f64(rand_vals(2 * 10 * 17, 42), {2, 10, 17});
    ConvOptions o;
    o.padding = {1};
    const std::vector<double> want = ref_conv2d_weight_grad(
        c1, x.to_vector<double>(), gy.to_vector<double>());
    const Tensor dw = convolution_weight_grad(x.to(DType::F32), gy.to(DType::F32), {10, 6, 3}, o);
    expect_values(dw.to(DType::F64), {10, 6, 3}, want, 1e-5, "conv1d weight grad");
    // 3-D: depth 1 with a 1-deep kernel reduces to the 2-D sum.
    const Conv2dCase& c3 = kCases[0];
    Tensor x3 = f64(rand_vals(size_t(c3.N * c3.C * c3.H * c3.W), 43),
                    {c3.N, c3.C, 1, c3.H, c3.W});
    Tensor gy3 = f64(rand_vals(size_t(c3.N * c3.O * c3.H * c3.W), 44),
                     {c3.N, c3.O, 1, c3.H, c3.W});
    ConvOptions o3;
    o3.padding = {0, 1, 1};
    const std::vector<double> want3 = ref_conv2d_weight_grad(
        c3, x3.to_vector<double>(), gy3.to_vector<double>());
    const Tensor dw3 = convolution_weight_grad(x3.to(DType::F32), gy3.to(DType::F32),
                                               {c3.O, c3.C, 1, 3, 3}, o3);
    expect_values(dw3.to(DType::F64), {c3.O, c3.C, 1, 3, 3}, want3, 1e-5, "conv3d weight grad");
  }
}

}  // namespace
}  // namespace kiln::nn::test
