// interpolate from C++: on a linear ramp, bilinear and trilinear with align_corners give the
// ramp at the new coordinates exactly (a float64 formula here); nearest picks
// floor(o * in / out); the errors name what was expected. (tests/python/test_interpolate.py
// compares every mode with PyTorch.)
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.h"
#include "kiln/nn/functional_resize.h"

namespace kiln {
namespace {

namespace F = nn::functional;

TEST(Interpolate, LinearModesReproduceARamp) {
  const int64_t H = 5, W = 7, OH = 9, OW = 4;
  std::vector<double> v;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t w = 0; w < W; ++w) v.push_back(3.0 * double(h) - 2.0 * double(w));
  Tensor x = tensor_from(v, {1, 1, H, W});
  F::InterpolateOptions o;
  o.size = {OH, OW};
  o.mode = "bilinear";
  o.align_corners = true;
  std::vector<double> got = F::interpolate(x, o).to_vector<double>();
  for (int64_t i = 0; i < OH; ++i)
    for (int64_t j = 0; j < OW; ++j) {
      const double h = double(i) * double(H - 1) / double(OH - 1);
      const double w = double(j) * double(W - 1) / double(OW - 1);
      EXPECT_NEAR(got[size_t(i * OW + j)], 3.0 * h - 2.0 * w, 1e-12) << i << " " << j;
    }
}

TEST(Interpolate, NearestPicksTheFloorOfTheScaledIndex) {
  std::vector<double> v;
  for (int i = 0; i < 6; ++i) v.push_back(double(i));
  F::InterpolateOptions o;
  o.size = {4};
  std::vector<double> got = F::interpolate(tensor_from(v, {1, 1, 6}), o).to_vector<double>();
  EXPECT_EQ(got, (std::vector<double>{0, 1, 3, 4}));  // floor(o * 1.5)
}

// bfloat16 nearest moves values without widening them: exactly the float32 result of the
// same values, NCHW and channels-last (kept). With a gradient to compute, the picks run in
// float32, so each input's gradient (the sum of the four output gradients it feeds) is
// rounded once: the float32 gradient rounded to bfloat16.
TEST(Interpolate, NearestBfloat16MovesValuesExactly) {
  std::vector<double> v;
  for (int i = 0; i < 2 * 19 * 5 * 6; ++i) v.push_back(std::sin(i * 0.37) * 8.0);
  Tensor x = tensor_from(v, {2, 19, 5, 6}).to(DType::BF16);
  F::InterpolateOptions o;
  o.scale_factor = {2.0, 3.0};
  for (const Tensor& in : {x, x.contiguous(MemoryFormat::ChannelsLast)}) {
    Tensor y = F::interpolate(in, o);
    EXPECT_EQ(y.dtype(), DType::BF16);
    EXPECT_EQ(y.is_channels_last(), in.is_channels_last());
    EXPECT_EQ(y.to(DType::F64).to_vector<double>(),
              F::interpolate(in.to(DType::F32), o).to(DType::F64).to_vector<double>());
  }
  std::vector<double> g;
  for (int i = 0; i < 2 * 19 * 10 * 18; ++i) g.push_back(1.0 + std::cos(i * 0.11) / 3.0);
  Tensor leaf = x.clone();
  autograd::set_requires_grad(leaf);
  const Tensor grad_out = tensor_from(g, {2, 19, 10, 18}).to(DType::BF16);
  autograd::backward({F::interpolate(leaf, o)}, {grad_out});
  Tensor leaf32 = x.to(DType::F32);
  autograd::set_requires_grad(leaf32);
  autograd::backward({F::interpolate(leaf32, o)}, {grad_out.to(DType::F32)});
  EXPECT_EQ(autograd::grad(leaf).to(DType::F64).to_vector<double>(),
            autograd::grad(leaf32).to(DType::BF16).to(DType::F64).to_vector<double>());
}

TEST(Interpolate, ErrorsSayWhatWasExpected) {
  Tensor x = zeros({1, 2, 4, 4});
  F::InterpolateOptions o;
  EXPECT_THROW(F::interpolate(x, o), ValueError);  // neither size nor scale_factor
  o.size = {2, 2};
  o.scale_factor = {2, 2};
  EXPECT_THROW(F::interpolate(x, o), ValueError);  // both
  o.scale_factor.clear();
  o.mode = "trilinear";
  EXPECT_THROW(F::interpolate(x, o), ShapeError);
  o.mode = "nearest";
  o.align_corners = true;
  EXPECT_THROW(F::interpolate(x, o), ValueError);
  o.align_corners.reset();
  o.mode = "cubic";
  EXPECT_THROW(F::interpolate(x, o), ValueError);
  o.mode = "nearest";
  o.size = {2, 2, 2};
  EXPECT_THROW(F::interpolate(x, o), ValueError);
}

}  // namespace
}  // namespace kiln
