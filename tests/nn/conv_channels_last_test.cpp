// Channels-last (NHWC-strided [N, C, H, W]) tensors: convolution reads them in place through
// oneDNN's nhwc kernels (kiln's kernel through contiguous copies when oneDNN is off: the
// isa_* CTest reruns) and returns channels-last results; pointwise ops and pooling keep the
// layout; autograd flows through; Tensor::contiguous(ChannelsLast) / is_contiguous. Values
// are checked against the float64 direct convolution of conv_ref.h.
#include <optional>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/backends/cpu/onednn.h"
#include "kiln/nn/conv.h"
#include "nn/conv_ref.h"
#include "nn/nn_test_util.h"

namespace kiln::nn::test {
namespace {

namespace F = functional;

bool is_cl(const Tensor& t) {
  return !t.is_contiguous() && t.is_contiguous(MemoryFormat::ChannelsLast);
}

void check_case(const Conv2dCase& c, DType dt, bool cl_weight, uint32_t seed) {
  const std::string what = "groups " + std::to_string(c.groups) + " stride " +
                           std::to_string(c.sh) + " " + std::string(dtype_name(dt)) +
                           (cl_weight ? " cl weight" : "");
  auto xv = rand_vals(size_t(c.N * c.C * c.H * c.W), seed);
  auto wv = rand_vals(size_t(c.O * (c.C / c.groups) * c.KH * c.KW), seed + 1);
  auto bv = rand_vals(size_t(c.O), seed + 2);
  Tensor x = f64(xv, {c.N, c.C, c.H, c.W}).to(dt);
  Tensor w = f64(wv, {c.O, c.C / c.groups, c.KH, c.KW}).to(dt);
  Tensor b = f64(bv, {c.O}).to(dt);
  // Reference on the values the kernels see (rounded to dt).
  auto ref = ref_conv2d(c, x.to(DType::F64).to_vector<double>(), w.to(DType::F64).to_vector<double>(),
                        b.to(DType::F64).to_vector<double>());
  Tensor xcl = x.contiguous(MemoryFormat::ChannelsLast);
  ASSERT_TRUE(is_cl(xcl)) << what;
  if (cl_weight) w = w.contiguous(MemoryFormat::ChannelsLast);
  Tensor y = F::conv2d(xcl, w, b, {c.sh, c.sw}, std::vector<int64_t>{c.ph, c.pw}, {c.dh, c.dw},
                       c.groups);
  const Shape out{c.N, c.O, conv_out(c.H, c.KH, c.sh, c.ph, c.dh), conv_out(c.W, c.KW, c.sw, c.pw, c.dw)};
  EXPECT_TRUE(is_cl(y)) << what << ": the result should be channels-last";
  expect_values(y.to(DType::F64), out, ref, dt == DType::BF16 ? 3e-2 : 2e-5, what);
}

TEST(ConvChannelsLast, PlainGroupedDepthwiseStridedFloatAndBfloat16) {
  uint32_t seed = 1;
  for (DType dt : {DType::F32, DType::BF16})
    for (bool cl_weight : {false, true}) {
      check_case({2, 16, 9, 11, 24, 3, 3, 1, 1, 1, 1}, dt, cl_weight, seed++);          // 3x3
      check_case({2, 16, 9, 11, 32, 1, 1}, dt, cl_weight, seed++);                      // 1x1
      check_case({1, 16, 12, 10, 16, 3, 3, 2, 2, 1, 1, 1, 1, 4}, dt, cl_weight, seed++);  // grouped
      check_case({1, 16, 12, 10, 16, 3, 3, 1, 1, 2, 2, 2, 2, 16}, dt, cl_weight, seed++); // depthwise
      check_case({2, 3, 15, 13, 8, 7, 7, 2, 2, 3, 3}, dt, cl_weight, seed++);           // first layer
    }
}

// Channels-last inputs whose outputs have one pixel (ResNet-50's last stride-2 layers on 32x32
// images): the output is both layouts at once, and oneDNN still reads the input in place.
// These used to go through contiguous copies of input and weight made per call (3.4 ms
// against 45 us), so oneDNN packed a temporary weight each time. The packed-weight count
// tells the paths apart: two live weights used in turn stay packed (2); per-call copies
// leave one, the second packing dropping the freed first copy.
TEST(ConvChannelsLast, OnePixelOutputsUseTheWeightsInPlace) {
  uint32_t seed = 80;
  for (DType dt : {DType::F32, DType::BF16}) {
    const bool onednn = cpu::onednn_enabled() &&
                        (dt == DType::F32 || cpu::isa_level() >= cpu::IsaLevel::Avx512Vnni);
    for (const Conv2dCase& c : {Conv2dCase{1, 32, 2, 2, 48, 3, 3, 2, 2, 1, 1},  // 3x3 stride 2
                                Conv2dCase{2, 32, 2, 2, 64, 1, 1, 2, 2}}) {     // 1x1 stride 2
      const std::string what = std::string(dtype_name(dt)) + " kernel " + std::to_string(c.KH);
      Tensor x = f64(rand_vals(size_t(c.N * c.C * c.H * c.W), seed++), {c.N, c.C, c.H, c.W})
                     .to(dt)
                     .contiguous(MemoryFormat::ChannelsLast);
      Tensor w = f64(rand_vals(size_t(c.O * c.C * c.KH * c.KW), seed++), {c.O, c.C, c.KH, c.KW})
                     .to(dt);
      Tensor w2 = mul(w, w);
      cpu::onednn_clear_packed_weights();
      for (const Tensor& weight : {w, w2}) {
        auto ref = ref_conv2d(c, x.to(DType::F64).to_vector<double>(),
                              weight.to(DType::F64).to_vector<double>(), {});
        Tensor y = F::conv2d(x, weight, Tensor(), {c.sh, c.sw}, std::vector<int64_t>{c.ph, c.pw});
        expect_values(y.to(DType::F64), {c.N, c.O, 1, 1}, ref, dt == DType::BF16 ? 3e-2 : 2e-5,
                      what);
      }
      EXPECT_EQ(cpu::onednn_packed_weight_count(), onednn ? 2u : 0u) << what;
    }
  }
}

TEST(ConvChannelsLast, PointwiseOpsAndPoolingKeepTheLayout) {
  Tensor x = f64(rand_vals(2 * 8 * 6 * 5, 40), {2, 8, 6, 5}).to(DType::F32);
  Tensor xcl = x.contiguous(MemoryFormat::ChannelsLast);
  Tensor bias = f64(rand_vals(8, 41), {8, 1, 1}).to(DType::F32);
  auto same = [](const Tensor& a, const Tensor& b) {
    return a.to(DType::F64).to_vector<double>() == b.to(DType::F64).to_vector<double>();
  };
  EXPECT_TRUE(is_cl(relu(xcl)));
  EXPECT_TRUE(same(relu(xcl), relu(x)));
  // The vectorised unary kernels run over the dense channels-last block as a flat array.
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor a = x.to(dt), acl = a.contiguous(MemoryFormat::ChannelsLast);
    EXPECT_TRUE(is_cl(gelu(acl)) && same(gelu(acl), gelu(a))) << dtype_name(dt);
    EXPECT_TRUE(is_cl(exp(acl)) && same(exp(acl), exp(a))) << dtype_name(dt);
    EXPECT_TRUE(is_cl(silu(acl)) && same(silu(acl), silu(a))) << dtype_name(dt);
  }
  EXPECT_TRUE(is_cl(add(xcl, bias)));
  EXPECT_TRUE(same(add(xcl, bias), add(x, bias)));
  EXPECT_TRUE(is_cl(mul(xcl, xcl)));
  // Operands of the same shape in both layouts: the first decides (as PyTorch, decision 0129).
  EXPECT_TRUE(is_cl(add(xcl, x)));
  EXPECT_TRUE(add(x, xcl).is_contiguous());
  EXPECT_TRUE(same(add(xcl, x), add(x, x)));
  EXPECT_TRUE(same(add(x, xcl), add(x, x)));
  Tensor p = F::max_pool2d(xcl, {3, 3}, {2, 2}, {1, 1});
  EXPECT_TRUE(is_cl(p));
  EXPECT_TRUE(same(p, F::max_pool2d(x, {3, 3}, {2, 2}, {1, 1})));
}

TEST(ConvChannelsLast, MaxPoolInPlaceMatchesThePlanarKernel) {
  auto v = rand_vals(2 * 12 * 9 * 10, 45);
  v[5] = std::nan("");                                       // NaN wins its windows
  for (size_t i = 100; i < 112; ++i) v[i] = -INFINITY;       // all -inf windows: first tap
  for (DType dt : {DType::F32, DType::BF16, DType::F64}) {
    Tensor x = f64(v, {2, 12, 9, 10}).to(dt);
    Tensor xcl = x.contiguous(MemoryFormat::ChannelsLast);
    struct P { F::IntList k, s, p, d; bool ceil; };
    for (const P& c : {P{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false}, P{{2, 3}, {1, 2}, {0, 1}, {2, 1}, true},
                       P{{3, 3}, {3, 3}, {1, 1}, {2, 2}, true}}) {
      auto [a, ai] = F::max_pool2d_with_indices(x, c.k, c.s, c.p, c.d, c.ceil);
      auto [b, bi] = F::max_pool2d_with_indices(xcl, c.k, c.s, c.p, c.d, c.ceil);
      EXPECT_TRUE(is_cl(b) && is_cl(bi)) << dtype_name(dt);
      auto av = a.to(DType::F64).to_vector<double>(), bv = b.to(DType::F64).to_vector<double>();
      ASSERT_EQ(av.size(), bv.size());
      for (size_t i = 0; i < av.size(); ++i)
        ASSERT_TRUE(av[i] == bv[i] || (std::isnan(av[i]) && std::isnan(bv[i]))) << i;
      EXPECT_EQ(ai.to_vector<int64_t>(), bi.to_vector<int64_t>()) << dtype_name(dt);
    }
  }
}

// Average pooling of a channels-last input runs in place into a channels-last result: the
// same double sums in the same tap order as the planar kernel, so equal to it exactly, with
// padding, ceil mode, count_include_pad off and a divisor override; 12 channels (one vector
// of eight and a scalar tail) and 35 (two of sixteen, a tail of three).
TEST(ConvChannelsLast, AvgPoolInPlaceMatchesThePlanarKernel) {
  auto v = rand_vals(2 * 35 * 9 * 10, 47);
  for (int64_t channels : {12, 35}) {
    for (DType dt : {DType::F32, DType::BF16, DType::F64}) {
      Tensor x = f64(std::vector<double>(v.begin(), v.begin() + 2 * channels * 90),
                     {2, channels, 9, 10}).to(dt);
      Tensor xcl = x.contiguous(MemoryFormat::ChannelsLast);
      struct P { F::IntList k, s, p; bool ceil, include_pad; std::optional<int64_t> divisor; };
      for (const P& c : {P{{3, 3}, {2, 2}, {1, 1}, false, true, {}},
                         P{{2, 3}, {1, 2}, {0, 1}, true, false, {}},
                         P{{3, 3}, {3, 3}, {1, 1}, true, true, {}},
                         P{{2, 2}, {2, 2}, {0, 0}, false, true, 3}}) {
        Tensor a = F::avg_pool2d(x, c.k, c.s, c.p, c.ceil, c.include_pad, c.divisor);
        Tensor b = F::avg_pool2d(xcl, c.k, c.s, c.p, c.ceil, c.include_pad, c.divisor);
        EXPECT_TRUE(is_cl(b)) << dtype_name(dt);
        EXPECT_EQ(a.to(DType::F64).to_vector<double>(), b.to(DType::F64).to_vector<double>())
            << dtype_name(dt);
      }
    }
  }
}

// Planar inputs with 16+ channels are pooled channels-last and copied back: values and
// indices against a float64 reference of PyTorch's rule (first maximum; NaN wins, the last
// one; a window without an in-range tap gives -inf at its first tap stepped into range). 20
// channels: the ISA's vector form for 16 (8 + 8 on AVX2) and the scalar loop for the rest.
TEST(ConvChannelsLast, PlanarMaxPoolWithManyChannelsAgainstReference) {
  const int64_t N = 2, C = 20, H = 9, W = 10;
  auto v = rand_vals(size_t(N * C * H * W), 46);
  v[5] = std::nan("");
  v[7] = std::nan("");
  for (size_t i = 300; i < 330; ++i) v[i] = -INFINITY;
  for (size_t i = 400; i < 460; ++i) v[i] = 0.75;  // ties: the first tap of the maximum wins
  for (size_t i = 2 * 90 + 3; i < 20 * 90; i += 90) v[i] = std::nan("");  // NaN in every plane
  struct P { F::IntList k, s, p, d; bool ceil; };
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor x = f64(v, {N, C, H, W}).to(dt);
    const std::vector<double> xv = x.to(DType::F64).to_vector<double>();
    for (const P& c : {P{{3, 3}, {2, 2}, {1, 1}, {1, 1}, false}, P{{2, 3}, {1, 2}, {0, 1}, {2, 1}, true},
                       P{{3, 3}, {3, 3}, {1, 1}, {2, 2}, true}}) {
      auto [y, yi] = F::max_pool2d_with_indices(x, c.k, c.s, c.p, c.d, c.ceil);
      ASSERT_TRUE(y.is_contiguous() && yi.is_contiguous());
      const int64_t OH = y.size(2), OW = y.size(3);
      const std::vector<double> got = y.to(DType::F64).to_vector<double>();
      const std::vector<int64_t> got_i = yi.to_vector<int64_t>();
      for (int64_t plane = 0; plane < N * C; ++plane)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t sh = oh * c.s[0] - c.p[0], sw = ow * c.s[1] - c.p[1];
            double best = 0;
            int64_t at = -1;
            for (int64_t jh = 0; jh < c.k[0]; ++jh)
              for (int64_t jw = 0; jw < c.k[1]; ++jw) {
                const int64_t h = sh + jh * c.d[0], w = sw + jw * c.d[1];
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                const double t = xv[size_t(plane * H * W + h * W + w)];
                if (at < 0 || t > best || std::isnan(t)) best = t, at = h * W + w;
              }
            if (at < 0) {
              int64_t fh = sh, fw = sw;
              while (fh < 0) fh += c.d[0];
              while (fw < 0) fw += c.d[1];
              best = -INFINITY;
              at = fh * W + fw;
            }
            const size_t o = size_t((plane * OH + oh) * OW + ow);
            ASSERT_TRUE(got[o] == best || (std::isnan(got[o]) && std::isnan(best)))
                << dtype_name(dt) << " at " << o;
            ASSERT_EQ(got_i[o], at) << dtype_name(dt) << " at " << o;
          }
    }
  }
}

