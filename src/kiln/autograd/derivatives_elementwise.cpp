// Derivatives of the elementwise ops, written with ops so that they are differentiable
// themselves (double backward with create_graph).
#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/node.h"
#include "kiln/ops/activation_backward.h"
#include "kiln/ops/complex.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/hard_sigmoid_family.h"
#include "kiln/ops/random.h"

namespace kiln::autograd {

namespace {

using Grads = std::vector<Tensor>;
const double kPi = 3.14159265358979323846;


// One-input op: d/dx = g * f'(x, y).
#define KILN_UNARY_DERIVATIVE(NAME, EXPR)                                   \
  Grads d_##NAME(const GradContext& ctx, const Grads& go) {                 \
    const Tensor& g = go[0];                                                \
    Tensor x = ctx.input(0);                                                \
    (void)x;                                                                \
    return {EXPR};                                                          \
  }

KILN_UNARY_DERIVATIVE(neg, neg(g))
KILN_UNARY_DERIVATIVE(abs, is_complex(x.dtype()) ? g.to(x.dtype()) * sgn(x) : g * sign(x))
KILN_UNARY_DERIVATIVE(exp, g * conj_if_complex(ctx.output(0)))
KILN_UNARY_DERIVATIVE(exp2, g * ctx.output(0) * std::log(2.0))
KILN_UNARY_DERIVATIVE(log, g / conj_if_complex(x))
KILN_UNARY_DERIVATIVE(log2, g / conj_if_complex(x * std::log(2.0)))
KILN_UNARY_DERIVATIVE(log1p, g / conj_if_complex(x + 1))
KILN_UNARY_DERIVATIVE(expm1, g * conj_if_complex(ctx.output(0) + 1))
KILN_UNARY_DERIVATIVE(sqrt, g / conj_if_complex(ctx.output(0) * 2))
KILN_UNARY_DERIVATIVE(rsqrt, g * conj_if_complex(pow(ctx.output(0), 3) * -0.5))
KILN_UNARY_DERIVATIVE(sin, g * conj_if_complex(cos(x)))
KILN_UNARY_DERIVATIVE(cos, g * conj_if_complex(neg(sin(x))))
KILN_UNARY_DERIVATIVE(tan, g * conj_if_complex(pow(ctx.output(0), 2) + 1))
KILN_UNARY_DERIVATIVE(tanh, g * conj_if_complex(1 - ctx.output(0) * ctx.output(0)))
KILN_UNARY_DERIVATIVE(sigmoid, g * conj_if_complex(ctx.output(0) * (1 - ctx.output(0))))
KILN_UNARY_DERIVATIVE(erf, g * exp(neg(x * x)) * (2 / std::sqrt(kPi)))
KILN_UNARY_DERIVATIVE(erfc, g * exp(neg(x * x)) * (-2 / std::sqrt(kPi)))
KILN_UNARY_DERIVATIVE(erfinv, g * exp(ctx.output(0) * ctx.output(0)) * (std::sqrt(kPi) / 2))
KILN_UNARY_DERIVATIVE(lgamma, g * digamma(x))
KILN_UNARY_DERIVATIVE(digamma, g * polygamma(1, x))
KILN_UNARY_DERIVATIVE(trigamma, g * polygamma(2, x))
KILN_UNARY_DERIVATIVE(reciprocal, g * conj_if_complex(neg(ctx.output(0) * ctx.output(0))))
// Gamma(alpha, 1) samples: the implicit reparameterisation derivative d sample / d alpha
// (itself not differentiable, as in PyTorch).
KILN_UNARY_DERIVATIVE(standard_gamma, g * standard_gamma_grad(x, ctx.output(0)))
KILN_UNARY_DERIVATIVE(zero_grad, zeros_like(g))  // floor, ceil, round, trunc, sign
#undef KILN_UNARY_DERIVATIVE

// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x): one fused pass for float32 / bfloat16 on the
// CPU when the backward is not itself recorded, else the differentiable op chain.
Grads d_silu(const GradContext& ctx, const Grads& go) {
  Tensor x = ctx.input(0);
  const Tensor& g = go[0];
  const bool fused = !is_grad_enabled() && x.device().type == DeviceType::CPU &&
                     (x.dtype() == DType::F32 || x.dtype() == DType::BF16) &&
                     g.dtype() == x.dtype() && g.shape() == x.shape();
  if (fused) return {silu_backward(g, x)};
  return {g * (sigmoid(x) * (1 + x * (1 - sigmoid(x))))};
}

Grads d_gelu(const GradContext& ctx, const Grads& go) {
  Tensor x = ctx.input(0);
  const Tensor& g = go[0];
  const std::string approximate = ctx.as_call().string_attr(0);
  // float32 on the CPU (and the testing device, which runs its kernels) or xpu, and bfloat16
  // on the CPU (autocast training), when the backward is not itself recorded: one fused pass.
  // Otherwise the op chain below, which is differentiable (create_graph) and runs on every
  // device.
  const DeviceType device = x.device().type;
  const bool f32 = x.dtype() == DType::F32 && g.dtype() == DType::F32 &&
                   (device == DeviceType::CPU || device == DeviceType::Testing ||
                    device == DeviceType::XPU);
  const bool bf16 = x.dtype() == DType::BF16 && g.dtype() == DType::BF16 &&
                    (device == DeviceType::CPU || device == DeviceType::Testing);
  if (!is_grad_enabled() && (f32 || bf16) && g.shape() == x.shape())
    return {gelu_backward(g, x, approximate)};
  if (approximate == "tanh") {
    const double k = std::sqrt(2 / kPi);
    Tensor inner = (x + pow(x, 3) * 0.044715) * k;
    Tensor t = tanh(inner);
    Tensor dinner = (pow(x, 2) * (3 * 0.044715) + 1) * k;
    return {g * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * dinner)};
  }
  Tensor cdf = (erf(x * (1 / std::sqrt(2.0))) + 1) * 0.5;
  Tensor pdf = exp(x * x * -0.5) * (1 / std::sqrt(2 * kPi));
  return {g * (cdf + x * pdf)};
}

