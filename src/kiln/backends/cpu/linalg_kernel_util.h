#pragma once
// Shared pieces of the factorisation kernels: LAPACK's int sizes, column-major copies (LAPACK
// is column-major, kiln's operands row-major contiguous), and the loop over a batch.
#include <climits>
#include <cstdint>

#include "kiln/core/error.h"

namespace kiln::cpu {

// n as LAPACK's 32-bit int, or a clear error for a matrix beyond it.
inline int lapack_int(int64_t n) {
  KILN_CHECK(n <= INT_MAX, ValueError, "linalg: matrix dimension ", n,
             " exceeds LAPACK's 32-bit limit (", INT_MAX, ")");
  return int(n);
}
// LAPACK requires leading dimensions of at least 1, even for empty matrices.
inline int lapack_ld(int64_t n) { return n > 0 ? lapack_int(n) : 1; }

// dst (column-major rows x cols, leading dimension rows) = src (row-major rows x cols).
template <typename T>
void to_col_major(const T* src, T* dst, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
}
// dst (row-major rows x cols) = src (column-major, leading dimension ld).
template <typename T>
void from_col_major(const T* src, int64_t ld, T* dst, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[j * ld + i];
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
