// 8-bit GEMM for AVX2 (and AVX-512 without VNNI; compiler flags set in CMakeLists.txt). Both
// operands are widened to int16 (A zero- or sign-extended as its type says, B sign-extended)
// and vpmaddwd multiplies pairs of int16 and adds each pair into one int32 lane. Every product
// and pair sum is exact (|a * b| <= 255 * 128), unlike vpmaddubsw, whose int16 pair sums
// saturate, so no shift or correction is needed for a signed A.
//   few rows x B stored as [N, K] (LLM decoding): each output a dot product, B streamed once;
//   otherwise the layout of gemm_s8_avx512vnni.cpp with K taken two at a time: per thread, B
//   packed per 1024 x 256 block into panels of 16 columns holding (k, k+1) int16 pairs in one
//   int32 each, A's 6 rows of a tile widened into a small buffer, 6 x 16 register tiles.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gemm_f32.h"  // gemm_thread_grid
#include "gemm_pack_buffer.h"
#include "gemm_s8.h"
#include "transpose_f32_avx2.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kMR = 6, kNR = 16, kKC = 1024, kNC = 256;

// 16 bytes as 16 int16 (sign- or zero-extended).
inline __m256i widen16(const void* p, bool is_signed) {
  const __m128i v = _mm_loadu_si128(static_cast<const __m128i*>(p));
  return is_signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
}

inline int32_t horizontal_sum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// A's rows [i, i + h) widened to int16 over columns [k0, k0 + kc), each row padded with zeros
// to 2 * kp values (kp int16 pairs; row stride kp words); rows h..rows-1 all zero.
void widen_a_rows(const uint8_t* A, int64_t K, bool a_signed, int64_t i, int64_t h,
                  int64_t rows, int64_t k0, int64_t kc, int64_t kp, int16_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    int16_t* dst = out + r * 2 * kp;
    if (r >= h) {
      std::memset(dst, 0, size_t(4 * kp));
      continue;
    }
    const uint8_t* src = A + (i + r) * K + k0;
    int64_t k = 0;
    for (; k + 16 <= kc; k += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), widen16(src + k, a_signed));
    for (; k < kc; ++k) dst[k] = a_signed ? int16_t(int8_t(src[k])) : int16_t(src[k]);
    for (; k < 2 * kp; ++k) dst[k] = 0;
  }
}

// Few rows (under kFewRowsMax) times a B stored as [N, K]: per output, 32 products a step
// from the widened A rows (in a buffer, widened once and zero-padded to whole steps) and 32
// bytes of B's row, in two accumulators per row; rows in groups of up to four, every group of
// one B row while that row is in L1, so B streams from memory once. The group's row count is a
// template argument so that the accumulators stay in registers (indexed by a run-time count
// they were kept on the stack: 17 GB/s for [1, 4096] x [4096, 4096]). The K tail goes through
// a zero-padded copy of the row's end. Writes c[r * ldc] for r < kRows.
template <int kRows>
void dot_rows(const int8_t* b, int64_t K, const int16_t* a16, int64_t a_stride, int32_t* c,
              int64_t ldc) {
  const int64_t full = K / 32 * 32;
  __m256i acc0[kRows], acc1[kRows];
  for (int r = 0; r < kRows; ++r) acc0[r] = acc1[r] = _mm256_setzero_si256();
  auto step = [&](const int8_t* bytes, int64_t k) {
    const __m256i b0 = widen16(bytes, true), b1 = widen16(bytes + 16, true);
    for (int r = 0; r < kRows; ++r) {
      const auto* a = reinterpret_cast<const __m256i*>(a16 + r * a_stride + k);
      acc0[r] = _mm256_add_epi32(acc0[r], _mm256_madd_epi16(_mm256_loadu_si256(a), b0));
      acc1[r] = _mm256_add_epi32(acc1[r], _mm256_madd_epi16(_mm256_loadu_si256(a + 1), b1));
    }
  };
  for (int64_t k = 0; k < full; k += 32) step(b + k, k);
  if (full < K) {
    alignas(32) int8_t last[32] = {};
    std::memcpy(last, b + full, size_t(K - full));
    step(last, full);
  }
  for (int r = 0; r < kRows; ++r) c[r * ldc] = horizontal_sum(_mm256_add_epi32(acc0[r], acc1[r]));
}

