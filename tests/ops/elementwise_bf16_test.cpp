// bfloat16 binary and ternary ops (the blocked float32 path of bf16_elementwise.h at the AVX2
// and AVX-512 levels, the generic loop at baseline; CTest reruns this suite at each level):
// every result must be exactly the float32 computation rounded once to bfloat16 (round to
// nearest even), in every layout the blocked path meets: contiguous, broadcast [C, 1, 1]
// along runs, channels-last with a per-channel operand, a transposed operand (strided
// fallback), runs shorter than a block, an output above the streaming-store size, in place.
// Also bfloat16 layer_norm / rms_norm (rows widened to float32) against float64 statistics.
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "kiln/ops/normalization.h"
#include "kiln/tensor/memory_format.h"
#include "kiln/tensor/streaming_store.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

// Round a float to bfloat16 (nearest even) and back, independently of kiln's converters.
double bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return double(r);
}

Tensor bf16_tensor(const std::vector<double>& v, const Shape& shape) {
  return tensor_from(v, shape).to(DType::BF16);  // values already bfloat16-exact
}

// Values already representable in bfloat16, in [lo, hi).
std::vector<double> bf16_values(size_t n, double lo, double hi, uint32_t seed) {
  std::vector<double> v = random_values(n, lo, hi, seed);
  for (double& x : v) x = bf16_round(float(x));
  return v;
}

// Exact comparison of a bfloat16 result with the expected values.
void expect_exact(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), DType::BF16) << what;
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_EQ(g[i], want[i]) << what << " at " << i;
}

TEST(ElementwiseLargeBfloat16, BinaryAndTernaryOpsRoundOnceInEveryLayout) {
  const int64_t n = 2, c = 40, h = 33, w = 29;  // 76,560 elements: threaded
  const Shape shape{n, c, h, w};
  const size_t count = size_t(n * c * h * w);
  std::vector<double> xv = bf16_values(count, -4, 4, 11), yv = bf16_values(count, 0.5, 3, 12);
  std::vector<double> cv = bf16_values(size_t(c), 0.25, 2, 13), dv = bf16_values(size_t(c), -1, 1, 14);
  Tensor x = bf16_tensor(xv, shape), y = bf16_tensor(yv, shape);
  Tensor ch = bf16_tensor(cv, {c, 1, 1}), ch2 = bf16_tensor(dv, {c, 1, 1});
  auto at_channel = [&](const std::vector<double>& v, size_t i) { return v[(i / size_t(h * w)) % size_t(c)]; };
  auto expect_each = [&](const Tensor& got, auto&& fn, const std::string& what) {
    std::vector<double> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = bf16_round(fn(i));
    expect_exact(got, want, what);
  };
  auto fx = [&](size_t i) { return float(xv[i]); };
  auto fy = [&](size_t i) { return float(yv[i]); };
  // Same shapes, contiguous.
  expect_each(add(x, y, 2), [&](size_t i) { return fx(i) + 2.0f * fy(i); }, "add alpha 2");
  expect_each(sub(x, y), [&](size_t i) { return fx(i) - fy(i); }, "sub");
  expect_each(mul(x, y), [&](size_t i) { return fx(i) * fy(i); }, "mul");
  expect_each(div(x, y), [&](size_t i) { return fx(i) / fy(i); }, "div");
  expect_each(maximum(x, y), [&](size_t i) { return std::max(fx(i), fy(i)); }, "maximum");
  // Ternary ops with two per-channel operands broadcast along the runs (eval batch norm).
  expect_each(addcmul(ch2, x, ch, 0.5),
              [&](size_t i) { return float(at_channel(dv, i)) + 0.5f * (fx(i) * float(at_channel(cv, i))); },
              "addcmul broadcast");
  expect_each(addcdiv(x, y, ch, -1.5),
              [&](size_t i) { return fx(i) + -1.5f * (fy(i) / float(at_channel(cv, i))); },
              "addcdiv broadcast");
  expect_each(lerp(x, y, ch),
              [&](size_t i) {
                const float a = fx(i), b = fy(i), t = float(at_channel(cv, i));
                return std::fabs(t) < 0.5f ? a + t * (b - a) : b - (b - a) * (1.0f - t);
              },
              "lerp broadcast weight");
  // Channels-last: the per-channel operand is unit-stride along the (channel) runs.
  Tensor xcl = x.contiguous(MemoryFormat::ChannelsLast);
  Tensor r = addcmul(ch2, xcl, ch);
  EXPECT_TRUE(r.is_contiguous(MemoryFormat::ChannelsLast));
  expect_each(r, [&](size_t i) { return float(at_channel(dv, i)) + fx(i) * float(at_channel(cv, i)); },
              "addcmul channels-last");
  expect_each(add(xcl, y), [&](size_t i) { return fx(i) + fy(i); }, "add channels-last + planar");
  // A transposed operand: byte strides along the run (the element-by-element fallback).
  Tensor yt = y.transpose(2, 3).contiguous().transpose(2, 3);
  expect_each(mul(x, yt), [&](size_t i) { return fx(i) * fy(i); }, "mul transposed operand");
  // Short runs below one block and below the threading threshold.
  std::vector<double> sv = bf16_values(37, -2, 2, 15);
  Tensor s = bf16_tensor(sv, {37});
  std::vector<double> want(37);
  for (size_t i = 0; i < 37; ++i) want[i] = bf16_round(float(sv[i]) * float(sv[i]) + float(sv[i]));
  expect_exact(addcmul(s, s, s), want, "addcmul 37 elements");
  // In place.
  Tensor z = x.clone();
  add_(z, y);
  expect_each(z, [&](size_t i) { return fx(i) + fy(i); }, "add_ in place");
}

