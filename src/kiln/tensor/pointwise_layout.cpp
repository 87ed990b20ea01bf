// Pointwise results laid out as their inputs (see kiln/tensor/pointwise_layout.h).
#include "kiln/tensor/pointwise_layout.h"

#include <algorithm>

#include "kiln/tensor/memory_format.h"
#include "kiln/tensor/tensor.h"

namespace kiln {

Strides dense_strides_ordered_by(const Shape& shape, const std::vector<Strides>& operands) {
  const int64_t n = int64_t(shape.size());
  // perm[0] is the innermost dim: start from row-major order and insertion-sort, asking the
  // operands in turn; the first one whose strides differ (neither 0) decides, equal strides
  // put the smaller dim inside or defer to the next operand, and a pair no operand orders
  // keeps its places (PyTorch's TensorIterator::reorder_dimensions).
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = n - 1 - i;
  const auto should_swap = [&](int64_t a, int64_t b) {
    for (const Strides& strides : operands) {
      const int64_t sa = strides[size_t(a)], sb = strides[size_t(b)];
      if (sa == 0 || sb == 0) continue;
      if (sa != sb) return sa < sb ? -1 : 1;
      if (shape[size_t(a)] > shape[size_t(b)]) return 1;
    }
    return 0;
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

std::optional<Strides> pointwise_result_strides(const Shape& shape, const std::vector<Tensor>& inputs) {
  bool all_row_major = true;
  for (const Tensor& t : inputs)
    if (t.defined() && !t.is_contiguous()) all_row_major = false;
  if (all_row_major || shape.size() < 2) return std::nullopt;
  // Inputs of the result's shape sharing one dense layout: that layout, strides of size-1
  // dims included (the kernels' flat paths compare strides).
  const Tensor* first = nullptr;
  bool same_layout = true;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (t.shape() != shape || (first && t.strides() != first->strides())) same_layout = false;
    if (!first) first = &t;
  }
  if (same_layout && first && is_non_overlapping_and_dense(shape, first->strides()))
    return first->strides();
  const size_t n = shape.size();
  std::vector<Strides> operands;
  operands.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (!t.defined() || t.dim() == 0) continue;  // a 0-d operand orders nothing
    const size_t rank = size_t(t.dim()), offset = n - rank;
    Strides s(n, 0);  // missing leading dims broadcast
    for (size_t i = 0; i < rank; ++i)
      s[offset + i] = (t.size(int64_t(i)) == 1 && shape[offset + i] != 1) ? 0 : t.stride(int64_t(i));
    operands.push_back(std::move(s));
  }
  Strides strides = dense_strides_ordered_by(shape, operands);
  // Row-major strides (up to dims of size 1): the plain allocation.
  int64_t expected = 1;
  bool row_major = true;
  for (size_t i = n; i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) row_major = false;
    expected *= shape[i];
  }
  if (row_major) return std::nullopt;
  return strides;
}

}  // namespace kiln
