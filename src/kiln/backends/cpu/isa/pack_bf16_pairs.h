#pragma once
// Packing of bfloat16 operands into (k, k+1) pairs, shared by the AVX-512 BF16 kernel
// (gemm_bf16_avx512bf16.cpp: vdpbf16ps takes one pair per float32 lane) and the AMX kernel
// (gemm_amx_body.inc: a tdpbf16ps B tile is 16 pair rows of 16 columns, i.e. half of a panel
// row here, loaded with a 128-byte stride). Needs AVX-512 BW; internal linkage on purpose, as in
// gemm_pack_buffer.h: each ISA translation unit compiles its own copy with its own flags.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "transpose_f32_avx512.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kPairPanel = 32;  // columns per packed B panel

inline uint32_t pair(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

inline uint32_t load_pair(const uint16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// B[k0:k0+kc, j0:j0+nc] -> panels of kPairPanel columns of (k, k+1) pairs, zero-padded: panel
// p starts at out + p * panel_rows * kPairPanel, and its pair rows from (kc + 1) / 2 up to
// panel_rows (the AMX kernel's whole tiles of 16 pair rows) are zero.
void pack_b_pairs(const uint16_t* B, int64_t b_rs, int64_t b_cs, int64_t K, int64_t k0,
                  int64_t kc, int64_t j0, int64_t nc, int64_t panel_rows, uint32_t* out) {
  constexpr int64_t kNR = kPairPanel;
  const int64_t panels = (nc + kNR - 1) / kNR, kp = (kc + 1) / 2;
  // Lane i of the two results: (row0[i], row1[i]) for columns 0-15, then 16-31.
  alignas(64) static const uint16_t lo_idx[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5,
                                                  37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42,
                                                  11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static const uint16_t hi_idx[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21,
                                                  53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58,
                                                  27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i lo = _mm512_load_si512(lo_idx), hi = _mm512_load_si512(hi_idx);
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t j = j0 + p * kNR, w = std::min(kNR, j0 + nc - j);
    uint32_t* dst = out + p * panel_rows * kNR;
    int64_t q0 = 0;  // pairs done by a vector path
    if (b_cs == 1 && w == kNR) {  // row-major B: interleave two rows of 32 columns
      for (; q0 < kc / 2; ++q0) {
        const uint16_t* r0 = B + (k0 + 2 * q0) * b_rs + j;
        const __m512i x0 = _mm512_loadu_si512(r0), x1 = _mm512_loadu_si512(r0 + b_rs);
        _mm512_storeu_si512(dst + q0 * kNR, _mm512_permutex2var_epi16(x0, lo, x1));
        _mm512_storeu_si512(dst + q0 * kNR + 16, _mm512_permutex2var_epi16(x0, hi, x1));
      }
    } else if (b_rs == 1 && b_cs % 2 == 0 && k0 % 2 == 0) {
      // A transposed weight (W [N, K] row-major): its rows, read as pairs, are the panel's
      // columns, so 16 x 16 transposes of 32-bit pairs build the panel.
      const int64_t full = kc / 2;
      for (int64_t g = 0; g < kNR; g += 16) {
        const int cols = int(std::clamp<int64_t>(w - g, 0, 16));
        for (int64_t q = 0; q < full; q += 16) {
          const int qq = int(std::min<int64_t>(16, full - q));
          transpose16_f32(reinterpret_cast<const float*>(B + (j + g) * b_cs + k0 + 2 * q),
                          b_cs / 2, cols, qq, reinterpret_cast<float*>(dst + q * kNR + g), kNR,
                          qq, 16);
        }
      }
      q0 = full;
    }
    for (int64_t q = q0; q < kp; ++q) {
      const int64_t k = k0 + 2 * q;
      const uint16_t* r0 = B + k * b_rs + j * b_cs;
      const uint16_t* r1 = k + 1 < K ? r0 + b_rs : nullptr;
      for (int64_t jj = 0; jj < w; ++jj)
        dst[q * kNR + jj] = pair(r0[jj * b_cs], r1 ? r1[jj * b_cs] : uint16_t(0));
      for (int64_t jj = w; jj < kNR; ++jj) dst[q * kNR + jj] = 0;
    }
    std::fill(dst + kp * kNR, dst + panel_rows * kNR, 0u);
  }
}

}  // namespace
}  // namespace kiln::cpu
