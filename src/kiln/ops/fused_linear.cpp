// fused_linear: a Linear layer and its epilogue (activation, residual add, output dtype) as
// one op (see kiln/ops/linalg.h). The op sees x as [M, K] rows and the residual as [M, N];
// inputs that require grad, and dtypes without a fused kernel, run the plain ops instead.
#include <string>

#include "kiln/autograd/autograd.h"
#include "kiln/dispatch/autocast.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/views.h"
#include "op_helpers.h"

namespace kiln {

namespace {

constexpr const char* kActivationNames[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};

Tensor apply_activation(const Tensor& y, LinearActivation act) {
  switch (act) {
    case LinearActivation::None: return y;
    case LinearActivation::Relu: return relu(y);
    case LinearActivation::Gelu: return gelu(y, "none");
    case LinearActivation::GeluTanh: return gelu(y, "tanh");
    case LinearActivation::Silu: return silu(y);
  }
  return y;
}

bool has_fused_kernel(DType t) { return t == DType::F32 || t == DType::BF16; }

// inputs {x [M, K], weight [N, K], bias?, residual? [M, N]}, attrs {activation, out_dtype}.
std::vector<TensorMeta> fused_linear_meta(const OpCall& c) {
  return {{Shape{c.inputs[0].size(0), c.inputs[1].size(0)}, c.dtype_attr(1)}};
}

}  // namespace

bool fused_linear_mixed_ok(const Tensor& x) {
  return x.device().is_cpu() && is_autocast_enabled(DeviceType::CPU) &&
         get_autocast_dtype(DeviceType::CPU) == DType::BF16 &&
         (x.dtype() == DType::F32 || x.dtype() == DType::BF16);
}

LinearActivation parse_linear_activation(const std::string& name) {
  for (int i = 0; i < 5; ++i)
    if (name == kActivationNames[i]) return LinearActivation(i);
  KILN_THROW(ValueError, "fused_linear: unknown activation '", name,
             "'; expected one of none, relu, gelu, gelu_tanh, silu");
}

const char* linear_activation_name(LinearActivation act) { return kActivationNames[int(act)]; }

Tensor fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                    LinearActivation act, const Tensor& residual, std::optional<DType> out_dtype) {
  KILN_CHECK(weight.dim() == 2, ShapeError,
             "fused_linear: expected weight to be a 2-D tensor [out_features, in_features], "
             "but got a ", weight.dim(), "-D tensor of shape ", shape_str(weight.shape()));
  KILN_CHECK(x.dim() >= 1, ShapeError, "fused_linear: expected input of at least 1 dim, got a 0-D tensor");
  const int64_t K = x.shape().back(), N = weight.size(0);
  KILN_CHECK(weight.size(1) == K, ShapeError, "fused_linear: input's last dim (", K,
             ") does not match weight's in_features (weight of shape ",
             shape_str(weight.shape()), ")");
  KILN_CHECK(is_floating(x.dtype()), Error, "fused_linear: expected a floating input, got ",
             dtype_name(x.dtype()));
  // Under CPU autocast to bfloat16, float32 and bfloat16 operands may mix: the autocast
  // interceptor unifies them before the kernel runs (decision 0121).
  const bool mixed_ok = fused_linear_mixed_ok(x);
  const auto mixes = [&](DType t) { return mixed_ok && (t == DType::F32 || t == DType::BF16); };
  KILN_CHECK(weight.dtype() == x.dtype() || mixes(weight.dtype()), Error,
             "fused_linear: expected weight of the input's dtype ", dtype_name(x.dtype()),
             ", got ", dtype_name(weight.dtype()));
  KILN_CHECK(weight.device() == x.device(), DeviceError, "fused_linear: expected weight on ",
             x.device().str(), ", got ", weight.device().str());
  if (bias.defined()) {
    KILN_CHECK(bias.dim() == 1 && bias.size(0) == N, ShapeError,
               "fused_linear: expected bias of shape [", N, "], got ", shape_str(bias.shape()));
    KILN_CHECK(bias.dtype() == x.dtype() || mixes(bias.dtype()), Error,
               "fused_linear: expected bias of the input's dtype ", dtype_name(x.dtype()),
               ", got ", dtype_name(bias.dtype()));
    KILN_CHECK(bias.device() == x.device(), DeviceError, "fused_linear: expected bias on ",
               x.device().str(), ", got ", bias.device().str());
  }
  const DType out = out_dtype.value_or(x.dtype());
  KILN_CHECK(is_floating(out), Error, "fused_linear: expected a floating out_dtype, got ",
             dtype_name(out));
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(N);
  Tensor res;
  if (residual.defined()) {
    KILN_CHECK(is_floating(residual.dtype()), Error,
               "fused_linear: expected a floating residual, got ", dtype_name(residual.dtype()));
    KILN_CHECK(residual.device() == x.device(), DeviceError, "fused_linear: expected residual on ",
               x.device().str(), ", got ", residual.device().str());
    KILN_CHECK(residual.dim() <= int64_t(out_shape.size()), ShapeError,
               "fused_linear: residual of shape ", shape_str(residual.shape()),
               " does not broadcast to the output's shape ", shape_str(out_shape));
    res = expand(residual, out_shape);  // raises for shapes that do not broadcast
  }

  bool grad = false;
  if (autograd::is_grad_enabled())
    for (const Tensor* t : {&x, &weight, &bias, &residual})
      grad = grad || (t->defined() && autograd::requires_grad(*t));
  const bool fused = !grad && has_fused_kernel(x.dtype()) && has_fused_kernel(out) &&
                     (!res.defined() || has_fused_kernel(res.dtype())) &&
                     x.device().type != DeviceType::XPU;
  if (!fused) {
    // The same arithmetic as separate ops (autograd records each), in float32 when the
    // output is float32 so the activation sees unrounded sums as the fused kernel's does.
    const bool widen = out == DType::F32 && x.dtype() != DType::F32 && !grad;
    Tensor y = widen ? linear(x.to(out), weight.to(out), bias.defined() ? bias.to(out) : bias)
                     : linear(x, weight, bias);
    y = apply_activation(y, act);
    if (res.defined()) y = add(y, res);
    return y.dtype() == out ? y : y.to(out);
  }
  int64_t M = 1;
  for (size_t i = 0; i + 1 < x.shape().size(); ++i) M *= x.shape()[i];
  Tensor x2 = reshape(x, {M, K});
  Tensor w2 = weight.stride(1) == 1 ? weight : weight.contiguous();
  Tensor r2;
  if (res.defined()) {
    r2 = reshape(res, {M, N});
    if (r2.stride(1) != 1 || (M > 1 && r2.stride(0) < N)) r2 = r2.contiguous();
  }
  Tensor y = call_op(KILN_OP("fused_linear"),
                     {x2, w2, bias.defined() ? bias.contiguous() : Tensor(), r2},
                     {int64_t(act), out});
  return reshape(y, out_shape);
}

namespace ops {
void register_fused_linear_op() {
  register_op("fused_linear",
              "fused_linear(Tensor input, Tensor weight, Tensor? bias, Tensor? residual, "
              "int activation, ScalarType out_dtype) -> Tensor",
              fused_linear_meta);
}
}  // namespace ops

}  // namespace kiln
