// Max, average and adaptive pooling against the float64 direct references in conv_ref.h
// (padding, dilation, ceil mode, count_include_pad, divisor_override, non-divisible adaptive
// windows), gradcheck / gradgradcheck, the layers and the argument errors.
#include "nn/conv_ref.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/pooling.h"
#include "kiln/ops/pooling.h"
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;

const std::vector<Pool2dCase> kMaxCases = {
    {6, 8, 7, 2, 2, 2, 2},
    {4, 9, 9, 3, 3, 2, 2, 1, 1},                       // padding
    {4, 10, 9, 3, 2, 2, 3, 1, 1, 2, 1},                // dilation
    {2, 7, 8, 3, 3, 2, 2, 1, 0, 1, 1, true},           // ceil mode
    {2, 5, 5, 2, 2, 3, 3, 0, 0, 1, 1, true},           // ceil mode drops a window past the end
};

TEST(MaxPool2d, MatchesReferenceWithIndices) {
  for (const auto& c : kMaxCases)
    for (DType dt : {DType::F64, DType::F32, DType::BF16}) {
      Tensor x = f64(rand_vals(size_t(c.P * c.H * c.W), 30, -3, 3), {2, c.P / 2, c.H, c.W}).to(dt);
      std::vector<double> ref;
      std::vector<int64_t> ref_idx;
      ref_max_pool2d(c, x.to(DType::F64).to_vector<double>(), ref, ref_idx);
      auto [y, idx] = F::max_pool2d_with_indices(x, {c.KH, c.KW}, {c.sh, c.sw}, {c.ph, c.pw},
                                                 {c.dh, c.dw}, c.ceil);
      const Shape s{2, c.P / 2, pool_out(c.H, c.KH, c.sh, c.ph, c.dh, c.ceil),
                    pool_out(c.W, c.KW, c.sw, c.pw, c.dw, c.ceil)};
      expect_values(y.to(DType::F64), s, ref, 0.0, "max_pool2d values");
      EXPECT_EQ(idx.dtype(), DType::I64);
      EXPECT_EQ(idx.to_vector<int64_t>(), ref_idx);
    }
}

// 16+ channels of a planar input take the channels-last kernel and are copied back; the
// values-only form (max_pool2d) skips laying out the indices. Both against the reference.
TEST(MaxPool2d, ManyChannelsWithAndWithoutIndices) {
  for (const Pool2dCase& c :
       {Pool2dCase{64, 9, 9, 3, 3, 2, 2, 1, 1}, Pool2dCase{40, 8, 7, 2, 2, 2, 2}})
    for (DType dt : {DType::F32, DType::BF16}) {
      Tensor x = f64(rand_vals(size_t(c.P * c.H * c.W), 31, -3, 3), {2, c.P / 2, c.H, c.W}).to(dt);
      std::vector<double> ref;
      std::vector<int64_t> ref_idx;
      ref_max_pool2d(c, x.to(DType::F64).to_vector<double>(), ref, ref_idx);
      const Shape s{2, c.P / 2, pool_out(c.H, c.KH, c.sh, c.ph, c.dh, c.ceil),
                    pool_out(c.W, c.KW, c.sw, c.pw, c.dw, c.ceil)};
      auto [y, idx] = F::max_pool2d_with_indices(x, {c.KH, c.KW}, {c.sh, c.sw}, {c.ph, c.pw},
                                                 {c.dh, c.dw}, c.ceil);
      expect_values(y.to(DType::F64), s, ref, 0.0, "max_pool2d_with_indices values");
      EXPECT_TRUE(y.is_contiguous() && idx.is_contiguous());
      EXPECT_EQ(idx.to_vector<int64_t>(), ref_idx);
      Tensor v = F::max_pool2d(x, {c.KH, c.KW}, {c.sh, c.sw}, {c.ph, c.pw}, {c.dh, c.dw}, c.ceil);
      EXPECT_TRUE(v.is_contiguous());
      expect_values(v.to(DType::F64), s, ref, 0.0, "max_pool2d values");
    }
}

TEST(MaxPool2d, NanPropagatesAndInfinityIsAValue) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  Tensor x = f64({1, nan, 3, 4, -inf, -inf, -inf, -inf}, {1, 2, 4});
  auto [y, idx] = F::max_pool2d_with_indices(x, {2, 2}, {2, 2});
  auto v = y.to_vector<double>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 4);
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
  Tensor all_neg_inf = f64({-inf, -inf, -inf, -inf}, {1, 2, 2});
  auto [m, mi] = F::max_pool2d_with_indices(all_neg_inf, {2, 2}, {2, 2});
  EXPECT_EQ(mi.to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(m.item<double>(), -inf);
}

