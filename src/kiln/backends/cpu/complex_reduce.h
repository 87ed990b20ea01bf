#pragma once
// The walk shared by the complex reductions (complex_kernels.cpp's sum / mean,
// complex_math_kernels.cpp's prod): every input element in memory order, with the flat index of
// the output it reduces into (out fresh and contiguous, shaped by the reduction's meta).
#include <cstdint>
#include <vector>

#include "kiln/tensor/tensor.h"
#include "../../ops/reduction_util.h"

namespace kiln::cpu {

// fn(out_index, in_offset) for each element of in, reducing over `dims` (all when empty).
template <typename Fn>
void for_each_reduced(const char* name, const Tensor& in, const Tensor& out,
                      const std::vector<int64_t>& dims, bool keepdim, Fn&& fn) {
  const std::vector<bool> mask = ops::reduction_mask(name, in.shape(), dims);
  const int64_t nd = in.dim();
  std::vector<int64_t> out_step(size_t(nd), 0);  // 0 for reduced dims
  for (int64_t d = 0, od = 0; d < nd; ++d) {
    if (!mask[size_t(d)]) out_step[size_t(d)] = out.stride(od++);
    else if (keepdim) ++od;
  }
  std::vector<int64_t> idx(size_t(nd), 0);
  int64_t in_off = 0, out_off = 0;
  for (int64_t i = 0, n = in.numel(); i < n; ++i) {
    fn(out_off, in_off);
    for (int64_t d = nd - 1; d >= 0; --d) {  // odometer step over the input's indices
      if (++idx[size_t(d)] < in.size(d)) {
        in_off += in.stride(d);
        out_off += out_step[size_t(d)];
        break;
      }
      in_off -= in.stride(d) * (in.size(d) - 1);
      out_off -= out_step[size_t(d)] * (in.size(d) - 1);
      idx[size_t(d)] = 0;
    }
  }
}

// The number of input elements reduced into each output.
inline int64_t reduced_count(const char* name, const Tensor& in, const std::vector<int64_t>& dims) {
  const std::vector<bool> mask = ops::reduction_mask(name, in.shape(), dims);
  int64_t count = 1;
  for (int64_t d = 0; d < in.dim(); ++d)
    if (mask[size_t(d)]) count *= in.size(d);
  return count;
}

}  // namespace kiln::cpu
