#include "depthwise_conv.h"
#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::cpu {

DepthwiseConv2d depthwise_conv2d() {
  static const DepthwiseConv2d fn = [] {
    const IsaLevel level = isa_level();
    if (level >= IsaLevel::Avx512) return depthwise_conv2d_avx512();
    if (level >= IsaLevel::Avx2) return depthwise_conv2d_avx2();
    return depthwise_conv2d_baseline();
  }();
  return fn;
}

}  // namespace kiln::cpu
