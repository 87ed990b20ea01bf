#include "bit_loops.h"
#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::cpu {

const BitLoops& bit_loops() {
  static const BitLoops& table = []() -> const BitLoops& {
    const IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512) return bit_loops_avx512();
    if (level >= IsaLevel::Avx2) return bit_loops_avx2();
    return bit_loops_baseline();
  }();
  return table;
}

}  // namespace kiln::cpu