// The register paths of sub / mul / div (two unit-stride arrays) and mul by one value
// (x * scale, scale * x): bit for bit the float32 op rounded once, signed zeros, infinities
// and NaN included (a +0.0 shift in place of -0.0 would turn -0 * 3 into +0).
TEST(ElementwiseLargeBfloat16, BinaryFastPathsKeepSignsAndSpecials) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  std::vector<double> xv = bf16_values(5000, -6, 6, 31), yv = bf16_values(5000, -3, 3, 32);
  const std::vector<double> sx = {0.0, -0.0, inf, -inf, nan, 1.5, -0.0, 0.0, 2.0, -inf};
  const std::vector<double> sy = {-0.0, 3.0, 0.0, -2.0, 1.0, 0.0, -0.0, -inf, nan, inf};
  for (size_t i = 0; i < sx.size(); ++i) xv[i * 97] = sx[i], yv[i * 97] = sy[i];
  Tensor x = bf16_tensor(xv, {50, 100}), y = bf16_tensor(yv, {50, 100});
  auto expect_bits = [&](const Tensor& got, auto&& fn, const std::string& what) {
    std::vector<double> g = got.to_vector<double>();
    ASSERT_EQ(g.size(), xv.size()) << what;
    for (size_t i = 0; i < g.size(); ++i) {
      const double want = bf16_round(fn(float(xv[i]), float(yv[i])));
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(g[i])) << what << " at " << i;
        continue;
      }
      ASSERT_EQ(g[i], want) << what << " at " << i << ": " << xv[i] << ", " << yv[i];
      ASSERT_EQ(std::signbit(g[i]), std::signbit(want)) << what << " sign at " << i;
    }
  };
  expect_bits(sub(x, y), [](float a, float b) { return a - b; }, "sub");
  expect_bits(mul(x, y), [](float a, float b) { return a * b; }, "mul");
  expect_bits(div(x, y), [](float a, float b) { return a / b; }, "div");
  expect_bits(sub(x, y, 2), [](float a, float b) { return a - 2.0f * b; }, "sub alpha 2");
  expect_bits(pow(x, 2.0), [](float a, float) { return a * a; }, "pow 2");
  for (double scale : {3.0, -0.125, 0.0, -0.0}) {
    Tensor sc = bf16_tensor({scale}, {});
    const float f = float(scale);
    expect_bits(mul(x, sc), [f](float a, float) { return a * f; }, "x * " + std::to_string(scale));
    expect_bits(mul(sc, x), [f](float a, float) { return f * a; }, std::to_string(scale) + " * x");
  }
  // Add / Sub of one value along the run (muladd_bf16 with a scale of +-1), both orders.
  for (double c : {3.0, -0.125, 0.0, -0.0, inf, nan}) {
    Tensor sc = bf16_tensor({c}, {});
    const float f = float(c);
    const std::string cs = std::to_string(c);
    expect_bits(add(x, sc), [f](float a, float) { return a + f; }, "x + " + cs);
    expect_bits(add(sc, x), [f](float a, float) { return f + a; }, cs + " + x");
    expect_bits(sub(x, sc), [f](float a, float) { return a - f; }, "x - " + cs);
    expect_bits(sub(sc, x), [f](float a, float) { return f - a; }, cs + " - x");
  }
  // A column broadcast along each row: x + y[:, :1] and y[:, :1] - x.
  const Tensor col = y.slice(1, 0, 1);
  for (bool is_add : {true, false}) {
    const std::vector<double> g = (is_add ? add(x, col) : sub(col, x)).to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) {
      const float a = float(xv[i]), c = float(yv[i / 100 * 100]);
      const double want = bf16_round(is_add ? a + c : c - a);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(g[i])) << i;
        continue;
      }
      ASSERT_EQ(g[i], want) << (is_add ? "x + col" : "col - x") << " at " << i;
      ASSERT_EQ(std::signbit(g[i]), std::signbit(want)) << i;
    }
  }
}

