// Derivatives of reductions, softmax and matrix products.
#include <cmath>

#include "kiln/autograd/node.h"
#include "kiln/ops/complex.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/reduction_util.h"
#include "kiln/ops/softmax_backward.h"
#include "kiln/ops/views.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;

std::vector<int64_t> dims_of(const GradContext& ctx) {
  OpCall c = ctx.as_call();
  return c.has_attr(0) ? c.ints_attr(0) : std::vector<int64_t>{};
}

// A reduction's output (or its gradient) with the reduced dims kept as size 1, which
// broadcasts against the input.
Tensor with_kept_dims(const Tensor& g, const GradContext& ctx) {
  const Shape& in_shape = ctx.input_shapes[0];
  bool keepdim = ctx.as_call().bool_attr(1);
  if (keepdim || in_shape.empty()) return g;
  auto mask = ops::reduction_mask(ctx.op->name.c_str(), in_shape, dims_of(ctx));
  Shape kept;
  for (size_t i = 0; i < in_shape.size(); ++i) kept.push_back(mask[i] ? 1 : in_shape[i]);
  return reshape(g, kept);
}
// g has the reduced shape; returns it broadcast back to the input's shape.
Tensor unreduce(const Tensor& g, const GradContext& ctx) {
  return expand(with_kept_dims(g, ctx), ctx.input_shapes[0]);
}

int64_t reduced_count(const GradContext& ctx) {
  const Shape& s = ctx.input_shapes[0];
  if (s.empty()) return 1;
  auto mask = ops::reduction_mask(ctx.op->name.c_str(), s, dims_of(ctx));
  int64_t n = 1;
  for (size_t i = 0; i < s.size(); ++i)
    if (mask[i]) n *= s[i];
  return n;
}

