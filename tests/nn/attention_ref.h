#pragma once
// Plain-loop float64 references for the attention tests: scaled dot-product attention,
// multi-head attention and layer norm, written from the definitions (no kiln ops).
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

namespace kiln::nn::test {

using Vec = std::vector<double>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// softmax of one row; a row that is all -inf gives NaN (plain) or zeros (safe).
inline Vec ref_softmax(const Vec& x, bool safe) {
  double m = -kInf;
  for (double v : x) m = std::max(m, v);
  Vec out(x.size());
  if (m == -kInf) {
    for (auto& o : out) o = safe ? 0.0 : std::nan("");
    return out;
  }
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += (out[i] = std::exp(x[i] - m));
  for (auto& o : out) o /= s;
  return out;
}

// out[b, i, :] = sum_j softmax_j(scale * q[b,i].k[b,j] + bias(b, i, j)) v[b, j, :], with q
// [B, L, E], k [B, S, E], v [B, S, Ev] row-major. weights (optional) receives [B, L, S].
inline Vec ref_attention(const Vec& q, const Vec& k, const Vec& v, int64_t B, int64_t L,
                         int64_t S, int64_t E, int64_t Ev, double scale,
                         const std::function<double(int64_t, int64_t, int64_t)>& bias,
                         bool safe, Vec* weights = nullptr) {
  Vec out(size_t(B * L * Ev), 0.0);
  if (weights) weights->assign(size_t(B * L * S), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      Vec row(static_cast<size_t>(S));
      for (int64_t j = 0; j < S; ++j) {
        double d = 0;
        for (int64_t e = 0; e < E; ++e) d += q[(b * L + i) * E + e] * k[(b * S + j) * E + e];
        row[j] = d * scale + (bias ? bias(b, i, j) : 0.0);
      }
      Vec p = ref_softmax(row, safe);
      for (int64_t j = 0; j < S; ++j) {
        if (weights) (*weights)[(b * L + i) * S + j] = p[j];
        for (int64_t e = 0; e < Ev; ++e) out[(b * L + i) * Ev + e] += p[j] * v[(b * S + j) * Ev + e];
      }
    }
  return out;
}

// y[r, o] = sum_i x[r, i] w[o, i] + b[o] for x [R, I], w [O, I], b [O] or empty.
inline Vec ref_linear(const Vec& x, const Vec& w, const Vec& b, int64_t R, int64_t I, int64_t O) {
  Vec y(size_t(R * O));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t o = 0; o < O; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int64_t i = 0; i < I; ++i) s += x[r * I + i] * w[o * I + i];
      y[r * O + o] = s;
    }
  return y;
}

// Layer norm over rows of length D (biased variance).
inline Vec ref_layer_norm(const Vec& x, const Vec& w, const Vec& b, int64_t D, double eps) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / size_t(D); ++r) {
    double m = 0, var = 0;
    for (int64_t d = 0; d < D; ++d) m += x[r * D + d];
    m /= double(D);
    for (int64_t d = 0; d < D; ++d) var += (x[r * D + d] - m) * (x[r * D + d] - m);
    var /= double(D);
    for (int64_t d = 0; d < D; ++d)
      y[r * D + d] = (x[r * D + d] - m) / std::sqrt(var + eps) * (w.empty() ? 1.0 : w[d]) +
                     (b.empty() ? 0.0 : b[d]);
  }
  return y;
}

// The weights of a MultiheadAttention, as host vectors (empty when absent).
struct MhaWeights {
  Vec wq, wk, wv;  // [E, E], [E, kdim], [E, vdim]
  Vec bq, bk, bv;  // [E] each
  Vec wo, bo;      // [E, E], [E]
  Vec bias_k, bias_v;  // [E]
};

// Multi-head attention from the definition, sequence-first: query [L, N, E], key [S, N, kd],
// value [S, N, vd]. masked(n, h, i, j): the additive mask (0, -inf or a float) for batch n,
// head h, query i, key j over the S keys (the extra keys of bias_kv/zero_attn are never
// masked). Returns out [L, N, E]; weights (optional) gets [N, H, L, S'] per head.
inline Vec ref_mha(const Vec& query, const Vec& key, const Vec& value, const MhaWeights& W,
                   int64_t L, int64_t S, int64_t N, int64_t E, int64_t kd, int64_t vd, int64_t H,
                   bool zero_attn,
                   const std::function<double(int64_t, int64_t, int64_t, int64_t)>& masked,
                   bool safe, Vec* weights = nullptr) {
  const int64_t hd = E / H;
  Vec q = ref_linear(query, W.wq, W.bq, L * N, E, E);  // [L, N, E]
  Vec k = ref_linear(key, W.wk, W.bk, S * N, kd, E);   // [S, N, E]
  Vec v = ref_linear(value, W.wv, W.bv, S * N, vd, E);
  int64_t S2 = S + (W.bias_k.empty() ? 0 : 1) + (zero_attn ? 1 : 0);
  // Per (n, h): Q [L, hd], K [S2, hd], V [S2, hd].
  Vec Q(size_t(N * H * L * hd)), K(size_t(N * H * S2 * hd), 0.0), V(size_t(N * H * S2 * hd), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      int64_t b = n * H + h;
      for (int64_t i = 0; i < L; ++i)
        for (int64_t d = 0; d < hd; ++d) Q[(b * L + i) * hd + d] = q[(i * N + n) * E + h * hd + d];
      for (int64_t j = 0; j < S; ++j)
        for (int64_t d = 0; d < hd; ++d) {
          K[(b * S2 + j) * hd + d] = k[(j * N + n) * E + h * hd + d];
          V[(b * S2 + j) * hd + d] = v[(j * N + n) * E + h * hd + d];
        }
      if (!W.bias_k.empty())
        for (int64_t d = 0; d < hd; ++d) {
          K[(b * S2 + S) * hd + d] = W.bias_k[h * hd + d];
          V[(b * S2 + S) * hd + d] = W.bias_v[h * hd + d];
        }
      // (the zero_attn position keeps its zeros)
    }
  auto bias = [&](int64_t b, int64_t i, int64_t j) {
    return j < S && masked ? masked(b / H, b % H, i, j) : 0.0;
  };
  Vec att = ref_attention(Q, K, V, N * H, L, S2, hd, hd, 1.0 / std::sqrt(double(hd)), bias,
                          safe, weights);
  Vec concat(size_t(L * N * E));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t d = 0; d < hd; ++d)
          concat[(i * N + n) * E + h * hd + d] = att[((n * H + h) * L + i) * hd + d];
  return ref_linear(concat, W.wo, W.bo, L * N, E, E);
}

// [A, B, C] row-major -> [B, A, C].
inline Vec swap01(const Vec& x, int64_t A, int64_t B, int64_t C) {
  Vec y(x.size());
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) y[(b * A + a) * C + c] = x[(a * B + b) * C + c];
  return y;
}

}  // namespace kiln::nn::test
