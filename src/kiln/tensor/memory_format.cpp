// Channels-last geometry (see kiln/tensor/memory_format.h).
#include "kiln/tensor/memory_format.h"

#include <algorithm>
#include <numeric>
#include <vector>

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
  const int64_t n = int64_t(shape.size());
  // perm[0] is the innermost dim: start from row-major order and insertion-sort by stride;
  // a stride of 0 compares as "no order" (the dims keep their places), equal strides put the
  // smaller dim inside.
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = n - 1 - i;
  const auto should_swap = [&](int64_t a, int64_t b) {
    const int64_t sa = strides[size_t(a)], sb = strides[size_t(b)];
    if (sa == 0 || sb == 0) return 0;
    if (sa != sb) return sa < sb ? -1 : 1;
    return shape[size_t(a)] > shape[size_t(b)] ? 1 : 0;
  };
  for (int64_t i = 1; i < n; ++i) {
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(perm[size_t(d0)], perm[size_t(d1)]);
      if (c > 0) {
        std::swap(perm[size_t(d0)], perm[size_t(d1)]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  Strides out(static_cast<size_t>(n), 1);
  int64_t stride = 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = perm[size_t(i)];
    out[size_t(d)] = stride;
    stride *= std::max<int64_t>(shape[size_t(d)], 1);
  }
  return out;
}

Strides preserve_format_strides(const Shape& shape, const Strides& strides) {
  if (is_non_overlapping_and_dense(shape, strides)) return strides;
  return dense_strides_in_order_of(shape, strides);
}

}  // namespace kiln
