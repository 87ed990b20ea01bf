#include "reduction_staging.h"

#include <vector>

#include "kiln/tensor/empty.h"
#include "permuted_copy.h"
#include "reduce_utils.h"

namespace kiln::cpu {

// Below this many elements the element loops finish before an allocation and a copy would.
constexpr int64_t kStagedMinElements = 4096;

bool reduce_on_staged_copy(const OpCall& call, const std::function<bool(OpCall&)>& fast) {
  const Tensor& in = call.inputs[0];
  if (call.outs.size() != 1 || in.dim() == 0 || in.numel() < kStagedMinElements) return false;
  const Tensor& out = call.outs[0];
  const bool keepdim = call.bool_attr(1);
  const std::vector<bool> mask = reduced_mask(call.ints_attr(0), in.dim());
  Shape shape, kept_shape;
  Strides strides, out_strides;
  int64_t out_dim = 0;
  for (int64_t i = 0; i < in.dim(); ++i) {
    if (mask[size_t(i)]) {
      if (keepdim) ++out_dim;
      continue;
    }
    shape.push_back(in.size(i));
    strides.push_back(in.stride(i));
    kept_shape.push_back(in.size(i));
    out_strides.push_back(out.stride(out_dim++));
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < in.dim(); ++i) {
    if (!mask[size_t(i)]) continue;
    dims.push_back(int64_t(shape.size()));
    shape.push_back(in.size(i));
    strides.push_back(in.stride(i));
  }
  if (dims.empty()) return false;
  const Tensor view = make_view(in, shape, strides, in.storage_offset());
  if (view.is_contiguous()) return false;  // already the layout the fast path takes
  const Tensor staged = contiguous_copy_by_blocks(view);
  if (!staged.defined()) return false;
  OpCall c = call;
  c.inputs[0] = staged;
  c.attrs[0] = dims;
  c.attrs[1] = false;
  c.outs[0] = make_view(out, kept_shape, out_strides, out.storage_offset());
  return fast(c);
}

}  // namespace kiln::cpu
