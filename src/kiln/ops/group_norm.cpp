// native_group_norm / native_group_norm_backward: argument checks, output shapes and the
// public functions (kernels: backends/cpu/group_norm_kernels.cpp).
#include "kiln/ops/normalization.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

DType stat_dtype(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

Shape stat_shape(const Tensor& x, int64_t groups) { return {x.size(0), groups}; }

// inputs {x, weight?, bias?}; attrs {num_groups, eps}.
std::vector<TensorMeta> group_norm_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  const Shape s = stat_shape(x, c.int_attr(0));
  return {{x.shape(), x.dtype()}, {s, stat_dtype(x.dtype())}, {s, stat_dtype(x.dtype())}};
}

// inputs {grad_y, x, mean, rstd, weight?}; attrs {num_groups}.
std::vector<TensorMeta> group_norm_backward_meta(const OpCall& c) {
  const Tensor& x = c.inputs[1];
  const Shape s{x.size(1)};
  return {{x.shape(), x.dtype()}, {s, x.dtype()}, {s, x.dtype()}};
}

void check(const char* op, const Tensor& x, int64_t groups, const Tensor& p, const char* what) {
  KILN_CHECK(is_floating(x.dtype()), Error, op, ": expected a floating-point input, got ",
             dtype_name(x.dtype()));
  KILN_CHECK(x.dim() >= 2, ShapeError, op, ": expected an input [N, C, *] with at least 2 dims, "
             "got shape ", shape_str(x.shape()));
  KILN_CHECK(groups > 0 && x.size(1) % groups == 0, ValueError, op, ": expected the number of "
             "channels (", x.size(1), ") to be divisible by num_groups (", groups, ")");
  if (!p.defined()) return;
  KILN_CHECK(p.dtype() == x.dtype() && p.device() == x.device(), Error, op, ": expected ", what,
             " of the input's dtype and device (", dtype_name(x.dtype()), ", ", x.device().str(),
             "), got ", dtype_name(p.dtype()), ", ", p.device().str());
  KILN_CHECK(p.shape() == Shape{x.size(1)}, ShapeError, op, ": expected ", what, " of shape [",
             x.size(1), "], got ", shape_str(p.shape()));
}

Tensor maybe_contiguous(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& x, const Tensor& weight,
                                                     const Tensor& bias, int64_t num_groups,
                                                     double eps) {
  check("native_group_norm", x, num_groups, weight, "a weight");
  check("native_group_norm", x, num_groups, bias, "a bias");
  auto r = call_op_multi(KILN_OP("native_group_norm"),
                         {x.contiguous(), maybe_contiguous(weight), maybe_contiguous(bias)},
                         {num_groups, eps});
  return {r[0], r[1], r[2]};
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(const Tensor& grad_y,
                                                              const Tensor& x, const Tensor& mean,
                                                              const Tensor& rstd,
                                                              const Tensor& weight,
                                                              int64_t num_groups) {
  const char* op = "native_group_norm_backward";
  check(op, x, num_groups, weight, "a weight");
  KILN_CHECK(grad_y.shape() == x.shape() && grad_y.dtype() == x.dtype() &&
                 grad_y.device() == x.device(),
             ShapeError, op, ": expected grad_y of the input's shape, dtype and device (",
             shape_str(x.shape()), " ", dtype_name(x.dtype()), "), got ",
             shape_str(grad_y.shape()), " ", dtype_name(grad_y.dtype()));
  const Shape ss = stat_shape(x, num_groups);
  const DType sd = stat_dtype(x.dtype());
  for (const Tensor* s : {&mean, &rstd})
    KILN_CHECK(s->shape() == ss && s->dtype() == sd && s->device() == x.device(), ShapeError, op,
               ": expected statistics of shape ", shape_str(ss), " ", dtype_name(sd), ", got ",
               shape_str(s->shape()), " ", dtype_name(s->dtype()));
  auto r = call_op_multi(KILN_OP("native_group_norm_backward"),
                         {grad_y.contiguous(), x.contiguous(), mean.contiguous(),
                          rstd.contiguous(), maybe_contiguous(weight)},
                         {num_groups});
  return {r[0], r[1], r[2]};
}

namespace ops {
void register_group_norm_ops() {
  register_op("native_group_norm",
              "native_group_norm(Tensor input, Tensor? weight, Tensor? bias, int num_groups, "
              "float eps) -> (Tensor, Tensor, Tensor)",
              group_norm_meta);
  register_op("native_group_norm_backward",
              "native_group_norm_backward(Tensor grad_y, Tensor input, Tensor mean, Tensor rstd, "
              "Tensor? weight, int num_groups) -> (Tensor, Tensor, Tensor)",
              group_norm_backward_meta);
}
}  // namespace ops

}  // namespace kiln
