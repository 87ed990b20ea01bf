#include <cstdlib>
#include <string>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/core/error.h"
#include "activation_grads.h"
#include "norm_grad_rows.h"
#include "softmax_grad_rows.h"
#include "vec_math.h"

namespace kiln::cpu {

namespace {
// The AVX-512 or AVX2 table for the current ISA level, or an empty one (null entries: scalar
// code) at the baseline level.
template <typename Table>
const Table& for_level(const Table& (*avx512)(), const Table& (*avx2)()) {
  static const Table none{};
  const IsaLevel level = isa_level();
  if (level >= IsaLevel::Avx512) return avx512();
  if (level >= IsaLevel::Avx2) return avx2();
  return none;
}
}  // namespace

// Whether large float32 outputs are written by the vector functions' own non-temporal stores
// (VecMathF32::streamed) or computed into a 512-byte buffer that is streamed out, with the
// input prefetched ahead (detail::run_streamed; decision 0150). Buffered on Intel, where it
// measured 0.99-1.08x of a copy's bandwidth (decision 0117); direct elsewhere: AMD Zen 4 ran
// 64M-element add at 0.87-0.90x of a copy direct against 0.53-0.71x buffered. KILN_STREAMED_
// STORES=direct|buffered chooses (for measuring, and for testing both paths on any CPU).
bool direct_streamed_stores() {
  static const bool direct = [] {
    const char* v = std::getenv("KILN_STREAMED_STORES");
    if (!v || !*v) return cpu_features().vendor != "GenuineIntel";
    const std::string s = v;
    if (s != "direct" && s != "buffered")
      throw ValueError("KILN_STREAMED_STORES must be 'direct' or 'buffered', got '" + s + "'");
    return s == "direct";
  }();
  return direct;
}

const VecMathF32& vec_math_f32() {
  static const VecMathF32 table = [] {
    VecMathF32 t = for_level(vec_math_avx512, vec_math_avx2);
    if (!direct_streamed_stores()) t.streamed = nullptr;
    return t;
  }();
  return table;
}

const SoftmaxGradRows& softmax_grad_rows() {
  static const SoftmaxGradRows& table = for_level(softmax_grad_rows_avx512, softmax_grad_rows_avx2);
  return table;
}

const ActivationGrads& activation_grads() {
  static const ActivationGrads& table = for_level(activation_grads_avx512, activation_grads_avx2);
  return table;
}

const NormGradRows& norm_grad_rows() {
  static const NormGradRows& table = for_level(norm_grad_rows_avx512, norm_grad_rows_avx2);
  return table;
}

}  // namespace kiln::cpu
