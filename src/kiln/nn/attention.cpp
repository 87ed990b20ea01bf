// MultiheadAttention: the computation of torch.nn.functional.multi_head_attention_forward
// (PyTorch's general path; its inference fast path computes the same values).
#include "kiln/nn/attention.h"

#include <cmath>
#include <limits>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/functional_attention.h"
#include "kiln/nn/init.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::nn {

Tensor attention_mask_to_float(const Tensor& mask, DType dtype, const std::string& what) {
  if (!mask.defined()) return mask;
  KILN_CHECK(mask.dtype() == DType::Bool || mask.is_floating_point(), Error, what,
             ": only bool and floating masks are supported, got ", dtype_name(mask.dtype()));
  if (mask.is_floating_point()) return mask;
  return masked_fill(zeros(mask.shape(), TensorOptions(dtype, mask.device())), mask,
                     Scalar(-std::numeric_limits<double>::infinity()));
}

namespace {

constexpr const char* kName = "MultiheadAttention";

int64_t checked_heads(int64_t embed_dim, int64_t num_heads) {
  KILN_CHECK(embed_dim > 0 && num_heads > 0, ValueError, kName,
             ": embed_dim and num_heads must be greater than 0, got embed_dim=", embed_dim,
             " and num_heads=", num_heads);
  KILN_CHECK(embed_dim % num_heads == 0, ValueError, kName, ": embed_dim (", embed_dim,
             ") must be divisible by num_heads (", num_heads, ")");
  return embed_dim / num_heads;
}

int64_t checked_dim(const char* what, std::optional<int64_t> d, int64_t embed_dim) {
  KILN_CHECK(!d || *d > 0, ValueError, kName, ": ", what, " must be greater than 0, got ",
             d.value_or(0));
  return d.value_or(embed_dim);
}

double checked_dropout(double p) {
  KILN_CHECK(p >= 0.0 && p <= 1.0, ValueError, kName, ": dropout must be in [0, 1], got ", p);
  return p;
}

TensorOptions float_options(TensorOptions o) {
  KILN_CHECK(!o.dtype || is_floating(*o.dtype), TypeError, kName,
             ": needs a floating-point parameter dtype, got ", dtype_name(*o.dtype));
  return o;
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, double p, bool bias,
                                       bool add_bias_kv, bool zero_attn,
                                       std::optional<int64_t> kd, std::optional<int64_t> vd,
                                       bool bf, TensorOptions o)
    : Module(kName),
      embed_dim(e),
      num_heads(h),
      head_dim(checked_heads(e, h)),
      kdim(checked_dim("kdim", kd, e)),
      vdim(checked_dim("vdim", vd, e)),
      dropout(checked_dropout(p)),
      add_zero_attn(zero_attn),
      batch_first(bf),
      // q/k/v_proj_weight come first when they exist (the slot of an undefined
      // in_proj_weight is skipped by state_dict), matching PyTorch's key order.
      in_proj_weight(register_parameter(
          "in_proj_weight", qkv_same_embed_dim() ? empty({3 * e, e}, float_options(o)) : Tensor())),
      q_proj_weight(register_parameter(
          "q_proj_weight", qkv_same_embed_dim() ? Tensor() : empty({e, e}, float_options(o)))),
      k_proj_weight(register_parameter(
          "k_proj_weight", qkv_same_embed_dim() ? Tensor() : empty({e, kdim}, float_options(o)))),
      v_proj_weight(register_parameter(
          "v_proj_weight", qkv_same_embed_dim() ? Tensor() : empty({e, vdim}, float_options(o)))),
      in_proj_bias(register_parameter("in_proj_bias",
                                      bias ? empty({3 * e}, float_options(o)) : Tensor())),
      bias_k(register_parameter("bias_k",
                                add_bias_kv ? empty({1, 1, e}, float_options(o)) : Tensor())),
      bias_v(register_parameter("bias_v",
                                add_bias_kv ? empty({1, 1, e}, float_options(o)) : Tensor())),
      out_proj(register_module("out_proj", std::make_shared<Linear>(e, e, bias, o))) {
  reset_parameters();
}

void MultiheadAttention::reset_parameters(Generator* gen) {
  if (qkv_same_embed_dim()) {
    init::xavier_uniform_(in_proj_weight, 1.0, gen);
  } else {
    init::xavier_uniform_(q_proj_weight, 1.0, gen);
    init::xavier_uniform_(k_proj_weight, 1.0, gen);
    init::xavier_uniform_(v_proj_weight, 1.0, gen);
  }
  out_proj->reset_parameters(gen);
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
  if (bias_k.defined()) init::xavier_normal_(bias_k, 1.0, gen);
  if (bias_v.defined()) init::xavier_normal_(bias_v, 1.0, gen);
}

}  // namespace kiln::nn