// addcmul(shift, x, scale) with value 1 and per-channel or single-value shift / scale (eval
// batch norm) takes VecMathF32::muladd_bf16 at the vector levels: conversions in registers,
// which must still give exactly float32's shift + x * scale rounded once, for planar
// (one value per run), channels-last (per-channel arrays), either operand order, a 0-dim
// shift, special values in x, and an output large enough for streaming stores. Also add of
// two same-layout arrays (VecMathF32::add_bf16).
TEST(ElementwiseLargeBfloat16, AddcmulPerChannelMulAdd) {
  // The larger image: 2 x 24 x h x h bfloat16 values just above kStreamingStoreBytes.
  const int64_t big = int64_t(std::sqrt(double(detail::kStreamingStoreBytes) / (2 * 24 * 2))) + 7;
  for (int64_t h : {int64_t(33), big}) {
    const int64_t n = 2, c = 24, w = h;
    const Shape shape{n, c, h, w};
    const size_t count = size_t(n * c * h * w);
    std::vector<double> xv = bf16_values(count, -6, 6, 31);
    xv[5] = NAN;
    xv[count / 2] = INFINITY;
    xv[count - 3] = -INFINITY;
    xv[7] = 1e-40;  // a denormal (bfloat16 shares float32's exponent range)
    xv[7] = bf16_round(float(xv[7]));
    std::vector<double> cv = bf16_values(size_t(c), -2, 2, 32), dv = bf16_values(size_t(c), -1, 1, 33);
    Tensor x = bf16_tensor(xv, shape);
    Tensor scale = bf16_tensor(cv, {c, 1, 1}), shift = bf16_tensor(dv, {c, 1, 1});
    auto want_for = [&](auto&& shift_of) {
      std::vector<double> want(count);
      for (size_t i = 0; i < count; ++i) {
        const size_t ch = (i / size_t(h * w)) % size_t(c);
        want[i] = bf16_round(float(shift_of(ch)) + float(xv[i]) * float(cv[ch]));
      }
      return want;
    };
    auto expect_same = [&](const Tensor& got, const std::vector<double>& want, const std::string& what) {
      std::vector<double> g = got.contiguous().to_vector<double>();
      ASSERT_EQ(g.size(), want.size()) << what;
      for (size_t i = 0; i < g.size(); ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(g[i])) << what << " at " << i;
          continue;
        }
        ASSERT_EQ(g[i], want[i]) << what << " at " << i;
      }
    };
    const std::string size = " h=" + std::to_string(h);
    const std::vector<double> per_channel = want_for([&](size_t ch) { return dv[ch]; });
    expect_same(addcmul(shift, x, scale), per_channel, "planar" + size);
    expect_same(addcmul(shift, scale, x), per_channel, "planar, x second" + size);
    Tensor xcl = x.contiguous(MemoryFormat::ChannelsLast);
    Tensor r = addcmul(shift, xcl, scale);
    EXPECT_TRUE(r.is_contiguous(MemoryFormat::ChannelsLast));
    expect_same(r, per_channel, "channels-last" + size);
    expect_same(addcmul(shift, scale, xcl), per_channel, "channels-last, x second" + size);
    // Residual adds (add_bf16): two same-layout arrays, specials included.
    std::vector<double> twice(count);
    for (size_t i = 0; i < count; ++i) twice[i] = bf16_round(float(xv[i]) + float(xv[i]));
    expect_same(add(x, x), twice, "add" + size);
    expect_same(add(xcl, xcl), twice, "add channels-last" + size);
    Tensor one_shift = bf16_tensor({0.375}, {});
    expect_same(addcmul(one_shift, xcl, scale), want_for([](size_t) { return 0.375; }),
                "channels-last, 0-dim shift" + size);
  }
}

