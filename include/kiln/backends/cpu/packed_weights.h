#pragma once
// The copies of Linear weights that kiln's own GEMM kernels keep packed in their panel layout
// (decision 0043: fused_linear / Linear where oneDNN does not take the product — float32 at
// the AVX2 level, bfloat16 and int8 on AMX tiles, any level with oneDNN switched off — and
// int_mm's W.t() on AMX), one per weight tensor and layout; a changed weight is packed again
// and the copies of freed weights are dropped at the next packing. The counterpart of
// onednn_packed_weight_count / onednn_clear_packed_weights (onednn.h) for those kernels.
#include <cstddef>

namespace kiln::cpu {

size_t own_packed_weight_count();
// Drops the packed copies and the bfloat16 roundings kept for float32 weights under autocast
// (decision 0121).
void own_clear_packed_weights();

}  // namespace kiln::cpu
