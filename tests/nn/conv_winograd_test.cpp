// float32 3x3 stride-1 convolutions large enough for oneDNN's Winograd kernels (decision 0030):
// with Winograd allowed and switched off, NCHW and channels-last, with and without bias and
// padding, against float64 direct sums (conv_ref.h). Where Winograd runs (oneDNN at AVX-512),
// the two settings must give different bits, or the switch would not be tested; without
// oneDNN, or capped below AVX-512, both runs take the direct path.
#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/backends/cpu/onednn.h"
#include "kiln/nn/conv.h"
#include "nn/conv_ref.h"
#include "nn/nn_test_util.h"

namespace kiln::nn::test {
namespace {

namespace F = functional;

// Restores the Winograd switch at the end of a test.
struct WinogradSetting {
  bool before = cpu::onednn_winograd_allowed();
  ~WinogradSetting() { cpu::set_onednn_winograd_allowed(before); }
};

bool winograd_can_run() {
  return cpu::onednn_enabled() && cpu::isa_level() >= cpu::IsaLevel::Avx512;
}

// 2 x 32 x 24 x 20 -> 48 channels: 26.5 MFLOP, above the 16 MFLOP where Winograd starts.
const Conv2dCase kPadded{2, 32, 24, 20, 48, 3, 3, 1, 1, 1, 1};
const Conv2dCase kValid{2, 64, 30, 30, 16, 3, 3};  // no padding, 28 x 28 out: 28.9 MFLOP

struct ConvResult {
  Tensor y;
  std::vector<double> ref;
  Shape shape;
};

ConvResult run(const Conv2dCase& c, bool bias, bool channels_last, uint32_t seed) {
  Tensor x = f64(rand_vals(size_t(c.N * c.C * c.H * c.W), seed), {c.N, c.C, c.H, c.W})
                 .to(DType::F32);
  Tensor w = f64(rand_vals(size_t(c.O * c.C * 9), seed + 1), {c.O, c.C, 3, 3}).to(DType::F32);
  Tensor b = bias ? f64(rand_vals(size_t(c.O), seed + 2), {c.O}).to(DType::F32) : Tensor();
  std::vector<double> bv = bias ? b.to(DType::F64).to_vector<double>() : std::vector<double>{};
  ConvResult r;
  r.ref = ref_conv2d(c, x.to(DType::F64).to_vector<double>(), w.to(DType::F64).to_vector<double>(),
                     bv);
  if (channels_last) {
    x = x.contiguous(MemoryFormat::ChannelsLast);
    w = w.contiguous(MemoryFormat::ChannelsLast);
  }
  r.y = F::conv2d(x, w, b, {1, 1}, std::vector<int64_t>{c.ph, c.pw}, {1, 1}, 1);
  r.shape = {c.N, c.O, conv_out(c.H, 3, 1, c.ph, 1), conv_out(c.W, 3, 1, c.pw, 1)};
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.contiguous().to_vector<float>() == b.contiguous().to_vector<float>();
}

TEST(ConvWinograd, AllowedAndSwitchedOffBothMatchTheFloat64Sum) {
  WinogradSetting restore;
  for (const Conv2dCase& c : {kPadded, kValid})
    for (bool bias : {true, false})
      for (bool channels_last : {false, true}) {
        const std::string what = std::string(bias ? "bias" : "no bias") +
                                 (channels_last ? ", channels-last" : ", NCHW") +
                                 (c.ph ? ", padded" : ", unpadded");
        cpu::set_onednn_winograd_allowed(true);
        ConvResult fast = run(c, bias, channels_last, 7);
        // Winograd's transforms add rounding: a few float32 ulps of the output's scale.
        expect_values(fast.y.to(DType::F64), fast.shape, fast.ref, 2e-5, "Winograd, " + what);
        cpu::set_onednn_winograd_allowed(false);
        ConvResult direct = run(c, bias, channels_last, 7);
        expect_values(direct.y.to(DType::F64), direct.shape, direct.ref, 2e-5, "direct, " + what);
        if (winograd_can_run())
          EXPECT_FALSE(same_bits(fast.y, direct.y)) << "the switch changed nothing, " << what;
        else
          EXPECT_TRUE(same_bits(fast.y, direct.y)) << what;
        if (channels_last) EXPECT_TRUE(fast.y.is_contiguous(MemoryFormat::ChannelsLast)) << what;
      }
}

// An infinity in the input reaches only the outputs whose 3x3 window holds it, as with the
// direct kernel: Winograd's tile transforms must not spread it (or NaN) over the whole tile.
TEST(ConvWinograd, AnInfinityStaysInItsWindow) {
  WinogradSetting restore;
  const Conv2dCase& c = kPadded;
  std::vector<double> xv = rand_vals(size_t(c.N * c.C * c.H * c.W), 9);
  const int64_t r = 10, q = 7;  // the infinity at [0, 3, r, q]
  xv[size_t((3 * c.H + r) * c.W + q)] = INFINITY;
  Tensor x = f64(xv, {c.N, c.C, c.H, c.W}).to(DType::F32);
  Tensor w = f64(rand_vals(size_t(c.O * c.C * 9), 10), {c.O, c.C, 3, 3}).to(DType::F32);
  for (bool allow : {true, false}) {
    cpu::set_onednn_winograd_allowed(allow);
    const std::vector<double> y =
        F::conv2d(x, w, Tensor(), {1, 1}, std::vector<int64_t>{1, 1}, {1, 1}, 1)
            .to(DType::F64)
            .to_vector<double>();
    int64_t non_finite = 0;
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t o = 0; o < c.O; ++o)
        for (int64_t i = 0; i < c.H; ++i)
          for (int64_t j = 0; j < c.W; ++j) {
            const bool in_window = n == 0 && std::abs(i - r) <= 1 && std::abs(j - q) <= 1;
            const double v = y[size_t(((n * c.O + o) * c.H + i) * c.W + j)];
            if (!std::isfinite(v)) ++non_finite;
            if (!in_window)
              ASSERT_TRUE(std::isfinite(v)) << (allow ? "Winograd" : "direct") << " at [" << n
                                            << ", " << o << ", " << i << ", " << j << "]";
          }
    EXPECT_EQ(non_finite, c.O * 9) << (allow ? "Winograd" : "direct");
  }
}

TEST(ConvWinograd, SmallLayersAndOtherShapesKeepTheDirectKernel) {
  WinogradSetting restore;
  // Below 16 MFLOP, stride 2, dilation 2, groups 2, 8 input channels, float64: never Winograd,
  // so allowing it changes no bit.
  struct Case {
    Conv2dCase c;
    DType dtype;
  };
  const std::vector<Case> cases = {
      {{1, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1}, DType::F32},
      {{2, 32, 24, 20, 48, 3, 3, 2, 2, 1, 1}, DType::F32},
      {{2, 32, 24, 20, 48, 3, 3, 1, 1, 2, 2, 2, 2}, DType::F32},
      {{2, 32, 24, 20, 48, 3, 3, 1, 1, 1, 1, 1, 1, 2}, DType::F32},
      {{2, 8, 48, 40, 48, 3, 3, 1, 1, 1, 1}, DType::F32},
      {{2, 32, 24, 20, 48, 3, 3, 1, 1, 1, 1}, DType::F64},
  };
  for (const Case& k : cases) {
    const Conv2dCase& c = k.c;
    Tensor x = f64(rand_vals(size_t(c.N * c.C * c.H * c.W), 3), {c.N, c.C, c.H, c.W}).to(k.dtype);
    Tensor w = f64(rand_vals(size_t(c.O * (c.C / c.groups) * 9), 4), {c.O, c.C / c.groups, 3, 3})
                   .to(k.dtype);
    auto call = [&] {
      return F::conv2d(x, w, Tensor(), {c.sh, c.sw}, std::vector<int64_t>{c.ph, c.pw},
                       {c.dh, c.dw}, c.groups);
    };
    cpu::set_onednn_winograd_allowed(true);
    Tensor a = call();
    cpu::set_onednn_winograd_allowed(false);
    Tensor b = call();
    expect_values(a.to(DType::F64),
                  {c.N, c.O, conv_out(c.H, 3, c.sh, c.ph, c.dh), conv_out(c.W, 3, c.sw, c.pw, c.dw)},
                  ref_conv2d(c, x.to(DType::F64).to_vector<double>(),
                             w.to(DType::F64).to_vector<double>(), {}),
                  k.dtype == DType::F64 ? 1e-12 : 2e-5);
    EXPECT_TRUE(a.to(DType::F64).to_vector<double>() == b.to(DType::F64).to_vector<double>())
        << "channels " << c.C << ", stride " << c.sh << ", dilation " << c.dh << ", groups "
        << c.groups;
  }
}

// A weight being trained (requires grad, grad mode on) keeps the direct kernel: each optimizer
// step changes it, and oneDNN's transform into the Winograd domain would run on every forward
// (decision 0050). The same weight without grad mode takes Winograd where it can run.
TEST(ConvWinograd, AWeightBeingTrainedKeepsTheDirectKernel) {
  WinogradSetting restore;
  const Conv2dCase& c = kPadded;
  Tensor x = f64(rand_vals(size_t(c.N * c.C * c.H * c.W), 21), {c.N, c.C, c.H, c.W})
                 .to(DType::F32);
  Tensor w = f64(rand_vals(size_t(c.O * c.C * 9), 22), {c.O, c.C, 3, 3}).to(DType::F32);
  autograd::set_requires_grad(w);
  auto call = [&] {
    return F::conv2d(x, w, Tensor(), {1, 1}, std::vector<int64_t>{1, 1}, {1, 1}, 1);
  };
  cpu::set_onednn_winograd_allowed(false);
  const Tensor direct = autograd::detach(call());
  cpu::set_onednn_winograd_allowed(true);
  const Tensor training = autograd::detach(call());
  EXPECT_TRUE(same_bits(training, direct)) << "a trained weight took the Winograd kernel";
  Tensor inference;
  {
    autograd::NoGradGuard no_grad;
    inference = call();
  }
  const std::vector<double> wv = autograd::detach(w).to(DType::F64).to_vector<double>();
  const std::vector<double> ref = ref_conv2d(c, x.to(DType::F64).to_vector<double>(), wv, {});
  const Shape shape{c.N, c.O, c.H, c.W};
  expect_values(training.to(DType::F64), shape, ref, 2e-5, "grad mode");
  expect_values(inference.to(DType::F64), shape, ref, 2e-5, "no grad");
  if (winograd_can_run())
    EXPECT_FALSE(same_bits(inference, direct)) << "no grad: Winograd expected";
}

}  // namespace
}  // namespace kiln::nn::test
