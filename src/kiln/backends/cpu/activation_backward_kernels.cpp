// CPU kernels of the fused activation derivatives (kiln/ops/activation_backward.h):
// grad_input = f(grad_output, self) in one pass. float32 and bfloat16 operands (copied dense
// first when the output is dense and they are not: sum()'s expanded gradient) take the ISA's
// vector loops (isa/activation_grads.h) over float32 chunks (unary_grad_chunks.h: bfloat16
// widened and rounded once); other dtypes, layouts and the baseline level compute each element
// in opmath through the strided element loop.
#include <cmath>
#include <limits>

#include "isa/activation_grads.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "unary_grad_chunks.h"

namespace kiln::cpu {

namespace {

// vec(g, x, a, b, out, n) over chunks where it applies, else fn(g, x) per element in opmath
// (fn is generic over the opmath type).
template <typename Fn>
void activation_grad(OpCall& call, const char* name, ActivationGradFn vec, float a, float b,
                     Fn fn) {
  const Tensor& out = call.outs[0];
  const Tensor g = dense_if_output_is(out, call.inputs[0]);
  const Tensor x = dense_if_output_is(out, call.inputs[1]);
  if (vec) {
    auto body = [&](const float* xs, const float* gs, float* rs, int64_t len) {
      vec(gs, xs, a, b, rs, len);
    };
    if (unary_grad_chunks<float>(g, x, out, body) ||
        unary_grad_chunks<uint16_t>(g, x, out, body))
      return;
  }
  KILN_DISPATCH_FLOAT(x.dtype(), name, [&]<typename T>() {
    using C = opmath_t<T>;
    elementwise_kernel<T, T, T>(out, {&g, &x}, [&](T gv, T xv) { return T(fn(C(gv), C(xv))); });
  });
}

void threshold_backward_kernel(OpCall& call) {
  const double t = call.double_attr(0);
  activation_grad(call, "threshold_backward", activation_grads().threshold, float(t), 0.0f,
                  [t](auto g, auto x) {
                    using C = decltype(x);
                    return x <= C(t) ? C(0) : g;
                  });
}

// Absent bounds arrive as NaN and are infinite here.
void clamp_backward_kernel(OpCall& call) {
  const double inf = std::numeric_limits<double>::infinity();
  double lo = call.double_attr(0), hi = call.double_attr(1);
  if (std::isnan(lo)) lo = -inf;
  if (std::isnan(hi)) hi = inf;
  activation_grad(call, "clamp_backward", activation_grads().clamp, float(lo), float(hi),
                  [=](auto g, auto x) {
                    using C = decltype(x);
                    return x >= C(lo) && x <= C(hi) ? g : C(0);
                  });
}

void leaky_relu_backward_kernel(OpCall& call) {
  const double slope = call.double_attr(0);
  activation_grad(call, "leaky_relu_backward", activation_grads().leaky_relu, float(slope),
                  0.0f, [slope](auto g, auto x) {
                    using C = decltype(x);
                    return x > C(0) ? g : g * C(slope);
                  });
}

void softplus_backward_kernel(OpCall& call) {
  const double beta = call.double_attr(0), threshold = call.double_attr(1);
  activation_grad(call, "softplus_backward", activation_grads().softplus, float(beta),
                  float(threshold), [=](auto g, auto x) {
                    using C = decltype(x);
                    const C t = x * C(beta);
                    return t > C(threshold) ? g : g / (C(1) + std::exp(-t));
                  });
}

}  // namespace

void register_activation_backward_kernels() {
  register_kernel("threshold_backward", DeviceType::CPU, threshold_backward_kernel, kFloatDTypes);
  register_kernel("clamp_backward", DeviceType::CPU, clamp_backward_kernel, kFloatDTypes);
  register_kernel("leaky_relu_backward", DeviceType::CPU, leaky_relu_backward_kernel,
                  kFloatDTypes);
  register_kernel("softplus_backward", DeviceType::CPU, softplus_backward_kernel, kFloatDTypes);
}

}  // namespace kiln::cpu
