#include "tools/demo/tiny_llama.h"

#include <cmath>

#include "kiln/kiln.h"

namespace kiln::demo {

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  int64_t half = x.size(-1) / 2;
  Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

Attention::Attention(const LlamaConfig& c)
    : Module("Attention"), heads_(c.heads), head_dim_(c.dim / c.heads) {
  KILN_CHECK(c.dim % c.heads == 0 && head_dim_ % 2 == 0, ValueError, "model dim ", c.dim,
             " must split into ", c.heads, " heads of even size");
  wq_ = register_module("wq", std::make_shared<nn::Linear>(c.dim, c.dim, false));
  wk_ = register_module("wk", std::make_shared<nn::Linear>(c.dim, c.dim, false));
  wv_ = register_module("wv", std::make_shared<nn::Linear>(c.dim, c.dim, false));
  wo_ = register_module("wo", std::make_shared<nn::Linear>(c.dim, c.dim, false));
}

Tensor Attention::forward(const Tensor& x, const Tensor& cos, const Tensor& sin,
                          const Tensor& mask) {
  int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  auto split = [&](const Tensor& t) { return t.view({B, T, heads_, head_dim_}).transpose(1, 2); };
  Tensor q = apply_rope(split(wq_->forward(x)), cos, sin);
  Tensor k = apply_rope(split(wk_->forward(x)), cos, sin);
  Tensor v = split(wv_->forward(x));
  Tensor scores = matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(double(head_dim_)));
  Tensor att = softmax(masked_fill(scores, mask, -INFINITY), -1);
  Tensor out = matmul(att, v).transpose(1, 2).reshape({B, T, C});
  return wo_->forward(out);
}

SwiGLU::SwiGLU(const LlamaConfig& c) : Module("SwiGLU") {
  w1_ = register_module("w1", std::make_shared<nn::Linear>(c.dim, c.hidden(), false));
  w3_ = register_module("w3", std::make_shared<nn::Linear>(c.dim, c.hidden(), false));
  w2_ = register_module("w2", std::make_shared<nn::Linear>(c.hidden(), c.dim, false));
}

Tensor SwiGLU::forward(const Tensor& x) {
  return w2_->forward(silu(w1_->forward(x)) * w3_->forward(x));
}

Block::Block(const LlamaConfig& c) : Module("Block") {
  norm1_ = register_module("attention_norm", std::make_shared<nn::RMSNorm>(Shape{c.dim}, 1e-5));
  attn_ = register_module("attention", std::make_shared<Attention>(c));
  norm2_ = register_module("ffn_norm", std::make_shared<nn::RMSNorm>(Shape{c.dim}, 1e-5));
  mlp_ = register_module("feed_forward", std::make_shared<SwiGLU>(c));
}

Tensor Block::forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& mask) {
  Tensor h = x + attn_->forward(norm1_->forward(x), cos, sin, mask);
  return h + mlp_->forward(norm2_->forward(h));
}

TinyLlama::TinyLlama(const LlamaConfig& c) : Module("TinyLlama"), config_(c) {
  KILN_CHECK(c.vocab > 0 && c.layers > 0 && c.context > 0, ValueError,
             "TinyLlama needs a vocabulary, at least one layer and a context, got vocab ",
             c.vocab, ", layers ", c.layers, ", context ", c.context);
  embed_ = register_module("tok_embeddings", std::make_shared<nn::Embedding>(c.vocab, c.dim));
  auto layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.layers; ++i) {
    blocks_.push_back(std::make_shared<Block>(c));
    layers->push_back(blocks_.back());
  }
  norm_ = register_module("norm", std::make_shared<nn::RMSNorm>(Shape{c.dim}, 1e-5));
  head_ = register_module("output", std::make_shared<nn::Linear>(c.dim, c.vocab, false));
  {
    // Small initial embeddings keep the first logits near uniform.
    autograd::NoGradGuard ng;
    embed_->weight.mul_(full({}, 0.02));
  }
  // RoPE tables: angle(t, i) = t / 10000^(2i / head_dim).
  int64_t half = c.dim / c.heads / 2;
  Tensor pos = arange(c.context, DType::F32).unsqueeze(1);
  Tensor inv = exp(arange(half, DType::F32) * (-2.0 * std::log(10000.0) / double(2 * half)));
  Tensor angle = pos * inv.unsqueeze(0);
  rope_cos_ = cos(angle);
  rope_sin_ = sin(angle);
  causal_mask_ = triu(ones({c.context, c.context}, DType::Bool), 1);
}

Tensor TinyLlama::forward(const Tensor& tokens) {
  int64_t T = tokens.size(1);
  KILN_CHECK(T <= config_.context, ValueError, "sequence of ", T,
             " tokens is longer than the model's context of ", config_.context);
  Device d = embed_->weight.device();
  Tensor cos_t = rope_cos_.narrow(0, 0, T).to(d), sin_t = rope_sin_.narrow(0, 0, T).to(d);
  Tensor mask = causal_mask_.narrow(0, 0, T).narrow(1, 0, T).to(d);
  Tensor h = embed_->forward(tokens);
  for (auto& b : blocks_) h = b->forward(h, cos_t, sin_t, mask);
  return head_->forward(norm_->forward(h));
}

int64_t TinyLlama::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace kiln::demo
