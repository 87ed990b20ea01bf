// Normalisation layers against float64 references computed here: LayerNorm, RMSNorm,
// GroupNorm, BatchNorm1d/2d (batch statistics, running statistics, eval).
#include "kiln/ops/normalization.h"
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;

// Normalises each consecutive group of `size` values (biased variance), then applies
// per-position affine values a[pos(i)], b[pos(i)].
std::vector<double> normalise_groups(const std::vector<double>& x, size_t size, double eps) {
  std::vector<double> y(x.size());
  for (size_t g = 0; g < x.size() / size; ++g) {
    double m = 0, v = 0;
    for (size_t i = 0; i < size; ++i) m += x[g * size + i];
    m /= double(size);
    for (size_t i = 0; i < size; ++i) v += (x[g * size + i] - m) * (x[g * size + i] - m);
    v /= double(size);
    for (size_t i = 0; i < size; ++i) y[g * size + i] = (x[g * size + i] - m) / std::sqrt(v + eps);
  }
  return y;
}

TEST(LayerNorm, ForwardMatchesReference) {
  LayerNorm ln({2, 3}, 1e-5, true, true, DType::F64);
  EXPECT_EQ(ln.weight.to_vector<double>(), std::vector<double>(6, 1.0));
  EXPECT_EQ(ln.bias.to_vector<double>(), std::vector<double>(6, 0.0));
  std::vector<double> w = rand_vals(6, 1, 0.5, 1.5), b = rand_vals(6, 2);
  set_values(ln.weight, w);
  set_values(ln.bias, b);
  std::vector<double> xv = rand_vals(24, 3, -2, 3);
  Tensor y = ln.forward(f64(xv, {4, 2, 3}));
  std::vector<double> ref = normalise_groups(xv, 6, 1e-5);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = ref[i] * w[i % 6] + b[i % 6];
  expect_values(y, {4, 2, 3}, ref, 1e-12);
  EXPECT_THROW(ln.forward(f64(xv, {4, 3, 2})), ShapeError);
  LayerNorm plain({3}, 1e-5, false, true, DType::F64);
  EXPECT_TRUE(plain.parameters().empty());
  expect_values(plain.forward(f64(xv, {8, 3})), {8, 3}, normalise_groups(xv, 3, 1e-5), 1e-12);
}

TEST(RMSNorm, ForwardMatchesReferenceWithDefaultAndGivenEps) {
  std::vector<double> xv = rand_vals(12, 4, -2, 2), w = rand_vals(4, 5, 0.5, 1.5);
  auto ref = [&](double eps) {
    std::vector<double> r(12);
    for (size_t row = 0; row < 3; ++row) {
      double ms = 0;
      for (size_t i = 0; i < 4; ++i) ms += xv[row * 4 + i] * xv[row * 4 + i];
      ms /= 4;
      for (size_t i = 0; i < 4; ++i) r[row * 4 + i] = xv[row * 4 + i] / std::sqrt(ms + eps) * w[i];
    }
    return r;
  };
  RMSNorm n({4}, 1e-3, true, DType::F64);
  set_values(n.weight, w);
  expect_values(n.forward(f64(xv, {3, 4})), {3, 4}, ref(1e-3), 1e-13);
  RMSNorm d({4}, std::nullopt, true, DType::F64);
  set_values(d.weight, w);
  expect_values(d.forward(f64(xv, {3, 4})), {3, 4}, ref(2.220446049250313e-16), 1e-13);
  // float32: eps is float32's machine epsilon; tiny inputs show it.
  RMSNorm f({2});
  Tensor tiny = full({1, 2}, 1e-4, DType::F32);
  double want = 1e-4 / std::sqrt(1e-8 + 1.1920928955078125e-07);
  expect_values(f.forward(tiny), {1, 2}, {want, want}, 1e-5);
}

