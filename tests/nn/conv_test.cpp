// Convolution (1-D, 2-D, transposed; stride, padding incl. "same", dilation, groups) against
// the float64 direct-sum references in conv_ref.h, in float64, float32 and bfloat16, on the
// cpu and testing devices; gradcheck and gradgradcheck; the layers; argument errors.
#include "nn/conv_ref.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/pooling.h"
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;

std::vector<double> none;

Tensor f64v(const std::vector<double>& v, const Shape& s) { return f64(v, s); }

void check_conv2d(const Conv2dCase& c, bool with_bias, DType dtype, double tol,
                  Device device = Device(DeviceType::CPU, 0)) {
  auto xv = rand_vals(size_t(c.N * c.C * c.H * c.W), 1);
  auto wv = rand_vals(size_t(c.O * (c.C / c.groups) * c.KH * c.KW), 2);
  auto bv = with_bias ? rand_vals(size_t(c.O), 3) : none;
  // Round the inputs to the tested dtype first, so the reference sees the same values.
  Tensor x = f64v(xv, {c.N, c.C, c.H, c.W}).to(dtype);
  Tensor w = f64v(wv, {c.O, c.C / c.groups, c.KH, c.KW}).to(dtype);
  Tensor b = with_bias ? f64v(bv, {c.O}).to(dtype) : Tensor();
  auto ref = ref_conv2d(c, x.to(DType::F64).to_vector<double>(), w.to(DType::F64).to_vector<double>(),
                        with_bias ? b.to(DType::F64).to_vector<double>() : none);
  Tensor y = F::conv2d(x.to(device), w.to(device), with_bias ? b.to(device) : Tensor(),
                       {c.sh, c.sw}, std::vector<int64_t>{c.ph, c.pw}, {c.dh, c.dw}, c.groups);
  const Shape shape{c.N, c.O, conv_out(c.H, c.KH, c.sh, c.ph, c.dh),
                    conv_out(c.W, c.KW, c.sw, c.pw, c.dw)};
  expect_values(y.to(Device(DeviceType::CPU, 0)).to(DType::F64), shape, ref, tol,
                "conv2d " + std::string(dtype_name(dtype)));
}

const std::vector<Conv2dCase> kCases = {
    {2, 3, 7, 6, 4, 3, 2},                                  // plain, rectangular kernel
    {2, 3, 9, 8, 4, 3, 3, 2, 1, 1, 0, 1, 2},                // stride, padding, dilation
    {1, 6, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2},             // groups = 2
    {2, 4, 6, 7, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4},             // depthwise
    {3, 5, 4, 4, 7, 1, 1},                                  // 1x1 (the im2col-free path)
    {1, 2, 11, 3, 3, 5, 1, 3, 1, 2, 0, 2, 1},               // tall kernel, stride 3
    {1, 8, 9, 10, 6, 1, 1},                                 // 1x1, over 64 output pixels
    {2, 6, 20, 18, 5, 1, 1, 2, 2},                          // 1x1 stride 2, 90 pixels
    {3, 5, 7, 6, 7, 1, 1, 2, 2},                            // 1x1 stride 2, odd height
    {2, 6, 9, 5, 8, 1, 1, 3, 2},                            // 1x1 strides 3 and 2
    {2, 5, 6, 6, 4, 1, 1, 2, 2, 1, 1},                      // 1x1 stride 2, padded
    {2, 4, 9, 9, 16, 5, 5, 2, 2, 2, 2},                     // first layer (4 channels)
};

TEST(Conv2d, MatchesDirectSumInFloat64AndFloat32) {
  for (const auto& c : kCases) {
    check_conv2d(c, true, DType::F64, 1e-12);
    check_conv2d(c, false, DType::F64, 1e-12);
    check_conv2d(c, true, DType::F32, 2e-5);
  }
}

TEST(Conv2d, BFloat16AndFloat16RoundOnce) {
  for (const auto& c : kCases) {
    check_conv2d(c, true, DType::BF16, 1e-2);
    check_conv2d(c, true, DType::F16, 2e-3);
  }
}

TEST(Conv2d, TestingDeviceMatchesReference) {
  for (const auto& c : kCases) check_conv2d(c, true, DType::F32, 2e-5, Device(DeviceType::Testing, 0));
}

