// 8-bit GEMM with AVX-512 VNNI (compiler flags set in CMakeLists.txt): the layout of
// gemm_f32_blocked.inc (decision 0015) with K taken four at a time. Each thread packs its own B
// panels (32 columns holding (k..k+3) quadruples in one int32 each, per 1024 x 256 block) and
// copies the 8 A rows of a tile into a small buffer (shifted to unsigned for a signed A,
// zero-padded to whole quadruples), which stays in L1 while the tile walks across the panels;
// vpdpbusd adds four u8 x s8 products into each of 16 int32 lanes, 8 x 32 tiles.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gemm_f32.h"  // gemm_thread_grid
#include "gemm_pack_buffer.h"
#include "gemm_s8.h"
#include "pack_s8_quads.h"
#include "vnni_accumulate.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kMR = 8, kNR = 32, kKC = 1024, kNC = 256;

// C[0:mr, 0:nr] (=|+=) (A rows as quadruples, row stride kq) * (B panel) over kq quadruples.
// col_shift (kNR values, or null) is added to every row: a signed A's correction, given on the
// last K block.
inline void microkernel(int64_t kq, const uint32_t* __restrict a, const uint32_t* __restrict b,
                        int32_t* c, int64_t ldc, int64_t mr, int64_t nr, bool accumulate,
                        const int32_t* col_shift) {
  __m512i acc[kMR][2];
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (int64_t r = 0; r < mr; ++r) {  // fetch the C tile while the products run
    __builtin_prefetch(c + r * ldc, 1, 3);
    __builtin_prefetch(c + r * ldc + kNR - 1, 1, 3);
  }
  for (int64_t k = 0; k < kq; ++k) {
    const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 16);
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      const __m512i ar = _mm512_set1_epi32(int(a[r * kq + k]));
      acc[r][0] = dpbusd_accumulate(acc[r][0], ar, b0);
      acc[r][1] = dpbusd_accumulate(acc[r][1], ar, b1);
    }
    b += kNR;
  }
  if (col_shift) {
    const __m512i s0 = _mm512_loadu_si512(col_shift), s1 = _mm512_loadu_si512(col_shift + 16);
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      acc[r][0] = _mm512_add_epi32(acc[r][0], s0);
      acc[r][1] = _mm512_add_epi32(acc[r][1], s1);
    }
  }
  if (mr == kMR && nr == kNR) {
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      int32_t* row = c + r * ldc;
      if (accumulate) {
        acc[r][0] = _mm512_add_epi32(acc[r][0], _mm512_loadu_si512(row));
        acc[r][1] = _mm512_add_epi32(acc[r][1], _mm512_loadu_si512(row + 16));
      }
      _mm512_storeu_si512(row, acc[r][0]);
      _mm512_storeu_si512(row + 16, acc[r][1]);
    }
    return;
  }
  alignas(64) int32_t tile[kMR * kNR];
  for (int r = 0; r < kMR; ++r) {
    _mm512_store_si512(tile + r * kNR, acc[r][0]);
    _mm512_store_si512(tile + r * kNR + 16, acc[r][1]);
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t j = 0; j < nr; ++j)
      c[r * ldc + j] = accumulate ? c[r * ldc + j] + tile[r * kNR + j] : tile[r * kNR + j];
}

// A[i:i+h, k0:k0+kc] -> rows of kq quadruples (row stride kq words) as unsigned bytes (a
// signed A shifted by +128 by flipping the top bit), zero-padded: the padding meets zero B
// bytes, and rows h..kMR-1 are never stored.
void copy_a_rows(const uint8_t* A, int64_t K, bool flip, int64_t i, int64_t h, int64_t k0,
                 int64_t kc, uint32_t* out) {
  const int64_t kq = (kc + 3) / 4;
  const __m512i flip_bits = _mm512_set1_epi8(flip ? char(0x80) : 0);
  for (int64_t r = 0; r < kMR; ++r) {
    uint8_t* dst = reinterpret_cast<uint8_t*>(out + r * kq);
    if (r >= h) {
      std::memset(dst, 0, size_t(4 * kq));
      continue;
    }
    const uint8_t* src = A + (i + r) * K + k0;
    int64_t k = 0;
    for (; k + 64 <= kc; k += 64)
      _mm512_storeu_si512(dst + k, _mm512_xor_si512(_mm512_loadu_si512(src + k), flip_bits));
    if (k < kc) {
      const __mmask64 m = ~__mmask64(0) >> (64 - (kc - k));
      const __m512i tail = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + k), flip_bits);
      _mm512_mask_storeu_epi8(dst + k, m, tail);
    }
    for (k = kc; k < 4 * kq; ++k) dst[k] = 0;
  }
}

