// Derivatives of the shape-building ops (cat, tril/triu, repeat, repeat_interleave, flip,
// roll, pad), sorting and selection (sort, topk), cumprod and prod (exact with zeros), and
// the random ops (dropout, bernoulli, the in-place fills). Written with ops so that they are
// differentiable themselves. stack (unsqueeze + cat), split/chunk (narrow views) and
// repeat_interleave with an integer count (expand + reshape) are composed of ops that
// record on their own.
#include "kiln/autograd/node.h"
#include "kiln/dispatch/dispatcher.h"
#include "kiln/ops/complex.h"
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

// Gradient of an op that copies input elements to output positions: `map` is the op applied
// to the flat positions of the input (int64, the output's shape); each input element gets
// the sum of the gradients of the outputs that copy it.
Tensor scatter_by_map(const Shape& in_shape, const Tensor& map, const Tensor& g) {
  Tensor flat = zeros_of({numel_of(in_shape)}, g);
  flat = index_put(flat, {reshape(map, {-1})}, reshape(g, {-1}), true);
  return reshape(flat, in_shape);
}

Tensor positions(const Shape& shape, Device dev) {
  return reshape(arange(numel_of(shape), TensorOptions(DType::I64, dev)), shape);
}

// cat: inputs the tensors; attrs: dim (wrapped).
Grads d_cat(const GradContext& ctx, const Grads& go) {
  int64_t d = ctx.as_call().int_attr(0);
  Grads r(ctx.inputs.size());
  int64_t start = 0;
  for (size_t i = 0; i < ctx.input_shapes.size(); ++i) {
    int64_t n = ctx.input_shapes[i][size_t(d)];
    if (ctx.needs(i)) r[i] = narrow(go[0], d, start, n);
    start += n;
  }
  return r;
}

Grads d_tril(const GradContext& ctx, const Grads& go) {
  return {tril(go[0], ctx.as_call().int_attr(0))};
}
Grads d_triu(const GradContext& ctx, const Grads& go) {
  return {triu(go[0], ctx.as_call().int_attr(0))};
}

// repeat: out[c] = x[c mod x.shape] (leading dims new): g viewed as (repeat, size) pairs
// per dim and summed over the repeats.
Grads d_repeat(const GradContext& ctx, const Grads& go) {
  const std::vector<int64_t> reps = ctx.as_call().ints_attr(0);
  const Shape& xs = ctx.input_shapes[0];
  size_t lead = reps.size() - xs.size();
  Shape split;
  Dims summed;
  for (size_t i = 0; i < reps.size(); ++i) {
    summed.push_back(int64_t(split.size()));
    split.push_back(reps[i]);
    if (i >= lead) split.push_back(xs[i - lead]);
  }
  if (summed.empty()) return {go[0]};
  return {reshape(sum(reshape(go[0], split), summed), xs)};
}

// repeat_interleave (tensor repeats): inputs self (>= 1-d), repeats; attrs: dim (wrapped).
Grads d_repeat_interleave(const GradContext& ctx, const Grads& go) {
  int64_t d = ctx.as_call().int_attr(0);
  const Shape& xs = ctx.input_shapes[0];
  const Tensor& g = go[0];
  Tensor src = repeat_interleave(arange(xs[size_t(d)], TensorOptions(DType::I64, g.device())),
                                 ctx.input(1), 0);  // input position of each output position
  Shape vs(xs.size(), 1);
  vs[size_t(d)] = src.numel();
  Tensor idx = expand(reshape(src, vs), g.shape());
  return {scatter_add(zeros_of(xs, g), d, idx, g), {}};
}

Grads d_flip(const GradContext& ctx, const Grads& go) {
  return {flip(go[0], ctx.as_call().ints_attr(0))};
}

// roll: attrs shifts, dims (wrapped).
Grads d_roll(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  std::vector<int64_t> shifts = c.ints_attr(0);
  for (int64_t& s : shifts) s = -s;
  return {roll(go[0], shifts, c.ints_attr(1))};
}

// pad: attrs pad (pairs, last dim first), mode, value. Constant: the opposite padding crops
// the padded border (and re-pads what a negative pad cropped, with zero gradient); other
// modes copy border elements, whose gradients add up.
Grads d_pad(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  std::vector<int64_t> p = c.ints_attr(0);
  const std::string mode = c.string_attr(1);
  if (mode == "constant") {
    for (int64_t& v : p) v = -v;
    return {pad(go[0], p, "constant", 0)};
  }
  const Shape& xs = ctx.input_shapes[0];
  return {scatter_by_map(xs, pad(positions(xs, go[0].device()), p, mode), go[0])};
}

// sort / topk: the values are the input at the indices (output 1), so their gradient goes
// back to those positions.
Grads select_by_indices(const GradContext& ctx, const Grads& go, int64_t d, bool any) {
  const Shape& xs = ctx.input_shapes[0];
  if (xs.empty()) return {any ? reshape(go[0], {}) : zeros_of(xs, go[0])};  // 0-d input
  return {scatter_add(zeros_of(xs, go[0]), d, ctx.output(1), go[0])};
}
// sort: attrs dim (wrapped), descending, stable.
Grads d_sort(const GradContext& ctx, const Grads& go) {
  return select_by_indices(ctx, go, ctx.as_call().int_attr(0), true);
}
// topk: attrs k, dim (wrapped), largest, sorted.
Grads d_topk(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  return select_by_indices(ctx, go, c.int_attr(1), c.int_attr(0) > 0);
}

