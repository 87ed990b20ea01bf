// The AMX tile GEMMs on the hardware (gemm_amx_body.inc with amx_tiles.h); compiler flags for
// the AVX-512 packers set in CMakeLists.txt. Selected at ISA level amx (gemm_bf16_select.cpp,
// gemm_s8_select.cpp). Products with fewer than kAmxMinRows rows keep the AVX-512 kernels,
// whose few-row paths stream B once without packing it.
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "amx_tiles.h"
#include "bf16_vectors_avx512.h"
#include "gemm_bf16.h"
#include "gemm_f32.h"  // gemm_thread_grid
#include "gemm_pack_buffer.h"
#include "gemm_packed_b.h"
#include "gemm_s8.h"
#include "kiln/core/error.h"
#include "pack_bf16_pairs.h"
#include "pack_s8_quads.h"

// GCC 12 reports the intentionally undefined placeholder inside its AVX-512 intrinsics
// (`__Y = __Y`) as uninitialized once the bfloat16 rounding (bf16_vectors_avx512.h) is
// inlined; the values are all defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "gemm_amx_body.inc"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

void gemm_bf16_amx(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs,
                   int64_t a_cs, const uint16_t* B, int64_t b_rs, int64_t b_cs, float* C,
                   int64_t c_rs) {
  if (M < kAmxMinRows) {
    gemm_bf16_avx512bf16(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs);
    return;
  }
  amx_gemm<AmxHardwareTiles, AmxKind::Bf16>(M, N, K, A, a_rs, a_cs, AmxB{B, b_rs, b_cs, false},
                                            C, c_rs);
}

bool gemm_bf16_amx_to_bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs,
                           int64_t a_cs, const uint16_t* B, int64_t b_rs, int64_t b_cs,
                           uint16_t* C, int64_t c_rs) {
  if (M < kAmxMinRows) return false;
  amx_gemm<AmxHardwareTiles, AmxKind::Bf16>(M, N, K, A, a_rs, a_cs, AmxB{B, b_rs, b_cs, false},
                                            nullptr, 0, nullptr, AmxBf16Out{C, c_rs, nullptr});
  return true;
}

void gemm_s8_amx(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                 const int8_t* B, bool b_transposed, int32_t* C) {
  if (M < kAmxMinRows) {
    gemm_s8_avx512vnni(M, N, K, A, a_signed, B, b_transposed, C);
    return;
  }
  const AmxB b{B, 0, 0, b_transposed};
  if (a_signed)
    amx_gemm<AmxHardwareTiles, AmxKind::S8S8>(M, N, K, A, K, 1, b, C, N);
  else
    amx_gemm<AmxHardwareTiles, AmxKind::U8S8>(M, N, K, A, K, 1, b, C, N);
}

// With B packed whole beforehand (gemm_packed_b.h; a Linear weight). A product of fewer than
// kAmxMinRows rows still runs on the tiles here (the caller chose the packed path).
void gemm_bf16_amx_packed(int64_t M, const void* A, int64_t a_rs, int64_t a_cs,
                          const GemmPackedB& B, float* C, int64_t c_rs, float alpha,
                          const float* bias) {
  KILN_CHECK(B.kernel == reinterpret_cast<const void*>(&gemm_bf16_amx_packed), Error,
             "gemm: a B packed for another kernel was given to the AMX bfloat16 kernel");
  amx_gemm<AmxHardwareTiles, AmxKind::Bf16>(M, B.N, B.K, static_cast<const uint16_t*>(A), a_rs,
                                            a_cs, AmxB{}, C, c_rs, &B);
  if (alpha != 1.0f)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < B.N; ++j) C[i * c_rs + j] *= alpha;
  if (bias)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < B.N; ++j) C[i * c_rs + j] += bias[j];
}
void gemm_bf16_amx_packed_to_bf16(int64_t M, const void* A, int64_t a_rs, int64_t a_cs,
                                  const GemmPackedB& B, uint16_t* C, int64_t c_rs,
                                  const float* bias) {
  KILN_CHECK(B.kernel == reinterpret_cast<const void*>(&gemm_bf16_amx_packed), Error,
             "gemm: a B packed for another kernel was given to the AMX bfloat16 kernel");
  amx_gemm<AmxHardwareTiles, AmxKind::Bf16>(M, B.N, B.K, static_cast<const uint16_t*>(A), a_rs,
                                            a_cs, AmxB{}, nullptr, 0, &B,
                                            AmxBf16Out{C, c_rs, bias});
}
GemmPackedB gemm_bf16_amx_pack(int64_t K, int64_t N, const void* B, int64_t b_rs, int64_t b_cs) {
  return amx_pack_whole<AmxKind::Bf16>(K, N, AmxB{B, b_rs, b_cs, false},
                                       reinterpret_cast<const void*>(&gemm_bf16_amx_packed));
}

void gemm_s8_amx_packed(int64_t M, const uint8_t* A, bool a_signed, const GemmPackedB& B,
                        int32_t* C) {
  KILN_CHECK(B.kernel == reinterpret_cast<const void*>(&gemm_s8_amx_packed), Error,
             "gemm: a B packed for another kernel was given to the AMX int8 kernel");
  if (a_signed)
    amx_gemm<AmxHardwareTiles, AmxKind::S8S8>(M, B.N, B.K, A, B.K, 1, AmxB{}, C, B.N, &B);
  else
    amx_gemm<AmxHardwareTiles, AmxKind::U8S8>(M, B.N, B.K, A, B.K, 1, AmxB{}, C, B.N, &B);
}
GemmPackedB gemm_s8_amx_pack(int64_t K, int64_t N, const int8_t* W) {
  return amx_pack_whole<AmxKind::S8S8>(K, N, AmxB{W, 0, 0, true},
                                       reinterpret_cast<const void*>(&gemm_s8_amx_packed));
}
GemmPackedB gemm_s8_amx_pack_rows(int64_t K, int64_t N, const int8_t* B) {
  return amx_pack_whole<AmxKind::S8S8>(K, N, AmxB{B, 0, 0, false},
                                       reinterpret_cast<const void*>(&gemm_s8_amx_packed));
}

}  // namespace kiln::cpu

#pragma GCC diagnostic pop
