// native_layer_norm / native_rms_norm: output shapes and the public functions.
#include "kiln/ops/normalization.h"

#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

DType stat_dtype(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

// The statistics' shape: x's with the normalised dims set to 1.
Shape stat_shape(const Tensor& x, int64_t k) {
  Shape s = x.shape();
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) s[size_t(i)] = 1;
  return s;
}

// inputs {x, weight?, bias?}; attrs {normalized_ndim, eps}.
std::vector<TensorMeta> layer_norm_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  const Shape s = stat_shape(x, c.int_attr(0));
  return {{x.shape(), x.dtype()}, {s, stat_dtype(x.dtype())}, {s, stat_dtype(x.dtype())}};
}
// inputs {x, weight?}; attrs {normalized_ndim, eps}.
std::vector<TensorMeta> rms_norm_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  return {{x.shape(), x.dtype()}, {stat_shape(x, c.int_attr(0)), stat_dtype(x.dtype())}};
}

void check(const char* op, const Tensor& x, int64_t k, const Tensor& w) {
  KILN_CHECK(is_floating(x.dtype()), Error, op, ": expected a floating-point input, got ",
             dtype_name(x.dtype()));
  KILN_CHECK(k >= 1 && k <= x.dim(), ValueError, op, ": normalized_ndim must be in [1, ",
             x.dim(), "], got ", k);
  if (!w.defined()) return;
  KILN_CHECK(w.dtype() == x.dtype() && w.device() == x.device(), Error, op,
             ": expected an affine parameter of the input's dtype and device (",
             dtype_name(x.dtype()), ", ", x.device().str(), "), got ", dtype_name(w.dtype()),
             ", ", w.device().str());
  KILN_CHECK(w.dim() == k && Shape(x.shape().end() - k, x.shape().end()) == w.shape(),
             ShapeError, op, ": expected an affine parameter of shape ",
             shape_str(Shape(x.shape().end() - k, x.shape().end())), ", got ",
             shape_str(w.shape()));
}

Tensor maybe_contiguous(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

// inputs {grad_y, x, mean, rstd, weight?} or {grad_y, x, rstd, weight?}; attrs
// {normalized_ndim}.
template <bool kLayer>
std::vector<TensorMeta> norm_backward_meta(const OpCall& c) {
  const Tensor& x = c.inputs[1];
  const int64_t k = c.int_attr(0);
  const Shape ws(x.shape().end() - k, x.shape().end());
  if (kLayer) return {{x.shape(), x.dtype()}, {ws, x.dtype()}, {ws, x.dtype()}};
  return {{x.shape(), x.dtype()}, {ws, x.dtype()}};
}

void check_norm_backward(const char* op, const Tensor& g, const Tensor& x, const Tensor& stat,
                         int64_t k, const Tensor& w) {
  check(op, x, k, w);
  KILN_CHECK(g.shape() == x.shape() && g.dtype() == x.dtype() && g.device() == x.device(),
             ShapeError, op, ": expected grad_y of the input's shape, dtype and device (",
             shape_str(x.shape()), " ", dtype_name(x.dtype()), "), got ", shape_str(g.shape()),
             " ", dtype_name(g.dtype()));
  KILN_CHECK(stat.shape() == stat_shape(x, k) && stat.dtype() == stat_dtype(x.dtype()) &&
                 stat.device() == x.device(),
             ShapeError, op, ": expected statistics of shape ", shape_str(stat_shape(x, k)), " ",
             dtype_name(stat_dtype(x.dtype())), ", got ", shape_str(stat.shape()), " ",
             dtype_name(stat.dtype()));
}

// inputs {x, weight?, bias?}; attrs {eps}.
std::vector<TensorMeta> batch_norm_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  const Shape s{x.size(1)};
  return {{x.shape(), x.dtype()}, {s, DType::F32}, {s, DType::F32}};
}
// inputs {grad_y, x, mean, var, weight?}; attrs {eps}.
std::vector<TensorMeta> batch_norm_backward_meta(const OpCall& c) {
  const Tensor& x = c.inputs[1];
  const Shape s{x.size(1)};
  return {{x.shape(), x.dtype()}, {s, x.dtype()}, {s, x.dtype()}};
}

void check_batch_norm(const Tensor& x, const Tensor& p, const char* what) {
  KILN_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::BF16, Error,
             "native_batch_norm: expected a float32 or bfloat16 input, got ",
             dtype_name(x.dtype()));
  KILN_CHECK(x.dim() >= 2, ShapeError, "native_batch_norm: expected an input [N, C, *], got ",
             shape_str(x.shape()));
  if (!p.defined()) return;
  KILN_CHECK(p.dtype() == x.dtype() && p.device() == x.device(), Error, "native_batch_norm: "
             "expected ", what, " of the input's dtype and device (", dtype_name(x.dtype()), ", ",
             x.device().str(), "), got ", dtype_name(p.dtype()), ", ", p.device().str());
  KILN_CHECK(p.shape() == Shape{x.size(1)}, ShapeError, "native_batch_norm: expected ", what,
             " of shape [", x.size(1), "], got ", shape_str(p.shape()));
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x, int64_t k,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps) {
  check("layer_norm", x, k, weight);
  check("layer_norm", x, k, bias);
  auto r = call_op_multi(KILN_OP("native_layer_norm"),
                         {x.contiguous(), maybe_contiguous(weight), maybe_contiguous(bias)},
                         {k, eps});
  return {r[0], r[1], r[2]};
}

