// The AMX tile GEMMs on the hardware (gemm_amx_body.inc with amx_tiles.h); compiler flags for
// the AVX-512 packers set in CMakeLists.txt. Selected at ISA level amx (gemm_bf16_select.cpp,
// gemm_s8_select.cpp). Products with fewer than kAmxMinRows rows keep the AVX-512 kernels,
// whose few-row paths stream B once without packing it.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "amx_tiles.h"
#include "gemm_bf16.h"
#include "gemm_f32.h"  // gemm_thread_grid
#include "gemm_pack_buffer.h"
#include "gemm_s8.h"
#include "pack_bf16_pairs.h"
#include "pack_s8_quads.h"

#include "gemm_amx_body.inc"

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

}  // namespace kiln::cpu
