#pragma once
// Shared argument checks and shapes of the factorisation ops (linalg_factor_ops.cpp,
// linalg_spectral_ops.cpp): PyTorch's messages, so errors read the same.
#include <string>

#include "kiln/tensor/tensor.h"

namespace kiln::ops {

// A float32 / float64 tensor of at least two dims, else RuntimeError naming the function.
void check_linalg_input(const char* fn, const Tensor& A);
// As check_linalg_input, and the last two dims equal.
void check_square(const char* fn, const Tensor& A);
// A's shape without its last `matrix_dims` dims.
Shape batch_of(const Tensor& A, size_t matrix_dims = 2);
// The broadcast of two batch shapes, or ShapeError naming fn.
Shape broadcast_batch(const char* fn, const Shape& a, const Shape& b);
// batch + {rows, cols}.
Shape with_matrix(Shape batch, int64_t rows, int64_t cols);
// Raises LinAlgError "fn: " + message(code) for the first non-zero info entry, prefixing
// "(Batch element i): " for batched input, as torch does.
using InfoMessage = std::string (*)(int32_t code);
void raise_for_info(const char* fn, const Tensor& info, InfoMessage message);

}  // namespace kiln::ops
