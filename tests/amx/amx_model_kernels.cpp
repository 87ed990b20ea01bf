// The AMX kernels of gemm_amx_body.inc instantiated with the tile model (amx_tile_model.h):
// compiled with the flags of the library's gemm_amx.cpp (tests/CMakeLists.txt), because the
// packers they share with the AVX-512 kernels use AVX-512 instructions.
#include "amx_model_kernels.h"

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "amx_tile_model.h"
#include "bf16_vectors_avx512.h"
#include "gemm_bf16.h"
#include "gemm_f32.h"
#include "gemm_pack_buffer.h"
#include "gemm_packed_b.h"
#include "gemm_s8.h"
#include "pack_bf16_pairs.h"
#include "pack_s8_quads.h"

// GCC 12 reports the intentionally undefined placeholder inside its AVX-512 intrinsics
// (`__Y = __Y`) as uninitialized once the bfloat16 rounding (bf16_vectors_avx512.h) is
// inlined; the values are all defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "gemm_amx_body.inc"

namespace kiln::cpu::test {

int64_t model_gemm_bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs,
                        int64_t a_cs, const uint16_t* B, int64_t b_rs, int64_t b_cs, float* C,
                        int64_t c_rs) {
  const int64_t before = model_products();
  amx_gemm<AmxTileModel, AmxKind::Bf16>(M, N, K, A, a_rs, a_cs, AmxB{B, b_rs, b_cs, false}, C,
                                        c_rs);
  return model_products() - before;
}

int64_t model_gemm_s8(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                      const int8_t* B, bool b_transposed, int32_t* C) {
  const int64_t before = model_products();
  const AmxB b{B, 0, 0, b_transposed};
  if (a_signed) amx_gemm<AmxTileModel, AmxKind::S8S8>(M, N, K, A, K, 1, b, C, N);
  else amx_gemm<AmxTileModel, AmxKind::U8S8>(M, N, K, A, K, 1, b, C, N);
  return model_products() - before;
}

int64_t model_gemm_bf16_prepacked(int64_t M, int64_t N, int64_t K, const uint16_t* A,
                                  int64_t a_rs, int64_t a_cs, const uint16_t* B, int64_t b_rs,
                                  int64_t b_cs, float* C, int64_t c_rs) {
  const GemmPackedB packed =
      amx_pack_whole<AmxKind::Bf16>(K, N, AmxB{B, b_rs, b_cs, false}, nullptr);
  const int64_t before = model_products();
  amx_gemm<AmxTileModel, AmxKind::Bf16>(M, N, K, A, a_rs, a_cs, AmxB{}, C, c_rs, &packed);
  return model_products() - before;
}

int64_t model_gemm_s8_prepacked(int64_t M, int64_t N, int64_t K, const uint8_t* A,
                                bool a_signed, const int8_t* W, int32_t* C) {
  const GemmPackedB packed = amx_pack_whole<AmxKind::S8S8>(K, N, AmxB{W, 0, 0, true}, nullptr);
  const int64_t before = model_products();
  if (a_signed) amx_gemm<AmxTileModel, AmxKind::S8S8>(M, N, K, A, K, 1, AmxB{}, C, N, &packed);
  else amx_gemm<AmxTileModel, AmxKind::U8S8>(M, N, K, A, K, 1, AmxB{}, C, N, &packed);
  return model_products() - before;
}

int64_t model_gemm_bf16_rounded(int64_t M, int64_t N, int64_t K, const uint16_t* A,
                                int64_t a_rs, int64_t a_cs, const uint16_t* B, int64_t b_rs,
                                int64_t b_cs, uint16_t* C, int64_t c_rs, const float* bias,
                                bool prepacked) {
  const int64_t before = model_products();
  const AmxBf16Out out{C, c_rs, bias};
  if (prepacked) {
    const GemmPackedB packed =
        amx_pack_whole<AmxKind::Bf16>(K, N, AmxB{B, b_rs, b_cs, false}, nullptr);
    amx_gemm<AmxTileModel, AmxKind::Bf16>(M, N, K, A, a_rs, a_cs, AmxB{}, nullptr, 0, &packed,
                                          out);
  } else {
    amx_gemm<AmxTileModel, AmxKind::Bf16>(M, N, K, A, a_rs, a_cs, AmxB{B, b_rs, b_cs, false},
                                          nullptr, 0, nullptr, out);
  }
  return model_products() - before;
}

int64_t model_products() {
  int64_t total = 0;
#pragma omp parallel reduction(+ : total)
  total += AmxTileModel::state().products;
  return total;
}

}  // namespace kiln::cpu::test

#pragma GCC diagnostic pop
