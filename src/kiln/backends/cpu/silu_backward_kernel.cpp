// silu_backward(grad_output, self): grad_output * s (1 + x (1 - s)), s = sigmoid(x), in one
// pass. float32 and bfloat16 operands (copied dense first when the output is dense and they
// are not) take the vector table's sigmoid over chunks (unary_grad_chunks.h); other dtypes
// and layouts compute each element in opmath.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "isa/vec_math.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"
#include "unary_grad_chunks.h"

namespace kiln::cpu {

namespace {

template <typename E>
bool run_vectorised(const Tensor& g, const Tensor& x, const Tensor& out) {
  const VecMathF32& vm = vec_math_f32();
  if (!vm.sigmoid) return false;
  return unary_grad_chunks<E>(g, x, out, [&](const float* xs, const float* gs, float* rs,
                                             int64_t len) {
    alignas(64) float s[kUnaryGradChunk];
    vm.sigmoid(xs, s, len);
    for (int64_t i = 0; i < len; ++i) rs[i] = gs[i] * (s[i] * (1.0f + xs[i] * (1.0f - s[i])));
  });
}

void silu_backward_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const Tensor g = dense_if_output_is(out, call.inputs[0]);
  const Tensor x = dense_if_output_is(out, call.inputs[1]);
  if (run_vectorised<float>(g, x, out) || run_vectorised<uint16_t>(g, x, out)) return;
  KILN_DISPATCH_FLOAT(x.dtype(), "silu_backward", [&]<typename T>() {
    using C = opmath_t<T>;
    elementwise_kernel<T, T, T>(out, {&g, &x}, [](T gv, T xv) {
      const C xc = C(xv), s = C(1) / (C(1) + std::exp(-xc));
      return T(C(gv) * (s * (C(1) + xc * (C(1) - s))));
    });
  });
}

}  // namespace

void register_silu_backward_kernel() {
  register_kernel("silu_backward", DeviceType::CPU, silu_backward_kernel, kFloatDTypes);
}

}  // namespace kiln::cpu
