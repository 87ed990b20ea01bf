// Derivatives of nll_loss. Its gradient is nll_loss_backward (the weighted, negated gradient
// scattered into each target class), which is linear in grad_output; the adjoint of that
// scatter is the gather nll_loss itself does, so nll_loss_backward's derivative is nll_loss
// of the incoming gradient with the same targets, weights and reduction (double backward).
// Targets, class weights and total_weight get no gradient, as in PyTorch.
#include "kiln/autograd/autograd.h"
#include "kiln/autograd/node.h"
#include "kiln/ops/cross_entropy_rows.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/nll_loss.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;
using ops::NllReduction;

Tensor saved_or_undefined(const GradContext& ctx, size_t i) {
  return ctx.inputs[i].defined() ? ctx.input(i) : Tensor();
}

// inputs {input, target, weight?}, attrs {reduction, ignore_index}.
Grads d_nll_loss(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  Grads r(3);
  if (ctx.needs(0))
    r[0] = ops::nll_loss_backward_op(go[0], ctx.input(1), saved_or_undefined(ctx, 2),
                                     ctx.output(1), ctx.input_shapes[0][1],
                                     NllReduction(c.int_attr(0)), c.int_attr(1));
  return r;
}

// inputs {grad_output, target, weight?, total_weight}, attrs {classes, reduction,
// ignore_index}.
Grads d_nll_loss_backward(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  Grads r(4);
  if (ctx.needs(0))
    r[0] = ops::nll_loss_op(go[0], ctx.input(1), saved_or_undefined(ctx, 2),
                            NllReduction(c.int_attr(1)), c.int_attr(2))
               .first;
  return r;
}

// cross_entropy_rows: inputs {input [N, C], target [N]}, attrs {reduction, ignore_index},
// outputs {loss, lse, total_weight}. The fused backward op where no graph of the backward is
// recorded; with create_graph the same gradient, (softmax(x) - one_hot(t)) * share, from
// differentiable ops.
Grads d_cross_entropy_rows(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  Grads r(2);
  if (!ctx.needs(0)) return r;
  const auto reduction = NllReduction(c.int_attr(0));
  const int64_t ignore = c.int_attr(1);
  const Tensor x = ctx.input(0), t = ctx.input(1);
  if (!is_grad_enabled()) {
    r[0] = ops::cross_entropy_rows_backward(go[0], x, t, ctx.output(1), ctx.output(2),
                                            reduction, ignore);
    return r;
  }
  const Tensor valid = ne(t, Scalar(ignore));
  const Tensor safe = where(valid, t, Scalar(int64_t(0)));
  Tensor share = reduction == NllReduction::Mean ? go[0] / ctx.output(2).to(go[0].dtype()) : go[0];
  share = where(valid, share, Scalar(0.0)).to(x.dtype());
  const Tensor one_hot = scatter(zeros_like(x), 1, unsqueeze(safe, 1), Scalar(1.0));
  r[0] = (softmax(x, 1) - one_hot) * unsqueeze(share, 1);
  return r;
}

}  // namespace

void register_loss_derivatives() {
  register_derivative("cross_entropy_rows", d_cross_entropy_rows);
  register_derivative("nll_loss", d_nll_loss);
  register_derivative("nll_loss_backward", d_nll_loss_backward);
}

}  // namespace kiln::autograd
