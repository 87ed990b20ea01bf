// nn::functional::scaled_dot_product_attention and the masked-row-safe softmax it uses.
#include "kiln/nn/functional_attention.h"

#include <cmath>
#include <limits>

#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::nn::functional {

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Whether `from` broadcasts to `to` without widening it.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  return true;
}

std::string describe(const Tensor& t) {
  return t.defined() ? std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape())
                     : std::string("undefined");
}
}  // namespace

Tensor safe_softmax(const Tensor& x, int64_t dim) {
  // A row of -inf would give exp(-inf - -inf) = NaN. Such rows are replaced by zeros
  // before the softmax (so its backward sees finite values) and by zeros after it (so the
  // row's output and gradient are 0).
  Tensor dead = all(eq(x, Scalar(kNegInf)), dim, /*keepdim=*/true);
  Tensor p = kiln::softmax(where(dead, Scalar(0.0), x), dim);
  return where(dead, Scalar(0.0), p);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen,
                                    bool enable_gqa) {
  const char* fn = "scaled_dot_product_attention";
  KILN_CHECK(q.defined() && k.defined() && v.defined(), ValueError, fn,
             ": query, key and value must be defined, got ", describe(q), ", ", describe(k),
             ", ", describe(v));
  KILN_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, ShapeError, fn,
             ": expected query, key and value of at least 2 dims ([..., L, E], [..., S, E], "
             "[..., S, Ev]), got shapes ", shape_str(q.shape()), ", ", shape_str(k.shape()),
             " and ", shape_str(v.shape()));
  KILN_CHECK(q.dtype() == k.dtype() && k.dtype() == v.dtype() && q.is_floating_point(),
             Error, fn, ": expected query, key and value of one floating dtype, got ",
             dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), " and ", dtype_name(v.dtype()));
  KILN_CHECK(k.size(-1) == q.size(-1), ShapeError, fn,
             ": key's last dim must equal query's (E = ", q.size(-1), "), got key of shape ",
             shape_str(k.shape()), " for query of shape ", shape_str(q.shape()));
  KILN_CHECK(v.size(-2) == k.size(-2), ShapeError, fn,
             ": value must have as many positions as key (S = ", k.size(-2),
             "), got value of shape ", shape_str(v.shape()), " for key of shape ",
             shape_str(k.shape()));
  KILN_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, ValueError, fn,
             ": dropout_p must be in [0, 1], got ", dropout_p);
  KILN_CHECK(!(is_causal && attn_mask.defined()), ValueError, fn,
             ": pass either attn_mask or is_causal = true, not both");
  if (attn_mask.defined()) {
    // As PyTorch: bool, float32 or the query's dtype.
    DType md = attn_mask.dtype();
    KILN_CHECK(md == DType::Bool || md == DType::F32 || md == q.dtype(), Error, fn,
               ": expected attn_mask of dtype bool, float32 or the query's dtype (",
               dtype_name(q.dtype()), "), got ", dtype_name(md));
  }

  // Grouped-query attention with one key/value head per group of g query heads: the group's
  // query heads are folded into rows ([..., hq, L, E] -> [..., hk, g * L, E]) so each key and
  // value is read once, instead of repeating them g times (5-10x faster when decoding one
  // token). Masks are tiled to the folded rows; a per-head mask keeps the repeat.
  if (enable_gqa && q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3 && k.size(-3) == v.size(-3) &&
      k.size(-3) > 0 && q.size(-3) != k.size(-3) && q.size(-3) % k.size(-3) == 0 &&
      (!attn_mask.defined() || attn_mask.dim() < 3 || attn_mask.size(-3) == 1)) {
    const int64_t hk = k.size(-3), g = q.size(-3) / hk, L = q.size(-2), S = k.size(-2);
    Shape folded = q.shape();
    folded[folded.size() - 3] = hk;
    folded[folded.size() - 2] = g * L;
    Tensor mask;
    if (is_causal) {
      mask = repeat(tril(ones({L, S}, TensorOptions(DType::Bool, q.device()))), {g, 1});
    } else if (attn_mask.defined()) {
      mask = attn_mask;
      if (mask.dim() >= 2 && mask.size(-2) == L && L > 1) {
        std::vector<int64_t> reps(size_t(mask.dim()), 1);
        reps[reps.size() - 2] = g;
        mask = repeat(mask, reps);
      }
    }
    Tensor out = scaled_dot_product_attention(q.reshape(folded), k, v, mask, dropout_p,
                                              /*is_causal=*/false, scale, gen, false);
    Shape out_shape = q.shape();
    out_shape.back() = v.size(-1);
    return out.reshape(out_shape);
  }

  Tensor key = k, value = v;
  if (enable_gqa) {
    KILN_CHECK(q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3, ShapeError, fn,
               ": enable_gqa needs a heads dim (-3) in query, key and value, got shapes ",
               shape_str(q.shape()), ", ", shape_str(k.shape()), ", ", shape_str(v.shape()));
    int64_t hq = q.size(-3), hk = k.size(-3), hv = v.size(-3);
    KILN_CHECK(hk > 0 && hv > 0 && hq % hk == 0 && hq % hv == 0, ShapeError, fn,
               ": with enable_gqa the key and value heads (", hk, ", ", hv,
               ") must divide the query heads (", hq, ")");
    if (hk != hq) key = repeat_interleave(k, hq / hk, -3);
    if (hv != hq) value = repeat_interleave(v, hq / hv, -3);
  }

  const int64_t L = q.size(-2), S = key.size(-2), E = q.size(-1);
  const double s = scale.value_or(1.0 / std::sqrt(double(E)));
  // Scaling q (L x E values) costs less than scaling the L x S scores.
  Tensor scores = matmul(q * s, transpose(key, -2, -1));
  Shape scores_shape = scores.shape();

  if (is_causal) {
    Tensor keep = tril(ones({L, S}, TensorOptions(DType::Bool, q.device())));
    scores = where(keep, scores, Scalar(kNegInf));
  } else if (attn_mask.defined()) {
    // PyTorch adds the mask to the scores in place: it may broadcast to them, not widen them.
    KILN_CHECK(broadcasts_to(attn_mask.shape(), scores_shape), ShapeError,
               fn, ": attn_mask of shape ", shape_str(attn_mask.shape()),
               " does not broadcast to the attention scores of shape ", shape_str(scores_shape));
    if (attn_mask.dtype() == DType::Bool)
      scores = where(attn_mask, scores, Scalar(kNegInf));
    else
      scores = scores + (attn_mask.dtype() == q.dtype() ? attn_mask : attn_mask.to(q.dtype()));
  }
  Tensor weights = safe_softmax(scores, -1);
  if (dropout_p > 0.0) weights = kiln::dropout(weights, dropout_p, /*train=*/true, gen);
  return matmul(weights, value);
}

}  // namespace kiln::nn::functional
