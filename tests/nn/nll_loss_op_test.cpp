// The nll_loss op (kiln/ops/nll_loss.h) that nll_loss and cross_entropy call: sizes that
// take the threaded paths, every float dtype, strided and spatial inputs, ignore_index and
// class weights, against float64 sums computed here; the gradient, its double backward, the
// composite kept for weights that require grad, the testing device, and bad targets.
#include "nn/nn_test_util.h"
#include "kiln/ops/views.h"

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;
using F::Reduction;

// A problem of N samples, C classes and D positions: log-probability-like values, targets
// with about one in nine ignored (ignore_index -100), and class weights.
struct Problem {
  int64_t N, C, D;
  std::vector<double> x;       // [N, C, D]
  std::vector<int64_t> t;      // [N, D]
  std::vector<double> w;       // [C]
  Problem(int64_t n, int64_t c, int64_t d, uint32_t seed) : N(n), C(c), D(d) {
    x = rand_vals(size_t(N * C * D), seed, -4, 0);
    std::mt19937 rng(seed + 1);
    for (int64_t i = 0; i < N * D; ++i) {
      const int64_t v = int64_t(rng() % uint32_t(C + 1));
      t.push_back(v == C || i % 9 == 4 ? -100 : v);
    }
    w = rand_vals(size_t(C), seed + 2, 0.25, 2);
  }
  Shape x_shape() const { return D == 1 ? Shape{N, C} : Shape{N, C, D}; }
  Shape t_shape() const { return D == 1 ? Shape{N} : Shape{N, D}; }
  // Per-sample losses (0 where ignored) and the total weight, in float64.
  std::vector<double> losses(bool weighted, double& total) const {
    std::vector<double> l;
    total = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t c = t[size_t(n * D + d)];
        const double wc = c < 0 ? 0.0 : weighted ? w[size_t(c)] : 1.0;
        l.push_back(c < 0 ? 0.0 : -wc * x[size_t((n * C + c) * D + d)]);
        total += wc;
      }
    return l;
  }
};

double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}

void check_problem(const Problem& p, DType dt, bool weighted, double tol, const std::string& what) {
  Tensor x = f64(p.x, p.x_shape()).to(dt), t = i64(p.t, p.t_shape());
  F::NLLLossOptions o;
  if (weighted) o.weight = f64(p.w, {p.C}).to(dt);
  double total = 0;
  const std::vector<double> ref = p.losses(weighted, total);
  o.reduction = Reduction::None;
  Tensor none = F::nll_loss(x, t, o);
  EXPECT_EQ(none.dtype(), dt) << what;
  expect_values(none.to(DType::F64), p.t_shape(), ref, tol, what + " none");
  o.reduction = Reduction::Sum;
  expect_scalar(F::nll_loss(x, t, o).to(DType::F64), sum_of(ref), tol, what + " sum");
  o.reduction = Reduction::Mean;
  expect_scalar(F::nll_loss(x, t, o).to(DType::F64), sum_of(ref) / total, tol, what + " mean");
}

TEST(NllLossOp, EveryFloatDtypeSmallAndThreadedSizes) {
  // 300 x 50257-class rows is a language model's batch; [70000, 3] and [8, 5, 9000] have over
  // 65536 targets (the threaded sums).
  const Problem lm(300, 50257, 1, 1), many(70000, 3, 1, 2), spatial(8, 5, 9000, 3),
      small(7, 4, 1, 4);
  for (bool weighted : {false, true}) {
    const std::string w = weighted ? " weighted" : "";
    check_problem(lm, DType::F32, weighted, 1e-6, "lm f32" + w);
    check_problem(many, DType::F64, weighted, 1e-11, "many f64" + w);  // 70000-term sums
    check_problem(spatial, DType::F32, weighted, 1e-6, "spatial f32" + w);
    check_problem(small, DType::BF16, weighted, 1e-2, "small bf16" + w);
    check_problem(small, DType::F16, weighted, 2e-3, "small f16" + w);
    check_problem(spatial, DType::BF16, weighted, 2e-2, "spatial bf16" + w);
  }
}

TEST(NllLossOp, StridedInputAndOneThreadGiveTheSameBits) {
  const Problem p(70000, 3, 1, 5);
  // The same values stored class-major and viewed as [N, C] (strides 1, N).
  std::vector<double> cm(p.x.size());
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t c = 0; c < p.C; ++c) cm[size_t(c * p.N + n)] = p.x[size_t(n * p.C + c)];
  Tensor xt = f64(cm, {p.C, p.N}).to(DType::F32).t(), x = f64(p.x, {p.N, p.C}).to(DType::F32);
  Tensor t = i64(p.t, {p.N});
  ASSERT_FALSE(xt.is_contiguous());
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    const int saved = get_num_threads();
    set_num_threads(1);
    const auto one = F::nll_loss(x, t, {.reduction = r}).to_vector<float>();
    set_num_threads(2);
    const auto two = F::nll_loss(x, t, {.reduction = r}).to_vector<float>();
    const auto strided = F::nll_loss(xt, t, {.reduction = r}).to_vector<float>();
    set_num_threads(saved);
    EXPECT_EQ(one, two);
    EXPECT_EQ(one, strided);
  }
}

