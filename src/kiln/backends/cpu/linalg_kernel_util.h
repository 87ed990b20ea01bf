#pragma once
// Shared pieces of the factorisation kernels: LAPACK's int sizes, column-major copies (LAPACK
// is column-major, kiln's operands row-major contiguous), and the loop over a batch.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"

namespace kiln::cpu {

// One kernel entry per op serving both precisions of a dtype family, picked by the first
// input's dtype: float32 / float64, and complex64 / complex128.
template <void (*F32)(OpCall&), void (*F64)(OpCall&)>
void by_dtype(OpCall& call) {
  if (call.inputs[0].dtype() == DType::F32)
    F32(call);
  else
    F64(call);
}
template <void (*C64)(OpCall&), void (*C128)(OpCall&)>
void by_complex_dtype(OpCall& call) {
  if (call.inputs[0].dtype() == DType::C64)
    C64(call);
  else
    C128(call);
}

// n as LAPACK's 32-bit int, or a clear error for a matrix beyond it.
inline int lapack_int(int64_t n) {
  KILN_CHECK(n <= INT_MAX, ValueError, "linalg: matrix dimension ", n,
             " exceeds LAPACK's 32-bit limit (", INT_MAX, ")");
  return int(n);
}
// LAPACK requires leading dimensions of at least 1, even for empty matrices.
inline int lapack_ld(int64_t n) { return n > 0 ? lapack_int(n) : 1; }

// Transposing copies go tile by tile, so the strided side of a large matrix stays in cache
// (row by row, every write of a 1024-wide matrix would touch a new line).
constexpr int64_t kTransposeTile = 32;

// dst (column-major rows x cols, leading dimension rows) = src (row-major rows x cols).
template <typename T>
void to_col_major(const T* src, T* dst, int64_t rows, int64_t cols) {
  for (int64_t i0 = 0; i0 < rows; i0 += kTransposeTile)
    for (int64_t j0 = 0; j0 < cols; j0 += kTransposeTile)
      for (int64_t i = i0; i < std::min(rows, i0 + kTransposeTile); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + kTransposeTile); ++j)
          dst[j * rows + i] = src[i * cols + j];
}
// dst (row-major rows x cols) = src (column-major, leading dimension ld).
template <typename T>
void from_col_major(const T* src, int64_t ld, T* dst, int64_t rows, int64_t cols) {
  for (int64_t i0 = 0; i0 < rows; i0 += kTransposeTile)
    for (int64_t j0 = 0; j0 < cols; j0 += kTransposeTile)
      for (int64_t i = i0; i < std::min(rows, i0 + kTransposeTile); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + kTransposeTile); ++j)
          dst[i * cols + j] = src[j * ld + i];
}

// Runs body(b) for each matrix of a batch: one matrix on the calling thread (so OpenBLAS may
// thread inside it), several spread over the OpenMP pool, one LAPACK call per thread at a
// time (inside a parallel region OpenBLAS runs single-threaded). body must not throw.
template <typename Body>
void for_each_matrix(int64_t batch, const Body& body) {
  if (batch == 1) {
    body(0);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t b = 0; b < batch; ++b) body(b);
}

}  // namespace kiln::cpu
