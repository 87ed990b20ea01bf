#pragma once
// Index arithmetic shared by the CPU reduction, scan and softmax kernels. A reduction views
// its input as [kept dims..., reduced dims...] through strides only (no copies): the kept
// dims are walked with an odometer that also tracks the output offset, and each output's
// reduced elements are visited in row-major order of the reduced dims, so "the first index"
// (argmax) and flat indices (argmax without dim) follow PyTorch.
#include <array>
#include <cstdint>
#include <vector>

#include "kiln/core/shape.h"
#include "kiln/tensor/tensor.h"

namespace kiln::cpu {

// The dims of (shape, strides) with size-1 dims dropped and adjacent dims merged where the
// strides allow it; visiting it in row-major order visits the original in row-major order.
struct OffsetWalk {
  Shape shape;
  Strides strides;
  bool empty = false;

  OffsetWalk() = default;
  OffsetWalk(const Shape& sh, const Strides& st) {
    for (size_t i = 0; i < sh.size(); ++i) {
      if (sh[i] == 0) empty = true;
      if (sh[i] == 1) continue;
      if (!shape.empty() && strides.back() == st[i] * sh[i]) {
        shape.back() *= sh[i];
        strides.back() = st[i];
        continue;
      }
      shape.push_back(sh[i]);
      strides.push_back(st[i]);
    }
  }

  // Calls fn(offset) for every index in row-major order, offset = sum(idx * strides).
  template <typename Fn>
  void for_each(Fn&& fn) const {
    if (empty) return;
    const size_t nd = shape.size();
    if (nd == 0) {
      fn(int64_t(0));
      return;
    }
    const int64_t n = shape[nd - 1], step = strides[nd - 1];
    if (nd == 1) {
      for (int64_t j = 0; j < n; ++j) fn(j * step);
      return;
    }
    std::vector<int64_t> idx(nd, 0);
    int64_t base = 0;
    while (true) {
      for (int64_t j = 0; j < n; ++j) fn(base + j * step);
      size_t d = nd - 1;
      while (true) {
        if (d == 0) return;
        --d;
        if (++idx[d] < shape[d]) {
          base += strides[d];
          break;
        }
        base -= strides[d] * (shape[d] - 1);
        idx[d] = 0;
      }
    }
  }
};

// Calls fn(offsets) for every index of shape in row-major order, where offsets[k] is the
// element offset of operand k (strides[k] are its strides at shape).
template <size_t N, typename Fn>
inline void for_each_offsets(const Shape& shape, const std::array<const Strides*, N>& strides,
                             Fn&& fn) {
  for (int64_t d : shape)
    if (d == 0) return;
  const size_t nd = shape.size();
  std::vector<int64_t> idx(nd, 0);
  std::array<int64_t, N> off{};
  while (true) {
    fn(off);
    size_t d = nd;
    while (true) {
      if (d == 0) return;
      --d;
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += (*strides[k])[d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= (*strides[k])[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Two operands: fn(offset_a, offset_b).
template <typename Fn>
inline void for_each_offset2(const Shape& shape, const Strides& sa, const Strides& sb, Fn&& fn) {
  for_each_offsets<2>(shape, {&sa, &sb}, [&](const std::array<int64_t, 2>& o) { fn(o[0], o[1]); });
}

// Which dims of an ndim-tensor a reduction over dims touches (empty dims: all). The dims
// were validated by the op's meta function.
inline std::vector<bool> reduced_mask(const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<bool> mask(size_t(ndim), dims.empty());
  for (int64_t d : dims) {
    int64_t w = d < 0 ? d + (ndim > 0 ? ndim : 1) : d;
    if (w < ndim) mask[size_t(w)] = true;
  }
  return mask;
}

// The geometry of a reduction of `in` into outputs that have the kept dims (keepdim or not).
struct ReduceGeometry {
  Shape outer_shape;                 // kept dims of the input
  Strides outer_in;                  // input strides of the kept dims
  std::vector<Strides> outer_out;    // per output: its strides for the kept dims
  Shape red_shape;                   // reduced dims of the input, in order
  Strides red_strides;
  int64_t red_numel = 1;
  OffsetWalk red;                    // walks the reduced elements of one output
};

inline ReduceGeometry reduce_geometry(const Tensor& in, const std::vector<int64_t>& dims,
                                      bool keepdim, const std::vector<const Tensor*>& outs) {
  ReduceGeometry g;
  std::vector<bool> mask = reduced_mask(dims, in.dim());
  g.outer_out.resize(outs.size());
  int64_t out_dim = 0;
  for (int64_t i = 0; i < in.dim(); ++i) {
    if (mask[size_t(i)]) {
      g.red_shape.push_back(in.shape()[size_t(i)]);
      g.red_strides.push_back(in.strides()[size_t(i)]);
      g.red_numel *= in.shape()[size_t(i)];
      if (keepdim) ++out_dim;
    } else {
      g.outer_shape.push_back(in.shape()[size_t(i)]);
      g.outer_in.push_back(in.strides()[size_t(i)]);
      for (size_t k = 0; k < outs.size(); ++k)
        g.outer_out[k].push_back(outs[k]->strides()[size_t(out_dim)]);
      ++out_dim;
    }
  }
  g.red = OffsetWalk(g.red_shape, g.red_strides);
  return g;
}

// Geometry of the lines along one dim of in/out (same shape): the other dims form the outer
// odometer; each line has `len` elements with strides in_step / out_step.
struct LineGeometry {
  Shape outer_shape;
  Strides outer_in, outer_out;
  int64_t len = 1, in_step = 0, out_step = 0;
};

inline LineGeometry line_geometry(const Tensor& in, const Tensor& out, int64_t dim) {
  LineGeometry g;
  if (in.dim() == 0) return g;
  int64_t d = dim < 0 ? dim + in.dim() : dim;
  for (int64_t i = 0; i < in.dim(); ++i) {
    if (i == d) {
      g.len = in.shape()[size_t(i)];
      g.in_step = in.strides()[size_t(i)];
      g.out_step = out.strides()[size_t(i)];
    } else {
      g.outer_shape.push_back(in.shape()[size_t(i)]);
      g.outer_in.push_back(in.strides()[size_t(i)]);
      g.outer_out.push_back(out.strides()[size_t(i)]);
    }
  }
  return g;
}

}  // namespace kiln::cpu
