#pragma once
// TransformerEncoderLayer and TransformerEncoder, as torch.nn's: the same submodules under
// the same names (self_attn, linear1, linear2, norm1, norm2; layers.<i>, norm), so a torch
// state_dict loads, and the same computation (post-norm by default, pre-norm with
// norm_first).
#include <memory>
#include <optional>
#include <string>

#include "kiln/nn/activation.h"
#include "kiln/nn/attention.h"
#include "kiln/nn/container.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/normalization.h"

namespace kiln::nn {

// The float causal mask of nn.Transformer.generate_square_subsequent_mask: [sz, sz] with
// -inf above the diagonal and 0 on and below it.
Tensor generate_square_subsequent_mask(int64_t sz, TensorOptions options = {});

// Self-attention then a feed-forward block (linear1 -> activation -> dropout -> linear2),
// each with dropout and a residual connection and LayerNorm:
//   post-norm: x = norm1(x + sa(x)); x = norm2(x + ff(x))
//   norm_first: x = x + sa(norm1(x)); x = x + ff(norm2(x))
class TransformerEncoderLayer : public Module {
 public:
  // activation: "relu" or "gelu" (ValueError otherwise).
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          double dropout = 0.1, std::string activation = "relu",
                          double layer_norm_eps = 1e-5, bool batch_first = false,
                          bool norm_first = false, bool bias = true, TensorOptions options = {});

  // src [S, N, E] (batch_first: [N, S, E]) or unbatched [S, E]; src_mask [S, S] or
  // [N * nhead, S, S]; src_key_padding_mask [N, S] ([S] unbatched). Bool masks mark with
  // true what may not be attended. is_causal: the hint of MultiheadAttention (src_mask
  // must then be the causal mask).
  Tensor forward(const Tensor& src, const Tensor& src_mask = Tensor(),
                 const Tensor& src_key_padding_mask = Tensor(), bool is_causal = false);
  Tensor operator()(const Tensor& src, const Tensor& src_mask = Tensor(),
                    const Tensor& src_key_padding_mask = Tensor(), bool is_causal = false) {
    return forward(src, src_mask, src_key_padding_mask, is_causal);
  }
  // A new layer with the same configuration, dtype, device, training mode, generators and
  // parameter values (independent copies), as copy.deepcopy in PyTorch.
  std::shared_ptr<TransformerEncoderLayer> clone() const;

  const int64_t d_model, nhead, dim_feedforward;
  const double dropout_p;
  const std::string activation;
  const double layer_norm_eps;
  const bool batch_first, norm_first, bias;

  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1;
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout1, dropout2;

 private:
  Tensor sa_block(const Tensor& x, const Tensor& mask, const Tensor& key_padding_mask,
                  bool is_causal);
  Tensor ff_block(const Tensor& x);
};

// num_layers copies of encoder_layer (each starting from its parameter values, as
// PyTorch's deep copies) registered as layers.0, layers.1, ..., then the optional final
// norm (any Tensor -> Tensor module, usually LayerNorm) registered as "norm".
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayer& encoder_layer, int64_t num_layers,
                     std::optional<AnyModule> norm = std::nullopt);

  // src and the masks as TransformerEncoderLayer::forward. is_causal unset: detected, as
  // PyTorch, by comparing mask with generate_square_subsequent_mask(S).
  Tensor forward(const Tensor& src, const Tensor& mask = Tensor(),
                 const Tensor& src_key_padding_mask = Tensor(),
                 std::optional<bool> is_causal = std::nullopt);
  Tensor operator()(const Tensor& src, const Tensor& mask = Tensor(),
                    const Tensor& src_key_padding_mask = Tensor(),
                    std::optional<bool> is_causal = std::nullopt) {
    return forward(src, mask, src_key_padding_mask, is_causal);
  }

  const int64_t num_layers;
  std::shared_ptr<ModuleList> layers;
  std::optional<AnyModule> norm;
  // The i-th layer.
  std::shared_ptr<TransformerEncoderLayer> layer(size_t i) const {
    return layers->get<TransformerEncoderLayer>(i);
  }
};

}  // namespace kiln::nn
