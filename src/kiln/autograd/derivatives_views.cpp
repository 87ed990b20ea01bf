// Derivatives of view ops and copies.
#include "kiln/autograd/node.h"
#include "kiln/dispatch/dispatcher.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/views.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;

Grads d_reshape_like(const GradContext& ctx, const Grads& go) {
  return {reshape(go[0], ctx.input_shapes[0])};
}

Grads d_permute(const GradContext& ctx, const Grads& go) {
  const std::vector<int64_t> dims = ctx.as_call().ints_attr(0);  // a copy: as_call() is a temporary
  int64_t nd = int64_t(dims.size());
  std::vector<int64_t> inverse(dims.size());
  for (int64_t i = 0; i < nd; ++i) inverse[size_t(wrap_dim(dims[size_t(i)], nd))] = i;
  return {permute(go[0], inverse)};
}

Grads d_expand(const GradContext& ctx, const Grads& go) { return {sum_to(go[0], ctx.input_shapes[0])}; }

// Views that pick (possibly overlapping) elements of the input: the gradient of each input
// element is the sum of the gradients of the output elements that view it. The same view op
// applied to a tensor of flat indices tells which input element each output element is.
Grads d_selecting_view(const GradContext& ctx, const Grads& go) {
  const Shape& shape = ctx.input_shapes[0];
  int64_t n = numel_of(shape);
  Device dev = go[0].device();
  Tensor flat_index = arange(n, TensorOptions(DType::I64, dev)).view(shape);
  if (ctx.op->name == "as_strided") {
    const SavedTensor& in = ctx.inputs[0];  // values unused: no version check, no unpack
    KILN_CHECK(in.is_contiguous(), NotImplementedError,
               "the derivative of as_strided is implemented for contiguous inputs only");
    // as_strided addresses the storage: shift by the input's own storage offset.
    OpCall c = ctx.as_call();
    int64_t offset = c.has_attr(2) ? c.int_attr(2) - in.storage_offset() : 0;
    KILN_CHECK(offset >= 0, NotImplementedError,
               "the derivative of as_strided before the input's start is not implemented");
    flat_index = kiln::as_strided(arange(n, TensorOptions(DType::I64, dev)), c.ints_attr(0),
                                  c.ints_attr(1), offset);
  } else {
    OpCall c = ctx.as_call();
    c.inputs = {flat_index};
    flat_index = ctx.op->view(c);
  }
  Tensor grad_in = zeros({n}, TensorOptions(go[0].dtype(), dev));
  grad_in = index_put(grad_in, {reshape(flat_index, {-1})}, reshape(go[0], {-1}), true);
  return {reshape(grad_in, shape)};
}

// Views whose elements are distinct input elements (slice, select, diagonal): the gradient
// is zero except at the viewed elements, which get the output gradient: zeros of the input's
// shape, the same view of them, one strided copy (no index tensor, no scatter). The copy_
// into a view records through CopySlices when the gradient itself needs a graph.
Grads d_distinct_view(const GradContext& ctx, const Grads& go) {
  Tensor grad_in = zeros(ctx.input_shapes[0], TensorOptions(go[0].dtype(), go[0].device()));
  OpCall c = ctx.as_call();
  c.inputs = {grad_in};
  Tensor region = ctx.op->view(c);
  region.copy_(go[0]);
  return {grad_in};
}

Grads d_to_copy(const GradContext& ctx, const Grads& go) {
  return {to_device(to_dtype(go[0], ctx.input_dtypes[0]), ctx.input_devices[0])};
}

Grads d_copy(const GradContext& ctx, const Grads& go) {
  // copy_(self <- src): the old values of self get no gradient; src gets it, summed over
  // broadcast dims and converted back to its dtype and device.
  Tensor g = sum_to(go[0], ctx.input_shapes[0]);
  return {to_device(to_dtype(g, ctx.input_dtypes[0]), ctx.input_devices[0])};
}

Grads d_no_inputs(const GradContext&, const Grads&) { return {}; }

}  // namespace

void register_view_derivatives() {
  for (const char* n : {"view", "reshape", "squeeze", "unsqueeze"}) register_derivative(n, d_reshape_like);
  register_derivative("permute", d_permute);
  register_derivative("expand", d_expand);
  for (const char* n : {"slice", "select", "diagonal"}) register_derivative(n, d_distinct_view);
  // unfold and as_strided may view one input element several times: gradients sum there.
  for (const char* n : {"unfold", "as_strided"}) register_derivative(n, d_selecting_view);
  register_derivative("_to_copy", d_to_copy);
  register_derivative("copy_", d_copy);
  register_derivative("fill_", d_no_inputs);
}

}  // namespace kiln::autograd
