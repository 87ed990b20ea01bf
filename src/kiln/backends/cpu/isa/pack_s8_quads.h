#pragma once
// Packing of an int8 B into (k..k+3) quadruples, shared by the AVX-512 VNNI kernel
// (gemm_s8_avx512vnni.cpp: vpdpbusd takes one quadruple per int32 lane) and the AMX kernel
// (gemm_amx_body.inc: a tdpbssd / tdpbusd B tile is 16 quadruple rows of 16 columns, half of
// a panel row here, loaded with a 128-byte stride). Needs AVX2; internal linkage on purpose
// (gemm_pack_buffer.h).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "transpose_f32_avx2.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kQuadPanel = 32;  // columns per packed B panel

// B[k0:k0+kc, j0:j0+nc] (B row-major [K, N], or `transposed`: stored as [N, K]) -> panels of
// kQuadPanel columns of (k..k+3) quadruples, one 32-bit word each, zero-padded: panel p starts
// at out + p * panel_rows * kQuadPanel, and its rows from (kc + 3) / 4 up to panel_rows (the
// AMX kernel's whole tiles of 16 quadruple rows) are zero.
void pack_b_quads(const int8_t* B, bool transposed, int64_t N, int64_t K, int64_t k0,
                  int64_t kc, int64_t j0, int64_t nc, int64_t panel_rows, uint32_t* out) {
  constexpr int64_t kNR = kQuadPanel;
  const int64_t panels = (nc + kNR - 1) / kNR, kq = (kc + 3) / 4;
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t j = j0 + p * kNR, w = std::min(kNR, j0 + nc - j);
    uint32_t* dst = out + p * panel_rows * kNR;
    std::fill(dst + kq * kNR, dst + panel_rows * kNR, 0u);
    if (transposed) {
      // B stored as [N, K]: a column's quadruple (k..k+3) is 4 adjacent bytes, so the panel is
      // a [32 columns, kq quadruples] matrix of 32-bit words to transpose: 8x8 blocks with
      // unpack/shuffle/permute where the block is full, word by word at the edges.
      int64_t q_full = 0;
      if (w == kNR) {
        for (; q_full + 8 <= kq && k0 + 4 * (q_full + 8) <= K; q_full += 8)
          for (int64_t jj = 0; jj < kNR; jj += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; ++i)
              r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(B + (j + jj + i) * K + k0 + 4 * q_full));
            transpose8x8(r);
            for (int t = 0; t < 8; ++t)
              _mm256_storeu_ps(reinterpret_cast<float*>(dst + (q_full + t) * kNR + jj), r[t]);
          }
      }
      for (int64_t jj = 0; jj < kNR; ++jj) {
        const int8_t* col = B + (j + jj) * K + k0;
        for (int64_t q = q_full; q < kq; ++q) {
          uint32_t v = 0;
          if (jj < w) {
            if (k0 + 4 * q + 4 <= K) {
              std::memcpy(&v, col + 4 * q, 4);
            } else {
              for (int64_t t = 0; k0 + 4 * q + t < K; ++t)
                v |= uint32_t(uint8_t(col[4 * q + t])) << (8 * t);
            }
          }
          dst[q * kNR + jj] = v;
        }
      }
      continue;
    }
    // Full panel and four rows in range: interleave 4 rows x 32 bytes into 32 quadruples
    // with byte/word unpacks (the scalar loop below handles the edges).
    int64_t q = 0;
    if (w == kNR) {
      for (; q < kq && k0 + 4 * q + 3 < K; ++q) {
        const int8_t* r = B + (k0 + 4 * q) * N + j;
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + N));
        const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 2 * N));
        const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 3 * N));
        const __m256i ab_lo = _mm256_unpacklo_epi8(a, b), ab_hi = _mm256_unpackhi_epi8(a, b);
        const __m256i cd_lo = _mm256_unpacklo_epi8(c, d), cd_hi = _mm256_unpackhi_epi8(c, d);
        // Per 128-bit lane: columns 0-3, 4-7, 8-11, 12-15 of that lane's 16.
        const __m256i q0 = _mm256_unpacklo_epi16(ab_lo, cd_lo), q1 = _mm256_unpackhi_epi16(ab_lo, cd_lo);
        const __m256i q2 = _mm256_unpacklo_epi16(ab_hi, cd_hi), q3 = _mm256_unpackhi_epi16(ab_hi, cd_hi);
        __m256i* out = reinterpret_cast<__m256i*>(dst + q * kNR);
        _mm256_storeu_si256(out + 0, _mm256_permute2x128_si256(q0, q1, 0x20));  // columns 0-7
        _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(q2, q3, 0x20));  // 8-15
        _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(q0, q1, 0x31));  // 16-23
        _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(q2, q3, 0x31));  // 24-31
      }
    }
    for (; q < kq; ++q)
      for (int64_t jj = 0; jj < kNR; ++jj) {
        uint32_t v = 0;
        if (jj < w)
          for (int64_t t = 0; t < 4; ++t) {
            const int64_t k = k0 + 4 * q + t;
            if (k < K) v |= uint32_t(uint8_t(B[k * N + j + jj])) << (8 * t);
          }
        dst[q * kNR + jj] = v;
      }
  }
}

}  // namespace
}  // namespace kiln::cpu