TEST(GroupNorm, ForwardMatchesReference) {
  GroupNorm gn(2, 4, 1e-5, true, DType::F64);
  std::vector<double> w = {1.5, 0.5, -1.0, 2.0}, b = {0.1, 0.2, 0.3, 0.4};
  set_values(gn.weight, w);
  set_values(gn.bias, b);
  std::vector<double> xv = rand_vals(2 * 4 * 3, 6, -3, 3);  // [N=2, C=4, L=3]
  Tensor y = gn.forward(f64(xv, {2, 4, 3}));
  // Each group is 2 channels x 3 positions = 6 consecutive values.
  std::vector<double> ref = normalise_groups(xv, 6, 1e-5);
  for (size_t i = 0; i < ref.size(); ++i) {
    size_t c = (i / 3) % 4;
    ref[i] = ref[i] * w[c] + b[c];
  }
  expect_values(y, {2, 4, 3}, ref, 1e-12);
  EXPECT_THROW(GroupNorm(3, 4), ValueError);
  EXPECT_THROW(gn.forward(f64(xv, {2, 3, 4})), ShapeError);
}

// Per-channel mean and variance (biased or unbiased) of x [N, C, S] in row-major order.
void channel_stats(const std::vector<double>& x, size_t n, size_t c, size_t s, size_t ch,
                   double* mean, double* var_biased, double* var_unbiased) {
  double m = 0, v = 0, cnt = double(n * s);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < s; ++k) m += x[(i * c + ch) * s + k];
  m /= cnt;
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < s; ++k) v += std::pow(x[(i * c + ch) * s + k] - m, 2);
  *mean = m;
  *var_biased = v / cnt;
  *var_unbiased = v / (cnt - 1);
}

TEST(BatchNorm, TrainingUsesBatchStatsAndUpdatesRunningStats) {
  const size_t n = 4, c = 3, s = 1;
  BatchNorm1d bn(3, 1e-5, 0.1, true, true, DType::F64);
  std::vector<double> w = {0.5, 1.5, -1.0}, b = {0.0, 0.25, 1.0};
  set_values(bn.weight, w);
  set_values(bn.bias, b);
  std::vector<double> rm(3, 0.0), rv(3, 1.0);
  for (int batch = 0; batch < 2; ++batch) {
    std::vector<double> xv = rand_vals(n * c, 10 + batch, -2, 4);
    Tensor y = bn.forward(f64(xv, {4, 3}));
    std::vector<double> ref(xv.size());
    for (size_t ch = 0; ch < c; ++ch) {
      double m, vb, vu;
      channel_stats(xv, n, c, s, ch, &m, &vb, &vu);
      for (size_t i = 0; i < n; ++i)
        ref[i * c + ch] = (xv[i * c + ch] - m) / std::sqrt(vb + 1e-5) * w[ch] + b[ch];
      rm[ch] = 0.9 * rm[ch] + 0.1 * m;
      rv[ch] = 0.9 * rv[ch] + 0.1 * vu;
    }
    expect_values(y, {4, 3}, ref, 1e-12, "batch " + std::to_string(batch));
  }
  expect_values(bn.running_mean, {3}, rm, 1e-13);
  expect_values(bn.running_var, {3}, rv, 1e-13);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  // Eval: the running statistics.
  bn.eval();
  std::vector<double> xv = rand_vals(6, 20);
  std::vector<double> ref(6);
  for (size_t i = 0; i < 6; ++i) {
    size_t ch = i % 3;
    ref[i] = (xv[i] - rm[ch]) / std::sqrt(rv[ch] + 1e-5) * w[ch] + b[ch];
  }
  expect_values(bn.forward(f64(xv, {2, 3})), {2, 3}, ref, 1e-12);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  EXPECT_EQ(bn.state_dict().keys(),
            (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                      "num_batches_tracked"}));
}

TEST(BatchNorm, CumulativeAverageWithoutMomentum) {
  BatchNorm1d bn(2, 1e-5, std::nullopt, false, true, DType::F64);
  std::vector<double> m1(2), m2(2), v1(2), v2(2), tmp(2);
  std::vector<double> a = rand_vals(10, 30), b = rand_vals(10, 31);
  bn.forward(f64(a, {5, 2}));
  bn.forward(f64(b, {5, 2}));
  for (size_t ch = 0; ch < 2; ++ch) {
    channel_stats(a, 5, 2, 1, ch, &m1[ch], &tmp[ch], &v1[ch]);
    channel_stats(b, 5, 2, 1, ch, &m2[ch], &tmp[ch], &v2[ch]);
  }
  // factor 1 then 1/2: the plain average of the batch statistics (and the initial ones go).
  expect_values(bn.running_mean, {2}, {(m1[0] + m2[0]) / 2, (m1[1] + m2[1]) / 2}, 1e-13);
  expect_values(bn.running_var, {2}, {(v1[0] + v2[0]) / 2, (v1[1] + v2[1]) / 2}, 1e-13);
}

