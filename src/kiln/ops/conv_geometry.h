#pragma once
// Shared by the convolution op and its derivative: the attrs of the convolution ops in
// one struct, PyTorch's argument checks, and output sizes.
#include <vector>

#include "kiln/dispatch/op_call.h"
#include "kiln/ops/conv.h"

namespace kiln::ops {

struct ConvAttrs {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;

  // attrs order: stride, padding, dilation, transposed, output_padding, groups
  std::vector<AttrValue> to_attrs() const;
  static ConvAttrs from_call(const OpCall& c, size_t first);
  ConvOptions to_options() const;
};

// Validates a convolution of input [N, C, *spatial] with a weight of weight_shape (and
// bias, which may be undefined) and returns the expanded attrs. Errors as PyTorch's.
ConvAttrs check_convolution(const Tensor& input, const Shape& weight_shape, DType weight_dtype,
                            const Tensor& bias, const ConvOptions& options);

// The output size along spatial dim d for an input size and kernel size.
int64_t conv_output_size(int64_t in, int64_t kernel, const ConvAttrs& a, int64_t d);
Shape conv_output_shape(const Shape& input, const Shape& weight, const ConvAttrs& a);

// Expands a per-dim list: one entry repeats, n entries pass; else ValueError naming `what`.
std::vector<int64_t> expand_param(const char* op, const char* what,
                                  const std::vector<int64_t>& v, int64_t n);

}  // namespace kiln::ops