TEST(MaxPool2d, WindowEntirelyInPaddingGivesMinusInfinity) {
  // kernel 3 wide with dilation 2 and padding 1 over a 1-row input: the row window's taps
  // (-1, 1) are both outside, as PyTorch gives -inf with the index of the stepped start.
  Tensor x = f64({0, 1, 2, 3, 4, 5, 6, 7}, {2, 1, 1, 4});
  auto [y, idx] = F::max_pool2d_with_indices(x, {2, 3}, {}, {1}, {2});
  ASSERT_EQ(y.shape(), (Shape{2, 1, 1, 1}));
  for (double v : y.to_vector<double>()) EXPECT_EQ(v, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{5, 5}));  // torch 2.13 gives 5
}

TEST(AvgPool2d, MatchesReferenceForEveryPaddingRule) {
  std::vector<Pool2dCase> cases = {
      {4, 8, 6, 2, 2, 2, 2},
      {4, 7, 7, 3, 3, 2, 2, 1, 1},                                // count_include_pad
      {4, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, false, false},            // exclude padding
      {4, 7, 8, 3, 2, 2, 2, 1, 1, 1, 1, true, true},              // ceil + padding
      {4, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, true, false},             // ceil, exclude pad
      {4, 6, 6, 3, 3, 3, 3, 1, 0, 1, 1, false, true, 5},          // divisor_override
  };
  for (const auto& c : cases)
    for (DType dt : {DType::F64, DType::F32}) {
      Tensor x = f64(rand_vals(size_t(c.P * c.H * c.W), 31), {c.P, c.H, c.W}).to(dt);
      auto ref = ref_avg_pool2d(c, x.to(DType::F64).to_vector<double>());
      Tensor y = F::avg_pool2d(x, {c.KH, c.KW}, {c.sh, c.sw}, {c.ph, c.pw}, c.ceil, c.include_pad,
                               c.divisor ? std::optional<int64_t>(c.divisor) : std::nullopt);
      const Shape s{c.P, pool_out(c.H, c.KH, c.sh, c.ph, 1, c.ceil),
                    pool_out(c.W, c.KW, c.sw, c.pw, 1, c.ceil)};
      expect_values(y.to(DType::F64), s, ref, dt == DType::F64 ? 1e-14 : 1e-6, "avg_pool2d");
    }
}

TEST(AdaptivePool, NonDivisibleWindows) {
  for (auto [H, W, OH, OW] : std::vector<std::array<int64_t, 4>>{
           {7, 5, 3, 2}, {8, 8, 1, 1}, {5, 9, 5, 4}, {4, 4, 6, 5}}) {
    Tensor x = f64(rand_vals(size_t(6 * H * W), 32), {2, 3, H, W});
    auto ref = ref_adaptive_avg_pool2d(6, H, W, OH, OW, x.to_vector<double>());
    expect_values(F::adaptive_avg_pool2d(x, {OH, OW}), {2, 3, OH, OW}, ref, 1e-14);
    // Adaptive max: the maximum over the same windows, checked against amax of each slice.
    Tensor m = F::adaptive_max_pool2d(x, {OH, OW});
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
        int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        Tensor win = x.slice(2, h0, h1).slice(3, w0, w1);
        Tensor want = amax(win, {2, 3});
        Tensor got = m.select(3, ow).select(2, oh);
        EXPECT_EQ(max(abs(got - want)).item<double>(), 0.0);
      }
  }
  Tensor x1 = f64(rand_vals(2 * 10, 33), {2, 10});
  Tensor y1 = F::adaptive_avg_pool1d(x1, 4);
  auto ref = ref_adaptive_avg_pool2d(2, 1, 10, 1, 4, x1.to_vector<double>());
  expect_values(y1, {2, 4}, ref, 1e-14, "adaptive_avg_pool1d unbatched");
}

// Sizes that tile the input exactly run as a mean over the spatial dims (global pooling) or
// as avg_pool with kernel = stride = in / out: same values as the window sums in every float
// dtype and in channels-last, gradients included.
TEST(AdaptivePool, ExactTilingsMatchTheWindowSums) {
  for (auto [H, W, OH, OW] : std::vector<std::array<int64_t, 4>>{
           {8, 9, 1, 1}, {8, 9, 2, 3}, {6, 6, 6, 6}, {1, 1, 1, 1}}) {
    Tensor x64 = f64(rand_vals(size_t(2 * 20 * H * W), 35), {2, 20, H, W});
    for (DType dt : {DType::F64, DType::F32, DType::BF16}) {
      Tensor x = x64.to(dt);
      auto ref = ref_adaptive_avg_pool2d(40, H, W, OH, OW, x.to(DType::F64).to_vector<double>());
      const double tol = dt == DType::F64 ? 1e-14 : dt == DType::F32 ? 1e-6 : 1e-2;
      const std::string what = std::string(dtype_name(dt)) + " " + std::to_string(H) + "x" +
                               std::to_string(W) + " -> " + std::to_string(OH) + "x" +
                               std::to_string(OW);
      for (const Tensor& in : {x, x.contiguous(MemoryFormat::ChannelsLast)}) {
        Tensor y = F::adaptive_avg_pool2d(in, {OH, OW});
        expect_values(y.to(DType::F64), {2, 20, OH, OW}, ref, tol, what);
      }
    }
    Tensor leaf_x = leaf({2, 3, H, W}, 36);
    KILN_EXPECT_GRADCHECK([&](const V& in) { return F::adaptive_avg_pool2d(in[0], {OH, OW}); },
                          V{leaf_x});
  }
}

