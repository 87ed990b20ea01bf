// Losses against float64 references computed here by hand (PyTorch's definitions), their
// gradchecks, and their errors.
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;
using F::Reduction;

// ---- cross entropy / nll reference ------------------------------------------------------

std::vector<double> log_softmax_ref(const std::vector<double>& z) {
  double m = *std::max_element(z.begin(), z.end()), s = 0;
  for (double v : z) s += std::exp(v - m);
  std::vector<double> r;
  for (double v : z) r.push_back(v - m - std::log(s));
  return r;
}

// Samples of x [N, C, K...] flattened as (n, k) -> the C values.
std::vector<std::vector<double>> samples(const std::vector<double>& x, size_t n, size_t c, size_t k) {
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < k; ++j) {
      std::vector<double> s;
      for (size_t cc = 0; cc < c; ++cc) s.push_back(x[(i * c + cc) * k + j]);
      out.push_back(s);
    }
  return out;
}

struct CERef {
  std::vector<double> none;
  double sum = 0, mean = 0;
};

// PyTorch's cross_entropy with class-index targets (log_probs: inputs are log-probabilities
// already, i.e. nll_loss).
CERef ce_ref(const std::vector<std::vector<double>>& x, const std::vector<int64_t>& t,
             const std::vector<double>& w, int64_t ignore, double ls, bool log_probs = false) {
  CERef r;
  double nll_sum = 0, smooth_sum = 0, wsum = 0;
  size_t c = x[0].size();
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> lp = log_probs ? x[i] : log_softmax_ref(x[i]);
    double nll = 0, smooth = 0, wt = 0;
    if (t[i] != ignore) {
      wt = w.empty() ? 1.0 : w[size_t(t[i])];
      nll = -wt * lp[size_t(t[i])];
      for (size_t k = 0; k < c; ++k) smooth -= (w.empty() ? 1.0 : w[k]) * lp[k];
    }
    r.none.push_back((1 - ls) * nll + ls / double(c) * smooth);
    nll_sum += nll;
    smooth_sum += smooth;
    wsum += wt;
  }
  r.sum = (1 - ls) * nll_sum + ls / double(c) * smooth_sum;
  r.mean = (1 - ls) * nll_sum / wsum + ls / double(c) * smooth_sum / wsum;
  return r;
}

void check_ce(const Tensor& x, const Tensor& t, const F::CrossEntropyOptions& base, const CERef& ref,
              const Shape& none_shape, const std::string& what) {
  F::CrossEntropyOptions o = base;
  o.reduction = Reduction::None;
  expect_values(F::cross_entropy(x, t, o), none_shape, ref.none, 1e-13, what + " none");
  o.reduction = Reduction::Sum;
  expect_scalar(F::cross_entropy(x, t, o), ref.sum, 1e-13, what + " sum");
  o.reduction = Reduction::Mean;
  expect_scalar(F::cross_entropy(x, t, o), ref.mean, 1e-13, what + " mean");
}

TEST(CrossEntropy, ClassIndicesWeightsIgnoreIndexAndLabelSmoothing) {
  std::vector<double> xv = rand_vals(5 * 4, 1, -3, 3);
  Tensor x = f64(xv, {5, 4});
  std::vector<int64_t> tv = {2, 0, 3, -100, 1};
  Tensor t = i64(tv, {5});
  std::vector<double> w = {0.5, 2.0, 1.0, 1.5};
  Tensor wt = f64(w, {4});
  auto s = samples(xv, 5, 4, 1);
  check_ce(x, t, {}, ce_ref(s, tv, {}, -100, 0), {5}, "plain");
  check_ce(x, t, {.weight = wt}, ce_ref(s, tv, w, -100, 0), {5}, "weight");
  check_ce(x, t, {.label_smoothing = 0.2}, ce_ref(s, tv, {}, -100, 0.2), {5}, "smoothing");
  check_ce(x, t, {.weight = wt, .label_smoothing = 0.1}, ce_ref(s, tv, w, -100, 0.1), {5},
           "weight+smoothing");
  std::vector<int64_t> tv2 = {2, 0, 3, 3, 1};
  check_ce(x, i64(tv2, {5}), {.weight = wt, .ignore_index = 3, .label_smoothing = 0.3},
           ce_ref(s, tv2, w, 3, 0.3), {5}, "ignore 3");
}

