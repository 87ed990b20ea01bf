// float32 GEMM, AVX-512 variant (compiler flags set in CMakeLists.txt): the blocked kernel
// with 8 x 32 register tiles for products with enough rows to fill them, the row-streaming
// kernel (gemm_f32_body.inc) for matrix-vector and few-row products, where packing B would
// cost as much memory traffic as the product itself. On CPUs with AVX-512 but without
// AVX-512 BF16 the bfloat16 products run here too (see gemm_f32_avx2.cpp).
#include <immintrin.h>

#include "gemm_bf16.h"
#include "gemm_f32.h"
#include "transpose_f32_avx512.h"

#define KILN_GEMM_F32_NAME gemm_f32_avx512_rows
#define KILN_GEMM_BF16_ROWS_NAME gemm_bf16_rows_avx512
#include "gemm_f32_body.inc"

#define V __m512
#define VW 16
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps((p), (v))
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VSET1(x) _mm512_set1_ps(x)
#define VZERO() _mm512_setzero_ps()
#define VMUL(a, b) _mm512_mul_ps((a), (b))
#define VLOAD_BF16(p)                                            \
  _mm512_castsi512_ps(_mm512_slli_epi32(                          \
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16))
#define KILN_GEMM_TRANSPOSE transpose16_f32  // packs transposed operands 16 x 16 at a time
#define KILN_GEMM_MR 8  // 16 accumulators of the 32 registers
#define KILN_GEMM_BLOCKED_NAME gemm_f32_avx512_blocked
#define KILN_GEMM_BLOCKED_BF16_NAME gemm_bf16_avx512
#define KILN_GEMM_PACK_NAME gemm_f32_avx512_pack
#define KILN_GEMM_PACKED_RUN_NAME gemm_f32_avx512_packed
// GCC 12 reports the intentionally undefined placeholder inside its AVX-512 intrinsics
// (`__Y = __Y`) as uninitialized once the bfloat16 widening loads are inlined; the values are
// all defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "gemm_f32_blocked.inc"
#define KILN_DOT_BF16_NAME dot_bf16_avx512
#define KILN_DOT_F32_BF16_NAME dot_f32_bf16_avx512
#define KILN_DOT4_F32_BF16_NAME dot4_f32_bf16_avx512
#include "dot_bf16_widening.inc"
#include "kiln/backends/cpu/parallel_region.h"
#pragma GCC diagnostic pop

namespace kiln::cpu {

void gemm_f32_avx512(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs,
                     int64_t a_cs, const float* B, int64_t b_rs, int64_t b_cs, float* C, int64_t c_rs,
                     float alpha) {
  if (M < kGemmBlockedMinRows)
    gemm_f32_avx512_rows(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, alpha);
  else
    gemm_f32_avx512_blocked(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, alpha);
}

}  // namespace kiln::cpu
