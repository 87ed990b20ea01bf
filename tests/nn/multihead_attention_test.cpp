// nn::MultiheadAttention against a plain-loop float64 reference (masks, kdim/vdim, batch
// first, unbatched, bias_kv, zero_attn, both the need_weights and the SDPA paths), the
// is_causal hint, state_dict names and shapes (PyTorch 2.13's lists), init, gradcheck and
// the errors.
#include "nn/attention_ref.h"
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;

const TensorOptions kF64(DType::F64);

Vec host(const Tensor& t) { return t.defined() ? t.to_vector<double>() : Vec{}; }

// Gives every parameter random values (biases included, so they are exercised) and
// returns them as reference weights.
MhaWeights randomise(MultiheadAttention& m, uint32_t seed) {
  for (auto& [name, p] : m.named_parameters())
    set_values(p, rand_vals(size_t(p.numel()), seed++, -0.8, 0.8));
  MhaWeights w;
  const int64_t E = m.embed_dim;
  if (m.qkv_same_embed_dim()) {
    Vec all = host(m.in_proj_weight);
    w.wq.assign(all.begin(), all.begin() + E * E);
    w.wk.assign(all.begin() + E * E, all.begin() + 2 * E * E);
    w.wv.assign(all.begin() + 2 * E * E, all.end());
  } else {
    w.wq = host(m.q_proj_weight);
    w.wk = host(m.k_proj_weight);
    w.wv = host(m.v_proj_weight);
  }
  if (m.in_proj_bias.defined()) {
    Vec b = host(m.in_proj_bias);
    w.bq.assign(b.begin(), b.begin() + E);
    w.bk.assign(b.begin() + E, b.begin() + 2 * E);
    w.bv.assign(b.begin() + 2 * E, b.end());
  }
  w.wo = host(m.out_proj->weight);
  w.bo = host(m.out_proj->bias);
  w.bias_k = host(m.bias_k);
  w.bias_v = host(m.bias_v);
  return w;
}

// Mean over heads of [N, H, L, S] -> [N, L, S].
Vec head_mean(const Vec& w, int64_t N, int64_t H, int64_t LS) {
  Vec r(size_t(N * LS), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < LS; ++i) r[n * LS + i] += w[(n * H + h) * LS + i] / double(H);
  return r;
}

TEST(MultiheadAttention, SelfAttentionMatchesReference) {
  const int64_t E = 6, H = 2, L = 4, N = 3;
  MultiheadAttention m(E, H, 0.0, true, false, false, std::nullopt, std::nullopt, false, kF64);
  MhaWeights w = randomise(m, 1);
  Vec x = rand_vals(size_t(L * N * E), 100, -1.5, 1.5);
  Tensor tx = f64(x, {L, N, E});
  Vec per_head;
  Vec ref = ref_mha(x, x, x, w, L, L, N, E, E, E, H, false, nullptr, false, &per_head);
  auto [out, weights] = m(tx, tx, tx);  // one tensor: the packed projection path
  expect_values(out, {L, N, E}, ref, 1e-12);
  expect_values(weights, {N, L, L}, head_mean(per_head, N, H, L * L), 1e-12);
  // Separate (equal-valued) tensors take the three-projection path; the SDPA path.
  auto [out2, none] = m(tx.clone(), tx.clone(), tx.clone(), {}, false);
  expect_values(out2, {L, N, E}, ref, 1e-12);
  EXPECT_FALSE(none.defined());
  auto [out3, w3] = m(tx, tx, tx, {}, true, {}, false);
  expect_values(w3, {N, H, L, L}, per_head, 1e-12);
}

