#pragma once
// Data movement in vector registers, chosen per ISA level: 16 x 16 tile transposes of 4-byte
// and 2-byte values and short contiguous runs for strided copies (permuted_copy.cpp), reversed
// rows (flip) and row gathers. Shuffles, loads and stores only, no arithmetic, so every bit pattern, NaN payloads
// included, arrives unchanged.
#include <cstdint>

namespace kiln::cpu {

struct DataMoves {
  // dst[c * dst_stride + r] = src[r * src_stride + c] for r, c < 16, strides in elements.
  void (*transpose_b32)(const uint32_t* src, int64_t src_stride, uint32_t* dst,
                        int64_t dst_stride) = nullptr;
  void (*transpose_b16)(const uint16_t* src, int64_t src_stride, uint16_t* dst,
                        int64_t dst_stride) = nullptr;
  // dst[j] = src_last[-j] for j < n: a row reversed (flip along the last dim), src_last the
  // element that lands at dst[0]; 8-, 4- and 2-byte elements.
  void (*reverse_b64)(const uint64_t* src_last, uint64_t* dst, int64_t n) = nullptr;
  void (*reverse_b32)(const uint32_t* src_last, uint32_t* dst, int64_t n) = nullptr;
  void (*reverse_b16)(const uint16_t* src_last, uint16_t* dst, int64_t n) = nullptr;
  // dst[j] = row[idx[j]] for j < n when every idx[j] lies in [0, size) (gather along a
  // contiguous last dim); false at the first vector of indices holding one that does not,
  // before any element is read through it (dst partly written).
  bool (*gather_b64)(const uint64_t* row, const int64_t* idx, int64_t n, int64_t size,
                     uint64_t* dst) = nullptr;
  bool (*gather_b32)(const uint32_t* row, const int64_t* idx, int64_t n, int64_t size,
                     uint32_t* dst) = nullptr;
  // dst + i * dst_step <- src + i * src_step, `bytes` bytes (at least 32) for i < runs; steps
  // in bytes; no run's destination overlaps a source or another run's destination.
  void (*move_runs)(const char* src, int64_t src_step, char* dst, int64_t dst_step,
                    int64_t runs, int64_t bytes) = nullptr;
};

const DataMoves& data_moves_avx2();

// The table for the current ISA level; null entries (baseline level) mean "use scalar code".
const DataMoves& data_moves();

}  // namespace kiln::cpu
