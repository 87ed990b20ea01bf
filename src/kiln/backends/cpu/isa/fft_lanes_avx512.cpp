// Batched FFTs in lanes for the avx512 level (flags in CMakeLists.txt; fft_lanes.h).
#include <algorithm>
#include <complex>
#include <cstring>
#include <memory>
#include <utility>

#include "fft_lanes.h"

namespace kiln::cpu::fft_lanes {
#include "fft_lanes_body.inc"

Kernels<float> kernels_f32_avx512() { return make_kernels<float>(); }
Kernels<double> kernels_f64_avx512() { return make_kernels<double>(); }

}  // namespace kiln::cpu::fft_lanes
