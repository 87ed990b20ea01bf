// nll_loss as one op (the composite of gather, ne, where, amin / amax, mul and sums it
// replaces took ten ops and two host reads of the target range: 25-50 us where PyTorch's
// kernel takes 2-6; decision 0036).
#include "kiln/ops/nll_loss.h"

#include "op_helpers.h"

namespace kiln {
namespace {

// inputs {input [N, C, D], target [N, D], weight?}, attrs {reduction, ignore_index}.
std::vector<TensorMeta> nll_loss_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  const bool none = ops::NllReduction(c.int_attr(0)) == ops::NllReduction::None;
  return {{none ? Shape{x.size(0), x.size(2)} : Shape{}, x.dtype()}, {Shape{}, x.dtype()}};
}

// inputs {grad_output, target [N, D], weight?, total_weight}, attrs {classes, reduction,
// ignore_index}.
std::vector<TensorMeta> nll_loss_backward_meta(const OpCall& c) {
  const Tensor& t = c.inputs[1];
  return {{Shape{t.size(0), c.int_attr(0), t.size(1)}, c.inputs[0].dtype()}};
}

}  // namespace

namespace ops {

std::pair<Tensor, Tensor> nll_loss_op(const Tensor& input, const Tensor& target,
                                      const Tensor& weight, NllReduction reduction,
                                      int64_t ignore_index) {
  const Tensor w = weight.defined() ? weight.contiguous() : weight;
  auto r = call_op_multi(KILN_OP("nll_loss"), {input, target.contiguous(), w},
                         {int64_t(reduction), ignore_index});
  return {r[0], r[1]};
}

Tensor nll_loss_backward_op(const Tensor& grad_output, const Tensor& target, const Tensor& weight,
                            const Tensor& total_weight, int64_t classes, NllReduction reduction,
                            int64_t ignore_index) {
  return call_op(KILN_OP("nll_loss_backward"),
                 {grad_output.contiguous(), target.contiguous(),
                  weight.defined() ? weight.contiguous() : weight, total_weight},
                 {classes, int64_t(reduction), ignore_index});
}

void register_nll_loss_ops() {
  register_op("nll_loss",
              "nll_loss(Tensor self, Tensor target, Tensor? weight, int reduction, "
              "int ignore_index) -> (Tensor, Tensor)",
              nll_loss_meta);
  register_op("nll_loss_backward",
              "nll_loss_backward(Tensor grad_output, Tensor target, Tensor? weight, "
              "Tensor total_weight, int classes, int reduction, int ignore_index) -> Tensor",
              nll_loss_backward_meta);
}

}  // namespace ops
}  // namespace kiln
