#pragma once
// The nll_loss op and its backward (registered in nll_loss.cpp, CPU kernels in
// backends/cpu/nll_loss_kernels.cpp, derivatives in autograd/derivatives_loss.cpp). Not
// public: nn::functional::nll_loss and cross_entropy are the entry points.
#include <utility>

#include "kiln/tensor/tensor.h"

namespace kiln::ops {

// The op's reduction attribute (nn::functional::Reduction without BatchMean).
enum class NllReduction : int64_t { None = 0, Mean = 1, Sum = 2 };

// input [N, C, D] floating log-probabilities, target [N, D] int64 (ignore_index or a class in
// [0, C): anything else raises IndexError), weight [C] of the input's dtype or undefined.
// Returns {loss, total_weight}: loss is [N, D] for None and 0-d otherwise (Mean divides the
// weighted sum by the total weight of the targets not ignored, as PyTorch).
std::pair<Tensor, Tensor> nll_loss_op(const Tensor& input, const Tensor& target,
                                      const Tensor& weight, NllReduction reduction,
                                      int64_t ignore_index);

// The gradient of nll_loss_op's loss with respect to its input: [N, classes, D], zero but at
// each target class. grad_output has the loss's shape; total_weight is the forward's.
Tensor nll_loss_backward_op(const Tensor& grad_output, const Tensor& target, const Tensor& weight,
                            const Tensor& total_weight, int64_t classes, NllReduction reduction,
                            int64_t ignore_index);

}  // namespace kiln::ops
