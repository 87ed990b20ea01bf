#include "kiln/backends/cpu/cpu_info.h"
#include "transpose_tiles.h"

namespace kiln::cpu {

const TransposeTiles& transpose_tiles() {
  static const TransposeTiles& table = []() -> const TransposeTiles& {
    static const TransposeTiles none{};
    return isa_level() >= IsaLevel::Avx2 ? transpose_tiles_avx2() : none;
  }();
  return table;
}

}  // namespace kiln::cpu
