// The cross_entropy_rows op and its backward (cross_entropy_rows.h): shapes and registration.
#include "kiln/ops/cross_entropy_rows.h"

#include "op_helpers.h"

namespace kiln {
namespace {

// inputs {input [N, C], target [N]}, attrs {reduction, ignore_index}.
std::vector<TensorMeta> cross_entropy_rows_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  const bool none = ops::NllReduction(c.int_attr(0)) == ops::NllReduction::None;
  return {{none ? Shape{x.size(0)} : Shape{}, x.dtype()},
          {Shape{x.size(0)}, DType::F32},
          {Shape{}, DType::F32}};
}

// inputs {grad_output, input, target, lse, total_weight}, attrs {reduction, ignore_index}.
std::vector<TensorMeta> cross_entropy_rows_backward_meta(const OpCall& c) {
  return {{c.inputs[1].shape(), c.inputs[1].dtype()}};
}

}  // namespace

namespace ops {

std::tuple<Tensor, Tensor, Tensor> cross_entropy_rows(const Tensor& input, const Tensor& target,
                                                      NllReduction reduction,
                                                      int64_t ignore_index) {
  KILN_CHECK(input.dim() == 2 && target.dim() == 1 && target.size(0) == input.size(0) &&
                 target.dtype() == DType::I64,
             ShapeError, "cross_entropy_rows: expected input [N, C] and int64 target [N], got ",
             shape_str(input.shape()), " and ", dtype_name(target.dtype()), " ",
             shape_str(target.shape()));
  auto r = call_op_multi(KILN_OP("cross_entropy_rows"), {input.contiguous(), target.contiguous()},
                         {int64_t(reduction), ignore_index});
  return {r[0], r[1], r[2]};
}

Tensor cross_entropy_rows_backward(const Tensor& grad_output, const Tensor& input,
                                   const Tensor& target, const Tensor& lse,
                                   const Tensor& total_weight, NllReduction reduction,
                                   int64_t ignore_index) {
  return call_op(KILN_OP("cross_entropy_rows_backward"),
                 {grad_output.contiguous(), input.contiguous(), target.contiguous(),
                  lse.contiguous(), total_weight},
                 {int64_t(reduction), ignore_index});
}

void register_cross_entropy_rows_ops() {
  register_op("cross_entropy_rows",
              "cross_entropy_rows(Tensor self, Tensor target, int reduction, int ignore_index) "
              "-> (Tensor, Tensor, Tensor)",
              cross_entropy_rows_meta);
  register_op("cross_entropy_rows_backward",
              "cross_entropy_rows_backward(Tensor grad_output, Tensor self, Tensor target, "
              "Tensor lse, Tensor total_weight, int reduction, int ignore_index) -> Tensor",
              cross_entropy_rows_backward_meta);
}

}  // namespace ops
}  // namespace kiln
