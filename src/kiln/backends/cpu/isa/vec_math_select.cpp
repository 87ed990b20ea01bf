#include "kiln/backends/cpu/cpu_info.h"
#include "vec_math.h"

namespace kiln::cpu {

const VecMathF32& vec_math_f32() {
  static const VecMathF32& table = []() -> const VecMathF32& {
    static const VecMathF32 none{};
    const IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512) return vec_math_avx512();
    if (level >= IsaLevel::Avx2) return vec_math_avx2();
    return none;
  }();
  return table;
}

}  // namespace kiln::cpu
