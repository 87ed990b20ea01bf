// nn::functional::scaled_dot_product_attention against a plain-loop float64 reference:
// masks (bool, float, broadcast), causal (L < S and L > S), scale, GQA, fully masked rows,
// dropout wiring, gradcheck and the errors.
#include "nn/attention_ref.h"
#include "nn/nn_test_util.h"

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;

// q [B, L, E], k [B, S, E], v [B, S, Ev] as float64 tensors with the given leading shape.
struct Qkv {
  Vec q, k, v;
  Tensor tq, tk, tv;
};
Qkv make_qkv(const Shape& lead, int64_t L, int64_t S, int64_t E, int64_t Ev, uint32_t seed) {
  int64_t B = numel_of(lead);
  Qkv r;
  r.q = rand_vals(size_t(B * L * E), seed, -2, 2);
  r.k = rand_vals(size_t(B * S * E), seed + 1, -2, 2);
  r.v = rand_vals(size_t(B * S * Ev), seed + 2, -2, 2);
  auto sh = [&](int64_t a, int64_t b) {
    Shape s = lead;
    s.push_back(a);
    s.push_back(b);
    return s;
  };
  r.tq = f64(r.q, sh(L, E));
  r.tk = f64(r.k, sh(S, E));
  r.tv = f64(r.v, sh(S, Ev));
  return r;
}
Shape out_shape(const Shape& lead, int64_t L, int64_t Ev) {
  Shape s = lead;
  s.push_back(L);
  s.push_back(Ev);
  return s;
}

TEST(ScaledDotProductAttention, NoMaskMatchesReference) {
  Shape lead{2, 3};
  auto d = make_qkv(lead, 4, 5, 3, 2, 1);
  Tensor out = F::scaled_dot_product_attention(d.tq, d.tk, d.tv);
  Vec ref = ref_attention(d.q, d.k, d.v, 6, 4, 5, 3, 2, 1 / std::sqrt(3.0), nullptr, true);
  expect_values(out, out_shape(lead, 4, 2), ref, 1e-12);
  // Unbatched (2-D) inputs and an explicit (negative) scale.
  auto u = make_qkv({}, 3, 4, 2, 3, 7);
  Vec ref_u = ref_attention(u.q, u.k, u.v, 1, 3, 4, 2, 3, -0.7, nullptr, true);
  expect_values(F::scaled_dot_product_attention(u.tq, u.tk, u.tv, {}, 0, false, -0.7),
                {3, 3}, ref_u, 1e-12);
}

TEST(ScaledDotProductAttention, BoolMaskBroadcastsOverBatch) {
  Shape lead{2, 2};
  const int64_t L = 3, S = 4;
  auto d = make_qkv(lead, L, S, 2, 3, 11);
  std::vector<uint8_t> keep = {1, 0, 1, 1,  //
                               0, 1, 1, 0,  //
                               1, 1, 1, 1};
  Tensor mask = tensor_from(keep, {L, S}, TensorOptions(DType::Bool));
  auto bias = [&](int64_t, int64_t i, int64_t j) { return keep[i * S + j] ? 0.0 : -kInf; };
  Vec ref = ref_attention(d.q, d.k, d.v, 4, L, S, 2, 3, 1 / std::sqrt(2.0), bias, true);
  expect_values(F::scaled_dot_product_attention(d.tq, d.tk, d.tv, mask), out_shape(lead, L, 3),
                ref, 1e-12);
}

TEST(ScaledDotProductAttention, FloatMaskPerBatchAndHead) {
  Shape lead{2, 3};
  const int64_t L = 2, S = 3;
  auto d = make_qkv(lead, L, S, 4, 2, 21);
  // [2, 1, L, S]: one bias per batch, broadcast over the 3 heads.
  Vec m = rand_vals(size_t(2 * L * S), 25, -3, 3);
  m[4] = -kInf;
  auto bias = [&](int64_t b, int64_t i, int64_t j) { return m[((b / 3) * L + i) * S + j]; };
  Vec ref = ref_attention(d.q, d.k, d.v, 6, L, S, 4, 2, 0.5, bias, true);
  expect_values(F::scaled_dot_product_attention(d.tq, d.tk, d.tv, f64(m, {2, 1, L, S})),
                out_shape(lead, L, 2), ref, 1e-12);
  // A float32 mask with float64 inputs is accepted (PyTorch allows float32 or q's dtype).
  expect_values(F::scaled_dot_product_attention(d.tq, d.tk, d.tv,
                                                f64(m, {2, 1, L, S}).to(DType::F32)),
                out_shape(lead, L, 2), ref, 1e-6);
}

