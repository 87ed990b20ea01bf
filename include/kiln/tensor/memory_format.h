#pragma once
// Memory formats of 4-D tensors, as PyTorch's torch.contiguous_format / torch.channels_last:
// a channels-last [N, C, H, W] tensor keeps its logical shape but stores the channels
// innermost (strides H*W*C, 1, W*C, C), the layout oneDNN's convolutions run fastest on.
// Pointwise ops and convolution give channels-last results for channels-last inputs (see
// OpDef::keeps_channels_last); the other ops read any layout.
#include <cstdint>

#include "kiln/core/shape.h"

namespace kiln {

enum class MemoryFormat : uint8_t { Contiguous, ChannelsLast, Preserve };

// The strides of a channels-last tensor of a 4-D shape.
Strides channels_last_strides(const Shape& shape);
// True for a 4-D geometry laid out channels-last (dims of size 1 ignored, as PyTorch).
bool is_channels_last_geometry(const Shape& shape, const Strides& strides);

}  // namespace kiln
