#pragma once
// oneDNN (Debian libdnnl-dev 2.6) called directly, as the GEMM peer of `kiln bench`:
// dnnl_sgemm, and the matmul primitive with weights prepacked once into the layout the
// primitive asks for (oneDNN repacks plain weights on every call otherwise: HARDWARE.md).
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::tools::bench {

bool onednn_available();
std::string onednn_version();

// C[M,N] = A[M,K] @ op(B) in row-major, op(B) = B[K,N] or, with b_transposed, B[N,K]^T.
void onednn_sgemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B,
                  bool b_transposed, float* C);

enum class DnnlType { F32, BF16, U8, S8, S32 };

// One matmul primitive with its weights prepacked at construction.
class OnednnMatmul {
 public:
  // weights: B[K,N] row-major, or B[N,K] when b_transposed; elements of type wei.
  OnednnMatmul(int64_t M, int64_t N, int64_t K, DnnlType src, DnnlType wei, DnnlType dst,
               const void* weights, bool b_transposed);
  ~OnednnMatmul();
  OnednnMatmul(const OnednnMatmul&) = delete;
  OnednnMatmul& operator=(const OnednnMatmul&) = delete;
  void run(const void* src, void* dst);  // synchronous
  std::string impl() const;              // the implementation oneDNN chose (e.g. brg:avx512_core_amx)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::tools::bench
