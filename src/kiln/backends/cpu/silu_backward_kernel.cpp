// silu_backward(grad_output, self): grad_output * s (1 + x (1 - s)), s = sigmoid(x), in one
// pass. float32 and bfloat16 operands (copied dense first when the output is dense and they
// are not) take the vector table's sigmoid over chunks that stay in L1, the rest in loops the
// compiler vectorises; bfloat16 chunks are widened first and the result rounded once
// (PyTorch's float computation). Other dtypes and layouts compute each element in opmath.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "isa/vec_math.h"
#include "kiln/backends/cpu/parallel_region.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"

namespace kiln::cpu {

namespace {

template <typename E>
bool run_vectorised(const Tensor& g, const Tensor& x, const Tensor& out) {
  constexpr bool kBf16 = std::is_same_v<E, uint16_t>;
  const VecMathF32& vm = vec_math_f32();
  if (!vm.sigmoid || (kBf16 && (!vm.widen_bf16 || !vm.narrow_bf16))) return false;
  const DType dt = kBf16 ? DType::BF16 : DType::F32;
  if (x.dtype() != dt || g.dtype() != dt || !g.is_contiguous() || !x.is_contiguous() ||
      !out.is_contiguous())
    return false;
  const E* gp = static_cast<const E*>(g.raw_data());
  const E* xp = static_cast<const E*>(x.raw_data());
  E* op = static_cast<E*>(out.raw_data());
  const int64_t n = out.numel();
  constexpr int64_t kChunk = 2048;  // float buffers of 8 KiB: L1-resident
  constexpr int64_t kWideLen = kBf16 ? kChunk : 1;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_region(chunks > 2, [&] {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      alignas(64) float s[kChunk];
      alignas(64) float xw[kWideLen], gw[kWideLen], rw[kWideLen];
      const int64_t b = c * kChunk, len = std::min(kChunk, n - b);
      const float* xs;
      const float* gs;
      float* rs;
      if constexpr (kBf16) {
        vm.widen_bf16(xp + b, xw, len);
        vm.widen_bf16(gp + b, gw, len);
        xs = xw, gs = gw, rs = rw;
      } else {
        xs = xp + b, gs = gp + b, rs = op + b;
      }
      vm.sigmoid(xs, s, len);
      for (int64_t i = 0; i < len; ++i) rs[i] = gs[i] * (s[i] * (1.0f + xs[i] * (1.0f - s[i])));
      if constexpr (kBf16) vm.narrow_bf16(rw, op + b, len);
    }
  });
  return true;
}

void silu_backward_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  // A gradient of another layout (sum()'s ones expanded with stride 0) copied dense when the
  // output is dense, as gelu_backward does.
  const auto dense = [&](const Tensor& t) {
    return out.is_contiguous() && !t.is_contiguous() ? t.contiguous() : t;
  };
  const Tensor g = dense(call.inputs[0]);
  const Tensor x = dense(call.inputs[1]);
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
