// float32 GEMM, AVX2 + FMA variant (compiler flags set in CMakeLists.txt): the blocked
// kernel with 6 x 16 register tiles, and the row-streaming kernel for few-row products
// (see gemm_f32_avx512.cpp). On CPUs without AVX-512 BF16 the bfloat16 products run here too:
// the blocked kernel widening its operands as it packs them, and a dot product widening in
// registers (gemm_bf16.h).
#include <immintrin.h>

#include "gemm_bf16.h"
#include "gemm_f32.h"
#include "transpose_f32_avx2.h"

#define KILN_GEMM_F32_NAME gemm_f32_avx2_rows
#define KILN_GEMM_BF16_ROWS_NAME gemm_bf16_rows_avx2
#include "gemm_f32_body.inc"

#define V __m256
#define VW 8
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps((p), (v))
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VSET1(x) _mm256_set1_ps(x)
#define VZERO() _mm256_setzero_ps()
#define VMUL(a, b) _mm256_mul_ps((a), (b))
#define VLOAD_BF16(p)                                            \
  _mm256_castsi256_ps(_mm256_slli_epi32(                          \
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16))
#define KILN_GEMM_TRANSPOSE transpose8_f32  // packs transposed operands 8 x 8 at a time
// Zen 3 (512 KiB L2): B's panel rows prefetched 16 k steps ahead, 1 KiB: [128, 768] x [768,
// 3072] float32 174 -> 182 GFLOP/s on two threads, 1024^3 184 -> 191, [128, 4096] x [4096,
// 4096] 163 -> 170 (8 or 32 steps ahead measured the same; NC 128 instead of 256 did nothing).
#define KILN_GEMM_PREFETCH_B 16
#define KILN_GEMM_MR 6  // 12 accumulators + 2 B vectors + 1 broadcast of the 16 registers
#define KILN_GEMM_BLOCKED_NAME gemm_f32_avx2_blocked
#define KILN_GEMM_BLOCKED_BF16_NAME gemm_bf16_avx2
#define KILN_GEMM_PACK_NAME gemm_f32_avx2_pack
#define KILN_GEMM_PACKED_RUN_NAME gemm_f32_avx2_packed
#include "gemm_f32_blocked.inc"
#define KILN_DOT_BF16_NAME dot_bf16_avx2
#define KILN_DOT_F32_BF16_NAME dot_f32_bf16_avx2
#define KILN_DOT4_F32_BF16_NAME dot4_f32_bf16_avx2
#include "dot_bf16_widening.inc"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

void gemm_f32_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_rs, int64_t a_cs,
                   const float* B, int64_t b_rs, int64_t b_cs, float* C, int64_t c_rs, float alpha) {
  if (M < kGemmBlockedMinRows)
    gemm_f32_avx2_rows(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, alpha);
  else
    gemm_f32_avx2_blocked(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, alpha);
}

}  // namespace kiln::cpu
