#pragma once
// Products with sparse matrices held as dense index / value arrays (kiln.sparse keeps the
// sparse tensor types in Python, decision 0108).
#include "kiln/tensor/tensor.h"

namespace kiln {

// [R, K] compressed-row sparse (crow_indices [R + 1], col_indices and values [nnz]) times
// dense [K, N] -> dense [R, N] in the values' dtype. Not differentiable by itself.
Tensor sparse_csr_mm(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                     const Tensor& dense);

}  // namespace kiln
