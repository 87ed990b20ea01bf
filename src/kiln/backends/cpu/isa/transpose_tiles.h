#pragma once
// 16 x 16 tile transposes of 4-byte and 2-byte values in vector registers, for strided copies
// (permuted_copy.cpp): dst[c * dst_stride + r] = src[r * src_stride + c] for r, c < 16,
// strides in elements; and reversed rows (flip). Pure data movement (shuffles, no arithmetic), so every bit pattern,
// NaN payloads included, arrives unchanged.
#include <cstdint>

namespace kiln::cpu {

struct TransposeTiles {
  void (*b32)(const uint32_t* src, int64_t src_stride, uint32_t* dst, int64_t dst_stride) =
      nullptr;
  void (*b16)(const uint16_t* src, int64_t src_stride, uint16_t* dst, int64_t dst_stride) =
      nullptr;
  // dst[j] = src_last[-j] for j < n: a row reversed (flip along the last dim), src_last the
  // element that lands at dst[0]; 8-, 4- and 2-byte elements.
  void (*reverse_b64)(const uint64_t* src_last, uint64_t* dst, int64_t n) = nullptr;
  void (*reverse_b32)(const uint32_t* src_last, uint32_t* dst, int64_t n) = nullptr;
  void (*reverse_b16)(const uint16_t* src_last, uint16_t* dst, int64_t n) = nullptr;
};

const TransposeTiles& transpose_tiles_avx2();

// The table for the current ISA level; null entries (baseline level) mean "use scalar code".
const TransposeTiles& transpose_tiles();

}  // namespace kiln::cpu
