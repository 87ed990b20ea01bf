// hardsigmoid / hardswish ops and their derivatives' ops: checks and definitions (kernels:
// backends/cpu/hard_sigmoid_family_kernels.cpp).
#include "kiln/ops/hard_sigmoid_family.h"

#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

void check_input(const char* op, const Tensor& x) {
  KILN_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::F64 || x.dtype() == DType::BF16,
             TypeError, op, ": expected a float32, bfloat16 or float64 input, got ",
             dtype_name(x.dtype()));
}

void check_grad(const char* op, const Tensor& g, const Tensor& x) {
  check_input(op, x);
  KILN_CHECK(g.dtype() == x.dtype(), TypeError, op, ": expected grad_output of self's dtype ",
             dtype_name(x.dtype()), ", got ", dtype_name(g.dtype()));
  KILN_CHECK(g.shape() == x.shape(), ValueError, op, ": expected grad_output of self's shape ",
             shape_str(x.shape()), ", got ", shape_str(g.shape()));
}

}  // namespace

Tensor hardsigmoid_op(const Tensor& x) {
  check_input("hardsigmoid", x);
  return call_op(KILN_OP("hardsigmoid"), {x});
}

Tensor hardswish_op(const Tensor& x) {
  check_input("hardswish", x);
  return call_op(KILN_OP("hardswish"), {x});
}

Tensor hardsigmoid_backward(const Tensor& grad_output, const Tensor& self) {
  check_grad("hardsigmoid_backward", grad_output, self);
  return call_op(KILN_OP("hardsigmoid_backward"), {grad_output, self});
}

Tensor hardswish_backward(const Tensor& grad_output, const Tensor& self) {
  check_grad("hardswish_backward", grad_output, self);
  return call_op(KILN_OP("hardswish_backward"), {grad_output, self});
}

namespace ops {
void register_hard_sigmoid_family_ops() {
  for (const char* name : {"hardsigmoid", "hardswish"})
    register_op(name, std::string(name) + "(Tensor self) -> Tensor", same_as_first_meta)
        .pointwise_layout = true;
  for (const char* name : {"hardsigmoid_backward", "hardswish_backward"})
    register_op(name, std::string(name) + "(Tensor grad_output, Tensor self) -> Tensor",
                same_as_first_meta)
        .pointwise_layout = true;
}
}  // namespace ops

}  // namespace kiln
