#pragma once
// 8 x 8 transposes of 32-bit values in AVX2 registers, for packing transposed GEMM operands
// (include only from translation units compiled for AVX2 or above); transpose8_f32 is the
// AVX2 counterpart of transpose_f32_avx512.h, with the same arguments.
#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu {

// An 8 x 8 transpose of 32-bit values in eight ymm registers, in place: r[c] becomes column c
// (used for float32 and, through bit casts, for packed integer words: gemm_s8_*.cpp).
inline void transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  // Per 128-bit lane L: s_j holds element 4L + j of rows 0-3 (s0..s3) or rows 4-7 (s4..s7).
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Loads `rows` rows of `cols` floats (row stride srs; the rest of the 8 x 8 block is zero)
// and stores the first dst_cols elements of each of the first dst_rows columns as rows of dst
// (row stride drs): dst[c * drs + r] = src[r * srs + c].
inline void transpose8_f32(const float* src, int64_t srs, int rows, int cols, float* dst,
                           int64_t drs, int dst_rows, int dst_cols) {
  // Lane masks: element e is kept where e < n.
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i in_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lanes);
  __m256 r[8];
  for (int i = 0; i < 8; ++i)
    r[i] = i >= rows    ? _mm256_setzero_ps()
           : cols == 8 ? _mm256_loadu_ps(src + i * srs)
                       : _mm256_maskload_ps(src + i * srs, in_mask);
  transpose8x8(r);
  const __m256i out_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(dst_cols), lanes);
  for (int c = 0; c < dst_rows; ++c) {
    if (dst_cols == 8) _mm256_storeu_ps(dst + c * drs, r[c]);
    else _mm256_maskstore_ps(dst + c * drs, out_mask, r[c]);
  }
}

}  // namespace kiln::cpu
