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

// An uninitialised contiguous tensor of t's shape, dtype and device.
Tensor contiguous_like(const Tensor& t);

// Staging for kernels whose fast paths take contiguous tensors (decision 0131): a contiguous
// copy of t made by copy_permuted, or an undefined tensor where that does not apply.
Tensor contiguous_copy_by_blocks(const Tensor& t);

// dst <- src (same shape and dtype, disjoint): copy_permuted, else the element loop.
void copy_by_blocks_or_elements(const Tensor& src, const Tensor& dst);

// fn(src, dst) on contiguous stand-ins for in and out: in itself or its contiguous copy, out
// itself or a contiguous buffer copied into out afterwards. False, with out unwritten, where
// in's copy does not apply or fn returns false.
template <typename Fn>
bool run_on_contiguous(const Tensor& in, const Tensor& out, Fn&& fn) {
  const Tensor src = in.is_contiguous() ? in : contiguous_copy_by_blocks(in);
  if (!src.defined()) return false;
  const bool direct = out.is_contiguous();
  const Tensor dst = direct ? out : contiguous_like(out);
  if (!fn(src, dst)) return false;
  if (!direct) copy_by_blocks_or_elements(dst, out);
  return true;
}

}  // namespace kiln::cpu
