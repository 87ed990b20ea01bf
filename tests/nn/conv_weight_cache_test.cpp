// Convolutions whose packed weights oneDNN caches per weight tensor: a weight changed in
// place, a new weight tensor of the same shape (likely at a freed weight's address) and a
// view of a larger buffer must each be used as they are now, never a stale packed copy.
// References are float64 direct sums (conv_ref.h). Without oneDNN these run kiln's kernel.
#include "kiln/nn/conv.h"
#include "nn/conv_ref.h"
#include "nn/nn_test_util.h"

namespace kiln::nn::test {
namespace {

namespace F = functional;

const Conv2dCase kCase{1, 8, 12, 10, 16, 3, 3, 1, 1, 1, 1};

std::vector<double> reference(const Tensor& x, const Tensor& w) {
  return ref_conv2d(kCase, x.to(DType::F64).to_vector<double>(), w.to(DType::F64).to_vector<double>(),
                    {});
}

Tensor conv(const Tensor& x, const Tensor& w) {
  return F::conv2d(x, w, Tensor(), {1, 1}, std::vector<int64_t>{1, 1}, {1, 1}, 1);
}

const Shape kOut{1, 16, 12, 10};

TEST(ConvWeightCache, InPlaceChangeOfTheWeightIsSeen) {
  Tensor x = f64(rand_vals(8 * 12 * 10, 1), {1, 8, 12, 10}).to(DType::F32);
  Tensor w = f64(rand_vals(16 * 8 * 9, 2), {16, 8, 3, 3}).to(DType::F32);
  expect_values(conv(x, w).to(DType::F64), kOut, reference(x, w), 1e-4, "first");
  w.mul_(full({1}, -3.0, TensorOptions(DType::F32, Device(DeviceType::CPU, 0))));
  expect_values(conv(x, w).to(DType::F64), kOut, reference(x, w), 1e-4, "after mul_");
  w.copy_(f64(rand_vals(16 * 8 * 9, 3), {16, 8, 3, 3}).to(DType::F32));
  expect_values(conv(x, w).to(DType::F64), kOut, reference(x, w), 1e-4, "after copy_");
}

TEST(ConvWeightCache, NewWeightsOfTheSameShapeAreNotConfused) {
  Tensor x = f64(rand_vals(8 * 12 * 10, 4), {1, 8, 12, 10}).to(DType::F32);
  for (uint32_t seed = 10; seed < 30; ++seed) {
    // Each weight is freed at the end of the iteration; the next one may reuse its memory.
    Tensor w = f64(rand_vals(16 * 8 * 9, seed), {16, 8, 3, 3}).to(DType::F32);
    expect_values(conv(x, w).to(DType::F64), kOut, reference(x, w), 1e-4,
                  "seed " + std::to_string(seed));
  }
}

TEST(ConvWeightCache, WeightViewsAtDifferentOffsetsAreDistinct) {
  Tensor x = f64(rand_vals(8 * 12 * 10, 5), {1, 8, 12, 10}).to(DType::F32);
  Tensor both = f64(rand_vals(2 * 16 * 8 * 9, 6), {2, 16, 8, 3, 3}).to(DType::F32);
  Tensor w0 = both.select(0, 0), w1 = both.select(0, 1);
  expect_values(conv(x, w0).to(DType::F64), kOut, reference(x, w0), 1e-4, "view 0");
  expect_values(conv(x, w1).to(DType::F64), kOut, reference(x, w1), 1e-4, "view 1");
}

}  // namespace
}  // namespace kiln::nn::test