void blocked(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed, const int8_t* B,
             bool b_transposed, int32_t* C);

constexpr int64_t kFewRowsMax = 16;  // from here the blocked kernel (or AMX tiles)

// Few rows (under kFewRowsMax) times a B stored as [N, K] (LLM decoding with int8 weights):
// each output is a dot product of two contiguous byte vectors, so B streams from memory once,
// in order, without packing (the blocked kernel packed it on every call: [8, 4096] x
// [11008, 4096]^T took 4.1-5.5 ms against 2.9-3.2 ms for 4 rows). vpdpbusd adds 64 u8 x s8
// products per instruction; the K tail is a masked load.
// A signed A (kFlip) is shifted to unsigned and the shift's contribution, 128 * (sum of the B
// row), taken off; that sum comes from one more vpdpbusd (ones x B) on the bytes already in
// registers, so B is still read once (a separate scalar pass over B took 4.5x PyTorch's time
// for [1, 4096] x [4096, 4096]).
// The 16 int32 lanes' wrapping sum, through memory: in the OpenMP body below, GCC 12 warns
// that the "undefined" register its own headers use in every lane-shuffling intrinsic (and in
// _mm512_reduce_add_epi32) may be used uninitialized. Once per output: no measurable cost.
inline uint32_t sum_lanes(__m512i v) {
  alignas(64) uint32_t lanes[16];
  _mm512_store_si512(lanes, v);
  uint32_t s = 0;
  for (uint32_t x : lanes) s += x;
  return s;
}

// R rows of A (1-4, row stride lda) against one B row of K bytes: row_sums[r] = the wrapping
// int32 dot product, and with kSumB *b_sum = the B row's byte sum. Two accumulators per row
// (even and odd 64-byte chunks), kept in registers by the fixed R. The loop before it (one
// chain per row, rows counted at run time, so the accumulators lived in memory) ran an
// L3-resident [4096, 4096] weight at 62-107 GB/s against 111-136 for this form (both -O3,
// one program, two threads); from DRAM the two were even within the host's noise.
// Each 128-byte step also prefetches B kFewRowsAhead bytes further on (the rows of B are
// contiguous), within the `left` bytes from b to B's end (0: no prefetch): one B row streamed
// at a time kept too few reads in flight ([8, 4096] x [11008, 4096]^T: 15 GB/s of a 35 GB/s
// read on the AMX Xeon; decision 0116).
constexpr int64_t kFewRowsAhead = 8192;
template <int R, bool kFlip, bool kSumB>
inline void dot_rows(const uint8_t* a, int64_t lda, const int8_t* b, int64_t K,
                     uint32_t* row_sums, uint32_t* b_sum, int64_t left) {
  const __m512i flip_bits = _mm512_set1_epi8(kFlip ? char(0x80) : 0);
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i acc[R][2], bsum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  int64_t k = 0;
  for (; k + 128 <= K; k += 128) {
    if (k + kFewRowsAhead + 128 <= left) {
      _mm_prefetch(reinterpret_cast<const char*>(b + k + kFewRowsAhead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + k + kFewRowsAhead + 64), _MM_HINT_T0);
    }
    const __m512i b0 = _mm512_loadu_si512(b + k), b1 = _mm512_loadu_si512(b + k + 64);
    if constexpr (kSumB) {
      bsum[0] = dpbusd_accumulate(bsum[0], ones, b0);
      bsum[1] = dpbusd_accumulate(bsum[1], ones, b1);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* ar = a + r * lda + k;
      acc[r][0] = dpbusd_accumulate(
          acc[r][0], _mm512_xor_si512(_mm512_loadu_si512(ar), flip_bits), b0);
      acc[r][1] = dpbusd_accumulate(
          acc[r][1], _mm512_xor_si512(_mm512_loadu_si512(ar + 64), flip_bits), b1);
    }
  }
  for (; k < K; k += 64) {  // at most one whole chunk and a tail, by masked loads
    const __mmask64 m = ~__mmask64(0) >> (64 - std::min<int64_t>(64, K - k));
    const __m512i bv = _mm512_maskz_loadu_epi8(m, b + k);
    if constexpr (kSumB) bsum[0] = dpbusd_accumulate(bsum[0], ones, bv);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512i av = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, a + r * lda + k), flip_bits);
      acc[r][0] = dpbusd_accumulate(acc[r][0], av, bv);  // B's zero tail cancels A's flips
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) row_sums[r] = sum_lanes(_mm512_add_epi32(acc[r][0], acc[r][1]));
  if constexpr (kSumB) *b_sum = sum_lanes(_mm512_add_epi32(bsum[0], bsum[1]));
}

