#pragma once
// bfloat16 <-> float32 in AVX-512 registers, shared by the translation units compiled with
// AVX-512 flags that convert (vec_math_avx512.cpp, gemm_amx.cpp): one rounding rule for every
// kernel, so a product rounded inside the AMX kernel equals the same sums narrowed by
// vec_math's narrow_bf16.
#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu {
namespace {  // internal linkage: each including unit has its own copy, with its own flags

// bfloat16 <-> float32 in registers: the 16-bit pattern is the float's upper half, so
// widening is a zero extension and a shift; narrowing rounds to nearest even by adding
// 0x7fff plus the kept part's lowest bit, and a NaN keeps its upper half with the quiet bit
// set (the rule of BFloat16(float) and of vec_math's v_narrow_bf16). vcvtneps2bf16 is not used: it
// flushes denormal inputs to zero.
inline __m512 load_bf16_avx512(const uint16_t* p) {
  const __m512i w =
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline void store_bf16_avx512(uint16_t* p, __m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
}
// Two vectors at once, the same rounding: each rounded value's upper half is gathered into one
// register by a single word permute (vpermt2w), and NaN lanes, rare, take the path above.
// Narrowing [4096, 1024] float32 on one thread: 820-840 us with one vpmovdw per vector.
inline void store2_bf16_avx512(uint16_t* p, __m512 v0, __m512 v1) {
  if (_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q)) {
    store_bf16_avx512(p, v0);
    store_bf16_avx512(p + 16, v1);
    return;
  }
  auto round = [](__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
  };
  // Word j of the result: the upper word of lane j of v0 (j < 16), else of lane j - 16 of v1.
  const __m512i upper_words = _mm512_set_epi16(
      63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33,
      31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  _mm512_storeu_si512(p, _mm512_permutex2var_epi16(round(v0), upper_words, round(v1)));
}

}  // namespace
}  // namespace kiln::cpu