// The piecewise activations' fused derivatives (activation_backward.h): one pass on the CPU
// where the backward is not itself recorded and the gradient matches self's dtype and shape;
// the differentiable op chains otherwise. relu from its output, as PyTorch.
bool fused_activation_grad(const Tensor& g, const Tensor& x) {
  return !is_grad_enabled() && x.device().type == DeviceType::CPU && g.defined() &&
         g.dtype() == x.dtype() && g.shape() == x.shape() && is_floating(x.dtype());
}

Grads d_relu(const GradContext& ctx, const Grads& go) {
  Tensor y = ctx.output(0);
  if (fused_activation_grad(go[0], y)) return {threshold_backward(go[0], y, 0.0)};
  return {go[0] * gt(y, 0).to(go[0].dtype())};
}

// hardswish / hardsigmoid (hard_sigmoid_family.h), as PyTorch's vector loops: x = -3 takes
// hardswish's lower piece, x = 3 its upper one; neither belongs to hardsigmoid's slope.
Grads d_hardswish(const GradContext& ctx, const Grads& go) {
  Tensor x = ctx.input(0);
  if (fused_activation_grad(go[0], x)) return {hardswish_backward(go[0], x)};
  Tensor upper = where(ge(x, Scalar(3.0)), go[0], go[0] * (x / 3.0 + 0.5));
  return {where(le(x, Scalar(-3.0)), Scalar(0.0), upper)};
}

Grads d_hardsigmoid(const GradContext& ctx, const Grads& go) {
  Tensor x = ctx.input(0);
  if (fused_activation_grad(go[0], x)) return {hardsigmoid_backward(go[0], x)};
  Tensor inside = logical_and(gt(x, Scalar(-3.0)), lt(x, Scalar(3.0)));
  return {where(inside, go[0] * (1.0 / 6.0), Scalar(0.0))};
}

