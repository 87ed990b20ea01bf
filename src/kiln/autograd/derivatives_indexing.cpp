// Derivatives of the indexing ops: index_select, gather, the scatter family, advanced
// indexing (index / index_put) and the mask ops. Written with ops, so that they are
// differentiable themselves (double backward with create_graph). Gradients of elements that
// several outputs read (repeated indices) accumulate through scatter_add / index_put with
// accumulate. The shape-building, sorting, cumulative-product and random ops are in
// derivatives_shape.cpp.
#include "kiln/autograd/node.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;

Tensor zeros_of(const Shape& shape, const Tensor& like) {
  return zeros(shape, TensorOptions(like.dtype(), like.device()));
}

// t (whose sizes are <= shape's, dim by dim) zero-padded at the end of each dim to shape:
// scatter-family ops may use only the leading part of src.
Tensor pad_to(Tensor t, const Shape& shape) {
  if (t.shape() == shape) return t;
  if (t.dim() == 0) t = reshape(t, Shape(shape.size(), 1));  // a 0-d index counts as [1]
  std::vector<int64_t> p;
  for (int64_t k = int64_t(shape.size()) - 1; k >= 0; --k) {
    p.push_back(0);
    p.push_back(shape[size_t(k)] - t.size(k));
  }
  return pad(t, p, "constant", 0);
}

// zeros(shape) with g added at index[i] along dim for each i (index 0-d or 1-d): the
// gradient of index_select.
Tensor index_add_into_zeros(const Shape& shape, int64_t dim, const Tensor& index,
                            const Tensor& g) {
  if (shape.empty()) return reshape(g, {});
  int64_t d = wrap_dim(dim, int64_t(shape.size()));
  Shape vs(shape.size(), 1);
  vs[size_t(d)] = index.numel();
  Tensor ie = expand(reshape(index, vs), g.shape());
  return scatter_add(zeros_of(shape, g), d, ie, g);
}

// The index tensors of an index / index_put call (inputs from `first` on; undefined: a
// whole dim). Undefined saved tensors are not unpacked.
std::vector<Tensor> saved_indices(const GradContext& ctx, size_t first) {
  std::vector<Tensor> idx;
  for (size_t i = first; i < ctx.inputs.size(); ++i)
    idx.push_back(ctx.inputs[i].defined() ? ctx.input(i) : Tensor());
  return idx;
}

// inputs: self, index; attrs: dim.
Grads d_index_select(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  return {index_add_into_zeros(ctx.input_shapes[0], c.int_attr(0), ctx.input(1), go[0]), {}};
}

// inputs: self, index0, index1, weight; attrs: dim. The blend's derivatives are 1 - w and w
// (both branches of lerp's formula) and, for the weight, x[index1] - x[index0].
Grads d_index_lerp(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const Shape& xs = ctx.input_shapes[0];
  const int64_t d = wrap_dim(c.int_attr(0), int64_t(xs.size()));
  Shape ws(xs.size(), 1);
  ws[size_t(d)] = go[0].size(d);
  const Tensor w = reshape(ctx.input(3), ws);
  Grads r(4);
  // One pass on the CPU when the backward is not itself recorded (index_lerp_backward); the
  // differentiable composite otherwise.
  if (ctx.needs(0) && !is_grad_enabled() && go[0].device().is_cpu() &&
      go[0].dtype() == ctx.input(3).dtype())
    r[0] = index_lerp_backward(go[0], d, xs[size_t(d)], ctx.input(1), ctx.input(2),
                               ctx.input(3));
  else if (ctx.needs(0))
    r[0] = index_add_into_zeros(xs, d, ctx.input(1), go[0] * (1 - w)) +
           index_add_into_zeros(xs, d, ctx.input(2), go[0] * w);
  if (ctx.needs(3)) {
    const Tensor x = ctx.input(0);
    const Tensor diff = index_select(x, d, ctx.input(2)) - index_select(x, d, ctx.input(1));
    r[3] = reshape(sum_to(go[0] * diff, ws), {ws[size_t(d)]});
  }
  return r;
}

