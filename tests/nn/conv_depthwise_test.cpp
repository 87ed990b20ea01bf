// Depthwise 2-d convolutions of contiguous float32 NCHW tensors take kiln's direct kernel
// (isa/depthwise_conv.h, decision 0071) with oneDNN on or off, channels-last ones oneDNN's or
// (oneDNN off) kiln's channels-last kernel: kernel sizes 1-7, strides 1-3
// on each axis, dilation, padding up to the kernel's reach, widths around every vector width
// (tails), planes of one row, batches, with and without bias and activation, against the
// float64 direct convolution of conv_ref.h. The Conv* CTest reruns run it at every ISA level.
#include "kiln/nn/conv.h"
#include "kiln/ops/conv.h"
#include "nn/conv_ref.h"
#include "nn/nn_test_util.h"

namespace kiln::nn::test {
namespace {

namespace F = functional;

void check_depthwise(Conv2dCase c, bool bias, uint32_t seed) {
  c.groups = c.C;  // depthwise: one input and one output channel per group
  const std::string what = "[" + std::to_string(c.N) + "," + std::to_string(c.C) + "," +
                           std::to_string(c.H) + "," + std::to_string(c.W) + "] k" +
                           std::to_string(c.KH) + "x" + std::to_string(c.KW) + " s" +
                           std::to_string(c.sh) + "," + std::to_string(c.sw) + " p" +
                           std::to_string(c.ph) + "," + std::to_string(c.pw) + " d" +
                           std::to_string(c.dh) + "," + std::to_string(c.dw);
  const auto xv = rand_vals(size_t(c.N * c.C * c.H * c.W), seed);
  const auto wv = rand_vals(size_t(c.C * c.KH * c.KW), seed + 1);
  const auto bv = bias ? rand_vals(size_t(c.C), seed + 2) : std::vector<double>();
  const Tensor x = f64(xv, {c.N, c.C, c.H, c.W}).to(DType::F32);
  const Tensor w = f64(wv, {c.C, 1, c.KH, c.KW}).to(DType::F32);
  const Tensor b = bias ? f64(bv, {c.C}).to(DType::F32) : Tensor();
  const auto ref = ref_conv2d(c, x.to(DType::F64).to_vector<double>(),
                              w.to(DType::F64).to_vector<double>(),
                              bias ? b.to(DType::F64).to_vector<double>() : std::vector<double>());
  const Shape out{c.N, c.C, conv_out(c.H, c.KH, c.sh, c.ph, c.dh),
                  conv_out(c.W, c.KW, c.sw, c.pw, c.dw)};
  const Tensor y = F::conv2d(x, w, b, {c.sh, c.sw}, std::vector<int64_t>{c.ph, c.pw},
                             {c.dh, c.dw}, c.C);
  expect_values(y.to(DType::F64), out, ref, 2e-5, what);
  // With a fused activation: relu of the same values.
  ConvOptions o;
  o.stride = {c.sh, c.sw};
  o.padding = {c.ph, c.pw};
  o.dilation = {c.dh, c.dw};
  o.output_padding = {0, 0};
  o.groups = c.C;
  const Tensor r = convolution_activation(x, w, b, o, {ConvActivation::Relu, 0, 0});
  std::vector<double> relu = ref;
  for (double& v : relu) v = v < 0 ? 0 : v;
  expect_values(r.to(DType::F64), out, relu, 2e-5, what + " relu");
  // Channels-last input: a channels-last result of the same values (oneDNN's kernel, or
  // kiln's channels-last one where oneDNN is off: the KILN_ONEDNN=0 reruns).
  const Tensor xcl = x.contiguous(MemoryFormat::ChannelsLast);
  const Tensor ycl = F::conv2d(xcl, w, b, {c.sh, c.sw}, std::vector<int64_t>{c.ph, c.pw},
                               {c.dh, c.dw}, c.C);
  EXPECT_TRUE(ycl.is_contiguous(MemoryFormat::ChannelsLast)) << what;
  expect_values(ycl.to(DType::F64), out, ref, 2e-5, what + " channels-last");
  const Tensor rcl = convolution_activation(xcl, w, b, o, {ConvActivation::Relu, 0, 0});
  expect_values(rcl.to(DType::F64), out, relu, 2e-5, what + " channels-last relu");
}

TEST(ConvDepthwise, KernelsStridesPaddingsAndTails) {
  uint32_t seed = 1;
  for (int64_t k : {1, 3, 5, 7})
    for (int64_t s : {1, 2, 3})
      for (int64_t W : {1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 97})
        check_depthwise({1, 3, 5, W, 3, k, k, s, s, k / 2, k / 2}, (W % 2) != 0, seed++);
}

TEST(ConvDepthwise, AsymmetricGeometryDilationAndBatches) {
  check_depthwise({2, 88, 3, 96, 88, 5, 5, 1, 1, 2, 2}, true, 100);   // PP-LCNet's shapes
  check_depthwise({1, 104, 3, 96, 104, 5, 5, 2, 1, 2, 2}, true, 101);
  check_depthwise({1, 24, 12, 96, 24, 3, 3, 2, 1, 1, 1}, false, 102);
  check_depthwise({3, 5, 9, 13, 5, 3, 5, 1, 2, 0, 2}, true, 103);      // kh != kw, no row pad
  check_depthwise({2, 4, 11, 19, 4, 3, 3, 1, 1, 2, 2, 2, 2}, true, 104);  // dilation 2
  check_depthwise({1, 6, 10, 21, 6, 3, 3, 3, 2, 4, 1, 1, 3}, false, 105);  // wide padding
  check_depthwise({1, 7, 1, 40, 7, 1, 9, 1, 1, 0, 4}, true, 106);       // one row
  check_depthwise({4, 16, 1, 1, 16, 3, 3, 1, 1, 1, 1}, true, 107);      // one pixel
  for (int64_t C : {1, 5, 8, 15, 16, 17, 33, 200})  // channel tails of every vector width
    check_depthwise({2, C, 6, 13, C, 3, 3, 1, 2, 1, 1}, C % 2 == 1, uint32_t(200 + C));
}

}  // namespace
}  // namespace kiln::nn::test
