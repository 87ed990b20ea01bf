#include "kiln/backends/cpu/cpu_info.h"
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

const VecMathF32& vec_math_f32() {
  static const VecMathF32& table = for_level(vec_math_avx512, vec_math_avx2);
  return table;
}

const SoftmaxGradRows& softmax_grad_rows() {
  static const SoftmaxGradRows& table = for_level(softmax_grad_rows_avx512, softmax_grad_rows_avx2);
  return table;
}

const NormGradRows& norm_grad_rows() {
  static const NormGradRows& table = for_level(norm_grad_rows_avx512, norm_grad_rows_avx2);
  return table;
}

}  // namespace kiln::cpu
