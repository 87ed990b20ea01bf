#pragma once
// MultiheadAttention, as torch.nn.MultiheadAttention: the same parameters under the same
// names and shapes (so a torch state_dict loads), the same initialisation and masks.
#include <optional>
#include <tuple>

#include "kiln/nn/linear.h"
#include "kiln/nn/module.h"
#include "kiln/ops/factory.h"
#include "kiln/runtime/generator.h"

namespace kiln::nn {

// Attention over num_heads heads of size embed_dim / num_heads.
//
// Parameters (state_dict order):
//   in_proj_weight [3E, E]          when kdim == vdim == embed_dim, else
//   q_proj_weight [E, E], k_proj_weight [E, kdim], v_proj_weight [E, vdim];
//   in_proj_bias [3E] (bias), bias_k, bias_v [1, 1, E] (add_bias_kv),
//   out_proj.weight [E, E], out_proj.bias [E] (bias).
// Init as PyTorch: xavier_uniform_ for the input projections, zero biases, xavier_normal_
// for bias_k/bias_v, out_proj.weight as Linear's.
//
// The masks follow PyTorch's MultiheadAttention (not SDPA's): a bool key_padding_mask or
// attn_mask marks with true the positions that may NOT be attended; float masks are added
// to the scores.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0,
                     bool bias = true, bool add_bias_kv = false, bool add_zero_attn = false,
                     std::optional<int64_t> kdim = std::nullopt,
                     std::optional<int64_t> vdim = std::nullopt, bool batch_first = false,
                     TensorOptions options = {});

  // query [L, N, E] (batch_first: [N, L, E]) or unbatched [L, E]; key [S, N, kdim],
  // value [S, N, vdim] likewise. key_padding_mask [N, S] ([S] unbatched); attn_mask [L, S]
  // or [N * num_heads, L, S]. Returns the output (query's layout) and, when need_weights,
  // the attention weights [N, L, S] averaged over the heads (average_attn_weights) or
  // [N, num_heads, L, S]; the weights are undefined otherwise.
  //
  // is_causal is a hint, as in PyTorch: it needs attn_mask (ValueError otherwise), which
  // it declares to be the causal mask; without need_weights and key_padding_mask the
  // causal attention is then computed and attn_mask itself is not read.
  //
  // As PyTorch, the need_weights path uses a plain softmax (a query whose keys are all
  // masked gets NaN) while the other path goes through scaled_dot_product_attention
  // (such a query gets 0).
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = Tensor(),
                                     bool need_weights = true, const Tensor& attn_mask = Tensor(),
                                     bool average_attn_weights = true, bool is_causal = false);
  std::tuple<Tensor, Tensor> operator()(const Tensor& query, const Tensor& key,
                                        const Tensor& value,
                                        const Tensor& key_padding_mask = Tensor(),
                                        bool need_weights = true,
                                        const Tensor& attn_mask = Tensor(),
                                        bool average_attn_weights = true,
                                        bool is_causal = false) {
    return forward(query, key, value, key_padding_mask, need_weights, attn_mask,
                   average_attn_weights, is_causal);
  }
  // Re-initialises every parameter (out_proj.weight as Linear's).
  void reset_parameters(Generator* gen = nullptr);

  const int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  const double dropout;
  const bool add_zero_attn, batch_first;
  // Whether kdim == vdim == embed_dim (one packed in_proj_weight).
  bool qkv_same_embed_dim() const { return kdim == embed_dim && vdim == embed_dim; }

  Tensor& in_proj_weight;  // [3E, E] or undefined
  Tensor& q_proj_weight;   // [E, E] or undefined
  Tensor& k_proj_weight;   // [E, kdim] or undefined
  Tensor& v_proj_weight;   // [E, vdim] or undefined
  Tensor& in_proj_bias;    // [3E] or undefined
  Tensor& bias_k;          // [1, 1, E] or undefined
  Tensor& bias_v;          // [1, 1, E] or undefined
  std::shared_ptr<Linear> out_proj;
  // The generator attention dropout draws from (nullptr: the default one).
  Generator* generator = nullptr;
};

// PyTorch's mask canonicalisation for MultiheadAttention and the Transformer layers: a bool
// mask becomes a float mask of `dtype` (-inf where true, 0 elsewhere); a floating mask is
// returned as is; an undefined one stays undefined; any other dtype is a TypeError that
// names `what`.
Tensor attention_mask_to_float(const Tensor& mask, DType dtype, const std::string& what);

}  // namespace kiln::nn
