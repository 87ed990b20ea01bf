// Channels-last geometry (see kiln/tensor/memory_format.h).
#include "kiln/tensor/memory_format.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/tensor/pointwise_layout.h"

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

bool is_non_overlapping_and_dense(const Shape& shape, const Strides& strides) {
  const size_t n = shape.size();
  if (n == 1) return shape[0] < 2 || strides[0] == 1;
  std::vector<size_t> dims(n);
  std::iota(dims.begin(), dims.end(), size_t(0));
  // Innermost first; dims of size 0 or 1 place no constraint.
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) {
    if (shape[a] < 2) return false;
    if (shape[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (size_t d : dims) {
    if (shape[d] < 2) return true;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

Strides dense_strides_in_order_of(const Shape& shape, const Strides& strides) {
  return dense_strides_ordered_by(shape, {strides});
}

Strides preserve_format_strides(const Shape& shape, const Strides& strides) {
  if (is_non_overlapping_and_dense(shape, strides)) return strides;
  return dense_strides_in_order_of(shape, strides);
}

}  // namespace kiln