TEST(ElementwiseLargeBfloat16, OutputsAboveTheStreamingStoreSize) {
  // About 2 MiB more bfloat16 values than the streaming-store size, at an odd offset inside a
  // larger buffer, with sentinels around.
  const int64_t len = detail::kStreamingStoreBytes / 2 + 1'000'003;
  std::vector<double> av = bf16_values(size_t(len), -8, 8, 21), bv = bf16_values(size_t(len), -8, 8, 22);
  Tensor a = bf16_tensor(av, {len}), b = bf16_tensor(bv, {len});
  Tensor got = mul(a, b);
  std::vector<double> want(static_cast<size_t>(len));
  for (size_t i = 0; i < want.size(); ++i) want[i] = bf16_round(float(av[i]) * float(bv[i]));
  expect_exact(got, want, "mul, above the streaming size");
  Tensor buf = full({len + 5}, 7.0, TensorOptions(DType::BF16));
  Tensor out = buf.narrow(0, 3, len);
  add_out(a, b, out);
  std::vector<double> g = buf.to_vector<double>();
  EXPECT_EQ(g[0], 7.0);
  EXPECT_EQ(g[1], 7.0);
  EXPECT_EQ(g[2], 7.0);
  EXPECT_EQ(g[size_t(len + 3)], 7.0);
  EXPECT_EQ(g[size_t(len + 4)], 7.0);
  for (size_t i = 0; i < size_t(len); ++i)
    ASSERT_EQ(g[i + 3], bf16_round(float(av[i]) + float(bv[i]))) << "add_out at " << i;
}

TEST(ElementwiseLargeBfloat16, Float32ConversionsRoundToNearestEven) {
  // Ties, values just either side of a tie, infinities, denormals and large magnitudes in a
  // threaded conversion; then the same values channels-last.
  const int64_t n = 2, c = 3, h = 150, w = 151;  // 135,900 elements
  std::vector<double> v = random_values(size_t(n * c * h * w), -1e3, 1e3, 41);
  const uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x7f800000u,
                               0xff800000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu, 0x00400000u};
  for (size_t i = 0; i < std::size(specials); ++i) {
    float f;
    std::memcpy(&f, &specials[i], 4);
    v[i * 997] = double(f);
  }
  Tensor x = tensor_from(v, {n, c, h, w}).to(DType::F32);
  std::vector<double> xf = x.to_vector<double>(), want(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) want[i] = bf16_round(float(xf[i]));
  Tensor y = x.to(DType::BF16);
  expect_exact(y, want, "float32 -> bfloat16");
  std::vector<double> back = y.to(DType::F32).to_vector<double>();
  for (size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], want[i]) << "bfloat16 -> float32 at " << i;
  Tensor ycl = x.contiguous(MemoryFormat::ChannelsLast).to(DType::BF16);
  EXPECT_TRUE(ycl.is_contiguous(MemoryFormat::ChannelsLast));
  expect_exact(ycl, want, "float32 -> bfloat16 channels-last");
  Tensor nan = full({70000}, std::nan(""), TensorOptions(DType::F32)).to(DType::BF16);
  EXPECT_TRUE(std::isnan(nan.to_vector<double>()[12345]));
}

