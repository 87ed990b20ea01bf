// TransformerEncoderLayer, TransformerEncoder and the square causal mask.
#include "kiln/nn/transformer.h"

#include <limits>

#include "kiln/nn/functional.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"

namespace kiln::nn {

Tensor generate_square_subsequent_mask(int64_t sz, TensorOptions options) {
  KILN_CHECK(sz >= 0, ValueError, "generate_square_subsequent_mask: sz must be non-negative, got ",
             sz);
  return triu(full({sz, sz}, Scalar(-std::numeric_limits<double>::infinity()), options), 1);
}

namespace {

std::string checked_activation(std::string a) {
  KILN_CHECK(a == "relu" || a == "gelu", ValueError,
             "TransformerEncoderLayer: activation should be \"relu\" or \"gelu\", got \"", a,
             "\"");
  return a;
}

int64_t checked_positive(const char* what, int64_t v) {
  KILN_CHECK(v > 0, ValueError, "TransformerEncoderLayer: ", what,
             " must be greater than 0, got ", v);
  return v;
}

}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d, int64_t h, int64_t ff, double p,
                                                 std::string act, double eps, bool bf, bool nf,
                                                 bool with_bias, TensorOptions o)
    : Module("TransformerEncoderLayer"),
      d_model(d),
      nhead(h),
      dim_feedforward(checked_positive("dim_feedforward", ff)),
      dropout_p(p),
      activation(checked_activation(std::move(act))),
      layer_norm_eps(eps),
      batch_first(bf),
      norm_first(nf),
      bias(with_bias) {
  // Registered in PyTorch's order, which is the state_dict order.
  self_attn = register_module(
      "self_attn", std::make_shared<MultiheadAttention>(d, h, p, with_bias, false, false,
                                                        std::nullopt, std::nullopt, bf, o));
  linear1 = register_module("linear1", std::make_shared<Linear>(d, ff, with_bias, o));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  linear2 = register_module("linear2", std::make_shared<Linear>(ff, d, with_bias, o));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{d}, eps, true, with_bias, o));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{d}, eps, true, with_bias, o));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(p));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(p));
}

Tensor TransformerEncoderLayer::sa_block(const Tensor& x, const Tensor& mask,
                                         const Tensor& key_padding_mask, bool is_causal) {
  Tensor y = std::get<0>(self_attn->forward(x, x, x, key_padding_mask, /*need_weights=*/false,
                                            mask, true, is_causal));
  return dropout1->forward(y);
}

Tensor TransformerEncoderLayer::ff_block(const Tensor& x) {
  Tensor h = linear1->forward(x);
  h = activation == "relu" ? functional::relu(h) : functional::gelu(h);
  return dropout2->forward(linear2->forward(dropout->forward(h)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask, bool is_causal) {
  KILN_CHECK(src.defined(), ValueError, "TransformerEncoderLayer: src must be defined");
  KILN_CHECK(src.dim() == 3 || src.dim() == 2, ShapeError,
             "TransformerEncoderLayer: expected src of shape [S, N, E] (batch_first: [N, S, E]) "
             "or [S, E], got ", shape_str(src.shape()));
  KILN_CHECK(src.size(-1) == d_model, ShapeError, "TransformerEncoderLayer: expected src's "
             "last dim to be d_model = ", d_model, ", got shape ", shape_str(src.shape()));
  Tensor kpm = attention_mask_to_float(src_key_padding_mask, src.dtype(), "src_key_padding_mask");
  Tensor mask = attention_mask_to_float(src_mask, src.dtype(), "src_mask");
  Tensor x = src;
  if (norm_first) {
    x = x + sa_block(norm1->forward(x), mask, kpm, is_causal);
    x = x + ff_block(norm2->forward(x));
  } else {
    x = norm1->forward(x + sa_block(x, mask, kpm, is_causal));
    x = norm2->forward(x + ff_block(x));
  }
  return x;
}

std::shared_ptr<TransformerEncoderLayer> TransformerEncoderLayer::clone() const {
  const Tensor& w = linear1->weight;
  auto copy = std::make_shared<TransformerEncoderLayer>(
      d_model, nhead, dim_feedforward, dropout_p, activation, layer_norm_eps, batch_first,
      norm_first, bias, TensorOptions(w.dtype(), w.device()));
  copy->load_state_dict(state_dict());  // copies the values into the new parameters
  copy->train(is_training());
  copy->self_attn->generator = self_attn->generator;
  copy->dropout->generator = dropout->generator;
  copy->dropout1->generator = dropout1->generator;
  copy->dropout2->generator = dropout2->generator;
  return copy;
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& encoder_layer,
                                       int64_t n, std::optional<AnyModule> final_norm)
    : Module("TransformerEncoder"), num_layers(n), norm(std::move(final_norm)) {
  KILN_CHECK(n >= 0, ValueError, "TransformerEncoder: num_layers must be non-negative, got ", n);
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < n; ++i) layers->push_back(encoder_layer.clone());
  if (norm) register_module("norm", norm->ptr());
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask_in,
                                   const Tensor& src_key_padding_mask,
                                   std::optional<bool> is_causal) {
  KILN_CHECK(src.defined(), ValueError, "TransformerEncoder: src must be defined");
  Tensor kpm = attention_mask_to_float(src_key_padding_mask, src.dtype(), "src_key_padding_mask");
  Tensor mask = attention_mask_to_float(mask_in, src.dtype(), "mask");
  bool causal = is_causal.value_or(false);
  if (!is_causal && mask.defined() && src.dim() >= 2 && num_layers > 0) {
    // As PyTorch's _detect_is_causal_mask: the mask is the square causal mask of the
    // sequence length.
    bool bf = layer(0)->batch_first;
    int64_t seq_len = src.dim() == 2 ? src.size(0) : src.size(bf ? 1 : 0);
    Tensor causal_mask = generate_square_subsequent_mask(seq_len, TensorOptions(mask.dtype(), mask.device()));
    causal = mask.shape() == causal_mask.shape() && all(eq(mask, causal_mask)).item<bool>();
  }
  Tensor out = src;
  for (int64_t i = 0; i < num_layers; ++i) out = layer(size_t(i))->forward(out, mask, kpm, causal);
  if (norm) out = norm->forward(out);
  return out;
}

}  // namespace kiln::nn