Grads d_softplus(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  double beta = c.double_attr(0), threshold = c.double_attr(1);
  Tensor x = ctx.input(0);
  if (fused_activation_grad(go[0], x)) return {softplus_backward(go[0], x, beta, threshold)};
  Tensor s = sigmoid(x * beta);
  return {where(gt(x * beta, threshold), go[0], go[0] * s)};
}

Grads d_leaky_relu(const GradContext& ctx, const Grads& go) {
  const double slope = ctx.as_call().double_attr(0);
  Tensor x = ctx.input(0);
  if (fused_activation_grad(go[0], x)) return {leaky_relu_backward(go[0], x, slope)};
  return {where(gt(x, Scalar(0.0)), go[0], go[0] * slope)};
}

Grads d_clamp(const GradContext& ctx, const Grads& go) {
  OpCall c = ctx.as_call();
  Tensor x = ctx.input(0);
  if (fused_activation_grad(go[0], x)) {
    auto bound = [&](int i) {
      return c.has_attr(i) ? std::optional<double>(c.scalar_attr(i).to_double()) : std::nullopt;
    };
    return {clamp_backward(go[0], x, bound(0), bound(1))};
  }
  Tensor mask = ones_like(x, DType::Bool);
  if (c.has_attr(0)) mask = logical_and(mask, ge(x, c.scalar_attr(0)));
  if (c.has_attr(1)) mask = logical_and(mask, le(x, c.scalar_attr(1)));
  return {where(mask, go[0], 0.0)};
}

Grads d_nan_to_num(const GradContext& ctx, const Grads& go) {
  return {where(isfinite(ctx.input(0)), go[0], 0.0)};
}

