// Layer forwards against float64 references computed here by hand: Linear, Bilinear,
// Embedding, activations, Softmax, Flatten, Identity, Dropout, Sequential; default inits.
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;

TEST(Linear, ForwardMatchesReference) {
  Linear lin(3, 2, true, DType::F64);
  std::vector<double> w = {0.5, -1.0, 2.0, 0.25, 0.75, -0.5}, b = {0.1, -0.2};
  set_values(lin.weight, w);
  set_values(lin.bias, b);
  std::vector<double> xv = rand_vals(4 * 3, 1);
  Tensor y = lin.forward(f64(xv, {4, 3}));
  std::vector<double> ref;
  for (int n = 0; n < 4; ++n)
    for (int o = 0; o < 2; ++o) {
      double s = b[size_t(o)];
      for (int i = 0; i < 3; ++i) s += xv[size_t(n * 3 + i)] * w[size_t(o * 3 + i)];
      ref.push_back(s);
    }
  expect_values(y, {4, 2}, ref, 1e-14);
  // Leading batch dims and no bias.
  Linear nb(3, 2, false, DType::F64);
  set_values(nb.weight, w);
  Tensor y3 = nb.forward(f64(xv, {2, 2, 3}));
  for (size_t i = 0; i < ref.size(); ++i) ref[i] -= b[i % 2];
  expect_values(y3, {2, 2, 2}, ref, 1e-14);
  EXPECT_THROW(lin.forward(f64(xv, {3, 4})), ShapeError);
}

TEST(Linear, DefaultInitIsUniformInOneOverSqrtFanIn) {
  manual_seed(0);
  Linear lin(64, 256);
  double bound = 1.0 / 8.0;
  std::vector<double> w = lin.weight.to_vector<double>(), b = lin.bias.to_vector<double>();
  double sq = 0;
  for (double v : w) {
    EXPECT_LE(std::fabs(v), bound);
    sq += v * v;
  }
  for (double v : b) EXPECT_LE(std::fabs(v), bound);
  // Uniform(-a, a) has standard deviation a / sqrt(3).
  EXPECT_NEAR(std::sqrt(sq / double(w.size())), bound / std::sqrt(3.0), 0.01 * bound);
  EXPECT_EQ(lin.weight.dtype(), DType::F32);
}

TEST(Bilinear, ForwardMatchesReference) {
  Bilinear bl(2, 3, 2, true, DType::F64);
  std::vector<double> w = rand_vals(12, 2), b = {0.3, -0.7};
  set_values(bl.weight, w);
  set_values(bl.bias, b);
  std::vector<double> x1 = rand_vals(4 * 2, 3), x2 = rand_vals(4 * 3, 4);
  Tensor y = bl.forward(f64(x1, {4, 2}), f64(x2, {4, 3}));
  std::vector<double> ref;
  for (int n = 0; n < 4; ++n)
    for (int k = 0; k < 2; ++k) {
      double s = b[size_t(k)];
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
          s += x1[size_t(n * 2 + i)] * w[size_t(k * 6 + i * 3 + j)] * x2[size_t(n * 3 + j)];
      ref.push_back(s);
    }
  expect_values(y, {4, 2}, ref, 1e-14);
  for (double v : Bilinear(4, 2, 3).weight.to_vector<double>()) EXPECT_LE(std::fabs(v), 0.5);
}

TEST(Embedding, ForwardPicksRowsAndPaddingRowStartsAtZero) {
  manual_seed(3);
  Embedding emb(5, 3, -1, DType::F64);  // padding_idx -1 -> 4
  ASSERT_TRUE(emb.padding_idx.has_value());
  EXPECT_EQ(*emb.padding_idx, 4);
  std::vector<double> w = emb.weight.to_vector<double>();
  for (int j = 0; j < 3; ++j) EXPECT_EQ(w[size_t(12 + j)], 0.0);
  Tensor idx = i64({2, 0, 4, 2, 1, 3}, {2, 3});
  Tensor y = emb.forward(idx);
  std::vector<double> ref;
  for (int64_t i : {2, 0, 4, 2, 1, 3})
    for (int j = 0; j < 3; ++j) ref.push_back(w[size_t(i * 3 + j)]);
  expect_values(y, {2, 3, 3}, ref, 0);
  EXPECT_THROW(emb.forward(i64({5}, {1})), IndexError);
  EXPECT_THROW(Embedding(3, 2, 3), ValueError);
}

TEST(Embedding, PaddingRowGetsNoGradient) {
  Embedding emb(4, 2, 1, DType::F64);
  Tensor idx = i64({1, 2, 1, 0, 2}, {5});
  std::vector<double> gv = rand_vals(10, 5);
  Tensor out = emb.forward(idx);
  backward((out * f64(gv, {5, 2})).sum());
  // Hand reference: row r accumulates the output gradients of the positions that pick it,
  // except the padding row 1.
  std::vector<double> ref(8, 0.0);
  std::vector<int64_t> iv = {1, 2, 1, 0, 2};
  for (size_t p = 0; p < iv.size(); ++p)
    if (iv[p] != 1)
      for (size_t j = 0; j < 2; ++j) ref[size_t(iv[p]) * 2 + j] += gv[p * 2 + j];
  expect_values(autograd::grad(emb.weight), {4, 2}, ref, 1e-15);
}

