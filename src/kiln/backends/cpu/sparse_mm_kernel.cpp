// CPU kernel of sparse_csr_mm (kiln/ops/sparse.h): out[r, :] = sum over the row's stored
// entries of value * dense[col, :]. Rows are split over the threads in pieces of about equal
// stored entries; float32 runs the ISA level's loops (isa/sparse_rows.h), the other float
// types accumulate each row in the compute type and write it once. A column out of range or
// compressed-row offsets that do not rise from 0 to nnz are an IndexError, never a read out
// of bounds.
#include <algorithm>
#include <vector>

#include "isa/sparse_rows.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/strided_loop.h"

namespace kiln::cpu {
namespace {

void check_row_offsets(const int64_t* crow, int64_t rows, int64_t nnz) {
  KILN_CHECK(crow[0] == 0 && crow[rows] == nnz, IndexError,
             "sparse_csr_mm(): crow_indices must start at 0 and end at nnz (", nnz, "), got ",
             crow[0], " and ", crow[rows]);
  for (int64_t r = 0; r < rows; ++r)
    KILN_CHECK(crow[r] <= crow[r + 1], IndexError,
               "sparse_csr_mm(): crow_indices must not decrease, got ", crow[r], " then ",
               crow[r + 1], " at row ", r);
}

void sparse_csr_mm_kernel(OpCall& call) {
  const Tensor& dense = call.inputs[1];
  const Tensor& crow_t = call.inputs[2];
  const Tensor& col_t = call.inputs[3];
  const Tensor& out = call.outs[0];
  const int64_t rows = crow_t.numel() - 1, nnz = col_t.numel();
  const int64_t K = dense.size(0), N = dense.size(1);
  const int64_t* crow = crow_t.data_ptr<int64_t>();
  const int64_t* col = col_t.data_ptr<int64_t>();
  check_row_offsets(crow, rows, nnz);
  // Index checks first (a column out of range is an error before anything is written).
  for (int64_t e = 0; e < nnz; ++e)
    KILN_CHECK(col[e] >= 0 && col[e] < K, IndexError, "sparse_csr_mm(): column index ", col[e],
               " is out of bounds for a dense operand of ", K, " rows");
  // Rows split over the threads in pieces of about equal stored entries (graphs have a few
  // very dense rows): piece p starts at the first row whose offset reaches p / pieces of nnz.
  auto split_rows = [&](auto&& run_rows) {
    const int threads = detail::elementwise_threads();
    if ((nnz + rows) * N < detail::kParallelElements || rows < 2 || threads <= 1)
      return run_rows(int64_t(0), rows);
    const int64_t pieces = std::min<int64_t>(rows, 4 * int64_t(threads));
    std::vector<int64_t> bounds(static_cast<size_t>(pieces + 1));
    for (int64_t p = 0; p <= pieces; ++p)
      bounds[size_t(p)] = p == pieces ? rows
                                      : int64_t(std::lower_bound(crow, crow + rows,
                                                                 nnz * p / pieces) - crow);
    detail::parallel_chunks(pieces, [&](int64_t p) {
      run_rows(bounds[size_t(p)], std::max(bounds[size_t(p)], bounds[size_t(p + 1)]));
    });
  };
  if (dense.dtype() == DType::F32) {  // the ISA level's vector loops (isa/sparse_rows.h)
    const CsrRowsF32 rows_f32 = csr_rows_f32();
    const float* values = call.inputs[0].data_ptr<float>();
    const float* d = dense.data_ptr<float>();
    float* o = out.data_ptr<float>();
    return split_rows([&](int64_t b, int64_t e) { rows_f32(crow, col, values, d, o, b, e, N); });
  }
  KILN_DISPATCH_FLOAT(dense.dtype(), "sparse_csr_mm", [&]<typename T>() {
    using C = opmath_t<T>;  // float32 sums for bfloat16 / float16, written rounded once
    const T* values = call.inputs[0].data_ptr<T>();
    const T* d = dense.data_ptr<T>();
    T* o = out.data_ptr<T>();
    split_rows([&](int64_t begin, int64_t end) {
      std::vector<C> acc(static_cast<size_t>(N));
      for (int64_t r = begin; r < end; ++r) {
        std::fill(acc.begin(), acc.end(), C(0));
        for (int64_t e = crow[r]; e < crow[r + 1]; ++e) {
          const C v = C(values[e]);
          const T* src = d + col[e] * N;
          for (int64_t k = 0; k < N; ++k) acc[size_t(k)] += v * C(src[k]);
        }
        for (int64_t k = 0; k < N; ++k) o[r * N + k] = T(acc[size_t(k)]);
      }
    });
  });
}

}  // namespace

void register_sparse_mm_kernel() {
  register_kernel("sparse_csr_mm", DeviceType::CPU, sparse_csr_mm_kernel, kFloatDTypes);
}

}  // namespace kiln::cpu
