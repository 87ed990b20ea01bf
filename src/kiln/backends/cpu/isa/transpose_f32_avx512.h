#pragma once
// A 16 x 16 float32 transpose in AVX-512 registers, for packing transposed GEMM operands and
// for vec_math's short-row kernels (include only from translation units compiled for AVX-512).
#include <immintrin.h>

#include <cstdint>

namespace kiln::cpu {

// GCC 12 reports the intentionally undefined placeholder inside its shuffle intrinsics
// (`__Y = __Y`) as uninitialized once they are inlined here; the values are all defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// r[i] <- column i of the 16 x 16 block whose rows are r[0..15], in registers.
inline void transpose16x16(__m512 r[16]) {
  __m512 t[16];
  // Pairs of rows interleaved, then quads: r[4i + j] holds, in 128-bit lane L, element 4L + j of
  // rows 4i .. 4i + 3.
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  // Lane L of r[j], r[4 + j], r[8 + j], r[12 + j] side by side is column 4L + j.
  __m512 out[16];
  for (int j = 0; j < 4; ++j) {
    const __m512 u0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    const __m512 u1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
    const __m512 u2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 u3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
    out[j] = _mm512_shuffle_f32x4(u0, u2, 0x88);
    out[j + 8] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
    out[j + 4] = _mm512_shuffle_f32x4(u1, u3, 0x88);
    out[j + 12] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i] = out[i];
}

// Loads `rows` rows of `cols` floats (row stride srs; the rest of the 16 x 16 block is zero)
// and stores the first dst_cols elements of each of the first dst_rows columns as rows of dst
// (row stride drs): dst[c * drs + r] = src[r * srs + c].
inline void transpose16_f32(const float* src, int64_t srs, int rows, int cols, float* dst,
                            int64_t drs, int dst_rows, int dst_cols) {
  const __mmask16 in_mask = __mmask16((1u << cols) - 1u);
  __m512 r[16];
  for (int i = 0; i < 16; ++i)
    r[i] = i < rows ? _mm512_maskz_loadu_ps(in_mask, src + i * srs) : _mm512_setzero_ps();
  transpose16x16(r);
  const __mmask16 out_mask = __mmask16((1u << dst_cols) - 1u);
  for (int c = 0; c < dst_rows; ++c) _mm512_mask_storeu_ps(dst + c * drs, out_mask, r[c]);
}

#pragma GCC diagnostic pop

}  // namespace kiln::cpu