TEST(ConvChannelsLast, GradientsMatchTheContiguousLayout) {
  const Conv2dCase c{2, 6, 7, 8, 10, 3, 3, 1, 1, 1, 1};
  auto xv = rand_vals(size_t(2 * 6 * 7 * 8), 50), wv = rand_vals(size_t(10 * 6 * 9), 51);
  Tensor grads[2][2];
  for (int cl = 0; cl < 2; ++cl) {
    Tensor x = f64(xv, {2, 6, 7, 8}).to(DType::F32), w = f64(wv, {10, 6, 3, 3}).to(DType::F32);
    if (cl) x = x.contiguous(MemoryFormat::ChannelsLast);
    autograd::set_requires_grad(x);
    autograd::set_requires_grad(w);
    Tensor y = F::max_pool2d(F::conv2d(x, w, Tensor(), {1, 1}, std::vector<int64_t>{1, 1}),
                             {2, 2});
    backward(sum(mul(y, y)));
    grads[cl][0] = autograd::grad(x);
    grads[cl][1] = autograd::grad(w);
  }
  for (int k = 0; k < 2; ++k)
    expect_values(grads[1][k].to(DType::F64), grads[0][k].shape(),
                  grads[0][k].to(DType::F64).to_vector<double>(), 1e-4, k ? "dW" : "dx");
}

