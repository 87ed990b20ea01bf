// nn::TransformerEncoderLayer / TransformerEncoder against a plain-loop float64 reference
// (post-norm and norm_first, relu and gelu, masks), state_dict names and shapes
// (PyTorch 2.13's lists), clones, causal-mask detection, training, gradcheck and errors.
#include "kiln/optim/adam.h"
#include "nn/attention_ref.h"
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;

const TensorOptions kF64(DType::F64);

Vec host(const Tensor& t) { return t.defined() ? t.to_vector<double>() : Vec{}; }

void randomise(Module& m, uint32_t seed) {
  for (auto& [name, p] : m.named_parameters())
    set_values(p, rand_vals(size_t(p.numel()), seed++, -0.7, 0.7));
}

MhaWeights mha_weights(const MultiheadAttention& m) {
  const int64_t E = m.embed_dim;
  MhaWeights w;
  Vec all = host(m.in_proj_weight), b = host(m.in_proj_bias);
  w.wq.assign(all.begin(), all.begin() + E * E);
  w.wk.assign(all.begin() + E * E, all.begin() + 2 * E * E);
  w.wv.assign(all.begin() + 2 * E * E, all.end());
  if (!b.empty()) {
    w.bq.assign(b.begin(), b.begin() + E);
    w.bk.assign(b.begin() + E, b.begin() + 2 * E);
    w.bv.assign(b.begin() + 2 * E, b.end());
  }
  w.wo = host(m.out_proj->weight);
  w.bo = host(m.out_proj->bias);
  return w;
}

// One encoder layer from the definition; x [S, N, E] sequence-first.
Vec ref_layer(const TransformerEncoderLayer& l, const Vec& x, int64_t S, int64_t N,
              const std::function<double(int64_t, int64_t, int64_t, int64_t)>& masked) {
  const int64_t E = l.d_model, F = l.dim_feedforward;
  MhaWeights w = mha_weights(*l.self_attn);
  auto sa = [&](const Vec& y) {
    return ref_mha(y, y, y, w, S, S, N, E, E, E, l.nhead, false, masked, true);
  };
  auto ff = [&](const Vec& y) {
    Vec h = ref_linear(y, host(l.linear1->weight), host(l.linear1->bias), S * N, E, F);
    for (auto& v : h) v = l.activation == "relu" ? std::max(v, 0.0) : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    return ref_linear(h, host(l.linear2->weight), host(l.linear2->bias), S * N, F, E);
  };
  auto norm = [&](const LayerNorm& n, const Vec& y) {
    return ref_layer_norm(y, host(n.weight), host(n.bias), E, l.layer_norm_eps);
  };
  auto add = [](Vec a, const Vec& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
  };
  Vec y = x;
  if (l.norm_first) {
    y = add(y, sa(norm(*l.norm1, y)));
    y = add(y, ff(norm(*l.norm2, y)));
  } else {
    y = norm(*l.norm1, add(y, sa(y)));
    y = norm(*l.norm2, add(y, ff(y)));
  }
  return y;
}

TEST(TransformerEncoderLayer, MatchesReference) {
  const int64_t E = 4, H = 2, FF = 6, S = 3, N = 2;
  std::vector<uint8_t> kpm = {0, 0, 1, 0, 1, 0};
  std::vector<uint8_t> am = {0, 1, 0, 0, 0, 1, 0, 0, 0};
  auto masked = [&](int64_t n, int64_t, int64_t i, int64_t j) {
    return (kpm[n * S + j] || am[i * S + j]) ? -kInf : 0.0;
  };
  Tensor tkpm = tensor_from(kpm, {N, S}, TensorOptions(DType::Bool));
  Tensor tam = tensor_from(am, {S, S}, TensorOptions(DType::Bool));
  uint32_t seed = 1;
  for (std::string act : {"relu", "gelu"})
    for (bool norm_first : {false, true})
      for (bool batch_first : {false, true}) {
        TransformerEncoderLayer l(E, H, FF, 0.1, act, 1e-5, batch_first, norm_first, true, kF64);
        randomise(l, seed);
        seed += 20;
        l.eval();
        Vec x = rand_vals(size_t(S * N * E), seed, -2, 2);
        std::string what = act + (norm_first ? " norm_first" : " post-norm") +
                           (batch_first ? " batch_first" : "");
        Vec ref = ref_layer(l, x, S, N, nullptr);
        Vec ref_m = ref_layer(l, x, S, N, masked);
        if (batch_first) {
          Tensor tx = f64(swap01(x, S, N, E), {N, S, E});
          expect_values(l(tx), {N, S, E}, swap01(ref, S, N, E), 1e-12, what);
          expect_values(l(tx, tam, tkpm), {N, S, E}, swap01(ref_m, S, N, E), 1e-12, what);
        } else {
          Tensor tx = f64(x, {S, N, E});
          expect_values(l(tx), {S, N, E}, ref, 1e-12, what);
          expect_values(l(tx, tam, tkpm), {S, N, E}, ref_m, 1e-12, what);
        }
      }
}

