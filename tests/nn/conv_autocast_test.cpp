// Convolutions under CPU autocast to bfloat16 (decision 0121): the autocast interceptor leaves
// a float32 weight to the kernel, which computes with the weight rounded to bfloat16 (oneDNN's
// reorder rounds it as it packs it, once per weight; kiln's own kernels round it per call).
// The result must be the one of the same convolution with every operand cast to bfloat16
// first, bit for bit, for plain, strided 1x1, depthwise, transposed and channels-last layers,
// with and without an activation, on every forward and after an in-place change of the
// weight. A bfloat16 input with a float32 weight is accepted under autocast, as PyTorch does,
// and refused without it. CTest reruns Conv* at every ISA level, with oneDNN and without.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kiln/dispatch/autocast.h"
#include "kiln/ops/conv.h"
#include "nn/nn_test_util.h"

namespace kiln::nn::test {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), ac.nbytes()) == 0;
}

struct Layer {
  std::string name;
  Shape x, w;
  ConvOptions o;
  bool channels_last = false;
};

TEST(ConvAutocast, Float32WeightComputedAsItsBfloat16Rounding) {
  std::vector<Layer> layers;
  layers.push_back({"3x3", {2, 16, 14, 14}, {32, 16, 3, 3}, {{1}, {1}, {1}, false, {0}, 1}});
  layers.push_back({"1x1 stride 2", {1, 32, 14, 14}, {64, 32, 1, 1}, {{2}, {0}, {1}, false, {0}, 1}});
  layers.push_back({"depthwise", {1, 24, 15, 15}, {24, 1, 3, 3}, {{1}, {1}, {1}, false, {0}, 24}});
  layers.push_back({"transposed", {1, 16, 8, 8}, {16, 8, 2, 2}, {{2}, {0}, {1}, true, {0}, 1}});
  layers.push_back({"3x3 channels-last", {1, 16, 12, 12}, {32, 16, 3, 3},
                    {{1}, {1}, {1}, false, {0}, 1}, true});
  uint32_t seed = 40;
  for (const Layer& l : layers)
    for (bool activation : {false, true}) {
      const std::string what = l.name + (activation ? " + relu" : "");
      int64_t nx = 1, nw = 1;
      for (int64_t s : l.x) nx *= s;
      for (int64_t s : l.w) nw *= s;
      const int64_t c_out = l.o.transposed ? l.w[1] * l.o.groups : l.w[0];
      Tensor x = f64(rand_vals(size_t(nx), seed), l.x).to(DType::F32);
      if (l.channels_last) x = x.contiguous(MemoryFormat::ChannelsLast);
      Tensor w = f64(rand_vals(size_t(nw), seed + 1), l.w).to(DType::F32);
      Tensor b = f64(rand_vals(size_t(c_out), seed + 2), {c_out}).to(DType::F32);
      const ConvEpilogue relu{ConvActivation::Relu, 0, 0};
      auto run = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
        return activation ? convolution_activation(xi, wi, bi, l.o, relu)
                          : convolution(xi, wi, bi, l.o);
      };
      for (int round = 0; round < 4; ++round) {
        if (round == 3) w.mul_(f64({-0.5}, {1}).to(DType::F32));
        const Tensor want = run(x.to(DType::BF16), w.to(DType::BF16), b.to(DType::BF16));
        set_autocast_enabled(DeviceType::CPU, true);
        increment_autocast_nesting();
        const Tensor got_f32_input = run(x, w, b);
        const Tensor got_bf16_input = run(x.to(DType::BF16), w, b);
        decrement_autocast_nesting();
        set_autocast_enabled(DeviceType::CPU, false);
        EXPECT_EQ(got_f32_input.dtype(), DType::BF16) << what;
        EXPECT_TRUE(same_bits(got_f32_input, want)) << what << " round " << round;
        EXPECT_TRUE(same_bits(got_bf16_input, want)) << what << " bf16 input, round " << round;
      }
      seed += 3;
    }
  // Without autocast the dtypes must match.
  Tensor x = f64(rand_vals(2 * 4 * 5 * 5, 9), {2, 4, 5, 5}).to(DType::BF16);
  Tensor w = f64(rand_vals(8 * 4 * 9, 10), {8, 4, 3, 3}).to(DType::F32);
  EXPECT_THROW(convolution(x, w, Tensor(), ConvOptions{}), Error);
}

}  // namespace
}  // namespace kiln::nn::test
