#pragma once
// The 8-bit integer matrix product (int_mm: int8/uint8 [M, K] x int8 [K, N] -> int32) through
// oneDNN's matmul primitive for tall products, where its VNNI brgemm kernels run 2-3x kiln's
// own blocked VNNI kernel (decision 0022). Built only with KILN_HAVE_DNNL; otherwise
// onednn_int_mm always returns false and kiln's kernel runs.
#include "kiln/tensor/tensor.h"

namespace kiln::cpu {

// c = a @ b exactly (int32 sums). a contiguous int8 or uint8 [M, K]; b int8 [K, N], either
// contiguous or the transpose of a contiguous [N, K] (a Linear weight W.t(): then packed once
// into oneDNN's layout and cached with the weight, onednn_packed_weights.h); c contiguous
// int32 [M, N]. Returns false, having written nothing, for fewer rows than decision 0017's
// rule (kiln's streaming kernel reads the weight once there), when oneDNN is absent or
// switched off, below the AVX-512 VNNI level (oneDNN's int16 pair sums saturate there), or
// when it has no implementation for the operands.
bool onednn_int_mm(const Tensor& a, const Tensor& b, const Tensor& c);

}  // namespace kiln::cpu