TEST(Conv2d, NonContiguousInputAndEmptyBatch) {
  Conv2dCase c{2, 3, 5, 6, 2, 3, 3};
  auto xv = rand_vals(size_t(2 * 3 * 6 * 5), 4);
  Tensor xt = f64v(xv, {2, 3, 6, 5}).transpose(2, 3);  // [2, 3, 5, 6], not contiguous
  Tensor w = f64v(rand_vals(2 * 3 * 9, 5), {2, 3, 3, 3});
  auto ref = ref_conv2d(c, xt.contiguous().to_vector<double>(), w.to_vector<double>(), none);
  expect_values(F::conv2d(xt, w), {2, 2, 3, 4}, ref, 1e-12);
  Tensor empty_batch = zeros({0, 3, 5, 6}, DType::F64);
  EXPECT_EQ(F::conv2d(empty_batch, w).shape(), (Shape{0, 2, 3, 4}));
}

TEST(Conv1d, SameValidUnbatchedAndDilation) {
  // As a 2-D problem with H = 1.
  Tensor x = f64v(rand_vals(2 * 3 * 10, 6), {2, 3, 10});
  Tensor w = f64v(rand_vals(4 * 3 * 4, 7), {4, 3, 4});
  Tensor b = f64v(rand_vals(4, 8), {4});
  // "same" with an even kernel: total padding 3 (dilation 1) -> 1 left, 2 right.
  Tensor same = F::conv1d(x, w, b, {1}, "same");
  ASSERT_EQ(same.shape(), (Shape{2, 4, 10}));
  Tensor padded = pad(x, {1, 2});
  Conv2dCase c{2, 3, 1, 13, 4, 1, 4};
  auto ref = ref_conv2d(c, padded.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>());
  expect_values(same, {2, 4, 10}, ref, 1e-12, "same");
  // dilation 2 with "same": total 6 -> symmetric 3.
  Tensor same_d = F::conv1d(x, w, b, {1}, "same", {2});
  Conv2dCase cd{2, 3, 1, 10, 4, 1, 4, 1, 1, 0, 3, 1, 2};
  expect_values(same_d, {2, 4, 10},
                ref_conv2d(cd, x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>()),
                1e-12, "same dilated");
  Tensor valid = F::conv1d(x, w, b, {1}, "valid");
  EXPECT_EQ(valid.shape(), (Shape{2, 4, 7}));
  // Unbatched [C, L] gives [O, L'] equal to the batched result's first sample.
  Tensor one = F::conv1d(x.select(0, 0), w, b, {2}, 1);
  Tensor batched = F::conv1d(x, w, b, {2}, 1);
  expect_values(one, {4, 5}, batched.select(0, 0).contiguous().to_vector<double>(), 1e-15);
}

