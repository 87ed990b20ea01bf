// Derivatives of nll_loss. Its gradient is nll_loss_backward (the weighted, negated gradient
// scattered into each target class), which is linear in grad_output; the adjoint of that
// scatter is the gather nll_loss itself does, so nll_loss_backward's derivative is nll_loss
// of the incoming gradient with the same targets, weights and reduction (double backward).
// Targets, class weights and total_weight get no gradient, as in PyTorch.
#include "kiln/autograd/node.h"
#include "kiln/ops/nll_loss.h"

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

}  // namespace

void register_loss_derivatives() {
  register_derivative("nll_loss", d_nll_loss);
  register_derivative("nll_loss_backward", d_nll_loss_backward);
}

}  // namespace kiln::autograd
