#pragma once
// Ops along one dim d that walk a tensor as [outer, L, inner] (softmax along a dim before the
// last, argmax / min(dim) / max(dim)) read it in place when the dims after d form one
// contiguous run and those before d one strided dim: column slices and row steps of matrices
// (x[:, :k], x[::2]) then need no contiguous copy first.
#include <cstdint>

#include "kiln/tensor/tensor.h"

namespace kiln::cpu {

// True, with the stride between outer blocks and between lines (in elements), where t has
// that layout around dim d; false for other layouts. Dims of size 1 are ignored.
inline bool outer_line_strides(const Tensor& t, int64_t d, int64_t& outer_stride,
                               int64_t& line_stride) {
  int64_t run = 1;
  for (int64_t k = t.dim() - 1; k > d; --k) {
    if (t.size(k) != 1 && t.stride(k) != run) return false;
    run *= t.size(k);
  }
  line_stride = t.stride(d);
  outer_stride = 0;
  int64_t expected = -1;  // the stride the next outer dim must have to merge with this one
  for (int64_t k = d - 1; k >= 0; --k) {
    if (t.size(k) == 1) continue;
    if (expected >= 0 && t.stride(k) != expected) return false;
    if (expected < 0) outer_stride = t.stride(k);
    expected = t.stride(k) * t.size(k);
  }
  return true;
}

}  // namespace kiln::cpu
