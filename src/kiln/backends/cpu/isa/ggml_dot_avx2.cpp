// AVX2 variant of the ggml block dot products (ggml_dot.h). Q8_0 / Q4_0: both operands widened
// to int16 and multiplied in exact pairs (vpmaddwd), so every weight byte, -128 included,
// counts exactly. The K-quants (ggml_kquant_dot.inc): vpmaddubsw of their small unsigned
// values with the activations. Compiled with -mavx2 -mfma -mf16c; also used at the AVX-512 level without VNNI.
#include <immintrin.h>

#include <cstring>

#include "ggml_dot.h"
#include "ggml_simd_helpers.h"

namespace kiln::cpu {

namespace {

using ggml_simd::hsum;
using ggml_simd::load32;
using ggml_simd::scale_at;

// Eight int32 partial sums of 32 int8 x int8 products (weights already widened).
inline __m256i dot32(__m256i w_lo, __m256i w_hi, const int8_t* x) {
  const __m256i x_lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
  const __m256i x_hi = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16)));
  return _mm256_add_epi32(_mm256_madd_epi16(w_lo, x_lo), _mm256_madd_epi16(w_hi, x_hi));
}

template <int R>
void q8_0_rows(const uint8_t* w, int64_t nblocks, const int8_t* qx, const float* dx,
               int64_t x_stride, float* out) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* blk = w + b * 34;
    const float dw = scale_at(blk);
    const __m256i w_lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
    const __m256i w_hi = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18)));
    for (int r = 0; r < R; ++r) {
      const __m256i p = dot32(w_lo, w_hi, qx + r * x_stride + b * 32);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * dx[r * nblocks + b]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

// Q4_0: the nibbles become int8 values minus 8 before the same exact products.
template <int R>
void q4_0_rows(const uint8_t* w, int64_t nblocks, const int8_t* qx, const float* dx,
               int64_t x_stride, float* out) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const __m128i low4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* blk = w + b * 18;
    const float dw = scale_at(blk);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, low4), eight);                     // values 0-15
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), low4), eight);  // values 16-31
    const __m256i w_lo = _mm256_cvtepi8_epi16(lo), w_hi = _mm256_cvtepi8_epi16(hi);
    for (int r = 0; r < R; ++r) {
      const __m256i p = dot32(w_lo, w_hi, qx + r * x_stride + b * 32);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * dx[r * nblocks + b]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}



// Unsigned by signed bytes into int32 lanes of four (see ggml_kquant_dot.inc): the pairs'
// int16 sums cannot saturate for the K-quants' values (at most 63).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// Eight floats to bfloat16 bits, rounding to nearest even (finite values; a NaN scale from a
// corrupt file gives garbage, not a fault).
inline void store_bf16x8(__m256 v, uint16_t* out) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
}

#define KILN_GGML_KQUANT_BF16
#include "ggml_kquant_dot.inc"

// 32 int8 values (two 16-byte halves) times the block scale, to bfloat16.
inline void block_to_bf16(__m128i lo, __m128i hi, float d, uint16_t* out) {
  const __m256 s = _mm256_set1_ps(d);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int i = 0; i < 4; ++i)
    store_bf16x8(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[i])), s), out + 8 * i);
}

void q8_0_bf16(const uint8_t* w, int64_t nblocks, uint16_t* out) {
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* blk = w + b * 34;
    block_to_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)),
                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18)), scale_at(blk), out + b * 32);
  }
}

void q4_0_bf16(const uint8_t* w, int64_t nblocks, uint16_t* out) {
  const __m128i low4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  for (int64_t b = 0; b < nblocks; ++b) {
    const uint8_t* blk = w + b * 18;
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    block_to_bf16(_mm_sub_epi8(_mm_and_si128(q, low4), eight),
                  _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), low4), eight), scale_at(blk),
                  out + b * 32);
  }
}

void q8_0(const uint8_t* w, int64_t nb, const int8_t* qx, const float* dx, const float*,
          int64_t xs, int rows, float* out) {
  ggml_simd::by_rows(rows, [&](auto R) { q8_0_rows<decltype(R)::value>(w, nb, qx, dx, xs, out); });
}

void q4_0(const uint8_t* w, int64_t nb, const int8_t* qx, const float* dx, const float*,
          int64_t xs, int rows, float* out) {
  ggml_simd::by_rows(rows, [&](auto R) { q4_0_rows<decltype(R)::value>(w, nb, qx, dx, xs, out); });
}

}  // namespace

GGMLDotKernels ggml_dot_kernels_avx2() {
  GGMLDotKernels k;
  k.q8_0 = &q8_0;
  k.q4_0 = &q4_0;
  k.q8_0_bf16 = &q8_0_bf16;
  k.q4_0_bf16 = &q4_0_bf16;
  k.q4_k_bf16 = &q45_k_bf16<false>;
  k.q5_k_bf16 = &q45_k_bf16<true>;
  k.q6_k_bf16 = &q6_k_bf16;
  k.q4_k = &q45_k<false>;
  k.q5_k = &q45_k<true>;
  k.q6_k = &q6_k;
  k.isa = "avx2";
  return k;
}

}  // namespace kiln::cpu
