#include "dense_gemm.h"

#include <algorithm>

#include "isa/gemm_f32.h"

namespace kiln::cpu {

void dense_gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs,
                const float* B, int64_t b_rs, int64_t b_cs, float* out, int64_t out_rs,
                bool accumulate, GemmScratch& s) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(out + i * out_rs, out + i * out_rs + N, 0.0f);
    return;
  }
  if (!accumulate) {
    gemm_f32_kernel()(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, out, out_rs, 1.0f);
    return;
  }
  s.result_f32.resize(size_t(M * N));
  gemm_f32_kernel()(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, s.result_f32.data(), N, 1.0f);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) out[i * out_rs + j] += s.result_f32[size_t(i * N + j)];
}

void dense_gemm(int64_t M, int64_t N, int64_t K, const double* A, int64_t a_rs, int64_t a_cs,
                const double* B, int64_t b_rs, int64_t b_cs, double* out, int64_t out_rs,
                bool accumulate, GemmScratch&) {
  for (int64_t i = 0; i < M; ++i) {
    double* o = out + i * out_rs;
    if (!accumulate) std::fill(o, o + N, 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double a = A[i * a_rs + k * a_cs];
      const double* b = B + k * b_rs;
      for (int64_t j = 0; j < N; ++j) o[j] += a * b[j * b_cs];
    }
  }
}

}  // namespace kiln::cpu
