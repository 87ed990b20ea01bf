// Depthwise convolution for the avx512 level (flags in CMakeLists.txt; depthwise_conv.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "depthwise_conv.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {
#include "depthwise_conv_body.inc"

DepthwiseKernels depthwise_conv2d_avx512() {
  return {depthwise_conv2d_impl, depthwise_conv2d_nhwc_impl};
}

}  // namespace kiln::cpu