TEST(ScaledDotProductAttention, CausalIsTopLeftAligned) {
  for (auto [L, S] : {std::pair<int64_t, int64_t>{4, 4}, {3, 5}, {5, 3}}) {
    auto d = make_qkv({2}, L, S, 3, 2, uint32_t(31 + L));
    auto bias = [](int64_t, int64_t i, int64_t j) { return j <= i ? 0.0 : -kInf; };
    Vec ref = ref_attention(d.q, d.k, d.v, 2, L, S, 3, 2, 1 / std::sqrt(3.0), bias, true);
    expect_values(F::scaled_dot_product_attention(d.tq, d.tk, d.tv, {}, 0, true),
                  {2, L, 2}, ref, 1e-12, "L=" + std::to_string(L) + " S=" + std::to_string(S));
  }
}

TEST(ScaledDotProductAttention, FullyMaskedRowsGiveZeroAndNoGradient) {
  // PyTorch 2.13 (the math and the CPU flash kernels alike) gives 0 for a query row whose
  // keys are all masked out, for bool and -inf masks, and a zero gradient there.
  auto d = make_qkv({1}, 3, 4, 2, 2, 41);
  std::vector<uint8_t> keep = {1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0};
  Tensor bmask = tensor_from(keep, {3, 4}, TensorOptions(DType::Bool));
  Tensor fmask = where(bmask, Scalar(0.0), full({3, 4}, Scalar(-kInf), DType::F64));
  auto bias = [&](int64_t, int64_t i, int64_t j) { return keep[i * 4 + j] ? 0.0 : -kInf; };
  Vec ref = ref_attention(d.q, d.k, d.v, 1, 3, 4, 2, 2, 1 / std::sqrt(2.0), bias, true);
  EXPECT_EQ(ref[2], 0.0);
  for (const Tensor& mask : {bmask, fmask}) {
    Tensor q = d.tq.clone();
    autograd::set_requires_grad(q);
    Tensor out = F::scaled_dot_product_attention(q, d.tk, d.tv, mask);
    expect_values(out, {1, 3, 2}, ref, 1e-12);
    autograd::backward({sum(out)});
    std::vector<double> g = autograd::grad(q).to_vector<double>();
    for (double x : g) EXPECT_FALSE(std::isnan(x));
    EXPECT_EQ(g[2], 0.0);
    EXPECT_EQ(g[3], 0.0);
  }
}

TEST(ScaledDotProductAttention, GroupedQueryAttention) {
  // 6 query heads share 2 key/value heads: query heads 0-2 use kv head 0, 3-5 use kv head 1.
  const int64_t Hq = 6, Hk = 2, L = 3, S = 4, E = 2;
  auto d = make_qkv({1, Hq}, L, S, E, E, 51);
  Vec k = rand_vals(size_t(Hk * S * E), 52), v = rand_vals(size_t(Hk * S * E), 53);
  Vec kr, vr;  // kv heads repeated per query head
  for (int64_t h = 0; h < Hq; ++h) {
    int64_t g = h / (Hq / Hk);
    kr.insert(kr.end(), k.begin() + g * S * E, k.begin() + (g + 1) * S * E);
    vr.insert(vr.end(), v.begin() + g * S * E, v.begin() + (g + 1) * S * E);
  }
  Vec ref = ref_attention(d.q, kr, vr, Hq, L, S, E, E, 1 / std::sqrt(double(E)), nullptr, true);
  Tensor out = F::scaled_dot_product_attention(d.tq, f64(k, {1, Hk, S, E}), f64(v, {1, Hk, S, E}),
                                               {}, 0, false, std::nullopt, nullptr, true);
  expect_values(out, {1, Hq, L, E}, ref, 1e-12);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq.narrow(1, 0, 5), f64(k, {1, Hk, S, E}),
                                               f64(v, {1, Hk, S, E}), {}, 0, false,
                                               std::nullopt, nullptr, true),
               ShapeError);
}

TEST(ScaledDotProductAttention, Float32MatchesReference) {
  auto d = make_qkv({2}, 5, 6, 4, 3, 61);
  Vec ref = ref_attention(d.q, d.k, d.v, 2, 5, 6, 4, 3, 0.5, nullptr, true);
  Tensor out = F::scaled_dot_product_attention(d.tq.to(DType::F32), d.tk.to(DType::F32),
                                               d.tv.to(DType::F32), {}, 0, true);
  EXPECT_EQ(out.dtype(), DType::F32);
  auto bias = [](int64_t, int64_t i, int64_t j) { return j <= i ? 0.0 : -kInf; };
  Vec ref_c = ref_attention(d.q, d.k, d.v, 2, 5, 6, 4, 3, 0.5, bias, true);
  expect_values(out.to(DType::F64), {2, 5, 3}, ref_c, 1e-5);
}