// sum over j >= i along d.
Tensor reverse_cumsum(const Tensor& t, int64_t d) { return sum(t, {d}, true) - cumsum(t, d) + t; }

// cumprod: out[j] = prod_{i <= j} x[i]; d out[j] / d x[k] = prod_{i <= j, i != k} x[i] for
// j >= k. Before the first zero of a slice that is out[j] / x[k]; at the first zero it is
// the cumulative product with that zero replaced by 1; after it, 0.
Grads d_cumprod(const GradContext& ctx, const Grads& go) {
  const Tensor& g = go[0];
  if (ctx.input_shapes[0].empty()) return {g};
  Tensor x = ctx.input(0), out = ctx.output(0);
  int64_t d = wrap_dim(ctx.as_call().int_attr(0), x.dim());
  Tensor is_zero = eq(x, 0.0);
  Tensor zeros_upto = cumsum(is_zero.to(DType::I64), d);  // zeros at or before each position
  Tensor before = eq(zeros_upto, 0);
  Tensor first_zero = logical_and(is_zero, eq(zeros_upto, 1));
  Tensor grad_before = reverse_cumsum(g * out, d) / where(before, x, 1.0);
  Tensor out_without_zero = cumprod(where(first_zero, 1.0, x), d);
  Tensor grad_first_zero = reverse_cumsum(g * out_without_zero, d);
  return {where(before, grad_before, where(first_zero, grad_first_zero, 0.0))};
}

// prod: attrs dims (empty: all), keepdim. d out / d x = the product of the
// other elements: out / x for x != 0; for x == 0 the product of the nonzero others when x is
// the only zero of its slice, else 0.
Grads d_prod(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const std::vector<int64_t> dims = c.has_attr(0) ? c.ints_attr(0) : std::vector<int64_t>{};
  const bool keepdim = c.bool_attr(1);
  Tensor x = ctx.input(0);
  const Shape& xs = x.shape();
  if (xs.empty()) return {go[0]};
  std::vector<bool> reduced(xs.size(), dims.empty());
  for (int64_t d : dims) reduced[size_t(wrap_dim(d, x.dim()))] = true;
  Shape kept = xs;
  for (size_t i = 0; i < xs.size(); ++i)
    if (reduced[i]) kept[i] = 1;
  // Sum / product over the reduced dims, keeping them (size 1).
  auto reduce_keep = [&](const Tensor& t, bool product) {
    if (dims.empty()) return reshape(product ? prod(t) : sum(t), kept);
    if (!product) return sum(t, dims, true);
    Tensor r = t;
    for (size_t i = 0; i < xs.size(); ++i)
      if (reduced[i]) r = prod(r, int64_t(i), true);
    return r;
  };
  // The output and its gradient with the reduced dims kept, to broadcast against x.
  auto keep = [&](const Tensor& t) { return keepdim ? t : reshape(t, kept); };
  Tensor out = keep(ctx.output(0)), g = keep(go[0]);
  Tensor is_zero = eq(x, 0.0);
  Tensor zero_count = reduce_keep(is_zero.to(x.dtype()), false);
  Tensor prod_nonzero = reduce_keep(where(is_zero, 1.0, x), true);
  Tensor d = where(is_zero, where(eq(zero_count, 1.0), prod_nonzero, 0.0),
                   out / where(is_zero, 1.0, x));
  return {g * conj_if_complex(d)};  // complex x: the conjugate derivative, as mul's
}

// dropout: attrs p, seed, offset. The kept elements' factor 1/(1-p) (0 for dropped ones) is
// dropout applied to ones with the same draws, so inputs that are 0 keep their gradient.
Grads d_dropout(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  const Tensor& g = go[0];
  Tensor scale = call_op(*ctx.op, {ones(ctx.input_shapes[0], TensorOptions(g.dtype(), g.device()))},
                         c.attrs);
  return {g * scale};
}

// bernoulli: the samples are piecewise constant in the probabilities (PyTorch: zeros).
Grads d_zeros_for_input(const GradContext& ctx, const Grads& go) {
  return {zeros_of(ctx.input_shapes[0], go[0])};
}

// The in-place fills (uniform_, normal_, bernoulli_, random_) have no tensor inputs: the
// overwritten values get no gradient.
Grads d_no_inputs(const GradContext&, const Grads&) { return {}; }

}  // namespace

void register_shape_derivatives() {
  register_derivative("cat", d_cat);
  register_derivative("tril", d_tril);
  register_derivative("triu", d_triu);
  register_derivative("repeat", d_repeat);
  register_derivative("repeat_interleave", d_repeat_interleave);
  register_derivative("flip", d_flip);
  register_derivative("roll", d_roll);
  register_derivative("pad", d_pad);
  register_derivative("sort", d_sort);
  register_derivative("topk", d_topk);
  register_derivative("cumprod", d_cumprod);
  // Replaces the formula of derivatives_reduction.cpp (0 for every zero element) with the
  // exact one (registered after it).
  register_derivative("prod", d_prod);
  register_derivative("dropout", d_dropout);
  register_derivative("bernoulli", d_zeros_for_input);
  for (const char* n : {"uniform_", "normal_", "bernoulli_", "random_"})
    register_derivative(n, d_no_inputs);
}

}  // namespace kiln::autograd
