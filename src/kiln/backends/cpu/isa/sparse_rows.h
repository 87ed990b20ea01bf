#pragma once
// The compressed-row sparse x dense product's inner loops for float32 (sparse_mm_kernel.cpp),
// compiled per ISA level: the baseline build of the generic loop ran at SSE2 width (10000 x
// 10000 with 100k entries @ [10000, 64]: about 10 ms where PyTorch takes 1-2 ms).
#include <cstdint>

namespace kiln::cpu {

// out[r, :] = sum over e in [crow[r], crow[r + 1]) of values[e] * dense[col[e], :] for rows
// r in [begin, end); dense [K, N] and out [R, N] row-major. Column indices are checked by the
// caller.
using CsrRowsF32 = void (*)(const int64_t* crow, const int64_t* col, const float* values,
                            const float* dense, float* out, int64_t begin, int64_t end,
                            int64_t N);

CsrRowsF32 csr_rows_f32_baseline();
CsrRowsF32 csr_rows_f32_avx2();
CsrRowsF32 csr_rows_f32_avx512();
CsrRowsF32 csr_rows_f32();  // the current ISA level's

}  // namespace kiln::cpu
