// Channels-last geometry (see kiln/tensor/memory_format.h).
#include "kiln/tensor/memory_format.h"

#include "kiln/core/error.h"

namespace kiln {

Strides channels_last_strides(const Shape& shape) {
  KILN_CHECK(shape.size() == 4, ShapeError,
             "channels_last: expected a 4-D shape [N, C, H, W], got ", shape_str(shape));
  const int64_t c = shape[1], h = shape[2], w = shape[3];
  return {h * w * c, 1, w * c, c};
}

bool is_channels_last_geometry(const Shape& shape, const Strides& strides) {
  if (shape.size() != 4) return false;
  // Walk the dims in channels-last order (C, W, H, N), as the contiguity check does in
  // row-major order, skipping dims of size 1.
  int64_t expected = 1;
  for (size_t d : {size_t(1), size_t(3), size_t(2), size_t(0)}) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return numel_of(shape) == 0;
    expected *= shape[d];
  }
  return true;
}

}  // namespace kiln