template <int R, bool kFlip>
inline void dot_rows_of(bool sum_b, const uint8_t* a, int64_t K, const int8_t* b,
                        uint32_t* row_sums, uint32_t* b_sum, int64_t left) {
  if constexpr (kFlip) {
    if (sum_b) return dot_rows<R, true, true>(a, K, b, K, row_sums, b_sum, left);
  }
  dot_rows<R, kFlip, false>(a, K, b, K, row_sums, b_sum, left);
}

template <bool kFlip>
void few_rows_transposed(int64_t M, int64_t N, int64_t K, const uint8_t* A, const int8_t* B,
                         int32_t* C) {
  // Rows in groups of up to four, every group against one B row while it is in L1.
  constexpr int64_t kGroupRows = 4;
  const bool parallel = N * K >= (int64_t(1) << 16) && omp_get_max_threads() > 1;
  parallel_region(parallel, [&] {
#pragma omp for schedule(static)
    for (int64_t j = 0; j < N; ++j) {
      const int8_t* b = B + j * K;
      uint32_t shift = 0;
      for (int64_t r0 = 0; r0 < M; r0 += kGroupRows) {
        const uint8_t* a = A + r0 * K;
        const bool sum_b = kFlip && r0 == 0;  // the B row's sum, once per row
        const int64_t rows = std::min(kGroupRows, M - r0);
        uint32_t sums[kGroupRows], b_sum = 0;
        // The first group of rows streams B (prefetching ahead within B), the others find the
        // row in L1.
        const int64_t left = r0 == 0 ? (N - j) * K : 0;
        switch (rows) {
          case 1: dot_rows_of<1, kFlip>(sum_b, a, K, b, sums, &b_sum, left); break;
          case 2: dot_rows_of<2, kFlip>(sum_b, a, K, b, sums, &b_sum, left); break;
          case 3: dot_rows_of<3, kFlip>(sum_b, a, K, b, sums, &b_sum, left); break;
          default: dot_rows_of<4, kFlip>(sum_b, a, K, b, sums, &b_sum, left); break;
        }
        // Wrapping int32 arithmetic throughout, as the instruction's own sums.
        if (sum_b) shift = 128u * b_sum;
        for (int64_t r = 0; r < rows; ++r)
          C[(r0 + r) * N + j] = int32_t(sums[r] - shift);
      }
    }
  });
}

}  // namespace

void gemm_s8_avx512vnni(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                        const int8_t* B, bool b_transposed, int32_t* C) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    std::fill(C, C + M * N, 0);
    return;
  }
  if (b_transposed && M < kFewRowsMax) {
    if (a_signed) few_rows_transposed<true>(M, N, K, A, B, C);
    else few_rows_transposed<false>(M, N, K, A, B, C);
  } else {
    blocked(M, N, K, A, a_signed, B, b_transposed, C);
  }
}

