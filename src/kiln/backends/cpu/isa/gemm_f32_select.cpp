#include "gemm_f32.h"

#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::cpu {

GemmF32Fn gemm_f32_kernel() {
  static const GemmF32Fn fn = [] {
    IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512) return &gemm_f32_avx512;
    if (level >= IsaLevel::Avx2) return &gemm_f32_avx2;
    return &gemm_f32_baseline;
  }();
  return fn;
}

}  // namespace kiln::cpu
