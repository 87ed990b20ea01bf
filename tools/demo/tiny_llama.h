#pragma once
// A small Llama-style language model built from kiln.nn: token embedding, pre-norm blocks of
// causal self-attention with rotary position embeddings (RoPE) and a SwiGLU MLP, RMSNorm,
// and a linear head.
#include <memory>
#include <vector>

#include "kiln/nn/nn.h"

namespace kiln::demo {

struct LlamaConfig {
  int64_t vocab = 0;
  int64_t dim = 128;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t context = 64;
  int64_t hidden() const { return ((dim * 8 / 3) + 15) / 16 * 16; }  // SwiGLU width
};

class Attention : public nn::Module {
 public:
  explicit Attention(const LlamaConfig& c);
  // x: [B, T, dim]; cos/sin: [T, head_dim/2]; mask: [T, T] bool (true = masked out).
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& mask);

 private:
  int64_t heads_, head_dim_;
  std::shared_ptr<nn::Linear> wq_, wk_, wv_, wo_;
};

class SwiGLU : public nn::Module {
 public:
  explicit SwiGLU(const LlamaConfig& c);
  Tensor forward(const Tensor& x);

 private:
  std::shared_ptr<nn::Linear> w1_, w2_, w3_;
};

class Block : public nn::Module {
 public:
  explicit Block(const LlamaConfig& c);
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& mask);

 private:
  std::shared_ptr<nn::RMSNorm> norm1_, norm2_;
  std::shared_ptr<Attention> attn_;
  std::shared_ptr<SwiGLU> mlp_;
};

class TinyLlama : public nn::Module {
 public:
  explicit TinyLlama(const LlamaConfig& c);
  // tokens: int64 [B, T] with T <= context -> logits [B, T, vocab].
  Tensor forward(const Tensor& tokens);
  const LlamaConfig& config() const { return config_; }
  int64_t num_parameters() const;

 private:
  LlamaConfig config_;
  std::shared_ptr<nn::Embedding> embed_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<nn::RMSNorm> norm_;
  std::shared_ptr<nn::Linear> head_;
  Tensor rope_cos_, rope_sin_, causal_mask_;  // for the full context, on the model's device
};

// Applies rotary embeddings to x [B, H, T, head_dim] (pairs: first half with second half).
Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin);

}  // namespace kiln::demo
