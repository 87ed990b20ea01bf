// gelu_backward(grad_output, self, approximate): grad_output * d/dx gelu(x) in one pass.
//   erf form:  gelu'(x) = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2,
//              phi(x) = exp(-x^2 / 2) / sqrt(2 pi);
//   tanh form: with u = k (x + c x^3), k = sqrt(2 / pi), c = 0.044715, t = tanh(u):
//              gelu'(x) = (1 + t) / 2 + x (1 - t^2) k (1 + 3 c x^2) / 2.
// float32 and bfloat16 contiguous operands take the vector table's erf / exp / tanh over chunks
// that stay in L1, the rest of the arithmetic in loops the compiler vectorises; other dtypes and
// layouts compute each element in opmath (float, or double for float64). The derivative written as a
// chain of ops (autograd's composite form) made about 17 passes over its operands: 18 ms for
// a [4, 256, 3072] float32 tanh-form activation of GPT-2 small's MLP on two Zen 3 cores.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "isa/vec_math.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "unary_grad_chunks.h"

namespace kiln::cpu {

namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kTanhCubic = 0.044715;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

template <typename C>
C gelu_grad_erf(C g, C x) {
  const C cdf = C(0.5) * (C(1) + std::erf(x * C(kInvSqrt2)));
  const C pdf = std::exp(C(-0.5) * x * x) * C(kInvSqrt2Pi);
  return g * (cdf + x * pdf);
}

template <typename C>
C gelu_grad_tanh(C g, C x) {
  const C x2 = x * x;
  const C t = std::tanh(C(kSqrt2OverPi) * (x + C(kTanhCubic) * x2 * x));
  const C dinner = C(kSqrt2OverPi) * (C(1) + C(3 * kTanhCubic) * x2);
  return g * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * dinner);
}

// float32 or bfloat16, contiguous (unary_grad_chunks): the transcendental part by the vector
// table, the rest in loops the compiler vectorises. Under autocast the bfloat16 activations of
// GPT-2 small's MLP took the derivative's op chain instead: 17 passes, a tanh of 4.9 ms per
// [4, 256, 3072] among them.
template <typename E>
bool run_vectorised(const Tensor& g, const Tensor& x, const Tensor& out, bool tanh_form) {
  const VecMathF32& vm = vec_math_f32();
  const VecUnaryF32 first = tanh_form ? vm.tanh : vm.erf;
  if (!first || (!tanh_form && !vm.exp)) return false;
  return unary_grad_chunks<E>(g, x, out, [&](const float* xs, const float* gs, float* rs,
                                             int64_t len) {
    alignas(64) float arg[kUnaryGradChunk], f1[kUnaryGradChunk], f2[kUnaryGradChunk];
    if (tanh_form) {
      for (int64_t i = 0; i < len; ++i)
        arg[i] = float(kSqrt2OverPi) * (xs[i] + float(kTanhCubic) * xs[i] * xs[i] * xs[i]);
      first(arg, f1, len);
      for (int64_t i = 0; i < len; ++i) {
        const float xv = xs[i], t = f1[i];
        const float dinner = float(kSqrt2OverPi) * (1.0f + float(3 * kTanhCubic) * xv * xv);
        rs[i] = gs[i] * (0.5f * (1.0f + t) + 0.5f * xv * (1.0f - t * t) * dinner);
      }
    } else {
      for (int64_t i = 0; i < len; ++i) arg[i] = xs[i] * float(kInvSqrt2);
      first(arg, f1, len);
      for (int64_t i = 0; i < len; ++i) arg[i] = -0.5f * xs[i] * xs[i];
      vm.exp(arg, f2, len);
      for (int64_t i = 0; i < len; ++i) {
        const float cdf = 0.5f * (1.0f + f1[i]), pdf = f2[i] * float(kInvSqrt2Pi);
        rs[i] = gs[i] * (cdf + xs[i] * pdf);
      }
    }
  });
}

void gelu_backward_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const Tensor g = dense_if_output_is(out, call.inputs[0]);
  const Tensor x = dense_if_output_is(out, call.inputs[1]);
  const bool tanh_form = call.string_attr(0) == "tanh";
  if (run_vectorised<float>(g, x, out, tanh_form) || run_vectorised<uint16_t>(g, x, out, tanh_form))
    return;
  KILN_DISPATCH_FLOAT(x.dtype(), "gelu_backward", [&]<typename T>() {
    using C = opmath_t<T>;
    if (tanh_form)
      elementwise_kernel<T, T, T>(out, {&g, &x},
                                  [](T gv, T xv) { return T(gelu_grad_tanh(C(gv), C(xv))); });
    else
      elementwise_kernel<T, T, T>(out, {&g, &x},
                                  [](T gv, T xv) { return T(gelu_grad_erf(C(gv), C(xv))); });
  });
}

}  // namespace

void register_gelu_backward_kernel() {
  register_kernel("gelu_backward", DeviceType::CPU, gelu_backward_kernel, kFloatDTypes);
}

}  // namespace kiln::cpu
