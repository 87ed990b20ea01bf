// Choice of the 8-bit GEMM variant, and the plain-loop reference used at the baseline level.
#include "gemm_s8.h"
#include "gemm_packed_b.h"
#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::cpu {

void gemm_s8_reference(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                       const int8_t* B, bool b_transposed, int32_t* C) {
  if (b_transposed) {  // dot products of A's rows with B's columns (W's rows)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int32_t s = 0;
        for (int64_t k = 0; k < K; ++k) {
          const uint8_t raw = A[i * K + k];
          s += (a_signed ? int32_t(int8_t(raw)) : int32_t(raw)) * int32_t(B[j * K + k]);
        }
        C[i * N + j] = s;
      }
    return;
  }
  for (int64_t i = 0; i < M; ++i) {
    int32_t* c = C + i * N;
    for (int64_t j = 0; j < N; ++j) c[j] = 0;
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t raw = A[i * K + k];
      const int32_t a = a_signed ? int32_t(int8_t(raw)) : int32_t(raw);
      const int8_t* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) c[j] += a * int32_t(b[j]);
    }
  }
}

GemmS8Fn gemm_s8_kernel() {
  static const GemmS8Fn fn = [] {
    if (isa_level() >= IsaLevel::Amx && cpu_features().amx_int8) return &gemm_s8_amx;
    if (isa_level() >= IsaLevel::Avx512Vnni && cpu_features().avx512_vnni)
      return &gemm_s8_avx512vnni;
    if (isa_level() >= IsaLevel::Avx2) return &gemm_s8_avx2;
    return &gemm_s8_reference;
  }();
  return fn;
}

GemmS8PackedKernel gemm_s8_packed_kernel() {
  static const GemmS8PackedKernel k = [] {
    if (isa_level() >= IsaLevel::Amx && cpu_features().amx_int8)
      return GemmS8PackedKernel{&gemm_s8_amx_pack, &gemm_s8_amx_packed, &gemm_s8_amx_pack_rows};
    return GemmS8PackedKernel{};
  }();
  return k;
}

}  // namespace kiln::cpu