Grads d_sum(const GradContext& ctx, const Grads& go) { return {unreduce(go[0], ctx)}; }
Grads d_mean(const GradContext& ctx, const Grads& go) {
  return {unreduce(go[0], ctx) / double(reduced_count(ctx))};
}
// amax/amin: the gradient is shared evenly among the elements equal to the extremum.
Grads d_amax(const GradContext& ctx, const Grads& go) {
  Tensor x = ctx.input(0);
  Tensor hit = eq(x, unreduce(ctx.output(0), ctx)).to(go[0].dtype());
  Tensor count = unreduce(sum(hit, dims_of(ctx), ctx.as_call().bool_attr(1)), ctx);
  return {unreduce(go[0], ctx) * hit / count};
}
// max.dim/min.dim: the gradient goes to the selected index.
Grads d_max_dim(const GradContext& ctx, const Grads& go) {
  Tensor idx = ctx.output(1);
  const Shape& shape = ctx.input_shapes[0];
  int64_t dim = shape.empty() ? 0 : wrap_dim(dims_of(ctx)[0], int64_t(shape.size()));
  bool keepdim = ctx.as_call().bool_attr(1);
  Tensor g = go[0];
  if (!keepdim && !shape.empty()) {
    g = unsqueeze(g, dim);
    idx = unsqueeze(idx, dim);
  }
  if (shape.empty()) return {g};
  Tensor z = zeros(shape, TensorOptions(g.dtype(), g.device()));
  return {scatter(z, dim, idx, g)};
}
Grads d_var_std(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  double correction = c.double_attr(2);
  Tensor x = ctx.input(0);
  int64_t n = reduced_count(ctx);
  Tensor mu = mean(x, dims_of(ctx), true);
  Tensor g = unreduce(go[0], ctx);
  Tensor dvar = (x - mu) * (2.0 / std::max(0.0, double(n) - correction));
  if (ctx.op->name == "std") {
    // d std = d var / (2 std); where std is 0 every deviation is 0 too and PyTorch gives 0.
    Tensor sd = unreduce(ctx.output(0), ctx);
    return {where(eq(sd, 0.0), zeros_like(x), g * dvar / (sd * 2))};
  }
  return {g * dvar};
}
Grads d_norm(const GradContext& ctx, const Grads& go) {
  double p = ctx.as_call().double_attr(2);
  Tensor x = ctx.input(0);
  // p = 2 and the general p: the factor per reduced slice first, on the output's shape, then
  // one product over x (as PyTorch: x * (g / norm), 0 where the norm is 0). Unreduced first,
  // the division, mask and cast each made a pass over x's size (1.5x PyTorch for [512, 3072]).
  if (p == 2 || (p != 1 && p != 0 && !std::isinf(p))) {
    Tensor nrm = with_kept_dims(ctx.output(0), ctx);
    Tensor g = with_kept_dims(go[0], ctx);
    if (p == 2) return {x * where(eq(nrm, 0.0), 0.0, g / nrm)};
    // d/dx (sum |x|^p)^(1/p) = sign(x) |x|^(p-1) / norm^(p-1)
    return {sign(x) * pow(abs(x), p - 1) * where(eq(nrm, 0.0), g, g / pow(nrm, p - 1))};
  }
  Tensor nrm = unreduce(ctx.output(0), ctx);
  Tensor g = unreduce(go[0], ctx);
  if (p == 1) return {g * sign(x)};
  if (std::isinf(p)) {
    Tensor hit = eq(abs(x), nrm).to(x.dtype());
    Tensor count = unreduce(sum(hit, dims_of(ctx), ctx.as_call().bool_attr(1)), ctx);
    return {g * sign(x) * hit / count};
  }
  return {zeros_like(x)};  // p = 0
}
Grads d_logsumexp(const GradContext& ctx, const Grads& go) {
  Tensor x = ctx.input(0);
  return {unreduce(go[0], ctx) * exp(x - unreduce(ctx.output(0), ctx))};
}
Grads d_cumsum(const GradContext& ctx, const Grads& go) {
  int64_t dim = ctx.as_call().int_attr(0);
  if (ctx.input_shapes[0].empty()) return {go[0]};
  // grad_in[i] = sum_{j >= i} g[j]: the reversed cumulative sum (flip, cumsum, flip, as
  // PyTorch). The former total - cumsum(g) + g made four passes and lost the digits of a
  // short tail under a large total.
  // An expanded gradient (sum()'s) is copied dense first: flip walks it element by element.
  Tensor g = go[0].is_contiguous() ? go[0] : go[0].contiguous();
  int64_t d = wrap_dim(dim, g.dim());
  return {flip(cumsum(flip(g, {d}), d), {d})};
}
// The fused backward op (one pass per row instead of four over the whole tensor) on the CPU
// where no graph of the backward is recorded; the composite form elsewhere (other devices,
// create_graph: it is differentiable).
bool fused_softmax_backward(const Tensor& g, const Tensor& y) {
  return !autograd::is_grad_enabled() && y.device().type == DeviceType::CPU &&
         g.device() == y.device() && g.dtype() == y.dtype() && g.shape() == y.shape();
}
Grads d_softmax(const GradContext& ctx, const Grads& go) {
  int64_t dim = ctx.as_call().int_attr(0);
  Tensor y = ctx.output(0);
  if (y.dim() == 0) return {zeros_like(go[0])};
  if (fused_softmax_backward(go[0], y)) return {softmax_backward_data(go[0], y, dim)};
  return {y * (go[0] - sum(go[0] * y, {dim}, true))};
}
Grads d_log_softmax(const GradContext& ctx, const Grads& go) {
  int64_t dim = ctx.as_call().int_attr(0);
  Tensor y = ctx.output(0);
  if (y.dim() == 0) return {zeros_like(go[0])};
  if (fused_softmax_backward(go[0], y)) return {log_softmax_backward_data(go[0], y, dim)};
  return {go[0] - exp(y) * sum(go[0], {dim}, true)};
}

// Matrix products.
// Products pass g times the other operand's conjugate transpose back (torch's rule for complex
// operands; the conjugate is a no-op for real ones).
//
// A column-major operand (the transpose of a row-major matrix: W.t() in a Linear layer) gets
// its gradient computed transposed, so that it comes out in the operand's own layout and the
// weight's gradient is row-major like the weight (torch's rule too): as g @ b^T it was a
// column-major [in, out] product that the weight's gradient then copied, 0.4-1.2 ms per
// GPT-2-small weight per training step (decision 0118).
bool column_major(const Tensor& m) {
  return m.dim() == 2 && m.size(0) > 1 && m.size(1) > 1 && m.stride(0) == 1 &&
         m.stride(1) == m.size(0);
}
// d(a @ b) / da for the incoming g, b_conj = conj(b).
Tensor mm_grad_self(const Tensor& g, const Tensor& a, const Tensor& b_conj) {
  return column_major(a) ? mm(b_conj, g.t()).t() : mm(g, b_conj.t());
}
// d(a @ b) / db for the incoming g, a_conj = conj(a).
Tensor mm_grad_mat2(const Tensor& g, const Tensor& a_conj, const Tensor& b) {
  return column_major(b) ? mm(g.t(), a_conj).t() : mm(a_conj.t(), g);
}

