#include "conv_geometry.h"

#include <algorithm>

#include "kiln/core/error.h"
#include "kiln/ops/op_helpers.h"
#include "kiln/tensor/tensor.h"

namespace kiln::ops {

std::vector<AttrValue> ConvAttrs::to_attrs() const {
  return {stride, padding, dilation, transposed, output_padding, groups};
}

ConvAttrs ConvAttrs::from_call(const OpCall& c, size_t first) {
  ConvAttrs a;
  a.stride = c.ints_attr(first);
  a.padding = c.ints_attr(first + 1);
  a.dilation = c.ints_attr(first + 2);
  a.transposed = c.bool_attr(first + 3);
  a.output_padding = c.ints_attr(first + 4);
  a.groups = c.int_attr(first + 5);
  return a;
}

ConvOptions ConvAttrs::to_options() const {
  return {stride, padding, dilation, transposed, output_padding, groups};
}

std::vector<int64_t> expand_param(const char* op, const char* what,
                                  const std::vector<int64_t>& v, int64_t n) {
  if (int64_t(v.size()) == n) return v;
  KILN_CHECK(v.size() == 1, Error, op, ": expected ", what, " to be a single integer or a "
             "list of ", n, " integers (one per spatial dim), got a list of ", v.size());
  return std::vector<int64_t>(size_t(n), v[0]);
}

int64_t conv_output_size(int64_t in, int64_t kernel, const ConvAttrs& a, int64_t d) {
  const size_t i = size_t(d);
  const int64_t span = a.dilation[i] * (kernel - 1) + 1;
  if (a.transposed)
    return (in - 1) * a.stride[i] - 2 * a.padding[i] + span + a.output_padding[i];
  return (in + 2 * a.padding[i] - span) / a.stride[i] + 1;
}

Shape conv_output_shape(const Shape& input, const Shape& weight, const ConvAttrs& a) {
  Shape out{input[0], a.transposed ? weight[1] * a.groups : weight[0]};
  for (size_t d = 0; d + 2 < input.size(); ++d)
    out.push_back(conv_output_size(input[d + 2], weight[d + 2], a, int64_t(d)));
  return out;
}

ConvAttrs check_convolution(const Tensor& x, const Shape& w, DType weight_dtype,
                            const Tensor& bias, const ConvOptions& o) {
  const char* op = o.transposed ? "conv_transpose" : "convolution";
  KILN_CHECK(w.size() >= 3 && w.size() <= 5, ShapeError, op, ": expected a weight of 3, 4 or 5 "
             "dims ([out, in / groups, *kernel]), got shape ", shape_str(w));
  KILN_CHECK(x.dim() == int64_t(w.size()), ShapeError, "Expected ", w.size() - 1, "D (unbatched) "
             "or ", w.size(), "D (batched) input to ", op, ", but got input of size: ",
             shape_str(x.shape()));
  KILN_CHECK(is_floating(x.dtype()), Error, op, ": expected a floating-point input, got ",
             dtype_name(x.dtype()));
  KILN_CHECK(x.dtype() == weight_dtype || autocast_unifies(x, weight_dtype), Error,
             "Input type (", dtype_name(x.dtype()), ") and weight type (",
             dtype_name(weight_dtype), ") should be the same");
  const int64_t nd = int64_t(w.size()) - 2;
  ConvAttrs a;
  a.stride = expand_param(op, "stride", o.stride, nd);
  a.padding = expand_param(op, "padding", o.padding, nd);
  a.dilation = expand_param(op, "dilation", o.dilation, nd);
  a.output_padding = expand_param(op, "output_padding", o.output_padding, nd);
  a.transposed = o.transposed;
  a.groups = o.groups;
  KILN_CHECK(a.groups > 0, Error, "non-positive groups is not supported, got ", a.groups);
  for (int64_t d = 0; d < nd; ++d) {
    const size_t i = size_t(d);
    KILN_CHECK(a.stride[i] > 0, Error, "non-positive stride is not supported, got ",
               a.stride[i]);
    KILN_CHECK(a.padding[i] >= 0, Error, "negative padding is not supported, got ",
               a.padding[i]);
    KILN_CHECK(a.dilation[i] > 0, Error, "dilation should be greater than zero, got ",
               a.dilation[i]);
    KILN_CHECK(a.output_padding[i] >= 0, Error, "negative output_padding is not "
               "supported, got ", a.output_padding[i]);
    if (a.transposed)
      KILN_CHECK(a.output_padding[i] < std::max(a.stride[i], a.dilation[i]), Error,
                 "output padding must be smaller than either stride or dilation, but got "
                 "output_padding ", a.output_padding[i], ", stride ", a.stride[i], ", dilation ",
                 a.dilation[i]);
    else
      KILN_CHECK(a.output_padding[i] == 0, Error, "convolution: output_padding is only "
                 "used by transposed convolution, got ", a.output_padding[i]);
  }
  const int64_t c_in = x.size(1);
  if (a.transposed) {
    KILN_CHECK(w[0] == c_in, ShapeError, "Given transposed=1, weight of size ", shape_str(w),
               ", expected input", shape_str(x.shape()), " to have ", w[0],
               " channels, but got ", c_in, " channels instead");
    KILN_CHECK(w[0] % a.groups == 0, Error, "conv_transpose: in_channels (", w[0],
               ") must be divisible by groups (", a.groups, ")");
  } else {
    KILN_CHECK(w[0] % a.groups == 0, Error, "Given groups=", a.groups, ", expected weight "
               "to be divisible by ", a.groups, " at dimension 0, but got weight of size ",
               shape_str(w), " instead");
    KILN_CHECK(w[1] * a.groups == c_in, ShapeError, "Given groups=", a.groups, ", weight of size ",
               shape_str(w), ", expected input", shape_str(x.shape()), " to have ",
               w[1] * a.groups, " channels, but got ", c_in, " channels instead");
  }
  const int64_t c_out = a.transposed ? w[1] * a.groups : w[0];
  if (bias.defined()) {
    KILN_CHECK(bias.dim() == 1 && bias.size(0) == c_out, ShapeError, "Given weight of size ",
               shape_str(w), ", expected bias to be 1-dimensional with ", c_out,
               " elements, but got bias of size ", shape_str(bias.shape()), " instead");
    KILN_CHECK(bias.dtype() == x.dtype() || autocast_unifies(x, bias.dtype()), Error,
               "Input type (", dtype_name(x.dtype()), ") and bias type (",
               dtype_name(bias.dtype()), ") should be the same");
    KILN_CHECK(bias.device() == x.device(), DeviceError, op, ": expected bias on ",
               x.device().str(), ", got ", bias.device().str());
  }
  for (int64_t d = 0; d < nd; ++d) {
    const size_t i = size_t(d);
    if (!a.transposed) {
      const int64_t padded = x.size(2 + d) + 2 * a.padding[i];
      const int64_t span = a.dilation[i] * (w[2 + i] - 1) + 1;
      KILN_CHECK(padded >= span, ShapeError, "Calculated padded input size per channel: ",
                 padded, " along spatial dim ", d, ". Kernel size: ", span,
                 " (dilated). Kernel size can't be greater than actual input size");
    }
    const int64_t out = conv_output_size(x.size(2 + d), w[2 + i], a, d);
    KILN_CHECK(out > 0, ShapeError, "Given input size ", shape_str(x.shape()),
               ", calculated output size along spatial dim ", d, " is ", out,
               ", which is too small");
  }
  return a;
}

}  // namespace kiln::ops
