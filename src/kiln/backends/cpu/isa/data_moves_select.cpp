#include "kiln/backends/cpu/cpu_info.h"
#include "data_moves.h"

namespace kiln::cpu {

const DataMoves& data_moves() {
  static const DataMoves& table = []() -> const DataMoves& {
    static const DataMoves none{};
    return isa_level() >= IsaLevel::Avx2 ? data_moves_avx2() : none;
  }();
  return table;
}

}  // namespace kiln::cpu