TEST(ScaledDotProductAttention, DropoutAppliesToTheWeights) {
  auto d = make_qkv({2}, 3, 4, 2, 2, 71);
  Generator g1(5), g2(5);
  Tensor out = F::scaled_dot_product_attention(d.tq, d.tk, d.tv, {}, 0.5, false, std::nullopt, &g1);
  // The same draws on the softmax weights, then @ v.
  Tensor w = softmax(matmul(d.tq, transpose(d.tk, -2, -1)) / std::sqrt(2.0), -1);
  Tensor expect = matmul(dropout(w, 0.5, true, &g2), d.tv);
  expect_values(out, {2, 3, 2}, expect.to_vector<double>(), 1e-12);
  // p = 1 drops everything.
  expect_values(F::scaled_dot_product_attention(d.tq, d.tk, d.tv, {}, 1.0), {2, 3, 2},
                Vec(12, 0.0), 0);
}

TEST(ScaledDotProductAttention, EmptySequences) {
  auto d = make_qkv({2}, 3, 0, 2, 4, 81);
  expect_values(F::scaled_dot_product_attention(d.tq, d.tk, d.tv), {2, 3, 4}, Vec(24, 0.0), 0);
  auto e = make_qkv({2}, 0, 3, 2, 4, 82);
  EXPECT_EQ(F::scaled_dot_product_attention(e.tq, e.tk, e.tv).shape(), Shape({2, 0, 4}));
}

TEST(ScaledDotProductAttention, Gradcheck) {
  Tensor q = leaf({2, 3, 2}, 91), k = leaf({2, 4, 2}, 92), v = leaf({2, 4, 3}, 93);
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2]); },
      (V{q, k, v}));
  KILN_EXPECT_GRADCHECK(
      [](const V& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, true); },
      (V{q, k, v}));
  // A bool mask with a fully masked row, and a learnable float mask (relative-position bias).
  std::vector<uint8_t> keep = {1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1};
  Tensor bmask = tensor_from(keep, {3, 4}, TensorOptions(DType::Bool));
  KILN_EXPECT_GRADCHECK(
      [&](const V& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2], bmask); },
      (V{q, k, v}));
  Tensor fmask = leaf({1, 3, 4}, 94);
  KILN_EXPECT_GRADCHECK(
      [](const V& in) {
        return F::scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0, false, 0.8);
      },
      (V{q, k, v, fmask}));
  Tensor qg = leaf({1, 4, 2, 2}, 95), kg = leaf({1, 2, 3, 2}, 96), vg = leaf({1, 2, 3, 2}, 97);
  KILN_EXPECT_GRADCHECK(
      [](const V& in) {
        return F::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, true, std::nullopt,
                                               nullptr, true);
      },
      (V{qg, kg, vg}));
  KILN_EXPECT_GRADCHECK(
      [](const V& in) {
        Generator g(3);
        return F::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.3, false,
                                               std::nullopt, &g);
      },
      (V{q, k, v}));
}

TEST(ScaledDotProductAttention, Errors) {
  auto d = make_qkv({2}, 3, 4, 2, 2, 101);
  Tensor mask = ones({3, 4}, DType::Bool);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq, d.tk, d.tv, mask, 0, true), ValueError);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq, d.tk, d.tv, ones({3, 4}, DType::I64)),
               Error);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq.to(DType::F32), d.tk.to(DType::F32),
                                               d.tv.to(DType::F32), zeros({3, 4}, DType::F64)),
               Error);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq.to(DType::F32), d.tk, d.tv), Error);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq, d.tk.narrow(2, 0, 1), d.tv), ShapeError);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq, d.tk, d.tv.narrow(1, 0, 3)), ShapeError);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq, d.tk, d.tv, ones({2, 2, 3, 4}, DType::Bool)),
               ShapeError);  // would widen the scores [2, 3, 4]
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq, d.tk, d.tv, ones({3, 5}, DType::Bool)),
               ShapeError);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq, d.tk, d.tv, {}, 1.5), ValueError);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq.select(0, 0).select(0, 0), d.tk, d.tv),
               ShapeError);
  EXPECT_THROW(F::scaled_dot_product_attention(d.tq[0], d.tk[0], d.tv[0], {}, 0, false,
                                               std::nullopt, nullptr, true),
               ShapeError);  // no heads dim
  try {
    F::scaled_dot_product_attention(d.tq, d.tk.narrow(2, 0, 1), d.tv);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 4, 1]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::nn
