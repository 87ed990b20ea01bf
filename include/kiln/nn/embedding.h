#pragma once
// Embedding: a lookup table of num_embeddings vectors of size embedding_dim.
#include <optional>

#include "kiln/nn/module.h"
#include "kiln/ops/factory.h"
#include "kiln/runtime/generator.h"

namespace kiln::nn {

// weight [num_embeddings, embedding_dim] ~ Normal(0, 1). The row padding_idx (negative
// counts from the end) is initialised to zeros and receives no gradient.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt, TensorOptions options = {});
  // indices: int64 (or int32) of any shape -> [..., embedding_dim].
  Tensor forward(const Tensor& indices);
  Tensor operator()(const Tensor& indices) { return forward(indices); }
  void reset_parameters(Generator* gen = nullptr);
  std::string extra_repr() const override;

  const int64_t num_embeddings, embedding_dim;
  const std::optional<int64_t> padding_idx;  // normalised to [0, num_embeddings)
  Tensor& weight;
};

}  // namespace kiln::nn