TEST(TransformerEncoderLayer, UnbatchedAndNoBias) {
  const int64_t E = 4, S = 3;
  TransformerEncoderLayer l(E, 2, 8, 0.0, "gelu", 1e-6, false, true, /*bias=*/false, kF64);
  randomise(l, 77);
  Vec x = rand_vals(size_t(S * E), 78);
  expect_values(l(f64(x, {S, E})), {S, E}, ref_layer(l, x, S, 1, nullptr), 1e-12);
}

// Expected lists printed by PyTorch 2.13: [(k, tuple(v.shape)) for k, v in
// m.state_dict().items()].
void expect_keys(const Module& m, const std::vector<std::pair<std::string, Shape>>& expect) {
  StateDict sd = m.state_dict();
  std::vector<std::string> keys = sd.keys();
  ASSERT_EQ(keys.size(), expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ(keys[i], expect[i].first);
    EXPECT_EQ(sd[keys[i]].shape(), expect[i].second) << keys[i];
  }
}

const std::vector<std::pair<std::string, Shape>> kLayerKeys = {
    {"self_attn.in_proj_weight", {24, 8}}, {"self_attn.in_proj_bias", {24}},
    {"self_attn.out_proj.weight", {8, 8}}, {"self_attn.out_proj.bias", {8}},
    {"linear1.weight", {16, 8}},           {"linear1.bias", {16}},
    {"linear2.weight", {8, 16}},           {"linear2.bias", {8}},
    {"norm1.weight", {8}},                 {"norm1.bias", {8}},
    {"norm2.weight", {8}},                 {"norm2.bias", {8}}};

TEST(TransformerEncoderLayer, StateDictMatchesPyTorch) {
  expect_keys(TransformerEncoderLayer(8, 2, 16), kLayerKeys);
  expect_keys(TransformerEncoderLayer(8, 2, 16, 0.1, "relu", 1e-5, false, false, false),
              {{"self_attn.in_proj_weight", {24, 8}},
               {"self_attn.out_proj.weight", {8, 8}},
               {"linear1.weight", {16, 8}},
               {"linear2.weight", {8, 16}},
               {"norm1.weight", {8}},
               {"norm2.weight", {8}}});
  TransformerEncoder enc(TransformerEncoderLayer(8, 2, 16), 2,
                         std::make_shared<LayerNorm>(Shape{8}));
  std::vector<std::pair<std::string, Shape>> expect;
  for (std::string i : {"0", "1"})
    for (auto [k, s] : kLayerKeys) expect.push_back({"layers." + i + "." + k, s});
  expect.push_back({"norm.weight", {8}});
  expect.push_back({"norm.bias", {8}});
  expect_keys(enc, expect);
}

TEST(TransformerEncoder, ClonesStartEqualAndAreIndependent) {
  TransformerEncoderLayer proto(4, 2, 8, 0.0, "relu", 1e-5, false, false, true, kF64);
  randomise(proto, 5);
  TransformerEncoder enc(proto, 3);
  ASSERT_EQ(enc.layers->size(), 3u);
  StateDict p = proto.state_dict();
  for (size_t i = 0; i < 3; ++i) {
    StateDict li = enc.layer(i)->state_dict();
    for (const auto& k : p.keys()) {
      EXPECT_TRUE(all(eq(li[k], p[k])).item<bool>()) << k;
      EXPECT_FALSE(li[k].shares_storage_with(p[k])) << k;
    }
  }
  set_values(enc.layer(0)->linear1->weight, Vec(32, 0.5));
  EXPECT_FALSE(all(eq(enc.layer(1)->linear1->weight, enc.layer(0)->linear1->weight)).item<bool>());
}

