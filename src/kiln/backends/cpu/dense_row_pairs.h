#pragma once
// One-input, one-output ops (the vector unary functions, nan_to_num, the bfloat16 sign bit
// ops) on strided tensors whose last dimension is contiguous: a column slice x[:, :k], a row
// step x[::2], their in-place forms. The row function runs once per last-dimension row, in
// one pass, where staging the input into the output first (stage_into_output) read and wrote
// everything twice: abs of a [512, 384] float32 column slice took 1.7x PyTorch's time that way.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kiln/tensor/strided_loop.h"
#include "kiln/tensor/tensor.h"

namespace kiln::cpu {

// Rows shorter than this are left to the staging copy: a call per row of a few elements
// costs more than the second pass.
constexpr int64_t kDenseRowMinElements = 64;

// True, after calling row(in_row, out_row, n) for every last-dimension row, where in and out
// have the same shape and element size, rows of at least kDenseRowMinElements contiguous
// elements on both sides, and are either the same elements (in place) or disjoint memory.
// Rows are split over the threads from parallel_from elements on. False (nothing called)
// where that does not hold.
template <typename E, typename Row>
bool run_on_dense_rows(const Tensor& in, const Tensor& out, int64_t parallel_from, Row&& row) {
  const int64_t nd = out.dim();
  if (nd < 2 || in.shape() != out.shape() || in.element_size() != sizeof(E) ||
      out.element_size() != sizeof(E))
    return false;
  const int64_t n = out.size(nd - 1);
  if (n < kDenseRowMinElements || in.stride(nd - 1) != 1 || out.stride(nd - 1) != 1)
    return false;
  const E* src = static_cast<const E*>(in.raw_data());
  E* dst = static_cast<E*>(out.raw_data());
  // The elements each side spans: in place needs equal strides, else no shared bytes.
  auto span = [nd](const Tensor& t, const E* base) {
    int64_t lo = 0, hi = 0;
    for (int64_t d = 0; d < nd; ++d) {
      const int64_t reach = (t.size(d) - 1) * t.stride(d);
      (reach < 0 ? lo : hi) += reach;
    }
    return std::pair<const E*, const E*>(base + lo, base + hi + 1);
  };
  const bool same = static_cast<const void*>(src) == static_cast<void*>(dst) &&
                    in.strides() == out.strides();
  if (!same) {
    const auto [in_lo, in_hi] = span(in, src);
    const auto [out_lo, out_hi] = span(out, dst);
    if (in_lo < out_hi && out_lo < in_hi) return false;
  }
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < nd; ++d) rows *= out.size(d);
  if (rows == 0) return true;
  // The outer dims' sizes and strides read once: Tensor::size / stride check their argument
  // on every call, and per row they cost a sixth of abs of a [2048, 384] column slice.
  std::vector<int64_t> sizes(size_t(nd - 1)), in_st(size_t(nd - 1)), out_st(size_t(nd - 1));
  for (int64_t d = 0; d + 1 < nd; ++d) {
    sizes[size_t(d)] = out.size(d);
    in_st[size_t(d)] = in.stride(d);
    out_st[size_t(d)] = out.stride(d);
  }
  // Rows [begin, end): the outer coordinates by an odometer, both offsets kept alongside.
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<int64_t> c(size_t(nd - 1), 0);
    int64_t in_off = 0, out_off = 0, r = begin;
    for (int64_t d = nd - 1; d-- > 0;) {
      c[size_t(d)] = r % sizes[size_t(d)];
      r /= sizes[size_t(d)];
      in_off += c[size_t(d)] * in_st[size_t(d)];
      out_off += c[size_t(d)] * out_st[size_t(d)];
    }
    for (int64_t i = begin; i < end; ++i) {
      row(src + in_off, dst + out_off, n);
      for (int64_t d = nd - 1; d-- > 0;) {
        in_off += in_st[size_t(d)];
        out_off += out_st[size_t(d)];
        if (++c[size_t(d)] < sizes[size_t(d)]) break;
        in_off -= in_st[size_t(d)] * sizes[size_t(d)];
        out_off -= out_st[size_t(d)] * sizes[size_t(d)];
        c[size_t(d)] = 0;
      }
    }
  };
  const int threads = rows * n >= parallel_from ? detail::elementwise_threads() : 1;
  const int64_t pieces = std::min<int64_t>(rows, 4 * int64_t(threads));
  if (threads <= 1 || pieces <= 1) {  // (four pieces on one thread still opened a region)
    run(0, rows);
    return true;
  }
  detail::parallel_chunks(pieces,
                          [&](int64_t p) { run(rows * p / pieces, rows * (p + 1) / pieces); });
  return true;
}

}  // namespace kiln::cpu
