#include "depthwise_conv.h"
#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::cpu {

const DepthwiseKernels& depthwise_conv2d() {
  static const DepthwiseKernels kernels = [] {
    const IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512) return depthwise_conv2d_avx512();
    if (level >= IsaLevel::Avx2) return depthwise_conv2d_avx2();
    return depthwise_conv2d_baseline();
  }();
  return kernels;
}

}  // namespace kiln::cpu