TEST(TransformerEncoder, ForwardIsLayersThenNorm) {
  const int64_t E = 4, S = 4, N = 2;
  TransformerEncoderLayer proto(E, 2, 8, 0.2, "gelu", 1e-5, true, false, true, kF64);
  auto norm = std::make_shared<LayerNorm>(Shape{E}, 1e-5, true, true, kF64);
  TransformerEncoder enc(proto, 2, norm);
  randomise(enc, 9);
  enc.eval();
  Vec x = rand_vals(size_t(S * N * E), 10);
  auto causal = [](int64_t, int64_t, int64_t i, int64_t j) { return j <= i ? 0.0 : -kInf; };
  Vec y = ref_layer(*enc.layer(0), x, S, N, causal);
  y = ref_layer(*enc.layer(1), y, S, N, causal);
  y = ref_layer_norm(y, host(norm->weight), host(norm->bias), E, 1e-5);
  Tensor tx = f64(swap01(x, S, N, E), {N, S, E});
  Tensor mask = generate_square_subsequent_mask(S, kF64);
  // The causal mask is detected (is_causal unset), given explicitly, or given as bool.
  expect_values(enc(tx, mask), {N, S, E}, swap01(y, S, N, E), 1e-12);
  expect_values(enc(tx, mask, {}, true), {N, S, E}, swap01(y, S, N, E), 1e-12);
  expect_values(enc(tx, triu(ones({S, S}, DType::Bool), 1)), {N, S, E}, swap01(y, S, N, E), 1e-12);
}

TEST(TransformerEncoder, SquareSubsequentMask) {
  Tensor m = generate_square_subsequent_mask(3, kF64);
  EXPECT_EQ(m.shape(), Shape({3, 3}));
  EXPECT_EQ(m.to_vector<double>(), Vec({0, -kInf, -kInf, 0, 0, -kInf, 0, 0, 0}));
  EXPECT_EQ(generate_square_subsequent_mask(2).dtype(), DType::F32);
}

TEST(TransformerEncoder, TrainsAndEveryParameterGetsAGradient) {
  // Learn to copy the token at position 0 to every position (needs attention).
  const int64_t E = 8, S = 4, N = 8;
  TransformerEncoderLayer proto(E, 2, 16, 0.0, "relu", 1e-5, true, true, true, kF64);
  TransformerEncoder enc(proto, 2, std::make_shared<LayerNorm>(Shape{E}, 1e-5, true, true, kF64));
  Tensor x = f64(rand_vals(size_t(N * S * E), 11, -1, 1), {N, S, E});
  Tensor target = expand(x.narrow(1, 0, 1), {N, S, E});
  optim::Adam opt(enc.parameters(), {.lr = 0.01});
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    opt.zero_grad();
    Tensor loss = functional::mse_loss(enc(x), target.contiguous());
    autograd::backward({loss});
    if (step == 0) {
      first = loss.item<double>();
      for (auto& [name, p] : enc.named_parameters())
        EXPECT_TRUE(autograd::grad(p).defined()) << name;
    }
    last = loss.item<double>();
    opt.step();
  }
  EXPECT_LT(last, 0.5 * first);
}

TEST(TransformerEncoderLayer, Gradcheck) {
  auto l = std::make_shared<TransformerEncoderLayer>(4, 2, 6, 0.0, "gelu", 1e-5, false, false,
                                                     true, kF64);
  randomise(*l, 13);
  Tensor x = leaf({3, 2, 4}, 14);
  Tensor kpm = tensor_from(std::vector<uint8_t>{0, 0, 1, 0, 1, 0}, {2, 3}, TensorOptions(DType::Bool));
  KILN_EXPECT_GRADCHECK([&](const V& in) { return l->forward(in[0], {}, kpm); }, V{x});
  auto pre = std::make_shared<TransformerEncoderLayer>(4, 2, 6, 0.0, "relu", 1e-5, false, true,
                                                       true, kF64);
  randomise(*pre, 15);
  Tensor mask = generate_square_subsequent_mask(3, kF64);
  KILN_EXPECT_GRADCHECK([&](const V& in) { return pre->forward(in[0], mask, {}, true); }, V{x});
}

TEST(TransformerEncoderLayer, Errors) {
  EXPECT_THROW(TransformerEncoderLayer(8, 2, 16, 0.1, "tanh"), ValueError);
  EXPECT_THROW(TransformerEncoderLayer(8, 3), ValueError);
  EXPECT_THROW(TransformerEncoderLayer(8, 2, 0), ValueError);
  EXPECT_THROW(TransformerEncoderLayer(8, 2, 16, 1.5), ValueError);
  TransformerEncoderLayer l(8, 2, 16);
  EXPECT_THROW(l(zeros({2, 3, 5})), ShapeError);
  EXPECT_THROW(l(zeros({2, 3, 4, 8})), ShapeError);
  EXPECT_THROW(l(zeros({2, 3, 8}), {}, zeros({3, 2}, DType::I64)), Error);
  EXPECT_THROW(l(zeros({2, 3, 8}), {}, {}, /*is_causal=*/true), ValueError);
  EXPECT_THROW(TransformerEncoder(l, -1), ValueError);
}

}  // namespace
}  // namespace kiln::nn