TEST(MultiheadAttention, CrossAttentionWithKdimVdimBatchFirst) {
  const int64_t E = 4, H = 2, L = 3, S = 5, N = 2, kd = 3, vd = 5;
  MultiheadAttention m(E, H, 0.0, true, false, false, kd, vd, /*batch_first=*/true, kF64);
  MhaWeights w = randomise(m, 10);
  Vec q = rand_vals(size_t(L * N * E), 200), k = rand_vals(size_t(S * N * kd), 201),
      v = rand_vals(size_t(S * N * vd), 202);
  Vec per_head;
  Vec ref = ref_mha(q, k, v, w, L, S, N, E, kd, vd, H, false, nullptr, false, &per_head);
  // batch_first: the inputs and output are [N, seq, feature].
  Tensor tq = f64(swap01(q, L, N, E), {N, L, E}), tk = f64(swap01(k, S, N, kd), {N, S, kd}),
         tv = f64(swap01(v, S, N, vd), {N, S, vd});
  for (bool need : {true, false}) {
    auto [out, weights] = m(tq, tk, tv, {}, need);
    expect_values(out, {N, L, E}, swap01(ref, L, N, E), 1e-12);
    if (need) expect_values(weights, {N, L, S}, head_mean(per_head, N, H, L * S), 1e-12);
  }
}

TEST(MultiheadAttention, KeyPaddingAndAttnMasksOnBothPaths) {
  const int64_t E = 4, H = 2, L = 3, S = 4, N = 2;
  MultiheadAttention m(E, H, 0.0, true, false, false, std::nullopt, std::nullopt, false, kF64);
  MhaWeights w = randomise(m, 20);
  Vec q = rand_vals(size_t(L * N * E), 300), k = rand_vals(size_t(S * N * E), 301),
      v = rand_vals(size_t(S * N * E), 302);
  Tensor tq = f64(q, {L, N, E}), tk = f64(k, {S, N, E}), tv = f64(v, {S, N, E});
  // Bool masks: true = may NOT attend. Query 1 of batch 1 ends up fully masked.
  std::vector<uint8_t> kpm = {0, 0, 1, 0,   // batch 0 ignores key 2
                              0, 1, 0, 0};  // batch 1 ignores key 1
  std::vector<uint8_t> am = {0, 0, 0, 1,    //
                             1, 0, 1, 1,    //
                             0, 0, 0, 0};
  auto masked = [&](int64_t n, int64_t, int64_t i, int64_t j) {
    return (kpm[n * S + j] || am[i * S + j]) ? -kInf : 0.0;
  };
  Tensor tkpm = tensor_from(kpm, {N, S}, TensorOptions(DType::Bool));
  Tensor tam = tensor_from(am, {L, S}, TensorOptions(DType::Bool));
  // need_weights: plain softmax, so the fully masked query row is NaN (as PyTorch).
  Vec per_head;
  Vec ref_nan = ref_mha(q, k, v, w, L, S, N, E, E, E, H, false, masked, false, &per_head);
  auto [out, weights] = m(tq, tk, tv, tkpm, true, tam);
  std::vector<double> got = out.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(ref_nan[i])) EXPECT_TRUE(std::isnan(got[i])) << i;
    else EXPECT_NEAR(got[i], ref_nan[i], 1e-12) << i;
  }
  // SDPA path: the fully masked row attends nothing (output = out_proj.bias).
  Vec ref = ref_mha(q, k, v, w, L, S, N, E, E, E, H, false, masked, true);
  auto [out2, none] = m(tq, tk, tv, tkpm, false, tam);
  expect_values(out2, {L, N, E}, ref, 1e-12);
  for (int64_t e = 0; e < E; ++e) EXPECT_NEAR(ref[(1 * N + 1) * E + e], w.bo[e], 1e-15);
  // Float masks, the attn_mask per batch and head [N * H, L, S].
  Vec fm = rand_vals(size_t(N * H * L * S), 303, -2, 2);
  Vec fk = rand_vals(size_t(N * S), 304, -2, 2);
  auto fmasked = [&](int64_t n, int64_t h, int64_t i, int64_t j) {
    return fm[((n * H + h) * L + i) * S + j] + fk[n * S + j];
  };
  Vec ref_f = ref_mha(q, k, v, w, L, S, N, E, E, E, H, false, fmasked, true, &per_head);
  for (bool need : {true, false}) {
    auto [o, wt] = m(tq, tk, tv, f64(fk, {N, S}), need, f64(fm, {N * H, L, S}), false);
    expect_values(o, {L, N, E}, ref_f, 1e-12);
    if (need) expect_values(wt, {N, H, L, S}, per_head, 1e-12);
  }
}