TEST(CrossEntropy, SpatialAndUnbatchedInputs) {
  std::vector<double> xv = rand_vals(2 * 3 * 4, 2, -2, 2);  // [N=2, C=3, K=4]
  std::vector<int64_t> tv = {0, 2, 1, 1, 2, -100, 0, 1};
  auto s = samples(xv, 2, 3, 4);
  check_ce(f64(xv, {2, 3, 4}), i64(tv, {2, 4}), {.label_smoothing = 0.05},
           ce_ref(s, tv, {}, -100, 0.05), {2, 4}, "spatial");
  std::vector<double> one = {0.3, -1.2, 2.0};
  CERef r = ce_ref({one}, {2}, {}, -100, 0);
  expect_scalar(F::cross_entropy(f64(one, {3}), i64({2}, {})), r.mean, 1e-14, "unbatched");
  expect_scalar(F::cross_entropy(f64(one, {3}), i64({2}, {}), {.reduction = Reduction::None}),
                r.none[0], 1e-14, "unbatched none");
}

TEST(CrossEntropy, ClassProbabilities) {
  std::vector<double> xv = rand_vals(3 * 4, 3, -2, 2), pv(12);
  for (size_t i = 0; i < 3; ++i) {
    auto p = rand_vals(4, 10 + uint32_t(i), 0.1, 1);
    double s = p[0] + p[1] + p[2] + p[3];
    for (size_t k = 0; k < 4; ++k) pv[i * 4 + k] = p[k] / s;
  }
  std::vector<double> w = {1.0, 0.5, 2.0, 1.5};
  const double ls = 0.1;
  std::vector<double> none;
  double sum = 0;
  for (size_t i = 0; i < 3; ++i) {
    auto lp = log_softmax_ref({xv.begin() + long(i * 4), xv.begin() + long(i * 4 + 4)});
    double l = 0;
    for (size_t k = 0; k < 4; ++k) l -= w[k] * (pv[i * 4 + k] * (1 - ls) + ls / 4) * lp[k];
    none.push_back(l);
    sum += l;
  }
  Tensor x = f64(xv, {3, 4}), p = f64(pv, {3, 4});
  F::CrossEntropyOptions o{.weight = f64(w, {4}), .reduction = Reduction::None, .label_smoothing = ls};
  expect_values(F::cross_entropy(x, p, o), {3}, none, 1e-13);
  o.reduction = Reduction::Sum;
  expect_scalar(F::cross_entropy(x, p, o), sum, 1e-13);
  o.reduction = Reduction::Mean;  // divided by the number of samples, not the weights
  expect_scalar(F::cross_entropy(x, p, o), sum / 3, 1e-13);
}

TEST(CrossEntropy, ExtremeLogitsStayFinite) {
  Tensor x = f64({1000.0, -1000.0, 0.0, -1e308, 50.0, 0.0}, {2, 3});
  Tensor l = F::cross_entropy(x, i64({0, 1}, {2}), {.reduction = Reduction::None});
  expect_values(l, {2}, {0.0, std::log1p(std::exp(-50.0))}, 1e-12);
}

TEST(CrossEntropy, Errors) {
  Tensor x = f64(rand_vals(6, 4), {2, 3});
  EXPECT_THROW(F::cross_entropy(x, i64({0, 3}, {2})), IndexError);
  EXPECT_THROW(F::cross_entropy(x, i64({0, -2}, {2})), IndexError);
  EXPECT_THROW(F::cross_entropy(x, i64({0, 1, 2}, {3})), ShapeError);
  EXPECT_THROW(F::cross_entropy(x, f64({0.5, 0.5}, {2})), ShapeError);  // not probabilities
  EXPECT_THROW(F::cross_entropy(x, i64({0, 1}, {2}).to(DType::I16)), Error);
  EXPECT_THROW(F::cross_entropy(x, i64({0, 1}, {2}), {.weight = f64({1, 2}, {2})}), ShapeError);
  EXPECT_THROW(F::cross_entropy(x, i64({0, 1}, {2}), {.label_smoothing = 1.5}), ValueError);
  // All targets ignored: the mean is 0/0 (NaN), as PyTorch.
  EXPECT_TRUE(std::isnan(F::cross_entropy(x, i64({-100, -100}, {2})).item<double>()));
}

