#pragma once
// Memory formats of 4-D tensors, as PyTorch's torch.contiguous_format / torch.channels_last:
// a channels-last [N, C, H, W] tensor keeps its logical shape but stores the channels
// innermost (strides H*W*C, 1, W*C, C), the layout oneDNN's convolutions run fastest on.
// Convolution, pooling and cat give channels-last results for channels-last inputs (see
// OpDef::keeps_channels_last), pointwise ops their inputs' layout of any rank
// (pointwise_layout.h); the other ops read any layout.
#include <cstdint>

#include "kiln/core/shape.h"

namespace kiln {

enum class MemoryFormat : uint8_t { Contiguous, ChannelsLast, Preserve };

// The strides of a channels-last tensor of a 4-D shape.
Strides channels_last_strides(const Shape& shape);
// True for a 4-D geometry laid out channels-last (dims of size 1 ignored, as PyTorch).
bool is_channels_last_geometry(const Shape& shape, const Strides& strides);
// True when the strides reach every element of the shape exactly once and leave no gaps: a
// permutation of a contiguous layout (PyTorch's is_non_overlapping_and_dense).
bool is_non_overlapping_and_dense(const Shape& shape, const Strides& strides);
// Dense strides that order the dims as these strides do (innermost = smallest stride; dims
// of stride 0 keep their place), PyTorch's infer_dense_strides.
Strides dense_strides_in_order_of(const Shape& shape, const Strides& strides);
// The strides of a new tensor made "like" a tensor of this geometry in PyTorch's
// preserve_format (clone, `to`, the *_like factories): the same strides when they are
// non-overlapping and dense, else dense strides in their order.
Strides preserve_format_strides(const Shape& shape, const Strides& strides);

}  // namespace kiln
