// The vector pass shared by the fused derivatives of unary ops (gelu_backward,
// silu_backward): grad_input from grad_output and self, float32 or bfloat16, a chunk of
// kUnaryGradChunk values at a time so that the vector table's transcendental functions and the
// arithmetic around them work on buffers that stay in L1. bfloat16 chunks are widened to
// float32 first and the result rounded once (PyTorch's float computation).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "isa/vec_math.h"
#include "kiln/backends/cpu/parallel_region.h"
#include "kiln/tensor/tensor.h"

namespace kiln::cpu {

constexpr int64_t kUnaryGradChunk = 2048;  // float buffers of 8 KiB

// An operand of another layout copied dense when the output is dense: the gradient of
// f(x).sum() arrives as sum's ones expanded with stride 0, and the element loops the kernels
// fall back to (a scalar erf per value for gelu) took 9.5 ms for [512, 3072] float32 where
// the copy and the vector pass take about 1.
inline Tensor dense_if_output_is(const Tensor& out, const Tensor& t) {
  return out.is_contiguous() && !t.is_contiguous() ? t.contiguous() : t;
}

// Runs body(x, g, result, len) on float32 chunks of contiguous g, x and out of E's type
// (float, or uint16_t for bfloat16), over the threads; false (nothing done) for other
// dtypes or layouts, or without the vector table's bfloat16 conversions.
template <typename E, typename Body>
bool unary_grad_chunks(const Tensor& g, const Tensor& x, const Tensor& out, Body body) {
  constexpr bool kBf16 = std::is_same_v<E, uint16_t>;
  const VecMathF32& vm = vec_math_f32();
  if (kBf16 && (!vm.widen_bf16 || !vm.narrow_bf16)) return false;
  const DType dt = kBf16 ? DType::BF16 : DType::F32;
  if (g.dtype() != dt || x.dtype() != dt || out.dtype() != dt || !g.is_contiguous() ||
      !x.is_contiguous() || !out.is_contiguous())
    return false;
  const E* gp = static_cast<const E*>(g.raw_data());
  const E* xp = static_cast<const E*>(x.raw_data());
  E* op = static_cast<E*>(out.raw_data());
  const int64_t n = out.numel();
  // Computed here: GCC 12 crashes on `kBf16 ? kUnaryGradChunk : 1` as an array bound inside
  // the lambda.
  constexpr int64_t kWideLen = kBf16 ? kUnaryGradChunk : 1;
  const int64_t chunks = (n + kUnaryGradChunk - 1) / kUnaryGradChunk;
  parallel_region(chunks > 2, [&] {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t b = c * kUnaryGradChunk, len = std::min(kUnaryGradChunk, n - b);
      // The chunk's x, g and result in float32: the tensors' own memory for float32, buffers
      // (widened / to be narrowed) for bfloat16.
      alignas(64) float xw[kWideLen], gw[kWideLen], rw[kWideLen];
      if constexpr (kBf16) {
        vm.widen_bf16(xp + b, xw, len);
        vm.widen_bf16(gp + b, gw, len);
        body(static_cast<const float*>(xw), static_cast<const float*>(gw), rw, len);
        vm.narrow_bf16(rw, op + b, len);
      } else {
        body(xp + b, gp + b, op + b, len);
      }
    }
  });
  return true;
}

}  // namespace kiln::cpu
