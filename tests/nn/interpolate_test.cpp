// interpolate from C++: on a linear ramp, bilinear and trilinear with align_corners give the
// ramp at the new coordinates exactly (a float64 formula here); nearest picks
// floor(o * in / out); the errors name what was expected. (tests/python/test_interpolate.py
// compares every mode with PyTorch.)
#include <gtest/gtest.h>

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