TEST(MultiheadAttention, UnbatchedInput) {
  const int64_t E = 4, H = 4, L = 2, S = 3;
  MultiheadAttention m(E, H, 0.0, false, false, false, std::nullopt, std::nullopt, true, kF64);
  MhaWeights w = randomise(m, 30);
  Vec q = rand_vals(size_t(L * E), 400), k = rand_vals(size_t(S * E), 401),
      v = rand_vals(size_t(S * E), 402);
  std::vector<uint8_t> kpm = {0, 1, 0};
  auto masked = [&](int64_t, int64_t, int64_t, int64_t j) { return kpm[j] ? -kInf : 0.0; };
  Vec per_head;
  Vec ref = ref_mha(q, k, v, w, L, S, 1, E, E, E, H, false, masked, false, &per_head);
  auto [out, weights] = m(f64(q, {L, E}), f64(k, {S, E}), f64(v, {S, E}),
                          tensor_from(kpm, {S}, TensorOptions(DType::Bool)), true, {}, false);
  expect_values(out, {L, E}, ref, 1e-12);
  expect_values(weights, {H, L, S}, per_head, 1e-12);
}

TEST(MultiheadAttention, BiasKvAndZeroAttn) {
  const int64_t E = 4, H = 2, L = 3, S = 2, N = 2;
  MultiheadAttention m(E, H, 0.0, true, /*add_bias_kv=*/true, /*add_zero_attn=*/true,
                       std::nullopt, std::nullopt, false, kF64);
  MhaWeights w = randomise(m, 40);
  Vec q = rand_vals(size_t(L * N * E), 500), k = rand_vals(size_t(S * N * E), 501),
      v = rand_vals(size_t(S * N * E), 502);
  std::vector<uint8_t> kpm = {0, 1, 1, 1};  // batch 1: every real key masked
  auto masked = [&](int64_t n, int64_t, int64_t, int64_t j) { return kpm[n * S + j] ? -kInf : 0.0; };
  Vec per_head;
  Vec ref = ref_mha(q, k, v, w, L, S, N, E, E, E, H, true, masked, false, &per_head);
  for (bool need : {true, false}) {
    auto [out, weights] = m(f64(q, {L, N, E}), f64(k, {S, N, E}), f64(v, {S, N, E}),
                            tensor_from(kpm, {N, S}, TensorOptions(DType::Bool)), need, {}, false);
    expect_values(out, {L, N, E}, ref, 1e-12);
    if (need) expect_values(weights, {N, H, L, S + 2}, per_head, 1e-12);
  }
}

TEST(MultiheadAttention, IsCausalHint) {
  const int64_t E = 4, H = 2, L = 4, N = 2;
  MultiheadAttention m(E, H, 0.0, true, false, false, std::nullopt, std::nullopt, false, kF64);
  MhaWeights w = randomise(m, 50);
  Vec x = rand_vals(size_t(L * N * E), 600);
  Tensor tx = f64(x, {L, N, E});
  auto causal = [](int64_t, int64_t, int64_t i, int64_t j) { return j <= i ? 0.0 : -kInf; };
  Vec ref = ref_mha(x, x, x, w, L, L, N, E, E, E, H, false, causal, true);
  Tensor mask = triu(ones({L, L}, DType::Bool), 1);
  for (bool need : {true, false}) {
    expect_values(std::get<0>(m(tx, tx, tx, {}, need, mask, true, /*is_causal=*/true)),
                  {L, N, E}, ref, 1e-12);
    expect_values(std::get<0>(m(tx, tx, tx, {}, need, mask)), {L, N, E}, ref, 1e-12);
  }
  EXPECT_THROW(m(tx, tx, tx, {}, false, {}, true, true), ValueError);
}