TEST(ConvChannelsLast, TransposedConvolutionReadsChannelsLast) {
  Tensor x = f64(rand_vals(1 * 8 * 5 * 6, 60), {1, 8, 5, 6}).to(DType::F32);
  Tensor w = f64(rand_vals(8 * 4 * 3 * 3, 61), {8, 4, 3, 3}).to(DType::F32);
  Tensor plain = F::conv_transpose2d(x, w, Tensor(), {2, 2}, {1, 1});
  Tensor cl = F::conv_transpose2d(x.contiguous(MemoryFormat::ChannelsLast), w, Tensor(), {2, 2}, {1, 1});
  expect_values(cl.to(DType::F64), plain.shape(), plain.to(DType::F64).to_vector<double>(), 1e-5);
}

TEST(ConvChannelsLast, ContiguousAndIsContiguous) {
  Tensor x = f64(rand_vals(2 * 3 * 4 * 5, 70), {2, 3, 4, 5});
  Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
  EXPECT_EQ(cl.strides(), (Strides{60, 1, 15, 3}));
  EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_FALSE(cl.is_contiguous());
  EXPECT_EQ(cl.to_vector<double>(), x.to_vector<double>());
  EXPECT_TRUE(cl.contiguous(MemoryFormat::ChannelsLast).is_same(cl));
  EXPECT_EQ(cl.contiguous().strides(), x.strides());
  // One channel: both layouts at once, as PyTorch.
  Tensor one = f64(rand_vals(2 * 1 * 4 * 5, 71), {2, 1, 4, 5});
  EXPECT_TRUE(one.is_contiguous(MemoryFormat::ChannelsLast));
  try {
    f64({1, 2, 3}, {3}).contiguous(MemoryFormat::ChannelsLast);
    ADD_FAILURE() << "no error for a 1-D tensor";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::nn::test