Grads d_mm(const GradContext& ctx, const Grads& go) {
  Grads r(2);
  if (ctx.needs(0)) r[0] = mm_grad_self(go[0], ctx.input(0), conj_if_complex(ctx.input(1)));
  if (ctx.needs(1)) r[1] = mm_grad_mat2(go[0], conj_if_complex(ctx.input(0)), ctx.input(1));
  return r;
}
Grads d_bmm(const GradContext& ctx, const Grads& go) {
  Grads r(2);
  if (ctx.needs(0)) r[0] = bmm(go[0], conj_if_complex(ctx.input(1)).transpose(1, 2));
  if (ctx.needs(1)) r[1] = bmm(conj_if_complex(ctx.input(0)).transpose(1, 2), go[0]);
  return r;
}
Grads d_dot(const GradContext& ctx, const Grads& go) {
  Grads r(2);
  if (ctx.needs(0)) r[0] = go[0] * ctx.input(1);
  if (ctx.needs(1)) r[1] = go[0] * ctx.input(0);
  return r;
}
Grads d_matmul(const GradContext& ctx, const Grads& go) {
  Tensor a = conj_if_complex(ctx.input(0)), b = conj_if_complex(ctx.input(1)), g = go[0];
  Tensor A = a, B = b;
  if (a.dim() == 1) {
    A = unsqueeze(a, 0);
    g = unsqueeze(g, g.dim() == 0 ? 0 : -2);
  }
  if (b.dim() == 1) {
    B = unsqueeze(b, -1);
    g = unsqueeze(g, -1);
  }
  Grads r(2);
  if (ctx.needs(0)) r[0] = reshape(sum_to(matmul(g, B.transpose(-1, -2)), A.shape()), a.shape());
  if (ctx.needs(1)) r[1] = reshape(sum_to(matmul(A.transpose(-1, -2), g), B.shape()), b.shape());
  return r;
}
template <bool kBatched>
Grads d_addmm(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  double beta = c.scalar_attr(0).to_double(), alpha = c.scalar_attr(1).to_double();
  Grads r(3);
  // beta = 1 (every Linear): g itself, not a product by 1 (1.7 ms per GPT-2-small layer of
  // a training step at batch 4 x 256).
  if (ctx.needs(0)) r[0] = sum_to(beta == 1 ? go[0] : go[0] * beta, ctx.input_shapes[0]);
  Tensor g = alpha == 1 ? go[0] : go[0] * alpha;
  if (kBatched) {
    if (ctx.needs(1)) r[1] = bmm(g, ctx.input(2).transpose(1, 2));
    if (ctx.needs(2)) r[2] = bmm(ctx.input(1).transpose(1, 2), g);
  } else {
    if (ctx.needs(1)) r[1] = mm_grad_self(g, ctx.input(1), ctx.input(2));
    if (ctx.needs(2)) r[2] = mm_grad_mat2(g, ctx.input(1), ctx.input(2));
  }
  return r;
}

}  // namespace

void register_reduction_derivatives() {
  register_derivative("sum", d_sum);
  register_derivative("mean", d_mean);
  register_derivative("amax", d_amax);
  register_derivative("amin", d_amax);
  register_derivative("max.dim", d_max_dim);
  register_derivative("min.dim", d_max_dim);
  register_derivative("var", d_var_std);
  register_derivative("std", d_var_std);
  register_derivative("norm", d_norm);
  register_derivative("logsumexp", d_logsumexp);
  register_derivative("cumsum", d_cumsum);
  register_derivative("softmax", d_softmax);
  register_derivative("log_softmax", d_log_softmax);
  register_derivative("mm", d_mm);
  register_derivative("bmm", d_bmm);
  register_derivative("dot", d_dot);
  register_derivative("matmul", d_matmul);
  register_derivative("addmm", d_addmm<false>);
  register_derivative("baddbmm", d_addmm<true>);
}

void register_view_derivatives();
void register_elementwise_derivatives();
void register_indexing_derivatives();
void register_conv_derivatives();  // derivatives_conv.cpp
void register_norm_derivatives();  // derivatives_norm.cpp
void register_loss_derivatives();  // derivatives_loss.cpp
void register_linalg_derivatives();  // derivatives_linalg.cpp
void register_complex_derivatives();  // derivatives_complex.cpp
void register_builtin_derivatives() {
  register_elementwise_derivatives();
  register_view_derivatives();
  register_reduction_derivatives();
  register_indexing_derivatives();  // includes prod (exact with zeros)
  register_conv_derivatives();
  register_norm_derivatives();
  register_loss_derivatives();
  register_linalg_derivatives();
  register_complex_derivatives();
}

}  // namespace kiln::autograd