TEST(MultiheadAttention, DropoutOnlyInTraining) {
  const int64_t E = 4, L = 3, N = 2;
  MultiheadAttention m(E, 2, 0.5, true, false, false, std::nullopt, std::nullopt, false, kF64);
  Tensor x = f64(rand_vals(size_t(L * N * E), 700), {L, N, E});
  m.eval();
  MultiheadAttention ref(E, 2, 0.0, true, false, false, std::nullopt, std::nullopt, false, kF64);
  ref.load_state_dict(m.state_dict());
  expect_values(std::get<0>(m(x, x, x)), {L, N, E}, std::get<0>(ref(x, x, x)).to_vector<double>(),
                1e-14);
  m.train();
  Generator g1(9), g2(9);
  m.generator = &g1;
  Tensor a = std::get<0>(m(x, x, x, {}, false));
  m.generator = &g2;
  Tensor b = std::get<0>(m(x, x, x, {}, false));
  expect_values(a, {L, N, E}, b.to_vector<double>(), 0);  // same generator state, same mask
  Tensor c = std::get<0>(ref(x, x, x, {}, false));
  double diff = max(abs(a - c)).item<double>();
  EXPECT_GT(diff, 1e-6);
}

// Expected lists printed by PyTorch 2.13: [(k, tuple(v.shape)) for k, v in
// nn.MultiheadAttention(8, 2, ...).state_dict().items()].
void expect_keys(const Module& m, const std::vector<std::pair<std::string, Shape>>& expect) {
  StateDict sd = m.state_dict();
  std::vector<std::string> keys = sd.keys();
  ASSERT_EQ(keys.size(), expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ(keys[i], expect[i].first);
    EXPECT_EQ(sd[keys[i]].shape(), expect[i].second) << keys[i];
  }
}

TEST(MultiheadAttention, StateDictMatchesPyTorch) {
  expect_keys(MultiheadAttention(8, 2), {{"in_proj_weight", {24, 8}},
                                         {"in_proj_bias", {24}},
                                         {"out_proj.weight", {8, 8}},
                                         {"out_proj.bias", {8}}});
  expect_keys(MultiheadAttention(8, 2, 0.0, false),
              {{"in_proj_weight", {24, 8}}, {"out_proj.weight", {8, 8}}});
  expect_keys(MultiheadAttention(8, 2, 0.0, true, false, false, 3, 5),
              {{"q_proj_weight", {8, 8}},
               {"k_proj_weight", {8, 3}},
               {"v_proj_weight", {8, 5}},
               {"in_proj_bias", {24}},
               {"out_proj.weight", {8, 8}},
               {"out_proj.bias", {8}}});
  expect_keys(MultiheadAttention(8, 2, 0.0, true, true),
              {{"in_proj_weight", {24, 8}},
               {"in_proj_bias", {24}},
               {"bias_k", {1, 1, 8}},
               {"bias_v", {1, 1, 8}},
               {"out_proj.weight", {8, 8}},
               {"out_proj.bias", {8}}});
  // A state dict with those names loads (strict) into a fresh module.
  MultiheadAttention a(8, 2, 0.0, true, false, false, 3, 5), b(8, 2, 0.0, true, false, false, 3, 5);
  b.load_state_dict(a.state_dict());
  EXPECT_TRUE(all(eq(a.k_proj_weight, b.k_proj_weight)).item<bool>());
}