TEST(NLLLoss, MatchesReference) {
  std::vector<double> lp = rand_vals(4 * 3, 5, -3, 0);
  std::vector<int64_t> tv = {1, 2, 0, 2};
  std::vector<double> w = {0.2, 1.0, 3.0};
  CERef r = ce_ref(samples(lp, 4, 3, 1), tv, w, 0, 0, true);
  Tensor x = f64(lp, {4, 3}), t = i64(tv, {4});
  F::NLLLossOptions o{.weight = f64(w, {3}), .ignore_index = 0, .reduction = Reduction::None};
  expect_values(F::nll_loss(x, t, o), {4}, r.none, 1e-14);
  o.reduction = Reduction::Mean;
  expect_scalar(F::nll_loss(x, t, o), r.mean, 1e-14);
  o.reduction = Reduction::Sum;
  expect_scalar(F::nll_loss(x, t, o), r.sum, 1e-14);
}

TEST(LossGrad, CrossEntropyAndNll) {
  Tensor x = leaf({4, 3}, 6, -2, 2);
  Tensor t = i64({2, 0, -100, 1}, {4});
  Tensor w = f64({0.5, 1.5, 1.0}, {3});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    KILN_EXPECT_GRADCHECK(
        [&](const V& in) {
          return F::cross_entropy(in[0], t, {.weight = w, .reduction = r, .label_smoothing = 0.15});
        },
        V{x});
    KILN_EXPECT_GRADCHECK(
        [&](const V& in) { return F::nll_loss(in[0], t, {.weight = w, .reduction = r}); }, V{x});
  }
  Tensor xs = leaf({2, 3, 2}, 7, -2, 2);
  KILN_EXPECT_GRADCHECK(
      [&](const V& in) { return F::cross_entropy(in[0], i64({0, 2, 1, 1}, {2, 2})); }, V{xs});
  Tensor p = leaf({4, 3}, 8, 0.1, 1);
  KILN_EXPECT_GRADCHECK(
      [&](const V& in) { return F::cross_entropy(in[0], in[1], {.label_smoothing = 0.1}); },
      (V{x, p}));
}

// ---- regression losses -------------------------------------------------------------------