TEST(Activations, MatchReferences) {
  std::vector<double> xv = {-3.0, -1.2, -0.3, 0.0, 0.4, 1.1, 2.5, 6.0};
  Tensor x = f64(xv, {2, 4});
  auto ref = [&](double (*f)(double)) {
    std::vector<double> r;
    for (double v : xv) r.push_back(f(v));
    return r;
  };
  expect_values(ReLU().forward(x), {2, 4}, ref([](double v) { return v > 0 ? v : 0.0; }), 0);
  expect_values(GELU().forward(x), {2, 4},
                ref([](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }), 1e-14);
  expect_values(GELU("tanh").forward(x), {2, 4}, ref([](double v) {
                  return 0.5 * v *
                         (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
                }),
                1e-14);
  expect_values(SiLU().forward(x), {2, 4}, ref([](double v) { return v / (1 + std::exp(-v)); }),
                1e-14);
  expect_values(Tanh().forward(x), {2, 4}, ref([](double v) { return std::tanh(v); }), 1e-14);
  expect_values(Sigmoid().forward(x), {2, 4},
                ref([](double v) { return 1 / (1 + std::exp(-v)); }), 1e-14);
  expect_values(functional::leaky_relu(x, 0.1), {2, 4},
                ref([](double v) { return v > 0 ? v : 0.1 * v; }), 1e-15);
  EXPECT_THROW(GELU("fast"), ValueError);
}

TEST(Activations, SoftmaxAlongEachDim) {
  std::vector<double> xv = rand_vals(6, 7, -2, 2);
  Tensor x = f64(xv, {2, 3});
  std::vector<double> r1(6), r0(6);
  for (int i = 0; i < 2; ++i) {
    double s = 0;
    for (int j = 0; j < 3; ++j) s += std::exp(xv[size_t(i * 3 + j)]);
    for (int j = 0; j < 3; ++j) r1[size_t(i * 3 + j)] = std::exp(xv[size_t(i * 3 + j)]) / s;
  }
  for (int j = 0; j < 3; ++j) {
    double s = std::exp(xv[size_t(j)]) + std::exp(xv[size_t(3 + j)]);
    for (int i = 0; i < 2; ++i) r0[size_t(i * 3 + j)] = std::exp(xv[size_t(i * 3 + j)]) / s;
  }
  expect_values(Softmax(1).forward(x), {2, 3}, r1, 1e-14);
  expect_values(Softmax(-1).forward(x), {2, 3}, r1, 1e-14);
  expect_values(Softmax(0).forward(x), {2, 3}, r0, 1e-14);
  std::vector<double> lr1;
  for (double v : r1) lr1.push_back(std::log(v));
  expect_values(functional::log_softmax(x, 1), {2, 3}, lr1, 1e-14);
}

TEST(Shape, FlattenAndIdentity) {
  Tensor x = f64(rand_vals(24, 8), {2, 3, 4});
  EXPECT_EQ(Flatten().forward(x).shape(), (Shape{2, 12}));
  EXPECT_EQ(Flatten(0, 1).forward(x).shape(), (Shape{6, 4}));
  EXPECT_EQ(Flatten().forward(x).to_vector<double>(), x.to_vector<double>());
  EXPECT_TRUE(Identity().forward(x).is_same(x));
}

TEST(Dropout, TrainZeroesAndScalesEvalIsIdentity) {
  Generator gen(42);
  Dropout drop(0.25, &gen);
  Tensor x = f64(rand_vals(4000, 9, 0.5, 1.5), {40, 100});
  std::vector<double> xv = x.to_vector<double>();
  Tensor y = drop.forward(x);
  std::vector<double> yv = y.to_vector<double>();
  int zeros = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    if (yv[i] == 0) ++zeros;
    else EXPECT_NEAR(yv[i], xv[i] / 0.75, 1e-15);
  }
  EXPECT_NEAR(double(zeros) / 4000.0, 0.25, 0.03);
  // The same seed gives the same mask.
  Generator gen2(42);
  Dropout again(0.25, &gen2);
  EXPECT_EQ(again.forward(x).to_vector<double>(), yv);
  drop.eval();
  EXPECT_EQ(drop.forward(x).to_vector<double>(), xv);
  EXPECT_THROW(Dropout(1.5), ValueError);
}

TEST(Sequential, ForwardIsTheComposition) {
  manual_seed(4);
  auto l1 = std::make_shared<Linear>(3, 5, true, DType::F64);
  auto l2 = std::make_shared<Linear>(5, 2, true, DType::F64);
  Sequential seq{l1, std::make_shared<SiLU>(), l2, std::make_shared<Softmax>(-1)};
  Tensor x = f64(rand_vals(12, 10), {4, 3});
  Tensor ref = softmax(l2->forward(silu(l1->forward(x))), -1);
  EXPECT_EQ(seq.forward(x).to_vector<double>(), ref.to_vector<double>());
  EXPECT_EQ(seq.parameters().size(), 4u);
}

}  // namespace
}  // namespace kiln::nn
