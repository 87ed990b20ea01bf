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

// An activation applied to a convolution's output as it is written (inference: an ONNX Conv
// followed by one of these is fused at load, as ONNX Runtime does). Relu: max(x, 0); Clip:
// min(max(x, alpha), beta); HardSigmoid: max(0, min(1, alpha x + beta)); HardSwish:
// x min(max(x + 3, 0), 6) / 6.
enum class ConvActivation : int64_t { None = 0, Relu = 1, Clip = 2, HardSigmoid = 3, HardSwish = 4 };
struct ConvEpilogue {
  ConvActivation activation = ConvActivation::None;
  double alpha = 0, beta = 0;
};

// convolution, then the epilogue's activation, as one op (`convolution_activation`: oneDNN
// applies it as a post-op; kiln's own kernels after the product). No gradient.
Tensor convolution_activation(const Tensor& input, const Tensor& weight, const Tensor& bias,
                              const ConvOptions& options, const ConvEpilogue& epilogue);

// The gradient of convolution with respect to its weight, given the input and the gradient
// of the output; weight_shape is the weight's shape. Linear in each argument, and itself
// differentiable (through convolution), so double backward works.
Tensor convolution_weight_grad(const Tensor& input, const Tensor& grad_output,
                               const Shape& weight_shape, const ConvOptions& options);

}  // namespace kiln