// Float32 1-D layers with 1 to 8 output positions in all (a streaming model's frame, run
// through the few-rows dot tiles where the level has them, or as a matrix-vector product for
// a single position): STFT-like (one channel, a long kernel, stride 128), padded kernel-3
// layers at stride 1 and 2, dilated ones whose taps fall in the padding, two samples, one
// output position (output channels a multiple of 4 or not, a weight large enough for the
// threaded loop), with and without bias, against a float64 reference of the float32 inputs.
TEST(Conv1dFewOutputs, MatchTheReference) {
  struct Case {
    int64_t N, C, L, O, K, stride, pad;
    bool bias;
    int64_t dil = 1;
  };
  uint32_t seed = 300;
  for (const Case& k :
       {Case{1, 1, 640, 258, 256, 128, 0, false}, Case{1, 129, 4, 128, 3, 1, 1, true},
        Case{1, 128, 4, 64, 3, 2, 1, true}, Case{1, 64, 2, 64, 3, 2, 1, false},
        Case{2, 64, 4, 32, 3, 1, 1, true}, Case{2, 16, 7, 5, 3, 2, 0, true},
        Case{3, 8, 3, 4, 3, 1, 0, true}, Case{1, 64, 1, 128, 3, 1, 1, true},
        Case{1, 9, 1, 7, 3, 1, 1, true}, Case{1, 5, 1, 3, 1, 1, 0, false},
        Case{1, 128, 1, 203, 3, 1, 1, true}, Case{1, 6, 5, 9, 3, 1, 2, true, 2},
        Case{2, 4, 3, 6, 3, 2, 3, false, 3}}) {
    Tensor x = f64v(rand_vals(size_t(k.N * k.C * k.L), seed++), {k.N, k.C, k.L}).to(DType::F32);
    Tensor w = f64v(rand_vals(size_t(k.O * k.C * k.K), seed++), {k.O, k.C, k.K}).to(DType::F32);
    Tensor b = k.bias ? f64v(rand_vals(size_t(k.O), seed++), {k.O}).to(DType::F32) : Tensor();
    Conv2dCase c{k.N, k.C, 1, k.L, k.O, 1, k.K, 1, k.stride, 0, k.pad, 1, k.dil};
    const int64_t out = conv_out(k.L, k.K, k.stride, k.pad, k.dil);
    ASSERT_LE(k.N * out, 8);
    auto ref = ref_conv2d(c, x.to(DType::F64).to_vector<double>(),
                          w.to(DType::F64).to_vector<double>(),
                          k.bias ? b.to(DType::F64).to_vector<double>() : std::vector<double>{});
    Tensor y = F::conv1d(x, w, b, {k.stride}, std::vector<int64_t>{k.pad}, {k.dil});
    expect_values(y.to(DType::F64), {k.N, k.O, out}, ref, 1e-4,
                  "N " + std::to_string(k.N) + " C " + std::to_string(k.C) + " L " +
                      std::to_string(k.L) + " O " + std::to_string(k.O));
  }
}

// Strided 1x1 convolutions without padding in 1, 2 and 3 spatial dims (oneDNN gathers the
// strided pixels and convolves at stride 1, decision 0028), bfloat16 and float32, with bias,
// against a float64 sum over the channels of the picked pixels.
TEST(ConvPointwise, StridedWithoutPaddingInEveryRank) {
  const int64_t N = 2, C = 6, O = 5;
  for (int64_t rank : {1, 2, 3}) {
    const std::vector<int64_t> in_sizes = {8, 6, 4}, steps = {2, 3, 2};
    Shape xs{N, C}, ws{O, C}, ys{N, O};
    std::vector<int64_t> stride;
    for (int64_t d = 0; d < rank; ++d) {
      xs.push_back(in_sizes[size_t(d)]);
      ws.push_back(1);
      ys.push_back((in_sizes[size_t(d)] - 1) / steps[size_t(d)] + 1);
      stride.push_back(steps[size_t(d)]);
    }
    int64_t xn = 1, yn = 1;
    for (int64_t v : xs) xn *= v;
    for (int64_t v : ys) yn *= v;
    for (DType t : {DType::BF16, DType::F32}) {
      Tensor x = f64v(rand_vals(size_t(xn), 11), xs).to(t), w = f64v(rand_vals(size_t(O * C), 12), ws).to(t);
      Tensor b = f64v(rand_vals(size_t(O), 13), {O}).to(t);
      Tensor y = rank == 1   ? F::conv1d(x, w, b, stride)
                 : rank == 2 ? F::conv2d(x, w, b, stride)
                             : F::conv3d(x, w, b, stride);
      ASSERT_EQ(y.shape(), ys);
      auto xv = x.to(DType::F64).to_vector<double>(), wv = w.to(DType::F64).to_vector<double>();
      auto bv = b.to(DType::F64).to_vector<double>();
      std::vector<double> want(static_cast<size_t>(yn));
      const int64_t in_px = xn / (N * C), out_px = yn / (N * O);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o)
          for (int64_t p = 0; p < out_px; ++p) {
            // The output pixel's coordinates, times the strides, index the input pixel.
            int64_t rest = p, at = 0, scale = 1;
            for (int64_t d = rank - 1; d >= 0; --d) {
              const int64_t osz = ys[size_t(2 + d)], coord = rest % osz;
              rest /= osz;
              at += coord * stride[size_t(d)] * scale;
              scale *= xs[size_t(2 + d)];
            }
            double acc = bv[size_t(o)];
            for (int64_t c = 0; c < C; ++c)
              acc += wv[size_t(o * C + c)] * xv[size_t((n * C + c) * in_px + at)];
            want[size_t((n * O + o) * out_px + p)] = acc;
          }
      expect_values(y.to(DType::F64), ys, want, t == DType::BF16 ? 2e-2 : 2e-5,
                    "rank " + std::to_string(rank) + " " + std::string(dtype_name(t)));
    }
  }
}

