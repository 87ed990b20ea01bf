#pragma once
// Same-dtype copies between differently laid out tensors (x.t().contiguous(), the head split
// permute(0, 2, 1, 3) of attention, channels-last conversions) by blocks instead of the
// generic element loop: runs that are contiguous on both sides are copied whole, and a pair of
// dimensions that is contiguous in the source but not in the destination (a transpose) is
// copied in tiles that stay in L1, so neither side walks a new cache line per element.
#include "kiln/tensor/tensor.h"

namespace kiln::cpu {

// dst <- src for tensors of the same shape and dtype whose memory does not overlap. Returns
// false (and writes nothing) where the layouts give it nothing to gain or it does not apply:
// then the caller takes the generic loop.
bool copy_permuted(const Tensor& src, const Tensor& dst);

}  // namespace kiln::cpu
