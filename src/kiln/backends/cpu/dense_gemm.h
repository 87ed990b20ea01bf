#pragma once
// A plain row-major matrix product for kernels that work on their own buffers (convolution
// via im2col): out[M, N] (=|+=) A[M, K] @ B[K, N], with A and B given by element strides.
// float runs the ISA-selected kernel (which packs B from any strides); double runs simple
// i-k-j loops.
#include <cstdint>
#include <vector>

namespace kiln::cpu {

// scratch buffers are reused across calls to avoid an allocation per product.
struct GemmScratch {
  std::vector<float> result_f32;  // the product before it is added into out
};

void dense_gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs,
                const float* B, int64_t b_rs, int64_t b_cs, float* out, int64_t out_rs,
                bool accumulate, GemmScratch& scratch);
void dense_gemm(int64_t M, int64_t N, int64_t K, const double* A, int64_t a_rs, int64_t a_cs,
                const double* B, int64_t b_rs, int64_t b_cs, double* out, int64_t out_rs,
                bool accumulate, GemmScratch& scratch);

}  // namespace kiln::cpu
