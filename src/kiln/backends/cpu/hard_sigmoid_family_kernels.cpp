// CPU kernels of hardsigmoid / hardswish and their derivatives (kiln/ops/hard_sigmoid_family.h).
// Dense float32 and bfloat16 take the ISA's vector loops (isa/activation_grads.h) over float32
// chunks on the threads (unary_grad_chunks.h: bfloat16 widened, rounded once); float64, other
// layouts and the baseline level the element loop, with the same steps and comparisons.
#include <algorithm>
#include <cmath>

#include "isa/activation_grads.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "unary_grad_chunks.h"

namespace kiln::cpu {

namespace {

// As the ops: a NaN stays NaN (fmax / fmin would drop it).
template <typename C>
C hard_sigmoid_value(C x, bool times_x) {
  C t = x + C(3);
  t = std::isnan(t) ? t : std::min(std::max(t, C(0)), C(6));
  return (times_x ? x * t : t) / C(6);
}

template <bool kTimesX>
void forward_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const Tensor& x = call.inputs[0];
  const HardSigmoidFamilyFn vec = activation_grads().hard_sigmoid_family;
  if (vec) {
    // unary_grad_chunks' (g, x) pair with x as both: the chunks of x in float32.
    auto body = [&](const float* xs, const float*, float* rs, int64_t len) {
      vec(xs, rs, len, kTimesX);
    };
    if (unary_grad_chunks<float>(x, x, out, body) || unary_grad_chunks<uint16_t>(x, x, out, body))
      return;
  }
  KILN_DISPATCH_FLOAT(x.dtype(), kTimesX ? "hardswish" : "hardsigmoid", [&]<typename T>() {
    using C = opmath_t<T>;
    elementwise_kernel<T, T>(out, {&x}, [](T v) { return T(hard_sigmoid_value(C(v), kTimesX)); });
  });
}

template <bool kTimesX>
void backward_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const Tensor g = dense_if_output_is(out, call.inputs[0]);
  const Tensor x = dense_if_output_is(out, call.inputs[1]);
  const ActivationGradFn vec = kTimesX ? activation_grads().hardswish
                                       : activation_grads().hardsigmoid;
  if (vec) {
    auto body = [&](const float* xs, const float* gs, float* rs, int64_t len) {
      vec(gs, xs, 0.0f, 0.0f, rs, len);
    };
    if (unary_grad_chunks<float>(g, x, out, body) || unary_grad_chunks<uint16_t>(g, x, out, body))
      return;
  }
  KILN_DISPATCH_FLOAT(x.dtype(), kTimesX ? "hardswish_backward" : "hardsigmoid_backward",
                      [&]<typename T>() {
    using C = opmath_t<T>;
    elementwise_kernel<T, T, T>(out, {&g, &x}, [](T gt, T xt) {
      const C gv = C(gt), xv = C(xt);
      if constexpr (kTimesX) {
        if (xv <= C(-3)) return T(0);
        return T(xv >= C(3) ? gv : gv * (xv / C(3) + C(0.5)));
      } else {
        return T(xv > C(-3) && xv < C(3) ? gv * (C(1) / C(6)) : C(0));
      }
    });
  });
}

}  // namespace

void register_hard_sigmoid_family_kernels() {
  const auto dtypes = dtype_bit(DType::F32) | dtype_bit(DType::F64) | dtype_bit(DType::BF16);
  register_kernel("hardsigmoid", DeviceType::CPU, forward_kernel<false>, dtypes);
  register_kernel("hardswish", DeviceType::CPU, forward_kernel<true>, dtypes);
  register_kernel("hardsigmoid_backward", DeviceType::CPU, backward_kernel<false>, dtypes);
  register_kernel("hardswish_backward", DeviceType::CPU, backward_kernel<true>, dtypes);
}

}  // namespace kiln::cpu
