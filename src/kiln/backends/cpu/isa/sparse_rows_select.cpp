#include "kiln/backends/cpu/cpu_info.h"
#include "sparse_rows.h"

namespace kiln::cpu {

CsrRowsF32 csr_rows_f32() {
  static const CsrRowsF32 fn = [] {
    const IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512) return csr_rows_f32_avx512();
    if (level >= IsaLevel::Avx2) return csr_rows_f32_avx2();
    return csr_rows_f32_baseline();
  }();
  return fn;
}

}  // namespace kiln::cpu
