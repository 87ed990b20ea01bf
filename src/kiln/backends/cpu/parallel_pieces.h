#pragma once
// piece(begin, end) over [0, n): on the calling thread below detail::kParallelElements
// elements, else in four pieces per OpenMP thread (the split of the element-wise fast paths:
// conversions, fill, lerp).
#include <cstdint>

#include "kiln/tensor/strided_loop.h"

namespace kiln::cpu {

template <typename Piece>
void parallel_pieces(int64_t n, Piece&& piece) {
  const int threads = n >= detail::kParallelElements ? detail::elementwise_threads() : 1;
  if (threads <= 1) {
    piece(int64_t(0), n);
    return;
  }
  const int64_t pieces = 4 * int64_t(threads);
  detail::parallel_chunks(pieces, [&](int64_t c) { piece(n * c / pieces, n * (c + 1) / pieces); });
}

}  // namespace kiln::cpu