// Binary ops: inputs are already of one dtype and broadcast; gradients are summed back.
Grads d_add(const GradContext& ctx, const Grads& go) {
  Scalar alpha = ctx.as_call().scalar_attr(0);
  Grads r(2);
  if (ctx.needs(0)) r[0] = sum_to(go[0], ctx.input_shapes[0]);
  if (ctx.needs(1)) r[1] = sum_to(alpha.to_double() == 1 ? go[0] : go[0] * alpha, ctx.input_shapes[1]);
  return r;
}
Grads d_sub(const GradContext& ctx, const Grads& go) {
  Scalar alpha = ctx.as_call().scalar_attr(0);
  Grads r(2);
  if (ctx.needs(0)) r[0] = sum_to(go[0], ctx.input_shapes[0]);
  if (ctx.needs(1)) r[1] = sum_to(go[0] * -alpha.to_double(), ctx.input_shapes[1]);
  return r;
}
Grads d_mul(const GradContext& ctx, const Grads& go) {
  Grads r(2);
  if (ctx.needs(0)) r[0] = sum_to(go[0] * conj_if_complex(ctx.input(1)), ctx.input_shapes[0]);
  if (ctx.needs(1)) r[1] = sum_to(go[0] * conj_if_complex(ctx.input(0)), ctx.input_shapes[1]);
  return r;
}
Grads d_div(const GradContext& ctx, const Grads& go) {
  Grads r(2);
  if (!ctx.as_call().string_attr(0).empty()) {  // rounding: piecewise constant
    if (ctx.needs(0)) r[0] = zeros(ctx.input_shapes[0], TensorOptions(go[0].dtype(), go[0].device()));
    if (ctx.needs(1)) r[1] = zeros(ctx.input_shapes[1], TensorOptions(go[0].dtype(), go[0].device()));
    return r;
  }
  Tensor b = conj_if_complex(ctx.input(1));
  if (ctx.needs(0)) r[0] = sum_to(go[0] / b, ctx.input_shapes[0]);
  if (ctx.needs(1)) r[1] = sum_to(neg(go[0] * conj_if_complex(ctx.input(0))) / (b * b), ctx.input_shapes[1]);
  return r;
}
Grads d_pow(const GradContext& ctx, const Grads& go) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  Grads r(2);
  // Complex operands take the conjugate of each derivative (conj_if_complex, as mul's).
  if (ctx.needs(0) && b.dim() == 0 && !is_complex(b.dtype()) && !is_complex(a.dtype()) &&
      a.shape() == ctx.input_shapes[0]) {
    // A real scalar exponent (x ** 2, x.pow(0.5)): as PyTorch, g * (b * a^(b-1)) with the
    // exponent read once; 0 for b == 0, g * (a * 2) for b == 2 (a^1 is a). The tensor form
    // below made five passes (a where, a zeros_like, pow, two products).
    const double e = b.item<double>();
    if (e == 0) r[0] = zeros_like(a);
    else if (e == 2) r[0] = sum_to(go[0] * (a * 2.0), ctx.input_shapes[0]);
    else r[0] = sum_to(go[0] * (pow(a, e - 1) * e), ctx.input_shapes[0]);
  } else if (ctx.needs(0)) {
    // b * a^(b-1), with 0 where b == 0 (PyTorch's convention avoids 0 * inf).
    Tensor d = where(eq(b, 0.0), zeros_like(a), b * pow(a, b - 1));
    r[0] = sum_to(go[0] * conj_if_complex(d), ctx.input_shapes[0]);
  }
  if (ctx.needs(1)) {
    // 0 where a == 0 (and, for real b, b >= 0: a^b is constant there).
    Tensor zero_base = is_complex(b.dtype()) ? eq(a, 0.0) : logical_and(eq(a, 0.0), ge(b, 0.0));
    Tensor d = where(zero_base, zeros_like(ctx.output(0)), ctx.output(0) * log(a));
    r[1] = sum_to(go[0] * conj_if_complex(d), ctx.input_shapes[1]);
  }
  return r;
}
// maximum/minimum: the gradient goes to the selected input; ties split it evenly (PyTorch).
template <bool kMax>
Grads d_extremum(const GradContext& ctx, const Grads& go) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  Tensor pick_a = kMax ? gt(a, b) : lt(a, b);
  Tensor tie = eq(a, b);
  Tensor wa = where(tie, 0.5, pick_a.to(go[0].dtype()));
  Grads r(2);
  if (ctx.needs(0)) r[0] = sum_to(go[0] * wa, ctx.input_shapes[0]);
  if (ctx.needs(1)) r[1] = sum_to(go[0] * (1 - wa), ctx.input_shapes[1]);
  return r;
}
Grads d_fmod(const GradContext& ctx, const Grads& go) {
  Grads r(2);
  if (ctx.needs(0)) r[0] = sum_to(go[0], ctx.input_shapes[0]);
  if (ctx.needs(1))
    r[1] = sum_to(go[0] * neg(div(ctx.input(0), ctx.input(1), "trunc")), ctx.input_shapes[1]);
  return r;
}
Grads d_remainder(const GradContext& ctx, const Grads& go) {
  Grads r(2);
  if (ctx.needs(0)) r[0] = sum_to(go[0], ctx.input_shapes[0]);
  if (ctx.needs(1))
    r[1] = sum_to(go[0] * neg(div(ctx.input(0), ctx.input(1), "floor")), ctx.input_shapes[1]);
  return r;
}
Grads d_atan2(const GradContext& ctx, const Grads& go) {
  Tensor a = ctx.input(0), b = ctx.input(1);
  Tensor denom = a * a + b * b;
  Grads r(2);
  if (ctx.needs(0)) r[0] = sum_to(go[0] * b / denom, ctx.input_shapes[0]);
  if (ctx.needs(1)) r[1] = sum_to(go[0] * neg(a) / denom, ctx.input_shapes[1]);
  return r;
}
Grads d_where(const GradContext& ctx, const Grads& go) {
  Tensor c = ctx.input(0);
  Grads r(3);
  if (ctx.needs(1)) r[1] = sum_to(where(c, go[0], 0.0), ctx.input_shapes[1]);
  if (ctx.needs(2)) r[2] = sum_to(where(c, 0.0, go[0]), ctx.input_shapes[2]);
  return r;
}
Grads d_lerp(const GradContext& ctx, const Grads& go) {
  Tensor s = ctx.input(0), e = ctx.input(1), w = ctx.input(2);
  Grads r(3);
  if (ctx.needs(0)) r[0] = sum_to(go[0] * (1 - w), ctx.input_shapes[0]);
  if (ctx.needs(1)) r[1] = sum_to(go[0] * w, ctx.input_shapes[1]);
  if (ctx.needs(2)) r[2] = sum_to(go[0] * (e - s), ctx.input_shapes[2]);
  return r;
}
template <bool kDivide>
Grads d_addc(const GradContext& ctx, const Grads& go) {
  double v = ctx.as_call().scalar_attr(0).to_double();
  Tensor t1 = ctx.input(1), t2 = ctx.input(2);
  Grads r(3);
  if (ctx.needs(0)) r[0] = sum_to(go[0], ctx.input_shapes[0]);
  if (kDivide) {
    if (ctx.needs(1)) r[1] = sum_to(go[0] * v / t2, ctx.input_shapes[1]);
    if (ctx.needs(2)) r[2] = sum_to(neg(go[0] * v * t1) / (t2 * t2), ctx.input_shapes[2]);
  } else {
    // As PyTorch: the other factor scaled by value first (often a per-channel weight, far
    // smaller than the gradient), and not at all for value 1: (g * v) * t made two passes
    // over the gradient for each input (group_norm's affine backward).
    if (ctx.needs(1)) r[1] = sum_to(go[0] * (v == 1 ? t2 : t2 * v), ctx.input_shapes[1]);
    if (ctx.needs(2)) r[2] = sum_to(go[0] * (v == 1 ? t1 : t1 * v), ctx.input_shapes[2]);
  }
  return r;
}

}  // namespace

