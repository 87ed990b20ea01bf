#pragma once
// Small helpers of the ggml block kernels, shared by the AVX2 and AVX-512 VNNI translation
// units (both compiled with AVX2, FMA and F16C). Only those units may include this header.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kiln::cpu::ggml_simd {

// The float16 scale stored at p (unaligned).
inline float scale_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// The sum of the 8 floats of v.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Calls body(std::integral_constant<int, R>) for R = rows (1-3; 4 and more: 4), so that
// kernels templated on their number of activation rows are chosen once per weight row.
template <typename Body>
inline void by_rows(int rows, Body body) {
  switch (rows) {
    case 1: body(std::integral_constant<int, 1>{}); break;
    case 2: body(std::integral_constant<int, 2>{}); break;
    case 3: body(std::integral_constant<int, 3>{}); break;
    default: body(std::integral_constant<int, 4>{}); break;
  }
}

}  // namespace kiln::cpu::ggml_simd