TEST(NllLossOp, GradientIsTheScaledTargetWeightAtThreadedSizes) {
  const Problem p(40, 3000, 1, 6);  // 120000 input elements: the threaded backward
  Tensor x = f64(p.x, p.x_shape()).to(DType::F32);
  autograd::set_requires_grad(x);
  Tensor w = f64(p.w, {p.C}).to(DType::F32);
  double total = 0;
  p.losses(true, total);
  Tensor loss = F::nll_loss(x, i64(p.t, p.t_shape()), {.weight = w});  // mean
  autograd::backward(std::vector<Tensor>{loss});
  const auto g = autograd::grad(x).to_vector<float>();
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t c = 0; c < p.C; ++c) {
      const int64_t tc = p.t[size_t(n)];
      const double ref = tc == c ? -p.w[size_t(c)] / total : 0.0;
      ASSERT_NEAR(g[size_t(n * p.C + c)], ref, 1e-6 * (1 + std::fabs(ref))) << n << ", " << c;
    }
}

TEST(NllLossOp, GradcheckAndGradgradcheck) {
  Tensor x = leaf({5, 4, 3}, 9, -3, 0);
  Tensor t = i64({0, 3, -100, 1, 2, 2, 0, 1, 3, -100, 1, 0, 2, 3, 1}, {5, 3});
  Tensor w = f64({0.5, 1.5, 1.0, 2.0}, {4});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    auto nll = [&](const V& in) { return F::nll_loss(in[0], t, {.weight = w, .reduction = r}); };
    KILN_EXPECT_GRADCHECK(nll, V{x});
    auto rr = autograd::gradgradcheck(nll, V{x});
    EXPECT_TRUE(rr.ok) << rr.message;
    auto ce = [&](const V& in) { return F::cross_entropy(in[0], t, {.reduction = r}); };
    auto rc = autograd::gradgradcheck(ce, V{x});
    EXPECT_TRUE(rc.ok) << rc.message;
  }
}

// The gradient as a function of the incoming gradient (the path d_nll_loss_backward takes
// when a graph is built through the backward pass).
TEST(NllLossOp, GradientOfTheGradientWithRespectToGradOutput) {
  Tensor x = leaf({5, 4, 3}, 14, -3, 0);
  Tensor t = i64({0, 3, -100, 1, 2, 2, 0, 1, 3, -100, 1, 0, 2, 3, 1}, {5, 3});
  Tensor w = f64({0.5, 1.5, 1.0, 2.0}, {4});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    Tensor v = leaf(r == Reduction::None ? Shape{5, 3} : Shape{}, 15, 0.5, 2);
    KILN_EXPECT_GRADCHECK(
        [&](const V& in) {
          Tensor loss = F::nll_loss(in[0], t, {.weight = w, .reduction = r});
          return autograd::grad({loss}, {in[0]}, {in[1]}, true, true)[0];
        },
        (V{x, v}));
  }
}

TEST(NllLossOp, WeightsThatRequireGradStillGetAGradient) {
  Tensor x = leaf({4, 3}, 10, -2, 0), w = leaf({3}, 11, 0.5, 2);
  Tensor t = i64({2, 0, -100, 1}, {4});
  KILN_EXPECT_GRADCHECK([&](const V& in) { return F::nll_loss(in[0], t, {.weight = in[1]}); },
                        (V{x, w}));
}

TEST(NllLossOp, TestingDeviceMatchesCpu) {
  const Problem p(6, 5, 4, 12);
  const Device dev(DeviceType::Testing, 0);
  if (!is_available(DeviceType::Testing)) GTEST_SKIP() << "no testing device";
  Tensor x = f64(p.x, p.x_shape()), t = i64(p.t, p.t_shape()), w = f64(p.w, {p.C});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    Tensor a = F::nll_loss(x, t, {.weight = w, .reduction = r});
    Tensor b = F::nll_loss(x.to(dev), t.to(dev), {.weight = w.to(dev), .reduction = r});
    EXPECT_EQ(b.device(), dev);
    EXPECT_EQ(a.to_vector<double>(), b.to(Device(DeviceType::CPU, 0)).to_vector<double>());
  }
}

TEST(NllLossOp, BadTargetsRaiseBeforeAnythingIsWritten) {
  Problem p(70000, 3, 1, 13);
  p.t[69999] = 3;  // the last target of a threaded case
  Tensor x = f64(p.x, p.x_shape()), t = i64(p.t, p.t_shape());
  try {
    F::nll_loss(x, t, {.reduction = Reduction::None});
    ADD_FAILURE() << "no error for target 3 of 3 classes";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("target 3 is out of bounds for 3 classes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(F::cross_entropy(x, i64({-5}, {1}).expand({70000})), IndexError);
  // ignore_index may be any value, even one inside the class range.
  std::vector<int64_t> t3 = p.t;
  for (auto& v : t3) v = v < 0 ? 3 : v;
  EXPECT_NO_THROW(F::nll_loss(x, i64(t3, {p.N}), {.ignore_index = 3}));
}

}  // namespace
}  // namespace kiln::nn