TEST(MultiheadAttention, InitAsPyTorch) {
  MultiheadAttention m(16, 4);
  EXPECT_EQ(max(abs(m.in_proj_bias)).item<double>(), 0.0);
  EXPECT_EQ(max(abs(m.out_proj->bias)).item<double>(), 0.0);
  // xavier_uniform_ on [48, 16]: bound sqrt(6 / (16 + 48)).
  double bound = std::sqrt(6.0 / 64.0), got = max(abs(m.in_proj_weight)).item<double>();
  EXPECT_LE(got, bound);
  EXPECT_GT(got, 0.8 * bound);
  // Linear's init for out_proj.weight: +-1/sqrt(16).
  EXPECT_LE(max(abs(m.out_proj->weight)).item<double>(), 0.25);
  MultiheadAttention s(4, 2, 0.0, true, false, false, 6, 2);
  EXPECT_LE(max(abs(s.k_proj_weight)).item<double>(), std::sqrt(6.0 / 10.0));
  EXPECT_FALSE(s.in_proj_weight.defined());
  EXPECT_EQ(m.parameters().size(), 4u);
}

TEST(MultiheadAttention, Gradcheck) {
  const int64_t E = 4, L = 3, S = 2, N = 2;
  auto m = std::make_shared<MultiheadAttention>(E, 2, 0.0, true, false, false, std::nullopt,
                                                std::nullopt, false, kF64);
  randomise(*m, 60);
  Tensor q = leaf({L, N, E}, 800), k = leaf({S, N, E}, 801), v = leaf({S, N, E}, 802);
  Tensor kpm = tensor_from(std::vector<uint8_t>{0, 1, 0, 0}, {N, S}, TensorOptions(DType::Bool));
  for (bool need : {true, false})
    KILN_EXPECT_GRADCHECK(
        [&](const V& in) { return std::get<0>(m->forward(in[0], in[1], in[2], kpm, need)); },
        (V{q, k, v}));
  // The parameters get gradients.
  autograd::backward({sum(std::get<0>(m->forward(q, k, v, kpm)))});
  for (auto& [name, p] : m->named_parameters())
    EXPECT_TRUE(autograd::grad(p).defined()) << name;
}

TEST(MultiheadAttention, Errors) {
  EXPECT_THROW(MultiheadAttention(6, 4), ValueError);
  EXPECT_THROW(MultiheadAttention(0, 1), ValueError);
  EXPECT_THROW(MultiheadAttention(4, 0), ValueError);
  EXPECT_THROW(MultiheadAttention(4, 2, 1.5), ValueError);
  MultiheadAttention m(4, 2, 0.0, true, false, false, std::nullopt, std::nullopt, false, kF64);
  Tensor x = zeros({3, 2, 4}, DType::F64);
  EXPECT_THROW(m(zeros({3, 2, 2, 4}, DType::F64), x, x), ShapeError);
  EXPECT_THROW(m(x, zeros({3, 4}, DType::F64), x), ShapeError);
  EXPECT_THROW(m(zeros({3, 2, 5}, DType::F64), x, x), ShapeError);
  EXPECT_THROW(m(x, zeros({3, 2, 5}, DType::F64), zeros({3, 2, 5}, DType::F64)), ShapeError);
  EXPECT_THROW(m(x, zeros({4, 2, 4}, DType::F64), x), ShapeError);
  EXPECT_THROW(m(x, x, x, zeros({2, 4}, DType::Bool)), ShapeError);
  EXPECT_THROW(m(x, x, x, zeros({2}, DType::Bool)), ShapeError);
  EXPECT_THROW(m(x, x, x, {}, true, zeros({3, 4}, DType::Bool)), ShapeError);
  EXPECT_THROW(m(x, x, x, {}, true, zeros({2, 3, 3}, DType::Bool)), ShapeError);
  EXPECT_THROW(m(x, x, x, {}, true, zeros({3, 3}, DType::I64)), Error);
  EXPECT_THROW(m(x, x, x, zeros({2, 3}, DType::I32)), Error);
}

}  // namespace
}  // namespace kiln::nn
