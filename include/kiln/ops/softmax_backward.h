#pragma once
// The backward of softmax and log_softmax as one op each (PyTorch's _softmax_backward_data
// and _log_softmax_backward_data): from the incoming gradient g and the forward's output y,
// softmax: y * (g - sum(g * y, dim)), log_softmax: g - exp(y) * sum(g, dim). Used by their
// derivatives where no graph of the backward is recorded.
#include "kiln/tensor/tensor.h"

namespace kiln {

Tensor softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim);
Tensor log_softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim);

}  // namespace kiln