TEST(BatchNorm, TwoDimensionalAndThreeDimensionalInputs) {
  const size_t n = 2, c = 3, s = 4;
  BatchNorm2d bn(3, 1e-3, 0.2, true, true, DType::F64);
  std::vector<double> xv = rand_vals(n * c * s, 40, -1, 2);
  Tensor y = bn.forward(f64(xv, {2, 3, 2, 2}));
  std::vector<double> ref(xv.size()), rm(3), rv(3);
  for (size_t ch = 0; ch < c; ++ch) {
    double m, vb, vu;
    channel_stats(xv, n, c, s, ch, &m, &vb, &vu);
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < s; ++k)
        ref[(i * c + ch) * s + k] = (xv[(i * c + ch) * s + k] - m) / std::sqrt(vb + 1e-3);
    rm[ch] = 0.2 * m;
    rv[ch] = 0.8 + 0.2 * vu;
  }
  expect_values(y, {2, 3, 2, 2}, ref, 1e-12);
  expect_values(bn.running_mean, {3}, rm, 1e-13);
  expect_values(bn.running_var, {3}, rv, 1e-13);
  // The same values as [N, C, L] through BatchNorm1d.
  BatchNorm1d bn1(3, 1e-3, 0.2, true, true, DType::F64);
  expect_values(bn1.forward(f64(xv, {2, 3, 4})), {2, 3, 4}, ref, 1e-12);
  EXPECT_THROW(bn.forward(f64(xv, {2, 3, 4})), ShapeError);
  EXPECT_THROW(bn1.forward(f64(xv, {24})), ShapeError);
  EXPECT_THROW(bn1.forward(f64({1, 2, 3}, {1, 3})), ValueError);  // one value per channel
}

TEST(BatchNorm, WithoutRunningStatsAlwaysUsesTheBatch) {
  BatchNorm1d bn(2, 1e-5, 0.1, false, false, DType::F64);
  EXPECT_TRUE(bn.buffers().empty());
  std::vector<double> xv = rand_vals(8, 50);
  bn.eval();
  std::vector<double> ref(8);
  for (size_t ch = 0; ch < 2; ++ch) {
    double m, vb, vu;
    channel_stats(xv, 4, 2, 1, ch, &m, &vb, &vu);
    for (size_t i = 0; i < 4; ++i) ref[i * 2 + ch] = (xv[i * 2 + ch] - m) / std::sqrt(vb + 1e-5);
  }
  expect_values(bn.forward(f64(xv, {4, 2})), {4, 2}, ref, 1e-12);
}

}  // namespace
}  // namespace kiln::nn

// The fused ops behind training-mode batch norm (decision 0051) reject what they cannot take
// with messages naming what was expected and what was given.
namespace kiln::nn {
namespace {
TEST(BatchNorm, FusedOpsRejectBadArguments) {
  Tensor x = ones({2, 3, 4});
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { native_batch_norm(x.to(DType::F64), Tensor(), Tensor(), 1e-5); })
                .find("float32 or bfloat16 input, got float64"),
            std::string::npos);
  EXPECT_NE(message([&] { native_batch_norm(x, ones({4}), Tensor(), 1e-5); })
                .find("weight of shape [3], got [4]"),
            std::string::npos);
  EXPECT_NE(message([&] { native_batch_norm(x, ones({3}).to(DType::BF16), Tensor(), 1e-5); })
                .find("got bfloat16"),
            std::string::npos);
  EXPECT_NE(message([&] {
              native_batch_norm_backward(x, x, zeros({2}), ones({3}), Tensor(), 1e-5);
            }).find("statistics of shape [3]"),
            std::string::npos);
  EXPECT_NE(message([&] {
              native_batch_norm_backward(ones({2, 3, 5}), x, zeros({3}), ones({3}), Tensor(), 1e-5);
            }).find("grad_y of the input's shape"),
            std::string::npos);
}
}  // namespace
}  // namespace kiln::nn
