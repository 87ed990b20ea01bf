#pragma once
// Descriptions shared by the oneDNN convolution paths (onednn_conv.cpp forward,
// onednn_conv_weight_grad.cpp weight gradient): kiln shapes as oneDNN dims, and the plain
// activation layout for 1-3 spatial dims. Only with oneDNN (KILN_HAVE_DNNL).
#ifdef KILN_HAVE_DNNL
#include <cstdint>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/core/shape.h"

namespace kiln::cpu {

inline dnnl::memory::dims onednn_dims(const Shape& s) {
  return dnnl::memory::dims(s.begin(), s.end());
}

// ncw / nchw / ncdhw for an activation of nd dims.
inline dnnl::memory::format_tag plain_activation_tag(int64_t nd) {
  using tag = dnnl::memory::format_tag;
  return nd == 3 ? tag::ncw : nd == 4 ? tag::nchw : tag::ncdhw;
}

}  // namespace kiln::cpu

#endif  // KILN_HAVE_DNNL
