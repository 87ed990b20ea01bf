#pragma once
// Index arithmetic shared by the CPU reduction, scan and softmax kernels. A reduction views
// its input as [kept dims..., reduced dims...] through strides only (no copies): the kept
// dims are walked with an odometer that also tracks the output offset, and each output's
// reduced elements are visited in row-major order of the reduced dims, so "the first index"
// (argmax) and flat indices (argmax without dim) follow PyTorch.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
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

// The reduced dims in memory order (largest stride first, expanded dims outermost), merged
// where they follow each other. A reduction over several dims may take them in any order
// (torch's TensorIterator reorders them too); in memory order a transposed or permuted input
// still gives contiguous runs, and the element loops walk memory in order. sum() of x.t() for
// a [1024, 1024] x took the generic strided kernel: 5.6 ms against 48 us for x.sum() (torch
// 55 us). Not for reductions whose result depends on the logical order (argmax's index).
inline void reduced_dims_in_memory_order(ReduceGeometry& g) {
  const size_t nd = g.red.shape.size();
  if (nd < 2) return;
  for (int64_t s : g.red.strides)
    if (s < 0) return;  // a flipped view: kept in its order
  std::vector<size_t> order(nd);
  for (size_t i = 0; i < nd; ++i) order[i] = i;
  auto key = [&](size_t i) {
    const int64_t s = g.red.strides[i];
    return s == 0 ? std::numeric_limits<int64_t>::max() : s;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
  Shape shape;
  Strides strides;
  for (size_t i : order) {
    shape.push_back(g.red.shape[i]);
    strides.push_back(g.red.strides[i]);
  }
  g.red = OffsetWalk(shape, strides);
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

// The kept dims walked as one: true (with the element strides between consecutive outputs in
// input and output) when every kept dim of size > 1 steps by the next one's stride times its
// size, so output o reads its run at o * in_stride.
inline bool kept_dims_collapse(const ReduceGeometry& g, int64_t& in_stride, int64_t& out_stride) {
  in_stride = out_stride = 0;
  int64_t span_in = 0, span_out = 0;  // stride times size of the inner kept dims so far
  bool first = true;  // not span_in == 0: an expanded (stride 0) kept dim has span 0 too
  for (size_t d = g.outer_shape.size(); d-- > 0;) {
    if (g.outer_shape[d] == 1) continue;
    if (first) {
      first = false;
      in_stride = g.outer_in[d];
      out_stride = g.outer_out[0][d];
    } else if (g.outer_in[d] != span_in || g.outer_out[0][d] != span_out) {
      return false;
    }
    span_in = g.outer_in[d] * g.outer_shape[d];
    span_out = g.outer_out[0][d] * g.outer_shape[d];
  }
  return true;
}

// Input and output offsets of the kept positions by output index (row-major): multiples of
// the index where the kept dims collapse into one (kept_dims_collapse), else listed once.
// Listing every output element by element had cost more than a row's work for short rows
// (prod(-1) of [4096, 64] float32: 122 us, PyTorch 21).
class KeptOffsets {
 public:
  explicit KeptOffsets(const ReduceGeometry& g) {
    count_ = 1;
    for (int64_t d : g.outer_shape) count_ *= d;
    collapsed_ = kept_dims_collapse(g, in_stride_, out_stride_);
    if (collapsed_) return;
    in_.reserve(size_t(count_));
    out_.reserve(size_t(count_));
    for_each_offset2(g.outer_shape, g.outer_in, g.outer_out[0], [&](int64_t i, int64_t o) {
      in_.push_back(i);
      out_.push_back(o);
    });
  }
  int64_t count() const { return count_; }
  int64_t in(int64_t o) const { return collapsed_ ? o * in_stride_ : in_[size_t(o)]; }
  int64_t out(int64_t o) const { return collapsed_ ? o * out_stride_ : out_[size_t(o)]; }

 private:
  int64_t count_ = 1, in_stride_ = 0, out_stride_ = 0;
  bool collapsed_ = false;
  std::vector<int64_t> in_, out_;
};

}  // namespace kiln::cpu