const std::vector<Conv2dCase> kTransposedCases = {
    {2, 3, 4, 5, 2, 3, 3},
    {1, 4, 3, 4, 6, 3, 2, 2, 3, 1, 0, 1, 1, 2, 1, 2},  // stride, padding, groups, output_padding
    {2, 2, 3, 3, 3, 2, 3, 2, 1, 0, 1, 2, 2, 1, 1, 0},  // dilation 2 with output_padding 1 < 2
};

TEST(ConvTranspose2d, MatchesScatterReference) {
  for (const auto& c : kTransposedCases)
    for (DType dt : {DType::F64, DType::F32}) {
      Tensor x = f64v(rand_vals(size_t(c.N * c.C * c.H * c.W), 9), {c.N, c.C, c.H, c.W}).to(dt);
      Tensor w = f64v(rand_vals(size_t(c.C * (c.O / c.groups) * c.KH * c.KW), 10),
                      {c.C, c.O / c.groups, c.KH, c.KW}).to(dt);
      Tensor b = f64v(rand_vals(size_t(c.O), 11), {c.O}).to(dt);
      Tensor y = F::conv_transpose2d(x, w, b, {c.sh, c.sw}, {c.ph, c.pw}, {c.oph, c.opw},
                                     c.groups, {c.dh, c.dw});
      auto ref = ref_conv_transpose2d(c, x.to(DType::F64).to_vector<double>(),
                                      w.to(DType::F64).to_vector<double>(),
                                      b.to(DType::F64).to_vector<double>());
      Shape shape{c.N, c.O, conv_t_out(c.H, c.KH, c.sh, c.ph, c.dh, c.oph),
                  conv_t_out(c.W, c.KW, c.sw, c.pw, c.dw, c.opw)};
      expect_values(y.to(DType::F64), shape, ref, dt == DType::F64 ? 1e-12 : 2e-5);
    }
}

TEST(ConvGrad, GradcheckPlainStridedDilatedGrouped) {
  Tensor x = leaf({2, 4, 6, 5}, 12), w = leaf({4, 2, 3, 2}, 13), b = leaf({4}, 14);
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::conv2d(in[0], in[1], in[2], {2, 1}, std::vector<int64_t>{1, 0}, {1, 2}, 2); },
      (V{x, w, b}));
  Tensor x1 = leaf({2, 3, 9}, 15), w1 = leaf({2, 3, 3}, 16);
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::conv1d(in[0], in[1], Tensor(), {3}, 2, {2}); },
                        (V{x1, w1}));
  Tensor w_same = leaf({2, 3, 4}, 17);
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::conv1d(in[0], in[1], Tensor(), {1}, "same"); },
                        (V{x1, w_same}));
}

TEST(ConvGrad, GradcheckTransposed) {
  Tensor x = leaf({2, 4, 3, 3}, 18), w = leaf({4, 3, 3, 2}, 19), b = leaf({6}, 20);
  KILN_EXPECT_GRADCHECK(
      [](const V& in) {
        return F::conv_transpose2d(in[0], in[1], in[2], {2, 3}, {1, 0}, {1, 2}, 2, {1, 1});
      },
      (V{x, w, b}));
  Tensor x1 = leaf({1, 2, 5}, 21), w1 = leaf({2, 2, 3}, 22);
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::conv_transpose1d(in[0], in[1], Tensor(), {2}, {1}, {0}, 1, {2}); },
      (V{x1, w1}));
}