template <typename Fn>
std::vector<double> pointwise(const std::vector<double>& a, const std::vector<double>& b, Fn f) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size(); ++i) r.push_back(f(a[i], b[i]));
  return r;
}
double total(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

void check_reductions(const std::function<Tensor(Reduction)>& loss, const std::vector<double>& none,
                      const Shape& shape, const std::string& what) {
  expect_values(loss(Reduction::None), shape, none, 1e-14, what);
  expect_scalar(loss(Reduction::Sum), total(none), 1e-14, what);
  expect_scalar(loss(Reduction::Mean), total(none) / double(none.size()), 1e-14, what);
}

TEST(RegressionLosses, MatchReferences) {
  std::vector<double> a = rand_vals(12, 20, -2, 2), b = rand_vals(12, 21, -2, 2);
  Tensor x = f64(a, {3, 4}), y = f64(b, {3, 4});
  check_reductions([&](Reduction r) { return F::mse_loss(x, y, r); },
                   pointwise(a, b, [](double p, double q) { return (p - q) * (p - q); }), {3, 4}, "mse");
  check_reductions([&](Reduction r) { return F::l1_loss(x, y, r); },
                   pointwise(a, b, [](double p, double q) { return std::fabs(p - q); }), {3, 4}, "l1");
  for (double beta : {0.5, 1.0, 2.0}) {
    check_reductions([&](Reduction r) { return F::smooth_l1_loss(x, y, r, beta); },
                     pointwise(a, b, [&](double p, double q) {
                       double d = std::fabs(p - q);
                       return d < beta ? 0.5 * d * d / beta : d - 0.5 * beta;
                     }),
                     {3, 4}, "smooth_l1 beta " + std::to_string(beta));
  }
  check_reductions([&](Reduction r) { return F::smooth_l1_loss(x, y, r, 0.0); },
                   pointwise(a, b, [](double p, double q) { return std::fabs(p - q); }), {3, 4},
                   "smooth_l1 beta 0");
  check_reductions([&](Reduction r) { return F::huber_loss(x, y, r, 0.8); },
                   pointwise(a, b, [](double p, double q) {
                     double d = std::fabs(p - q);
                     return d < 0.8 ? 0.5 * d * d : 0.8 * (d - 0.4);
                   }),
                   {3, 4}, "huber");
  EXPECT_THROW(F::mse_loss(x, f64(b, {12})), ShapeError);
  EXPECT_THROW(F::mse_loss(x, y, Reduction::BatchMean), ValueError);
}

TEST(LossGrad, RegressionLosses) {
  // Differences kept away from 0 and from +-beta, where l1/smooth_l1 have kinks.
  Tensor x = f64({0.3, -1.9, 1.4, 0.1, -0.6, 2.2}, {2, 3});
  Tensor y = f64({-0.2, 0.8, 0.2, 1.3, 0.35, -0.5}, {2, 3});
  autograd::set_requires_grad(x);
  autograd::set_requires_grad(y);
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::mse_loss(in[0], in[1]); }, (V{x, y}));
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::l1_loss(in[0], in[1], Reduction::Sum); },
                        (V{x, y}));
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::smooth_l1_loss(in[0], in[1], Reduction::Mean, 1.0); }, (V{x, y}));
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::huber_loss(in[0], in[1], Reduction::None, 0.7); }, (V{x, y}));
}

// ---- binary cross entropy ----------------------------------------------------------------

TEST(BinaryCrossEntropy, ProbabilitiesAndLogits) {
  std::vector<double> p = rand_vals(8, 30, 0.05, 0.95), y = rand_vals(8, 31, 0, 1);
  std::vector<double> w = rand_vals(8, 32, 0.5, 2);
  Tensor pt = f64(p, {2, 4}), yt = f64(y, {2, 4}), wt = f64(w, {2, 4});
  std::vector<double> ref;
  for (size_t i = 0; i < 8; ++i)
    ref.push_back(-w[i] * (y[i] * std::log(p[i]) + (1 - y[i]) * std::log(1 - p[i])));
  check_reductions([&](Reduction r) { return F::binary_cross_entropy(pt, yt, wt, r); }, ref,
                   {2, 4}, "bce");
  // Logits with weight and a per-class pos_weight (broadcast along the last dim).
  std::vector<double> z = rand_vals(8, 33, -4, 4), pw = {0.5, 1.0, 2.0, 3.0};
  std::vector<double> lref;
  for (size_t i = 0; i < 8; ++i) {
    double log_sig = -std::log1p(std::exp(-z[i])), log_1m = -std::log1p(std::exp(z[i]));
    lref.push_back(-w[i] * (pw[i % 4] * y[i] * log_sig + (1 - y[i]) * log_1m));
  }
  Tensor zt = f64(z, {2, 4});
  check_reductions(
      [&](Reduction r) {
        return F::binary_cross_entropy_with_logits(zt, yt, {.weight = wt, .pos_weight = f64(pw, {4}), .reduction = r});
      },
      lref, {2, 4}, "bce_with_logits");
  std::vector<double> plain;
  for (size_t i = 0; i < 8; ++i)
    plain.push_back(std::log1p(std::exp(-z[i])) + (1 - y[i]) * z[i]);
  expect_values(F::binary_cross_entropy_with_logits(zt, yt, {.reduction = Reduction::None}), {2, 4},
                plain, 1e-14);
}

