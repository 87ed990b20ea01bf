#pragma once
// Fused first derivatives of the piecewise activations, each grad_output times f'(self) in
// one pass (as PyTorch's ops of the same names). Autograd's derivatives of relu, clamp,
// leaky_relu and softplus call them on the CPU where no graph of the backward is recorded;
// their op chains (a comparison, a cast or where, a product: 3-5 passes) stay for create_graph
// and other devices. grad_output and self: one floating dtype and one shape.
#include <optional>

#include "kiln/tensor/tensor.h"

namespace kiln {

// grad_output where self > threshold, else 0 (relu's derivative from its output).
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, double threshold);
// grad_output where min <= self <= max (either bound absent: unbounded), else 0.
Tensor clamp_backward(const Tensor& grad_output, const Tensor& self, std::optional<double> min,
                      std::optional<double> max);
// grad_output where self > 0, else grad_output * negative_slope.
Tensor leaky_relu_backward(const Tensor& grad_output, const Tensor& self, double negative_slope);
// grad_output where self * beta > threshold, else grad_output * sigmoid(self * beta).
Tensor softplus_backward(const Tensor& grad_output, const Tensor& self, double beta,
                         double threshold);

}  // namespace kiln