// One A row (a16, widened) times kCols consecutive B rows (b, b + K, ...): kCols memory streams
// in flight where a B row at a time left the loop waiting on memory (LLM decoding, M = 1).
// Writes c[j] for j < kCols; the sums are exact, so they equal dot_rows<1>'s.
template <int kCols>
void dot_cols(const int8_t* b, int64_t K, const int16_t* a16, int32_t* c) {
  const int64_t full = K / 32 * 32;
  __m256i acc0[kCols], acc1[kCols];
  for (int j = 0; j < kCols; ++j) acc0[j] = acc1[j] = _mm256_setzero_si256();
  auto step = [&](const int8_t* bytes, int64_t ldb, int64_t k) {
    const auto* a = reinterpret_cast<const __m256i*>(a16 + k);
    const __m256i a0 = _mm256_loadu_si256(a), a1 = _mm256_loadu_si256(a + 1);
    for (int j = 0; j < kCols; ++j) {
      const __m256i b0 = widen16(bytes + j * ldb, true), b1 = widen16(bytes + j * ldb + 16, true);
      acc0[j] = _mm256_add_epi32(acc0[j], _mm256_madd_epi16(a0, b0));
      acc1[j] = _mm256_add_epi32(acc1[j], _mm256_madd_epi16(a1, b1));
    }
  };
  for (int64_t k = 0; k < full; k += 32) step(b + k, K, k);
  if (full < K) {
    alignas(32) int8_t last[kCols][32] = {};
    for (int j = 0; j < kCols; ++j) std::memcpy(last[j], b + j * K + full, size_t(K - full));
    step(&last[0][0], 32, full);
  }
  for (int j = 0; j < kCols; ++j) c[j] = horizontal_sum(_mm256_add_epi32(acc0[j], acc1[j]));
}

constexpr int64_t kFewRowsMax = 16;  // from here the blocked kernel

void few_rows_transposed(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                         const int8_t* B, int32_t* C) {
  const int64_t kp = (K + 31) / 32 * 16;  // int16 pairs per widened row: whole 32-byte steps
  const int64_t a_stride = 2 * kp;
  std::vector<int16_t> a16(size_t(M * a_stride));
  widen_a_rows(A, K, a_signed, 0, M, M, 0, K, kp, a16.data());
  const bool parallel = N * K >= (int64_t(1) << 16) && omp_get_max_threads() > 1;
  if (M == 1) {
    // int_mm of [1, K] x W.t(), N and K from {4096, 11008}, weight bytes per second, three
    // alternating runs each (two threads, Zen 3): 30.7-33.3, 26.9-27.9, 26.7-27.9 GB/s a B
    // row at a time -> 31.5-38.1, 30.1-30.7, 33.0-33.7 four rows at a time.
    const int64_t groups = N / 4;
    parallel_region(parallel, [&] {
#pragma omp for schedule(static)
      for (int64_t q = 0; q < groups; ++q) dot_cols<4>(B + 4 * q * K, K, a16.data(), C + 4 * q);
    });
    for (int64_t j = 4 * groups; j < N; ++j)
      dot_rows<1>(B + j * K, K, a16.data(), a_stride, C + j, N);
    return;
  }
  parallel_region(parallel, [&] {
#pragma omp for schedule(static)
    for (int64_t j = 0; j < N; ++j) {
      const int8_t* b = B + j * K;
      for (int64_t r0 = 0; r0 < M; r0 += 4) {
        const int16_t* a = a16.data() + r0 * a_stride;
        int32_t* c = C + r0 * N + j;
        switch (std::min<int64_t>(4, M - r0)) {
          case 1: dot_rows<1>(b, K, a, a_stride, c, N); break;
          case 2: dot_rows<2>(b, K, a, a_stride, c, N); break;
          case 3: dot_rows<3>(b, K, a, a_stride, c, N); break;
          default: dot_rows<4>(b, K, a, a_stride, c, N); break;
        }
      }
    }
  });
}