namespace {

// The part of C in row tiles [tile_begin, tile_end) and panels [p_begin, p_end), with this
// thread's own packed B blocks (as in gemm_f32_blocked.inc).
void blocked_part(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed,
                  const int8_t* B, bool b_transposed, int32_t* C, int64_t tile_begin,
                  int64_t tile_end, int64_t p_begin, int64_t p_end) {
  if (tile_begin >= tile_end || p_begin >= p_end) return;
  constexpr int64_t kBlockPanels = kNC / kNR;
  thread_local std::vector<uint32_t> packed_b, a_rows;
  const int64_t kq_max = (std::min(kKC, K) + 3) / 4;
  const size_t b_size = size_t(kq_max * std::min(p_end - p_begin, kBlockPanels) * kNR);
  if (a_rows.size() < size_t(kMR * kq_max)) a_rows.resize(size_t(kMR * kq_max));
  uint32_t* const pb = aligned_buffer(packed_b, b_size);
  // A signed A is shifted to unsigned by +128: every output of column j then holds
  // 128 * (column sum of B) too. The sums are taken from this thread's packed panels (one
  // vpdpbusd of ones per packed vector, against 2 * kMR per vector in each tile) and the
  // correction, -128 * sum, is added in registers on the last K block.
  alignas(64) int32_t col_shift[kNC];
  const __m512i ones = _mm512_set1_epi8(1), minus_128 = _mm512_set1_epi32(-128);
  for (int64_t jp = p_begin; jp < p_end; jp += kBlockPanels) {
    const int64_t j0 = jp * kNR;
    const int64_t nc = std::min(std::min(p_end - jp, kBlockPanels) * kNR, N - j0);
    const int64_t np = (nc + kNR - 1) / kNR;
    __m512i sums[kBlockPanels][2];
    for (int64_t p = 0; p < np; ++p) sums[p][0] = sums[p][1] = _mm512_setzero_si512();
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = std::min(kKC, K - k0), kq = (kc + 3) / 4;
      const bool last = k0 + kKC >= K;
      pack_b_quads(B, b_transposed, N, K, k0, kc, j0, nc, kq, pb);
      for (int64_t p = 0; p < np && a_signed; ++p) {
        const uint32_t* panel = pb + p * kq * kNR;
        for (int64_t q = 0; q < kq; ++q) {
          sums[p][0] = dpbusd_accumulate(sums[p][0], ones, _mm512_loadu_si512(panel + q * kNR));
          sums[p][1] =
              dpbusd_accumulate(sums[p][1], ones, _mm512_loadu_si512(panel + q * kNR + 16));
        }
        if (last) {
          _mm512_store_si512(col_shift + p * kNR, _mm512_mullo_epi32(sums[p][0], minus_128));
          _mm512_store_si512(col_shift + p * kNR + 16, _mm512_mullo_epi32(sums[p][1], minus_128));
        }
      }
      for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
        const int64_t i = tile * kMR, mr = std::min(kMR, M - i);
        copy_a_rows(A, K, a_signed, i, mr, k0, kc, a_rows.data());
        for (int64_t p = 0; p < np; ++p)
          microkernel(kq, a_rows.data(), pb + p * kq * kNR, C + i * N + j0 + p * kNR, N, mr,
                      std::min(kNR, nc - p * kNR), k0 > 0,
                      a_signed && last ? col_shift + p * kNR : nullptr);
      }
    }
  }
}

void blocked(int64_t M, int64_t N, int64_t K, const uint8_t* A, bool a_signed, const int8_t* B,
             bool b_transposed, int32_t* C) {
  const int64_t row_tiles = (M + kMR - 1) / kMR, panels = (N + kNR - 1) / kNR;
  const bool parallel = M * N * K >= (int64_t(1) << 18) && omp_get_max_threads() > 1;
  parallel_region(parallel, [&] {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const auto [tr, tp] = gemm_thread_grid(row_tiles, panels, threads, kMR, kNC / kNR,
                                              K * N);
    const int64_t r = t / tp, c = t % tp;
    blocked_part(M, N, K, A, a_signed, B, b_transposed, C, row_tiles * r / tr,
                 row_tiles * (r + 1) / tr, panels * c / tp, panels * (c + 1) / tp);
  });
}

}  // namespace

}  // namespace kiln::cpu
