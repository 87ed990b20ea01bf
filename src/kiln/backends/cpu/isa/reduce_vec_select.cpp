#include "kiln/backends/cpu/cpu_info.h"
#include "reduce_vec.h"

namespace kiln::cpu {

const VecReduce& reduce_vec() {
  static const VecReduce& table = []() -> const VecReduce& {
    const IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512) return reduce_vec_avx512();
    if (level >= IsaLevel::Avx2) return reduce_vec_avx2();
    return reduce_vec_baseline();
  }();
  return table;
}

bool prefetch_extremum_blocks() {
  static const bool intel = cpu_features().vendor == "GenuineIntel";
  return intel;
}

}  // namespace kiln::cpu