// inputs: self, index; attrs: dim.
Grads d_gather(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  return {scatter_add(zeros_of(ctx.input_shapes[0], go[0]), c.int_attr(0), ctx.input(1), go[0]),
          {}};
}

// scatter (src): written positions take src (the last write wins with repeated indices; as
// PyTorch, every src element that targets a position gets that position's gradient).
Grads d_scatter(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  int64_t dim = c.int_attr(0);
  Tensor index = ctx.input(1);
  Grads r(3);
  if (ctx.needs(0)) r[0] = scatter(go[0], dim, index, Scalar(0.0));
  if (ctx.needs(2)) r[2] = pad_to(gather(go[0], dim, index), ctx.input_shapes[2]);
  return r;
}

// scatter.value: inputs self, index; attrs: dim, value.
Grads d_scatter_value(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  return {scatter(go[0], c.int_attr(0), ctx.input(1), Scalar(0.0)), {}};
}

Grads d_scatter_add(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  Grads r(3);
  if (ctx.needs(0)) r[0] = go[0];
  if (ctx.needs(2)) r[2] = pad_to(gather(go[0], c.int_attr(0), ctx.input(1)), ctx.input_shapes[2]);
  return r;
}

// scatter_reduce: inputs self, index, src; attrs: dim, reduce, include_self.
Grads d_scatter_reduce(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const int64_t dim = c.int_attr(0);
  const std::string reduce = c.string_attr(1);
  const bool include_self = c.bool_attr(2);
  const Tensor& g = go[0];
  Tensor index = ctx.input(1);
  const Shape& self_shape = ctx.input_shapes[0];
  const Shape& src_shape = ctx.input_shapes[2];
  // How many src elements each position of self receives.
  auto hits = [&] {
    Tensor ones_idx = ones(index.shape(), TensorOptions(g.dtype(), g.device()));
    return scatter_add(zeros_of(self_shape, g), dim, index, ones_idx);
  };
  // Positions that receive nothing keep self (gradient g); without include_self the others
  // do not depend on self.
  Tensor g_self_untouched;
  if (ctx.needs(0) && !include_self) g_self_untouched = masked_fill(g, gt(hits(), 0.0), 0.0);
  else if (ctx.needs(0)) g_self_untouched = g;
  Grads r(3);
  if (reduce == "sum") {
    if (ctx.needs(0)) r[0] = g_self_untouched;
    if (ctx.needs(2)) r[2] = pad_to(gather(g, dim, index), src_shape);
    return r;
  }
  if (reduce == "mean") {
    Tensor h = hits();
    Tensor n = include_self ? h + 1 : where(gt(h, 0.0), h, 1.0);
    Tensor gn = g / n;
    if (ctx.needs(0)) r[0] = include_self ? gn : g_self_untouched;
    if (ctx.needs(2)) r[2] = pad_to(gather(gn, dim, index), src_shape);
    return r;
  }
  Tensor out = ctx.output(0);
  Tensor src = ctx.input(2);
  // The src elements that take part (those covered by index).
  Tensor src_used = src;
  if (index.dim() == 0 && src.dim() > 0) {
    src_used = reshape(narrow(flatten(src), 0, 0, 1), {});
  } else if (src_shape != index.shape()) {
    for (int64_t k = 0; k < index.dim(); ++k)
      if (src_used.size(k) != index.size(k)) src_used = narrow(src_used, k, 0, index.size(k));
  }
  Tensor out_at = gather(out, dim, index);  // the result each src element contributed to
  if (reduce == "amax" || reduce == "amin") {
    // The gradient is split evenly among the elements equal to the result.
    Tensor src_hit = eq(src_used, out_at).to(g.dtype());
    Tensor count = scatter_add(zeros_of(self_shape, g), dim, index, src_hit);
    Tensor self_hit;
    if (include_self) {
      self_hit = eq(ctx.input(0), out).to(g.dtype());
      count = count + self_hit;
    }
    Tensor gc = g / where(eq(count, 0.0), 1.0, count);
    if (ctx.needs(0)) r[0] = include_self ? gc * self_hit : g_self_untouched;
    if (ctx.needs(2)) r[2] = pad_to(gather(gc, dim, index) * src_hit, src_shape);
    return r;
  }
  KILN_CHECK(reduce == "prod", NotImplementedError, "the derivative of scatter_reduce with reduce='",
             reduce, "' is not implemented");
  // d out / d e = the product of the other elements: out / e for e != 0; for e == 0 the
  // product of the nonzero others when e is the only zero, else 0.
  Tensor x = ctx.input(0);
  Tensor x_zero = eq(x, 0.0), src_zero = eq(src_used, 0.0);
  Tensor zeros_count = scatter_add(zeros_of(self_shape, g), dim, index, src_zero.to(g.dtype()));
  if (include_self) zeros_count = zeros_count + x_zero.to(g.dtype());
  Tensor prod_nonzero = scatter_reduce(where(x_zero, 1.0, x), dim, index,
                                       where(src_zero, 1.0, src_used), "prod", include_self);
  Tensor single_zero_prod = where(eq(zeros_count, 1.0), prod_nonzero, 0.0);
  if (ctx.needs(0)) {
    if (include_self)
      r[0] = g * where(x_zero, single_zero_prod, out / where(x_zero, 1.0, x));
    else
      r[0] = g_self_untouched;
  }
  if (ctx.needs(2)) {
    Tensor d = where(src_zero, gather(single_zero_prod, dim, index),
                     out_at / where(src_zero, 1.0, src_used));
    r[2] = pad_to(gather(g, dim, index) * d, src_shape);
  }
  return r;
}

