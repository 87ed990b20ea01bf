// nn::functional::rnn / rnn_cell against a float64 LSTM / GRU / RNN written here step by step
// (PyTorch's formulas and gate orders), and the float32 inference path (each LSTM step as the
// lstm_cell op) against the differentiable path.
#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/functional_recurrent.h"
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;

double sig(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// One direction of one layer in float64: x [L][N][in] row-major, weights row-major.
std::vector<double> reference(F::RnnMode mode, const std::vector<double>& x, int64_t L,
                              int64_t N, int64_t in, int64_t H, const std::vector<double>& wi,
                              const std::vector<double>& wh, const std::vector<double>& bi,
                              const std::vector<double>& bh, std::vector<double>& h,
                              std::vector<double>& c) {
  const int64_t G = (mode == F::RnnMode::Lstm ? 4 : mode == F::RnnMode::Gru ? 3 : 1) * H;
  std::vector<double> out;
  for (int64_t t = 0; t < L; ++t) {
    std::vector<double> h2(static_cast<size_t>(N * H)), c2(static_cast<size_t>(N * H));
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> xg(static_cast<size_t>(G)), hg(static_cast<size_t>(G));
      for (int64_t g = 0; g < G; ++g) {
        double a = bi[size_t(g)], b = bh[size_t(g)];
        for (int64_t k = 0; k < in; ++k)
          a += wi[size_t(g * in + k)] * x[size_t((t * N + n) * in + k)];
        for (int64_t k = 0; k < H; ++k) b += wh[size_t(g * H + k)] * h[size_t(n * H + k)];
        xg[size_t(g)] = a;
        hg[size_t(g)] = b;
      }
      for (int64_t j = 0; j < H; ++j) {
        auto at = [&](const std::vector<double>& v, int64_t k) { return v[size_t(k * H + j)]; };
        const size_t o = size_t(n * H + j);
        if (mode == F::RnnMode::Lstm) {
          const double i = sig(at(xg, 0) + at(hg, 0)), f = sig(at(xg, 1) + at(hg, 1));
          const double g = std::tanh(at(xg, 2) + at(hg, 2)), og = sig(at(xg, 3) + at(hg, 3));
          c2[o] = f * c[o] + i * g;
          h2[o] = og * std::tanh(c2[o]);
        } else if (mode == F::RnnMode::Gru) {
          const double r = sig(at(xg, 0) + at(hg, 0)), z = sig(at(xg, 1) + at(hg, 1));
          const double nn = std::tanh(at(xg, 2) + r * at(hg, 2));
          h2[o] = (1 - z) * nn + z * h[o];
        } else {
          const double v = at(xg, 0) + at(hg, 0);
          h2[o] = mode == F::RnnMode::RnnTanh ? std::tanh(v) : std::max(v, 0.0);
        }
      }
    }
    h = h2;
    c = c2;
    out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

TEST(FunctionalRecurrent, EveryModeMatchesTheFloat64Steps) {
  const int64_t L = 5, N = 3, in = 4, H = 6;
  for (F::RnnMode mode : {F::RnnMode::Lstm, F::RnnMode::Gru, F::RnnMode::RnnTanh,
                          F::RnnMode::RnnRelu}) {
    const int64_t G = (mode == F::RnnMode::Lstm ? 4 : mode == F::RnnMode::Gru ? 3 : 1) * H;
    const std::vector<double> x = rand_vals(size_t(L * N * in), 1);
    const std::vector<double> wi = rand_vals(size_t(G * in), 2);
    const std::vector<double> wh = rand_vals(size_t(G * H), 3), bi = rand_vals(size_t(G), 4);
    const std::vector<double> bh = rand_vals(size_t(G), 5), h0 = rand_vals(size_t(N * H), 6);
    const std::vector<double> c0 = rand_vals(size_t(N * H), 7);
    std::vector<double> h = h0, c = c0;
    const std::vector<double> ref = reference(mode, x, L, N, in, H, wi, wh, bi, bh, h, c);
    const F::RnnWeights w{f64(wi, {G, in}), f64(wh, {G, H}), f64(bi, {G}), f64(bh, {G})};
    F::RnnOptions o;
    o.mode = mode;
    const bool lstm = mode == F::RnnMode::Lstm;
    std::vector<Tensor> r = F::rnn(f64(x, {L, N, in}), f64(h0, {1, N, H}),
                                   lstm ? f64(c0, {1, N, H}) : Tensor(), {w}, o);
    expect_values(r[0], {L, N, H}, ref, 1e-13);
    expect_values(r[1], {1, N, H}, h, 1e-13);
    if (lstm) expect_values(r[2], {1, N, H}, c, 1e-13);
    else EXPECT_FALSE(r[2].defined());
    // The cell: the first step.
    std::vector<Tensor> s = F::rnn_cell(mode, f64(x, {L, N, in}).select(0, 0),
                                        f64(h0, {N, H}), lstm ? f64(c0, {N, H}) : Tensor(), w);
    expect_values(s[0], {N, H}, std::vector<double>(ref.begin(), ref.begin() + N * H), 1e-13);
  }
}

TEST(FunctionalRecurrent, FusedInferenceStepMatchesTheOps) {
  manual_seed(3);
  const int64_t L = 9, N = 2, in = 5, H = 8;
  std::vector<F::RnnWeights> ws;
  for (int k = 0; k < 4; ++k) {  // 2 layers x 2 directions
    const int64_t layer_in = k < 2 ? in : 2 * H;
    ws.push_back({randn({4 * H, layer_in}), randn({4 * H, H}), randn({4 * H}), randn({4 * H})});
  }
  F::RnnOptions o;
  o.num_layers = 2;
  o.bidirectional = true;
  const Tensor x = randn({L, N, in});
  std::vector<Tensor> fused;
  {
    autograd::NoGradGuard no_grad;  // nothing to record: lstm_cell per step
    fused = F::rnn(x, Tensor(), Tensor(), ws, o);
  }
  Tensor xg = x.clone();
  autograd::set_requires_grad(xg);  // a gradient to record: the step's ops
  std::vector<Tensor> ops = F::rnn(xg, Tensor(), Tensor(), ws, o);
  for (size_t i = 0; i < 3; ++i) {
    const std::vector<double> a = fused[i].to_vector<double>(), b = ops[i].to_vector<double>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j) ASSERT_NEAR(a[j], b[j], 2e-6) << i << ", " << j;
  }
}

TEST(FunctionalRecurrent, ShapesAreChecked) {
  const F::RnnWeights w{randn({24, 4}), randn({24, 6}), Tensor(), Tensor()};
  F::RnnOptions o;
  EXPECT_THROW(F::rnn(randn({5, 3, 3}), Tensor(), Tensor(), {w}, o), ShapeError);  // in = 3
  EXPECT_THROW(F::rnn(randn({5, 3, 4}), randn({1, 2, 6}), Tensor(), {w}, o), ShapeError);
  EXPECT_THROW(F::rnn(randn({5, 3, 4}), Tensor(), Tensor(), {w, w}, o), ValueError);
  EXPECT_THROW(F::rnn(randn({2, 5, 3, 4}), Tensor(), Tensor(), {w}, o), ShapeError);
  o.mode = F::RnnMode::Gru;  // 24 rows are not 3 gates of 6
  EXPECT_THROW(F::rnn(randn({5, 3, 4}), Tensor(), Tensor(), {w}, o), ShapeError);
}

}  // namespace
}  // namespace kiln::nn