std::tuple<Tensor, Tensor> native_rms_norm(const Tensor& x, int64_t k, const Tensor& weight,
                                           double eps) {
  check("rms_norm", x, k, weight);
  auto r = call_op_multi(KILN_OP("native_rms_norm"), {x.contiguous(), maybe_contiguous(weight)},
                         {k, eps});
  return {r[0], r[1]};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(const Tensor& grad_y,
                                                              const Tensor& x, const Tensor& mean,
                                                              const Tensor& rstd,
                                                              const Tensor& weight, int64_t k) {
  check_norm_backward("native_layer_norm_backward", grad_y, x, mean, k, weight);
  check_norm_backward("native_layer_norm_backward", grad_y, x, rstd, k, weight);
  auto r = call_op_multi(KILN_OP("native_layer_norm_backward"),
                         {grad_y.contiguous(), x.contiguous(), mean.contiguous(),
                          rstd.contiguous(), maybe_contiguous(weight)},
                         {k});
  return {r[0], r[1], r[2]};
}

std::tuple<Tensor, Tensor> native_rms_norm_backward(const Tensor& grad_y, const Tensor& x,
                                                    const Tensor& rstd, const Tensor& weight,
                                                    int64_t k) {
  check_norm_backward("native_rms_norm_backward", grad_y, x, rstd, k, weight);
  auto r = call_op_multi(KILN_OP("native_rms_norm_backward"),
                         {grad_y.contiguous(), x.contiguous(), rstd.contiguous(),
                          maybe_contiguous(weight)},
                         {k});
  return {r[0], r[1]};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& x, const Tensor& weight,
                                                     const Tensor& bias, double eps) {
  check_batch_norm(x, weight, "a weight");
  check_batch_norm(x, bias, "a bias");
  auto r = call_op_multi(KILN_OP("native_batch_norm"),
                         {x.contiguous(), maybe_contiguous(weight), maybe_contiguous(bias)}, {eps});
  return {r[0], r[1], r[2]};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(const Tensor& grad_y,
                                                              const Tensor& x, const Tensor& mean,
                                                              const Tensor& var,
                                                              const Tensor& weight, double eps) {
  check_batch_norm(x, weight, "a weight");
  KILN_CHECK(grad_y.shape() == x.shape() && grad_y.dtype() == x.dtype(), ShapeError,
             "native_batch_norm_backward: expected grad_y of the input's shape and dtype, got ",
             shape_str(grad_y.shape()));
  const Shape cs{x.size(1)};
  KILN_CHECK(mean.shape() == cs && var.shape() == cs && mean.dtype() == DType::F32 &&
                 var.dtype() == DType::F32,
             ShapeError, "native_batch_norm_backward: expected float32 statistics of shape ",
             shape_str(cs));
  auto r = call_op_multi(KILN_OP("native_batch_norm_backward"),
                         {grad_y.contiguous(), x.contiguous(), mean.contiguous(),
                          var.contiguous(), maybe_contiguous(weight)},
                         {eps});
  return {r[0], r[1], r[2]};
}

namespace ops {
void register_normalization_ops() {
  register_op("native_batch_norm",
              "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, float eps) -> "
              "(Tensor, Tensor, Tensor)",
              batch_norm_meta);
  register_op("native_batch_norm_backward",
              "native_batch_norm_backward(Tensor grad_y, Tensor input, Tensor mean, Tensor var, "
              "Tensor? weight, float eps) -> (Tensor, Tensor, Tensor)",
              batch_norm_backward_meta);
  register_op("native_layer_norm",
              "native_layer_norm(Tensor input, Tensor? weight, Tensor? bias, int normalized_ndim, "
              "float eps) -> (Tensor, Tensor, Tensor)",
              layer_norm_meta);
  register_op("native_layer_norm_backward",
              "native_layer_norm_backward(Tensor grad_y, Tensor input, Tensor mean, Tensor rstd, "
              "Tensor? weight, int normalized_ndim) -> (Tensor, Tensor, Tensor)",
              norm_backward_meta<true>);
  register_op("native_rms_norm_backward",
              "native_rms_norm_backward(Tensor grad_y, Tensor input, Tensor rstd, Tensor? weight, "
              "int normalized_ndim) -> (Tensor, Tensor)",
              norm_backward_meta<false>);
  register_op("native_rms_norm",
              "native_rms_norm(Tensor input, Tensor? weight, int normalized_ndim, float eps) -> "
              "(Tensor, Tensor)",
              rms_norm_meta);
}
}  // namespace ops

}  // namespace kiln