TEST(BinaryCrossEntropy, StableAtExtremes) {
  Tensor z = f64({100.0, -100.0, 800.0, -800.0}, {4}), y = f64({0.0, 1.0, 1.0, 0.0}, {4});
  expect_values(F::binary_cross_entropy_with_logits(z, y, {.reduction = Reduction::None}), {4},
                {100.0, 100.0, 0.0, 0.0}, 1e-14);
  Tensor zf = z.to(DType::F32);
  for (double v : F::binary_cross_entropy_with_logits(zf, y.to(DType::F32),
                                                      {.reduction = Reduction::None})
                      .to_vector<double>())
    EXPECT_TRUE(std::isfinite(v));
  // Probabilities of exactly 0 and 1: the logs are clamped at -100.
  Tensor p = f64({0.0, 1.0, 0.0, 1.0}, {4}), t = f64({1.0, 0.0, 0.0, 1.0}, {4});
  expect_values(F::binary_cross_entropy(p, t, Tensor(), Reduction::None), {4}, {100, 100, 0, 0},
                1e-14);
  EXPECT_THROW(F::binary_cross_entropy(f64({1.5}, {1}), f64({1.0}, {1})), ValueError);
  EXPECT_THROW(F::binary_cross_entropy(f64({0.5, 0.5}, {2}), f64({1.0}, {1})), ShapeError);
}

TEST(LossGrad, BinaryCrossEntropy) {
  Tensor p = leaf({2, 3}, 40, 0.1, 0.9), y = leaf({2, 3}, 41, 0, 1), w = f64(rand_vals(6, 42, 0.5, 2), {2, 3});
  KILN_EXPECT_GRADCHECK([&](const V& in) { return F::binary_cross_entropy(in[0], in[1], w); },
                        (V{p, y}));
  Tensor z = leaf({2, 3}, 43, -3, 3), pw = f64({0.5, 2.0, 1.5}, {3});
  KILN_EXPECT_GRADCHECK(
      [&](const V& in) {
        return F::binary_cross_entropy_with_logits(in[0], in[1], {.weight = w, .pos_weight = pw});
      },
      (V{z, y}));
  KILN_EXPECT_GRADCHECK(
      [&](const V& in) {
        return F::binary_cross_entropy_with_logits(in[0], in[1], {.reduction = Reduction::Sum});
      },
      (V{z, y}));
}

// ---- KL divergence -----------------------------------------------------------------------

TEST(KLDiv, MatchesReferenceForEachReduction) {
  std::vector<double> x = rand_vals(6, 50, -3, -0.1);  // log-probabilities
  std::vector<double> t = {0.2, 0.0, 0.5, 0.3, 0.0, 0.7};
  std::vector<double> ref = pointwise(x, t, [](double a, double b) {
    return b == 0 ? 0.0 : b * (std::log(b) - a);
  });
  Tensor xt = f64(x, {2, 3}), tt = f64(t, {2, 3});
  check_reductions([&](Reduction r) { return F::kl_div(xt, tt, r); }, ref, {2, 3}, "kl_div");
  expect_scalar(F::kl_div(xt, tt, Reduction::BatchMean), total(ref) / 2, 1e-14, "batchmean");
  std::vector<double> lt = rand_vals(6, 51, -3, -0.1);
  std::vector<double> lref =
      pointwise(x, lt, [](double a, double b) { return std::exp(b) * (b - a); });
  expect_values(F::kl_div(xt, f64(lt, {2, 3}), Reduction::None, true), {2, 3}, lref, 1e-14);
}

TEST(LossGrad, KLDiv) {
  Tensor x = leaf({2, 3}, 52, -3, -0.1), t = leaf({2, 3}, 53, 0.05, 1), lt = leaf({2, 3}, 54, -3, 0);
  KILN_EXPECT_GRADCHECK([](const V& in) { return F::kl_div(in[0], in[1], Reduction::BatchMean); },
                        (V{x, t}));
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::kl_div(in[0], in[1], Reduction::Mean, true); }, (V{x, lt}));
  // A zero target contributes nothing and has a finite gradient.
  Tensor tz = f64({0.0, 0.5, 0.5}, {3});
  Tensor xz = leaf({3}, 55, -2, -0.5);
  Tensor l = F::kl_div(xz, tz, Reduction::Sum);
  backward(l);
  expect_values(autograd::grad(xz), {3}, {0.0, -0.5, -0.5}, 0);
}

}  // namespace
}  // namespace kiln::nn
