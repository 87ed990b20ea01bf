#pragma once
// Row-at-a-time loops for the shape kernels (tril / triu, flip, roll, repeat, pad): the
// destination is walked one last-dimension row at a time, in parallel pieces, with the row's
// outer coordinates kept by an odometer, so a row costs a few additions plus the memcpy or
// fill that moves it, where the element loop paid an index computation and a call per
// element (roll of [2048, 2048] float32: 76 ms against PyTorch's 0.5 ms).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "isa/data_moves.h"
#include "kiln/core/shape.h"
#include "kiln/tensor/strided_loop.h"
#include "kiln/tensor/tensor.h"

namespace kiln::cpu {

// The last dimension of t is one contiguous run (or t has no elements along it to stride).
inline bool rows_are_dense(const Tensor& t) {
  return t.dim() >= 1 && (t.size(t.dim() - 1) <= 1 || t.stride(t.dim() - 1) == 1);
}

// Calls row(coords, out_offset) for every row of `shape` (every dimension but the last;
// coords has shape.size() - 1 entries, out_offset = sum coords[d] * out_strides[d], in
// elements). Rows are split over the threads from detail::kParallelElements elements on.
template <typename F>
void for_each_row(const Shape& shape, const Strides& out_strides, F&& row) {
  const size_t nd = shape.size() - 1;
  int64_t rows = 1;
  for (size_t d = 0; d < nd; ++d) rows *= shape[d];
  const int64_t numel = rows * shape[nd];
  if (numel == 0) return;
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<int64_t> c(nd);
    int64_t off = 0, r = begin;
    for (size_t d = nd; d-- > 0;) {
      c[d] = r % shape[d];
      r /= shape[d];
      off += c[d] * out_strides[d];
    }
    for (int64_t i = begin; i < end; ++i) {
      row(static_cast<const int64_t*>(c.data()), off);
      for (size_t d = nd; d-- > 0;) {
        off += out_strides[d];
        if (++c[d] < shape[d]) break;
        off -= out_strides[d] * shape[d];
        c[d] = 0;
      }
    }
  };
  const int threads = numel >= detail::kParallelElements ? detail::elementwise_threads() : 1;
  const int64_t pieces = std::min<int64_t>(rows, 4 * int64_t(threads));
  if (threads <= 1 || pieces <= 1) {  // (four pieces on one thread still opened a region)
    run(0, rows);
    return;
  }
  detail::parallel_chunks(pieces,
                          [&](int64_t p) { run(rows * p / pieces, rows * (p + 1) / pieces); });
}

// Calls typed.template operator()<W>() with W the unsigned word of es bytes (1, 2, 4 or 8)
// and returns true; false for other sizes.
template <typename Typed>
bool with_word_of_size(size_t es, Typed&& typed) {
  switch (es) {
    case 1: typed.template operator()<uint8_t>(); return true;
    case 2: typed.template operator()<uint16_t>(); return true;
    case 4: typed.template operator()<uint32_t>(); return true;
    case 8: typed.template operator()<uint64_t>(); return true;
    default: return false;
  }
}

// dst[j] = src_first[-j] for j < n: a row reversed (src_first is the source element that
// lands at dst[0]); typed moves for the usual element sizes (tensor data is aligned to its
// element size).
inline void reverse_row(char* dst, const char* src_first, int64_t n, size_t es) {
  const DataMoves& tiles = data_moves();  // the ISA's vector reversal
  auto reversed = [&]<typename W>(void (*fn)(const W*, W*, int64_t)) {
    if (!fn || es != sizeof(W)) return false;
    fn(reinterpret_cast<const W*>(src_first), reinterpret_cast<W*>(dst), n);
    return true;
  };
  if (reversed(tiles.reverse_b32) || reversed(tiles.reverse_b16) || reversed(tiles.reverse_b64))
    return;
  if (with_word_of_size(es, [&]<typename W>() {
        W* d = reinterpret_cast<W*>(dst);
        const W* s = reinterpret_cast<const W*>(src_first);
        for (int64_t j = 0; j < n; ++j) d[j] = s[-j];
      }))
    return;
  for (int64_t j = 0; j < n; ++j)
    std::memcpy(dst + j * int64_t(es), src_first - j * int64_t(es), es);
}

// dst[j] = value for j < n, value being es bytes.
inline void fill_row(char* dst, const char* value, int64_t n, size_t es) {
  if (with_word_of_size(es, [&]<typename W>() {
        W v;
        std::memcpy(&v, value, sizeof(W));
        std::fill(reinterpret_cast<W*>(dst), reinterpret_cast<W*>(dst) + n, v);
      }))
    return;
  for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * int64_t(es), value, es);
}

}  // namespace kiln::cpu