// acc0 += pairs(broadcast(*a_word) * b0), acc1 += the same with b1. Inline asm because GCC 12,
// given the intrinsics, loaded all six rows' broadcasts first and, out of the 16 registers,
// kept 8 of the 12 accumulators on the stack (a load and a store each per step: 0.4x of the
// vpmaddwd peak); here a row needs 2 temporaries, so 12 + 2 (B) + 2 fit.
inline void madd_row(__m256i& acc0, __m256i& acc1, const int32_t* a_word, __m256i b0,
                     __m256i b1) {
  __m256i t0, t1;
  asm("vpbroadcastd %[a], %[t0]\n\t"
      "vpmaddwd %[b1], %[t0], %[t1]\n\t"
      "vpmaddwd %[b0], %[t0], %[t0]\n\t"
      "vpaddd %[t0], %[c0], %[c0]\n\t"
      "vpaddd %[t1], %[c1], %[c1]"
      : [c0] "+x"(acc0), [c1] "+x"(acc1), [t0] "=&x"(t0), [t1] "=&x"(t1)
      : [a] "m"(*a_word), [b0] "x"(b0), [b1] "x"(b1));
}

// C[0:mr, 0:nr] (=|+=) (A rows as int16 pairs, row stride kp words) * (B panel), kp pairs.
inline void microkernel(int64_t kp, const int32_t* __restrict a, const int32_t* __restrict b,
                        int32_t* c, int64_t ldc, int64_t mr, int64_t nr, bool accumulate) {
  static_assert(kMR == 6, "the accumulators below are named, one pair per row");
  // Named variables, not an array: GCC kept an array of accumulators in memory.
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t q = 0; q < kp; ++q) {
    const __m256i b0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 8));
    madd_row(c00, c01, a + q, b0, b1);
    madd_row(c10, c11, a + kp + q, b0, b1);
    madd_row(c20, c21, a + 2 * kp + q, b0, b1);
    madd_row(c30, c31, a + 3 * kp + q, b0, b1);
    madd_row(c40, c41, a + 4 * kp + q, b0, b1);
    madd_row(c50, c51, a + 5 * kp + q, b0, b1);
    b += kNR;
  }
  __m256i acc[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (mr == kMR && nr == kNR) {
#pragma GCC unroll 6
    for (int r = 0; r < kMR; ++r) {
      auto* row = reinterpret_cast<__m256i*>(c + r * ldc);
      if (accumulate) {
        acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_loadu_si256(row));
        acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_loadu_si256(row + 1));
      }
      _mm256_storeu_si256(row, acc[r][0]);
      _mm256_storeu_si256(row + 1, acc[r][1]);
    }
    return;
  }
  alignas(32) int32_t tile[kMR * kNR];
  for (int r = 0; r < kMR; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(tile + r * kNR), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tile + r * kNR + 8), acc[r][1]);
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t j = 0; j < nr; ++j)
      c[r * ldc + j] = accumulate ? c[r * ldc + j] + tile[r * kNR + j] : tile[r * kNR + j];
}

// One int32 word of a packed panel: B[k][j] in the low int16, B[k + 1][j] in the high one
// (zero beyond K).
inline int32_t pair_word(int8_t lo, int8_t hi) {
  return int32_t(uint32_t(uint16_t(int16_t(lo))) | (uint32_t(uint16_t(int16_t(hi))) << 16));
}

