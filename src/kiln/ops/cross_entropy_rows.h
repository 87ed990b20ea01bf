#pragma once
// cross_entropy of [N, C] logits with [N] class indices as one op and its backward
// (registered in cross_entropy_rows.cpp, CPU kernels in
// backends/cpu/cross_entropy_rows_kernels.cpp, derivative in autograd/derivatives_loss.cpp).
// The log-probabilities are never formed: the forward reads the logits once for each row's
// logsumexp and the target's logit, the backward writes softmax - one-hot in one pass. Not
// public: nn::functional::cross_entropy takes it where autograd records a float32 / bfloat16
// CPU input without class weights or label smoothing (decision 0126).
#include <tuple>

#include "kiln/ops/nll_loss.h"

namespace kiln::ops {

// input [N, C] float32 / bfloat16, target [N] int64 (ignore_index or a class in [0, C)).
// Returns {loss, lse, total_weight}: loss [N] for None and 0-d otherwise, in the input's
// dtype (Mean: the sum over the targets not ignored divided by their count); lse [N] float32,
// each row's logsumexp; total_weight the count, float32 0-d.
std::tuple<Tensor, Tensor, Tensor> cross_entropy_rows(const Tensor& input, const Tensor& target,
                                                      NllReduction reduction,
                                                      int64_t ignore_index);

// The gradient with respect to the input: (softmax(input) - one_hot(target)) times each row's
// share of grad_output (0 for ignored targets). grad_output has the loss's shape.
Tensor cross_entropy_rows_backward(const Tensor& grad_output, const Tensor& input,
                                   const Tensor& target, const Tensor& lse,
                                   const Tensor& total_weight, NllReduction reduction,
                                   int64_t ignore_index);

}  // namespace kiln::ops
