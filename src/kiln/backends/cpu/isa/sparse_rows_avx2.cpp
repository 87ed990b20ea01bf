// The float32 compressed-row product rows for the avx2 level (flags in CMakeLists.txt;
// sparse_rows.h).
#include "sparse_rows.h"

namespace kiln::cpu {
#include "sparse_rows_body.inc"

CsrRowsF32 csr_rows_f32_avx2() { return csr_rows_f32_impl; }

}  // namespace kiln::cpu