// B[k0:k0+kc, j0:j0+nc] -> panels of kNR columns, each kp pair words x kNR, zero-padded.
void pack_b(const int8_t* B, bool transposed, int64_t N, int64_t K, int64_t k0, int64_t kc,
            int64_t j0, int64_t nc, int32_t* out) {
  const int64_t panels = (nc + kNR - 1) / kNR, kp = (kc + 1) / 2;
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t j = j0 + p * kNR, w = std::min(kNR, j0 + nc - j);
    int32_t* dst = out + p * kp * kNR;
    int64_t q = 0;
    if (transposed && w == kNR) {
      // B stored as [N, K]: column j's pairs are adjacent bytes; 8 columns' 16 bytes widen to
      // 8 words each, and an 8 x 8 transpose puts them into panel rows.
      for (; k0 + 2 * q + 16 <= K && 2 * q + 16 <= kc; q += 8)
        for (int64_t jj = 0; jj < kNR; jj += 8) {
          __m256 r[8];
          for (int t = 0; t < 8; ++t)
            r[t] = _mm256_castsi256_ps(widen16(B + (j + jj + t) * K + k0 + 2 * q, true));
          transpose8x8(r);
          for (int t = 0; t < 8; ++t)
            _mm256_store_ps(reinterpret_cast<float*>(dst + (q + t) * kNR + jj), r[t]);
        }
    } else if (!transposed && w == kNR) {
      // Row-major B: rows k and k + 1, 16 columns each, widened and interleaved.
      for (; 2 * q + 1 < kc; ++q) {
        const int8_t* row = B + (k0 + 2 * q) * N + j;
        const __m256i lo = widen16(row, true), hi = widen16(row + N, true);
        const __m256i a = _mm256_unpacklo_epi16(lo, hi), b = _mm256_unpackhi_epi16(lo, hi);
        _mm256_store_si256(reinterpret_cast<__m256i*>(dst + q * kNR),
                           _mm256_permute2x128_si256(a, b, 0x20));
        _mm256_store_si256(reinterpret_cast<__m256i*>(dst + q * kNR + 8),
                           _mm256_permute2x128_si256(a, b, 0x31));
      }
    }
    for (; q < kp; ++q)
      for (int64_t jj = 0; jj < kNR; ++jj) {
        int8_t lo = 0, hi = 0;
        if (jj < w) {
          const int64_t k = k0 + 2 * q;
          lo = transposed ? B[(j + jj) * K + k] : B[k * N + j + jj];
          if (2 * q + 1 < kc) hi = transposed ? B[(j + jj) * K + k + 1] : B[(k + 1) * N + j + jj];
        }
        dst[q * kNR + jj] = pair_word(lo, hi);
      }
  }
}

void blocked_part(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                  const int8_t* B, bool b_transposed, int32_t* C, int64_t tile_begin,
                  int64_t tile_end, int64_t p_begin, int64_t p_end) {
  if (tile_begin >= tile_end || p_begin >= p_end) return;
  constexpr int64_t kBlockPanels = kNC / kNR;
  thread_local std::vector<int32_t> packed_b, a_rows;
  const int64_t kp_max = (std::min(kKC, K) + 1) / 2;
  const size_t b_size = size_t(kp_max * std::min(p_end - p_begin, kBlockPanels) * kNR);
  if (a_rows.size() < size_t(kMR * kp_max)) a_rows.resize(size_t(kMR * kp_max));
  int32_t* const pb = aligned_buffer(packed_b, b_size);
  for (int64_t jp = p_begin; jp < p_end; jp += kBlockPanels) {
    const int64_t j0 = jp * kNR;
    const int64_t nc = std::min(std::min(p_end - jp, kBlockPanels) * kNR, N - j0);
    const int64_t np = (nc + kNR - 1) / kNR;
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = std::min(kKC, K - k0), kp = (kc + 1) / 2;
      pack_b(B, b_transposed, N, K, k0, kc, j0, nc, pb);
      for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
        const int64_t i = tile * kMR, mr = std::min(kMR, M - i);
        widen_a_rows(A, K, a_signed, i, mr, kMR, k0, kc, kp,
                     reinterpret_cast<int16_t*>(a_rows.data()));
        for (int64_t p = 0; p < np; ++p)
          microkernel(kp, a_rows.data(), pb + p * kp * kNR, C + i * N + j0 + p * kNR, N, mr,
                      std::min(kNR, nc - p * kNR), k0 > 0);
      }
    }
  }
}

}  // namespace

void gemm_s8_avx2(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                  const int8_t* B, bool b_transposed, int32_t* C) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    std::fill(C, C + M * N, 0);
    return;
  }
  if (b_transposed && M < kFewRowsMax) {
    few_rows_transposed(M, N, K, A, a_signed, B, C);
    return;
  }
  const int64_t row_tiles = (M + kMR - 1) / kMR, panels = (N + kNR - 1) / kNR;
  const bool parallel = M * N * K >= (int64_t(1) << 18) && omp_get_max_threads() > 1;
  parallel_region(parallel, [&] {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const auto [tr, tp] = gemm_thread_grid(row_tiles, panels, threads, kMR, kNC / kNR, K * N);
    const int64_t r = t / tp, c = t % tp;
    blocked_part(M, N, K, A, a_signed, B, b_transposed, C, row_tiles * r / tr,
                 row_tiles * (r + 1) / tr, panels * c / tp, panels * (c + 1) / tp);
  });
}

}  // namespace kiln::cpu