// index: inputs self, one index per dim (undefined: the whole dim), already integer and
// broadcast together.
Grads d_index(const GradContext& ctx, const Grads& go) {
  Grads r(ctx.inputs.size());
  r[0] = index_put(zeros_of(ctx.input_shapes[0], go[0]), saved_indices(ctx, 1), go[0], true);
  return r;
}

// index_put: inputs self, values (of the indexing result's shape), indices; attrs: accumulate.
Grads d_index_put(const GradContext& ctx, const Grads& go) {
  bool accumulate = ctx.as_call().bool_attr(0);
  std::vector<Tensor> idx = saved_indices(ctx, 2);
  const Tensor& g = go[0];
  Grads r(ctx.inputs.size());
  if (ctx.needs(0))
    r[0] = accumulate ? g : index_put(g, idx, zeros({}, TensorOptions(g.dtype(), g.device())));
  if (ctx.needs(1)) r[1] = index(g, idx);
  return r;
}

// masked_fill: inputs self, mask (broadcast together); attrs: value.
Grads d_masked_fill(const GradContext& ctx, const Grads& go) {
  Grads r(2);
  r[0] = sum_to(masked_fill(go[0], ctx.input(1), 0.0), ctx.input_shapes[0]);
  return r;
}

// masked_select: inputs self and mask of one (broadcast) shape.
Grads d_masked_select(const GradContext& ctx, const Grads& go) {
  Grads r(2);
  r[0] = index_put(zeros_of(ctx.input_shapes[0], go[0]), {ctx.input(1)}, go[0]);
  return r;
}

}  // namespace

void register_shape_derivatives();  // derivatives_shape.cpp

void register_indexing_derivatives() {
  register_derivative("index_select", d_index_select);
  register_derivative("index_lerp", d_index_lerp);
  register_derivative("gather", d_gather);
  register_derivative("scatter", d_scatter);
  register_derivative("scatter.value", d_scatter_value);
  register_derivative("scatter_add", d_scatter_add);
  register_derivative("scatter_reduce", d_scatter_reduce);
  register_derivative("index", d_index);
  register_derivative("index_put", d_index_put);
  register_derivative("masked_fill", d_masked_fill);
  register_derivative("masked_select", d_masked_select);
  register_shape_derivatives();
}

}  // namespace kiln::autograd