TEST(PoolGrad, GradcheckAndGradgradcheck) {
  // Distinct values, so no two elements tie for a maximum within finite-difference steps.
  std::vector<double> v(2 * 3 * 7 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double((i * 37) % v.size()) * 0.01;
  Tensor x = f64(v, {2, 3, 7, 6});
  autograd::set_requires_grad(x);
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::max_pool2d(in[0], {3, 2}, {2, 2}, {1, 1}, {1, 2}, true); },
      V{x});
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::adaptive_max_pool2d(in[0], {3, 4}); }, V{x});
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::max_pool1d(in[0].flatten(2), {4}, {3}, {2}); },
                        V{x});
  // Second order: max_pool_backward's own derivative (a gather through the indices).
  auto mp = [](const V& in) { return F::max_pool2d(in[0], {3, 2}, {1, 2}, {1, 1}, {1, 1}, false); };
  auto rm = autograd::gradgradcheck(mp, V{x});
  EXPECT_TRUE(rm.ok) << rm.message;
  Tensor y = leaf({2, 3, 7, 6}, 34);
  auto avg = [](const V& in) {
    return F::avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, true, false);
  };
  KILN_EXPECT_GRADCHECK(avg, V{y});
  auto r = autograd::gradgradcheck(avg, V{y});
  EXPECT_TRUE(r.ok) << r.message;
  auto ada = [](const V& in) { return F::adaptive_avg_pool2d(in[0], {4, 4}); };
  KILN_EXPECT_GRADCHECK(ada, V{y});
  auto r2 = autograd::gradgradcheck(ada, V{y});
  EXPECT_TRUE(r2.ok) << r2.message;
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::avg_pool1d(in[0].flatten(2), {5}, {2}, {2}, false, true); },
      V{y});
}

TEST(PoolLayers, ModulesAndErrors) {
  MaxPool2d mp({2});
  Tensor x = randn({2, 3, 8, 6});
  EXPECT_EQ(mp(x).shape(), (Shape{2, 3, 4, 3}));
  AvgPool2d ap({3}, {.stride = {2}, .padding = {1}});
  EXPECT_EQ(ap(x).shape(), (Shape{2, 3, 4, 3}));
  AdaptiveAvgPool2d gap({1, 1});
  EXPECT_EQ(gap(x).shape(), (Shape{2, 3, 1, 1}));
  EXPECT_NE(mp.str().find("MaxPool2d(kernel_size=2, stride=2, padding=0"), std::string::npos)
      << mp.str();
  EXPECT_THROW(F::max_pool2d(x, {3}, {1}, {2}), Error);           // pad > kernel / 2
  EXPECT_THROW(F::max_pool2d(x, {0}), Error);                     // kernel 0
  EXPECT_THROW(F::max_pool2d(x, {2}, {0}), Error);                // stride 0
  EXPECT_THROW(F::max_pool2d(randn({8, 6}), {2}), ShapeError);    // rank
  EXPECT_THROW(F::max_pool2d(randn({1, 3, 1, 1}), {2}), ShapeError);  // output too small
  EXPECT_THROW(F::max_pool2d(x.to(DType::I64), {2}), NotImplementedError);
  EXPECT_THROW(F::avg_pool2d(x, {2}, {}, {0}, false, true, 0), Error);  // divisor 0
  EXPECT_THROW(F::adaptive_avg_pool2d(randn({2, 0, 4, 4}), {2, 2}), ShapeError);
  EXPECT_THROW(F::adaptive_avg_pool2d(x, {2, 2, 2}), Error);
}

// max_pool_backward adds each gradient where its index points; an index outside the input
// plane (a corrupted or foreign indices tensor) is an IndexError, not a stray write.
TEST(MaxPoolBackward, RejectsIndicesOutsideThePlane) {
  PoolOptions o;
  o.kernel_size = {2, 2};
  o.stride = {2, 2};
  o.padding = {0, 0};
  o.dilation = {1, 1};
  Tensor gy = ones({1, 1, 2, 2});
  Tensor idx = tensor_from(std::vector<int64_t>{0, 3, 8, 16}, Shape{1, 1, 2, 2});
  EXPECT_THROW(max_pool_backward(gy, idx, {1, 1, 4, 4}, o), IndexError);
  Tensor ok = tensor_from(std::vector<int64_t>{0, 0, 8, 15}, Shape{1, 1, 2, 2});
  EXPECT_EQ(max_pool_backward(gy * 2.0, ok, {1, 1, 4, 4}, o).to_vector<float>(),
            (std::vector<float>{4, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 2}));
}

}  // namespace
}  // namespace kiln::nn
