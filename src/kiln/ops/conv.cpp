// convolution and convolution_weight_grad: argument checks with PyTorch's messages, output
// shapes, and the public functions. The kernels see contiguous (or, for 4-D input,
// channels-last) inputs of one floating dtype and per-dim lists already expanded to one
// entry per spatial dim.
#include "kiln/ops/conv.h"

#include "conv_geometry.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

using ops::ConvAttrs;

// inputs {input, weight, bias?}; attrs as ConvAttrs::to_attrs.
std::vector<TensorMeta> convolution_meta(const OpCall& c) {
  ConvAttrs a = ConvAttrs::from_call(c, 0);
  return {{ops::conv_output_shape(c.inputs[0].shape(), c.inputs[1].shape(), a),
           c.inputs[0].dtype()}};
}

// inputs {input, grad_output}; attrs {weight_shape, ConvAttrs...}.
std::vector<TensorMeta> convolution_weight_grad_meta(const OpCall& c) {
  const auto& ws = c.ints_attr(0);
  return {{Shape(ws.begin(), ws.end()), c.inputs[0].dtype()}};
}

}  // namespace

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const ConvOptions& options) {
  return convolution_activation(input, weight, bias, options, {});
}

// convolution (no activation) or convolution_activation: one argument check and layout rule.
Tensor convolution_activation(const Tensor& input, const Tensor& weight, const Tensor& bias,
                              const ConvOptions& options, const ConvEpilogue& epilogue) {
  KILN_CHECK(weight.device() == input.device(), DeviceError, "convolution: expected weight on ",
             input.device().str(), ", got ", weight.device().str());
  const bool fused = epilogue.activation != ConvActivation::None;
  KILN_CHECK(epilogue.activation >= ConvActivation::None &&
                 epilogue.activation <= ConvActivation::HardSwish,
             ValueError, "convolution_activation: unknown activation ",
             int64_t(epilogue.activation));
  ConvAttrs a = ops::check_convolution(input, weight.shape(), weight.dtype(), bias, options);
  std::vector<AttrValue> attrs = a.to_attrs();
  if (fused) {
    attrs.emplace_back(int64_t(epilogue.activation));
    attrs.emplace_back(epilogue.alpha);
    attrs.emplace_back(epilogue.beta);
  }
  // A channels-last input stays as it is (the kernel reads it in place and writes a
  // channels-last result, as PyTorch); other layouts are made contiguous.
  return call_op(fused ? KILN_OP("convolution_activation") : KILN_OP("convolution"),
                 {input.is_channels_last() ? input : input.contiguous(),
                  weight.is_channels_last() ? weight : weight.contiguous(),
                  bias.defined() ? bias.contiguous() : Tensor()},
                 std::move(attrs));
}

Tensor convolution_weight_grad(const Tensor& input, const Tensor& grad_output,
                               const Shape& weight_shape, const ConvOptions& options) {
  KILN_CHECK(input.dtype() == grad_output.dtype(), Error,
             "convolution_weight_grad: expected input and grad_output of one dtype, got ",
             dtype_name(input.dtype()), " and ", dtype_name(grad_output.dtype()));
  ConvAttrs a =
      ops::check_convolution(input, weight_shape, input.dtype(), Tensor(), options);
  Shape expected = ops::conv_output_shape(input.shape(), weight_shape, a);
  KILN_CHECK(grad_output.shape() == expected, ShapeError,
             "convolution_weight_grad: expected grad_output of shape ", shape_str(expected),
             ", got ", shape_str(grad_output.shape()));
  std::vector<AttrValue> attrs{std::vector<int64_t>(weight_shape.begin(), weight_shape.end())};
  for (auto& v : a.to_attrs()) attrs.push_back(std::move(v));
  return call_op(KILN_OP("convolution_weight_grad"), {input.contiguous(), grad_output.contiguous()},
                 std::move(attrs));
}

namespace ops {
void register_conv_ops() {
  register_op("convolution",
              "convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, "
              "SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, "
              "SymInt groups) -> Tensor",
              convolution_meta)
      .keeps_channels_last = true;
  register_op("convolution_activation",
              "convolution_activation(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, "
              "SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, "
              "SymInt groups, int activation, float alpha, float beta) -> Tensor",
              convolution_meta)
      .keeps_channels_last = true;
  register_op("convolution_weight_grad",
              "convolution_weight_grad(Tensor input, Tensor grad_output, SymInt[] weight_shape, "
              "SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, "
              "SymInt[] output_padding, SymInt groups) -> Tensor",
              convolution_weight_grad_meta);
}
}  // namespace ops

}  // namespace kiln
