#pragma once
// Convolution over 1, 2 or 3 spatial dims, plain and transposed, with stride, padding,
// dilation, output padding and groups: one op, `convolution`, as PyTorch's aten::convolution.
// input [N, C_in, *spatial]; weight [C_out, C_in / groups, *kernel] (plain) or
// [C_in, C_out / groups, *kernel] (transposed); bias [C_out] or undefined. The per-dim
// lists have one entry per spatial dim (a single entry is repeated). The nn layer
// (nn/functional_conv.h) adds unbatched inputs and padding="same"/"valid".
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {

struct ConvOptions {
  std::vector<int64_t> stride{1};
  std::vector<int64_t> padding{0};
  std::vector<int64_t> dilation{1};
  bool transposed = false;
  std::vector<int64_t> output_padding{0};  // transposed only: extra rows at the end
  int64_t groups = 1;
};

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const ConvOptions& options);

// The gradient of convolution with respect to its weight, given the input and the gradient
// of the output; weight_shape is the weight's shape. Linear in each argument, and itself
// differentiable (through convolution), so double backward works.
Tensor convolution_weight_grad(const Tensor& input, const Tensor& grad_output,
                               const Shape& weight_shape, const ConvOptions& options);

}  // namespace kiln