TEST(NormBfloat16, LayerNormAndRmsNormAgainstFloat64) {
  // Rows of 768 (BERT) and 37 (a tail shorter than a vector), threaded and not.
  for (int64_t len : {int64_t(768), int64_t(37)}) {
    const int64_t rows = 130;
    std::vector<double> xv = bf16_values(size_t(rows * len), -3, 5, 31);
    std::vector<double> wv = bf16_values(size_t(len), 0.5, 1.5, 32), bv = bf16_values(size_t(len), -1, 1, 33);
    Tensor x = bf16_tensor(xv, {rows, len}), w = bf16_tensor(wv, {len}), b = bf16_tensor(bv, {len});
    auto [y, mean, rstd] = native_layer_norm(x, 1, w, b, 1e-5);
    auto [yr, rstd_r] = native_rms_norm(x, 1, w, 1e-6);
    ASSERT_EQ(y.dtype(), DType::BF16);
    ASSERT_EQ(mean.dtype(), DType::F32);
    std::vector<double> got = y.to_vector<double>(), got_r = yr.to_vector<double>();
    std::vector<double> m = mean.to_vector<double>(), rs = rstd.to_vector<double>();
    for (int64_t r = 0; r < rows; ++r) {
      double mu = 0, ms = 0, var = 0;
      for (int64_t i = 0; i < len; ++i) mu += xv[size_t(r * len + i)], ms += xv[size_t(r * len + i)] * xv[size_t(r * len + i)];
      mu /= double(len);
      ms /= double(len);
      for (int64_t i = 0; i < len; ++i) var += (xv[size_t(r * len + i)] - mu) * (xv[size_t(r * len + i)] - mu);
      var /= double(len);
      const double rstd_ref = 1.0 / std::sqrt(var + 1e-5), rms_ref = 1.0 / std::sqrt(ms + 1e-6);
      ASSERT_NEAR(m[size_t(r)], mu, 1e-5 * (1 + std::fabs(mu))) << "mean row " << r;
      ASSERT_NEAR(rs[size_t(r)], rstd_ref, 1e-5 * rstd_ref) << "rstd row " << r;
      for (int64_t i = 0; i < len; ++i) {
        const size_t at = size_t(r * len + i);
        const double want = (xv[at] - mu) * rstd_ref * wv[size_t(i)] + bv[size_t(i)];
        const double want_r = xv[at] * rms_ref * wv[size_t(i)];
        // One bfloat16 rounding of a float32 result: half an ulp (2^-9 relative) plus slack.
        ASSERT_NEAR(got[at], want, 4e-3 * std::fabs(want) + 1e-5) << "layer_norm len " << len << " at " << at;
        ASSERT_NEAR(got_r[at], want_r, 4e-3 * std::fabs(want_r) + 1e-5) << "rms_norm len " << len << " at " << at;
      }
    }
    // Bit for bit the float32 op on the widened values, rounded once (the write pass rounds
    // in registers; the float32 path writes float32).
    const Tensor xf = x.to(DType::F32), wf = w.to(DType::F32), bf = b.to(DType::F32);
    const std::vector<double> want_y =
        std::get<0>(native_layer_norm(xf, 1, wf, bf, 1e-5)).to(DType::BF16).to_vector<double>();
    const std::vector<double> want_yr =
        std::get<0>(native_rms_norm(xf, 1, wf, 1e-6)).to(DType::BF16).to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], want_y[i]) << "layer_norm len " << len << " at " << i;
      ASSERT_EQ(got_r[i], want_yr[i]) << "rms_norm len " << len << " at " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::test