TEST(ConvGrad, GradgradcheckThroughWeightGradient) {
  Tensor x = leaf({2, 2, 5, 4}, 23), w = leaf({3, 2, 2, 3}, 24), b = leaf({3}, 25);
  auto r = autograd::gradgradcheck(
      [](const V& in) { return F::conv2d(in[0], in[1], in[2], {2, 1}, std::vector<int64_t>{1, 1}); },
      V{x, w, b});
  EXPECT_TRUE(r.ok) << r.message;
  Tensor xt = leaf({1, 2, 3, 3}, 26), wt = leaf({2, 2, 2, 2}, 27);
  auto rt = autograd::gradgradcheck(
      [](const V& in) { return F::conv_transpose2d(in[0], in[1], Tensor(), {2}, {0}, {1}); },
      V{xt, wt});
  EXPECT_TRUE(rt.ok) << rt.message;
}

TEST(ConvErrors, BadArgumentsAreClearErrors) {
  Tensor x = zeros({1, 3, 5, 5}), w = zeros({4, 3, 3, 3});
  EXPECT_THROW(F::conv2d(x, zeros({4, 2, 3, 3})), Error);                 // channel mismatch
  EXPECT_THROW(F::conv2d(zeros({1, 3, 2, 2}), w), Error);                 // kernel too large
  EXPECT_THROW(F::conv2d(x, w, Tensor(), {2}, "same"), ValueError);       // same + stride
  EXPECT_THROW(F::conv2d(x, w, Tensor(), {1}, "full"), ValueError);       // unknown mode
  EXPECT_THROW(F::conv2d(x, w, zeros({3})), Error);                       // bias size
  EXPECT_THROW(F::conv2d(x, zeros({4, 1, 3, 3}), Tensor(), {1}, 0, {1}, 2), Error);  // 3 % 2
  EXPECT_THROW(F::conv2d(x, w, Tensor(), {0}), Error);                    // stride 0
  EXPECT_THROW(F::conv2d(x, w, Tensor(), {1}, -1), Error);                // negative padding
  EXPECT_THROW(F::conv2d(x.to(DType::F64), w), Error);                    // dtype mismatch
  EXPECT_THROW(F::conv2d(zeros({3, 5}), w), ShapeError);                  // rank
  EXPECT_THROW(F::conv2d(x.to(DType::I64), w.to(DType::I64)), Error); // integer
  EXPECT_THROW(F::conv_transpose2d(zeros({1, 4, 3, 3}), zeros({4, 2, 3, 3}), Tensor(), {2}, {0},
                                   {2}),
               Error);  // output_padding >= stride
  try {
    F::conv2d(x, zeros({4, 2, 3, 3}));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected input[1, 3, 5, 5] to have 2 channels"),
              std::string::npos)
        << e.what();
  }
}

TEST(ConvLayers, ParametersInitAndForward) {
  manual_seed(3);
  Conv2d conv(4, 6, {3, 2}, {.stride = {2}, .padding = {1}, .groups = 2});
  auto sd = conv.state_dict();
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd.at("weight").shape(), (Shape{6, 2, 3, 2}));
  EXPECT_EQ(sd.at("bias").shape(), (Shape{6}));
  const double bound = 1.0 / std::sqrt(2.0 * 3 * 2);  // 1/sqrt(fan_in)
  EXPECT_LE(max(abs(conv.weight)).item<double>(), bound);
  EXPECT_LE(max(abs(conv.bias)).item<double>(), bound);
  Tensor x = randn({2, 4, 7, 5});
  Tensor y = conv(x);
  Tensor ref = F::conv2d(x, conv.weight, conv.bias, {2}, 1, {1}, 2);
  EXPECT_EQ(max(abs(y - ref)).item<double>(), 0.0);
  ConvTranspose2d up(6, 3, {2}, {.stride = {2}, .bias = false});
  EXPECT_EQ(up.weight.shape(), (Shape{6, 3, 2, 2}));
  EXPECT_FALSE(up.bias.defined());
  EXPECT_EQ(up(y).shape(), (Shape{2, 3, 8, 6}));
  Conv1d c1(3, 5, {3}, {.padding = "same"});
  EXPECT_EQ(c1(randn({2, 3, 9})).shape(), (Shape{2, 5, 9}));
  EXPECT_THROW(Conv2d(3, 4, {3}, {.groups = 2}), ValueError);
  EXPECT_NE(conv.str().find("Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 2)"), std::string::npos)
      << conv.str();
}

}  // namespace
}  // namespace kiln::nn
