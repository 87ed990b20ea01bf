// Derivatives of convolution and pooling. Convolution's input gradient is the transposed
// convolution with the same weight (and the reverse for transposed convolution); the weight
// gradient is its own op, whose derivative is again a pair of convolutions, so double
// backward works throughout. Max pooling routes gradients through the saved indices with
// scatter_add; the average pools' gradients are linear ops whose derivatives are the pools.
#include "kiln/autograd/node.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/pooling.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;

// attrs from `first`: stride, padding, dilation, transposed, output_padding, groups.
ConvOptions conv_options(const OpCall& c, size_t first) {
  return {c.ints_attr(first), c.ints_attr(first + 1), c.ints_attr(first + 2),
          c.bool_attr(first + 3), c.ints_attr(first + 4), c.int_attr(first + 5)};
}

// The transposed convolution that maps a gradient of a plain convolution's output back to
// an input of input_shape: the output padding makes up the rows the stride dropped.
Tensor conv_input_grad(const Tensor& grad, const Tensor& weight, const Shape& input_shape,
                       ConvOptions o) {
  if (o.transposed) {
    o.transposed = false;
    o.output_padding = std::vector<int64_t>(o.stride.size(), 0);
    return convolution(grad, weight, Tensor(), o);
  }
  o.transposed = true;
  for (size_t d = 0; d < o.stride.size(); ++d) {
    const int64_t span = o.dilation[d] * (weight.size(int64_t(d) + 2) - 1) + 1;
    const int64_t produced =
        (grad.size(int64_t(d) + 2) - 1) * o.stride[d] - 2 * o.padding[d] + span;
    o.output_padding[d] = input_shape[d + 2] - produced;
  }
  return convolution(grad, weight, Tensor(), o);
}

Grads d_convolution(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const ConvOptions o = conv_options(c, 0);
  Grads r(3);
  if (ctx.needs(0)) r[0] = conv_input_grad(go[0], ctx.input(1), ctx.input_shapes[0], o);
  if (ctx.needs(1)) r[1] = convolution_weight_grad(ctx.input(0), go[0], ctx.input_shapes[1], o);
  if (ctx.needs(2)) {
    Dims dims{0};
    for (int64_t d = 2; d < go[0].dim(); ++d) dims.push_back(d);
    r[2] = sum(go[0], dims);
  }
  return r;
}

// weight_grad(x, gy) is bilinear: with G the gradient of the weight gradient,
// plain: d/dgy = conv(x, G), d/dx = conv_transpose(gy, G);
// transposed: d/dgy = conv_transpose(x, G), d/dx = conv(gy, G).
Grads d_convolution_weight_grad(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const ConvOptions o = conv_options(c, 1);
  Grads r(2);
  if (ctx.needs(0)) r[0] = conv_input_grad(ctx.input(1), go[0], ctx.input_shapes[0], o);
  if (ctx.needs(1)) r[1] = convolution(ctx.input(0), go[0], Tensor(), o);
  return r;
}

// Gradient of a pool that picked one element per output (its flat index in the plane).
Tensor scatter_by_indices(const Tensor& grad, const Tensor& indices, const Shape& input_shape,
                          size_t spatial_dims, DType dtype, Device device) {
  const size_t lead = input_shape.size() - spatial_dims;
  Shape flat_in(input_shape.begin(), input_shape.begin() + int64_t(lead));
  Shape flat_out = flat_in;
  int64_t plane = 1;
  for (size_t i = lead; i < input_shape.size(); ++i) plane *= input_shape[i];
  flat_in.push_back(plane);
  flat_out.push_back(-1);
  Tensor g = zeros(flat_in, TensorOptions(dtype, device));
  return reshape(scatter_add(g, -1, reshape(indices, flat_out), reshape(grad, flat_out)),
                 input_shape);
}

// max_pool attrs {kernel, stride, padding, dilation, ceil_mode}, expanded per dim.
Grads d_max_pool(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  PoolOptions o;
  o.kernel_size = c.ints_attr(0);
  o.stride = c.ints_attr(1);
  o.padding = c.ints_attr(2);
  o.dilation = c.ints_attr(3);
  return {max_pool_backward(go[0], ctx.output(1), ctx.input_shapes[0], o)};
}
// max_pool_backward is linear in the gradient: its derivative reads each output's element of
// the incoming gradient back through the same indices (a gather); the indices get none.
Grads d_max_pool_backward(const GradContext& ctx, const Grads& go) {
  const Shape& gy = ctx.input_shapes[0];
  const size_t nd = ctx.as_call().ints_attr(1).size(), lead = gy.size() - nd;
  Shape flat(gy.begin(), gy.begin() + int64_t(lead));
  flat.push_back(-1);
  return {reshape(gather(reshape(go[0], flat), -1, reshape(ctx.input(1), flat)), gy), Tensor()};
}
Grads d_adaptive_max_pool(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  return {scatter_by_indices(go[0], ctx.output(1), ctx.input_shapes[0], c.ints_attr(0).size(),
                             ctx.input_dtypes[0], ctx.input_devices[0])};
}

// avg_pool attrs {kernel, stride, padding, ceil_mode, count_include_pad, divisor?} from first.
PoolOptions avg_options(const OpCall& c, size_t first) {
  PoolOptions o;
  o.kernel_size = c.ints_attr(first);
  o.stride = c.ints_attr(first + 1);
  o.padding = c.ints_attr(first + 2);
  o.ceil_mode = c.bool_attr(first + 3);
  o.count_include_pad = c.bool_attr(first + 4);
  if (c.has_attr(first + 5)) o.divisor_override = c.int_attr(first + 5);
  return o;
}

Grads d_avg_pool(const GradContext& ctx, const Grads& go) {
  return {avg_pool_backward(go[0], ctx.input_shapes[0], avg_options(ctx.as_call(), 0))};
}
Grads d_avg_pool_backward(const GradContext& ctx, const Grads& go) {
  PoolOptions o = avg_options(ctx.as_call(), 1);
  return {avg_pool(go[0], int64_t(o.kernel_size.size()), o)};
}
Grads d_adaptive_avg_pool(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  return {adaptive_avg_pool_backward(go[0], ctx.input_shapes[0],
                                     int64_t(c.ints_attr(0).size()))};
}
Grads d_adaptive_avg_pool_backward(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const int64_t nd = c.int_attr(1);
  const Shape& gy = ctx.input_shapes[0];
  return {adaptive_avg_pool(go[0], std::vector<int64_t>(gy.end() - nd, gy.end()))};
}

}  // namespace

void register_conv_derivatives() {
  register_derivative("convolution", d_convolution);
  register_derivative("convolution_weight_grad", d_convolution_weight_grad);
  register_derivative("max_pool", d_max_pool);
  register_derivative("max_pool_backward", d_max_pool_backward);
  register_derivative("adaptive_max_pool", d_adaptive_max_pool);
  register_derivative("avg_pool", d_avg_pool);
  register_derivative("avg_pool_backward", d_avg_pool_backward);
  register_derivative("adaptive_avg_pool", d_adaptive_avg_pool);
  register_derivative("adaptive_avg_pool_backward", d_adaptive_avg_pool_backward);
}

}  // namespace kiln::autograd
