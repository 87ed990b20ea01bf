// The fused activation derivatives of activation_backward.h: checks and op definitions
// (kernels: backends/cpu/activation_backward_kernels.cpp).
#include "kiln/ops/activation_backward.h"

#include <limits>

#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

void check(const char* op, const Tensor& g, const Tensor& x) {
  KILN_CHECK(is_floating(x.dtype()) && g.dtype() == x.dtype(), TypeError, op,
             ": expected grad_output and self of one floating dtype, got ",
             dtype_name(g.dtype()), " and ", dtype_name(x.dtype()));
  KILN_CHECK(g.shape() == x.shape(), ValueError, op, ": expected grad_output of self's shape ",
             shape_str(x.shape()), ", got ", shape_str(g.shape()));
}

// A bound as the op's attribute: absent bounds are NaN (no value compares with it).
double bound(std::optional<double> b) { return b ? *b : std::numeric_limits<double>::quiet_NaN(); }

}  // namespace

Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, double threshold) {
  check("threshold_backward", grad_output, self);
  return call_op(KILN_OP("threshold_backward"), {grad_output, self}, {threshold});
}

Tensor clamp_backward(const Tensor& grad_output, const Tensor& self, std::optional<double> min,
                      std::optional<double> max) {
  check("clamp_backward", grad_output, self);
  return call_op(KILN_OP("clamp_backward"), {grad_output, self}, {bound(min), bound(max)});
}

Tensor leaky_relu_backward(const Tensor& grad_output, const Tensor& self, double negative_slope) {
  check("leaky_relu_backward", grad_output, self);
  return call_op(KILN_OP("leaky_relu_backward"), {grad_output, self}, {negative_slope});
}

Tensor softplus_backward(const Tensor& grad_output, const Tensor& self, double beta,
                         double threshold) {
  check("softplus_backward", grad_output, self);
  return call_op(KILN_OP("softplus_backward"), {grad_output, self}, {beta, threshold});
}

namespace ops {
void register_activation_backward_ops() {
  register_op("threshold_backward",
              "threshold_backward(Tensor grad_output, Tensor self, float threshold) -> Tensor",
              same_as_first_meta)
      .pointwise_layout = true;
  // min / max: NaN for an absent bound.
  register_op("clamp_backward",
              "clamp_backward(Tensor grad_output, Tensor self, float min, float max) -> Tensor",
              same_as_first_meta)
      .pointwise_layout = true;
  register_op("leaky_relu_backward",
              "leaky_relu_backward(Tensor grad_output, Tensor self, float negative_slope) -> "
              "Tensor",
              same_as_first_meta)
      .pointwise_layout = true;
  register_op("softplus_backward",
              "softplus_backward(Tensor grad_output, Tensor self, float beta, float threshold) "
              "-> Tensor",
              same_as_first_meta)
      .pointwise_layout = true;
}
}  // namespace ops

}  // namespace kiln
