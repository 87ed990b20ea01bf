#include "fft_lanes.h"
#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::cpu::fft_lanes {

template <>
const Kernels<float>& kernels<float>() {
  static const Kernels<float> table = [] {
    const IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512) return kernels_f32_avx512();
    if (level >= IsaLevel::Avx2) return kernels_f32_avx2();
    return kernels_f32_baseline();
  }();
  return table;
}

template <>
const Kernels<double>& kernels<double>() {
  static const Kernels<double> table = [] {
    const IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512) return kernels_f64_avx512();
    if (level >= IsaLevel::Avx2) return kernels_f64_avx2();
    return kernels_f64_baseline();
  }();
  return table;
}

}  // namespace kiln::cpu::fft_lanes