namespace kiln::nn {

namespace {

// Appends a zero column to a float mask's last dim (for bias_k/bias_v and add_zero_attn,
// which add one key position that every query may attend).
Tensor pad_key_column(const Tensor& mask) {
  return mask.defined() ? pad(mask, {0, 1}) : mask;
}

}  // namespace

std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query_in,
                                                       const Tensor& key_in,
                                                       const Tensor& value_in,
                                                       const Tensor& key_padding_mask_in,
                                                       bool need_weights,
                                                       const Tensor& attn_mask_in,
                                                       bool average_attn_weights,
                                                       bool is_causal) {
  KILN_CHECK(query_in.defined() && key_in.defined() && value_in.defined(), ValueError, kName,
             ": query, key and value must be defined");
  // --- shapes: [L, N, E] batched or [L, E] unbatched -----------------------------------
  const bool batched = query_in.dim() == 3;
  KILN_CHECK(query_in.dim() == 3 || query_in.dim() == 2, ShapeError, kName,
             ": expected a 3-D (batched) or 2-D (unbatched) query, got shape ",
             shape_str(query_in.shape()));
  KILN_CHECK(key_in.dim() == query_in.dim() && value_in.dim() == query_in.dim(), ShapeError,
             kName, ": for a ", query_in.dim(), "-D query, expected ", query_in.dim(),
             "-D key and value, got shapes ", shape_str(key_in.shape()), " and ",
             shape_str(value_in.shape()));
  KILN_CHECK(!key_padding_mask_in.defined() || key_padding_mask_in.dim() == (batched ? 2 : 1),
             ShapeError, kName, ": for a ", batched ? "batched" : "unbatched",
             " query, expected a ", batched ? "2-D [N, S]" : "1-D [S]",
             " key_padding_mask, got shape ", shape_str(key_padding_mask_in.shape()));
  KILN_CHECK(!attn_mask_in.defined() || attn_mask_in.dim() == 2 || attn_mask_in.dim() == 3,
             ShapeError, kName, ": expected a 2-D or 3-D attn_mask, got shape ",
             shape_str(attn_mask_in.shape()));
  KILN_CHECK(query_in.is_floating_point(), Error, kName,
             ": expected a floating query, got ", dtype_name(query_in.dtype()));

  // Self-attention (one tensor for query, key and value) projects with one matmul.
  const bool self_attention = query_in.is_same(key_in) && key_in.is_same(value_in);
  Tensor query = query_in, key = key_in, value = value_in;
  Tensor key_padding_mask = key_padding_mask_in;
  if (batched && batch_first) {
    query = transpose(query, 0, 1);
    key = transpose(key, 0, 1);
    value = transpose(value, 0, 1);
  }
  if (!batched) {
    query = unsqueeze(query, 1);
    key = unsqueeze(key, 1);
    value = unsqueeze(value, 1);
    if (key_padding_mask.defined()) key_padding_mask = unsqueeze(key_padding_mask, 0);
  }
  const int64_t L = query.size(0), N = query.size(1), S0 = key.size(0);
  const DType dt = query.dtype();
  KILN_CHECK(query.size(2) == embed_dim, ShapeError, kName, ": expected query's last dim to be ",
             "embed_dim = ", embed_dim, ", got query of shape ", shape_str(query_in.shape()));
  KILN_CHECK(key.size(2) == kdim && value.size(2) == vdim, ShapeError, kName,
             ": expected key's last dim to be kdim = ", kdim, " and value's to be vdim = ", vdim,
             ", got key of shape ", shape_str(key_in.shape()), " and value of shape ",
             shape_str(value_in.shape()));
  KILN_CHECK(key.size(0) == value.size(0) && key.size(1) == value.size(1) && key.size(1) == N,
             ShapeError, kName, ": key and value must have the same sequence length and the "
             "query's batch size, got query ", shape_str(query_in.shape()), ", key ",
             shape_str(key_in.shape()), ", value ", shape_str(value_in.shape()),
             batch_first ? " (batch_first)" : "");

  // --- masks: canonical float form; the is_causal hint ---------------------------------
  key_padding_mask = attention_mask_to_float(key_padding_mask, dt, "key_padding_mask");
  KILN_CHECK(!is_causal || attn_mask_in.defined(), ValueError, kName,
             ": is_causal is a hint that needs attn_mask (the causal mask); pass one, e.g. "
             "generate_square_subsequent_mask(L)");
  Tensor attn_mask;
  if (is_causal && !key_padding_mask.defined() && !need_weights) {
    // attn_mask is declared causal: let SDPA build the causal mask instead.
  } else {
    attn_mask = attention_mask_to_float(attn_mask_in, dt, "attn_mask");
    if (key_padding_mask.defined()) is_causal = false;  // the merged mask is not causal
  }
  if (attn_mask.defined()) {
    if (attn_mask.dtype() != dt) attn_mask = attn_mask.to(dt);
    if (attn_mask.dim() == 2) {
      KILN_CHECK(attn_mask.shape() == Shape({L, S0}), ShapeError, kName,
                 ": the 2-D attn_mask must have shape [L, S] = [", L, ", ", S0, "], got ",
                 shape_str(attn_mask.shape()));
      attn_mask = unsqueeze(attn_mask, 0);
    } else {
      KILN_CHECK(attn_mask.shape() == Shape({N * num_heads, L, S0}), ShapeError, kName,
                 ": the 3-D attn_mask must have shape [N * num_heads, L, S] = [",
                 N * num_heads, ", ", L, ", ", S0, "], got ", shape_str(attn_mask.shape()));
    }
  }

  // --- input projections -> q [L, N, E], k [S, N, E], v [S, N, E] ---------------------
  Tensor q, k, v;
  if (qkv_same_embed_dim()) {
    if (self_attention) {
      std::vector<Tensor> qkv = chunk(functional::linear(query, in_proj_weight, in_proj_bias), 3, -1);
      q = qkv[0], k = qkv[1], v = qkv[2];
    } else {
      std::vector<Tensor> w = chunk(in_proj_weight, 3, 0);
      std::vector<Tensor> b(3);
      if (in_proj_bias.defined()) b = chunk(in_proj_bias, 3, 0);
      q = functional::linear(query, w[0], b[0]);
      k = functional::linear(key, w[1], b[1]);
      v = functional::linear(value, w[2], b[2]);
    }
  } else {
    std::vector<Tensor> b(3);
    if (in_proj_bias.defined()) b = chunk(in_proj_bias, 3, 0);
    q = functional::linear(query, q_proj_weight, b[0]);
    k = functional::linear(key, k_proj_weight, b[1]);
    v = functional::linear(value, v_proj_weight, b[2]);
  }
  if (bias_k.defined()) {
    k = cat({k, expand(bias_k, {1, N, embed_dim})}, 0);
    v = cat({v, expand(bias_v, {1, N, embed_dim})}, 0);
    attn_mask = pad_key_column(attn_mask);
    key_padding_mask = pad_key_column(key_padding_mask);
  }

  // --- heads: [N * H, L, hd] and [N * H, S, hd] -----------------------------------------
  const int64_t NH = N * num_heads;
  q = transpose(reshape(q, {L, NH, head_dim}), 0, 1);
  k = transpose(reshape(k, {k.size(0), NH, head_dim}), 0, 1);
  v = transpose(reshape(v, {v.size(0), NH, head_dim}), 0, 1);
  if (add_zero_attn) {
    k = cat({k, zeros({NH, 1, head_dim}, TensorOptions(dt, k.device()))}, 1);
    v = cat({v, zeros({NH, 1, head_dim}, TensorOptions(dt, v.device()))}, 1);
    attn_mask = pad_key_column(attn_mask);
    key_padding_mask = pad_key_column(key_padding_mask);
  }
  const int64_t S = k.size(1);
  if (key_padding_mask.defined()) {
    KILN_CHECK(key_padding_mask.shape() == Shape({N, S}), ShapeError, kName,
               ": expected key_padding_mask of shape [N, S] = [", N, ", ", S, "], got ",
               shape_str(key_padding_mask_in.shape()));
    Tensor kpm = reshape(expand(reshape(key_padding_mask, {N, 1, 1, S}), {N, num_heads, 1, S}),
                         {NH, 1, S});
    attn_mask = attn_mask.defined() ? attn_mask + kpm : kpm;
  }
  const double p = is_training() ? dropout : 0.0;

  // --- attention and output projection ----------------------------------------------------
  Tensor out, weights;
  if (need_weights) {
    Tensor scores = matmul(q * std::sqrt(1.0 / double(head_dim)), transpose(k, 1, 2));
    if (attn_mask.defined()) scores = scores + attn_mask;
    weights = kiln::softmax(scores, -1);  // plain softmax, as PyTorch's need_weights path
    if (p > 0.0) weights = kiln::dropout(weights, p, true, generator);
    out = reshape(transpose(matmul(weights, v), 0, 1), {L * N, embed_dim});
    weights = reshape(weights, {N, num_heads, L, S});
    if (average_attn_weights) weights = mean(weights, {1});
    if (!batched) weights = squeeze(weights, {0});
  } else {
    if (attn_mask.defined())
      attn_mask = attn_mask.size(0) == 1 ? unsqueeze(attn_mask, 0)
                                         : reshape(attn_mask, {N, num_heads, -1, S});
    Tensor o = functional::scaled_dot_product_attention(
        reshape(q, {N, num_heads, L, head_dim}), reshape(k, {N, num_heads, S, head_dim}),
        reshape(v, {N, num_heads, S, head_dim}), attn_mask, p, is_causal, std::nullopt,
        generator);
    out = reshape(permute(o, {2, 0, 1, 3}), {L * N, embed_dim});
  }
  out = reshape(out_proj->forward(out), {L, N, embed_dim});
  if (!batched) out = squeeze(out, {1});
  else if (batch_first) out = transpose(out, 0, 1);
  return {out, weights};
}

}  // namespace kiln::nn
