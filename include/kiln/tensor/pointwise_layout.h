#pragma once
// The layout of a pointwise op's new result, as PyTorch's TensorIterator chooses it: dense,
// with the dims in the order the inputs' strides give them, so that `x.t() + 1`,
// `x.permute(0, 2, 1).exp()` or a channels-last sum keep their input's layout and the kernel
// walks every operand as one flat array.
#include <optional>
#include <vector>

#include "kiln/core/shape.h"

namespace kiln {

class Tensor;

// Dense strides for `shape` with its dims ordered by several operands' strides (each
// broadcast to `shape`: 0 along broadcast dims). For each pair of dims the first operand
// whose strides differ there decides; equal strides put the smaller dim inside or defer to
// the next operand; a pair none orders keeps row-major order.
Strides dense_strides_ordered_by(const Shape& shape, const std::vector<Strides>& operands);

// The strides of a new result of `shape` computed pointwise from `inputs` (undefined ones
// skipped; each broadcastable to shape), or nullopt for row-major: always when every input
// is contiguous.
std::optional<Strides> pointwise_result_strides(const Shape& shape, const std::vector<Tensor>& inputs);

}  // namespace kiln