void register_elementwise_derivatives() {
  register_derivative("neg", d_neg);
  register_derivative("abs", d_abs);
  register_derivative("exp", d_exp);
  register_derivative("exp2", d_exp2);
  register_derivative("log", d_log);
  register_derivative("log2", d_log2);
  register_derivative("log1p", d_log1p);
  register_derivative("expm1", d_expm1);
  register_derivative("sqrt", d_sqrt);
  register_derivative("rsqrt", d_rsqrt);
  register_derivative("sin", d_sin);
  register_derivative("cos", d_cos);
  register_derivative("tan", d_tan);
  register_derivative("tanh", d_tanh);
  register_derivative("sigmoid", d_sigmoid);
  register_derivative("relu", d_relu);
  register_derivative("silu", d_silu);
  register_derivative("erf", d_erf);
  register_derivative("erfc", d_erfc);
  register_derivative("erfinv", d_erfinv);
  register_derivative("lgamma", d_lgamma);
  register_derivative("_standard_gamma", d_standard_gamma);
  register_derivative("digamma", d_digamma);
  register_derivative("trigamma", d_trigamma);
  register_derivative("reciprocal", d_reciprocal);
  for (const char* n : {"floor", "ceil", "round", "trunc", "sign"}) register_derivative(n, d_zero_grad);
  register_derivative("gelu", d_gelu);
  register_derivative("softplus", d_softplus);
  register_derivative("hardswish", d_hardswish);
  register_derivative("hardsigmoid", d_hardsigmoid);
  register_derivative("leaky_relu", d_leaky_relu);
  register_derivative("clamp", d_clamp);
  register_derivative("nan_to_num", d_nan_to_num);
  register_derivative("add", d_add);
  register_derivative("sub", d_sub);
  register_derivative("mul", d_mul);
  register_derivative("div", d_div);
  register_derivative("pow", d_pow);
  register_derivative("maximum", d_extremum<true>);
  register_derivative("minimum", d_extremum<false>);
  register_derivative("fmod", d_fmod);
  register_derivative("remainder", d_remainder);
  register_derivative("atan2", d_atan2);
  register_derivative("where", d_where);
  register_derivative("lerp", d_lerp);
  register_derivative("addcmul", d_addc<false>);
  register_derivative("addcdiv", d_addc<true>);
}

}  // namespace kiln::autograd
