// bfloat16 GEMM with AVX-512 BF16 (compiler flags set in CMakeLists.txt), laid out as the
// float32 kernel (gemm_f32_blocked.inc, decision 0015) with K taken two at a time: B is packed
// per 1024 x 256 block into panels of 32 columns holding (k, k+1) pairs side by side (per
// thread, no barrier), A is read in place as pairs (its 8 rows of one block, 16 KiB, stay in
// L1), and vdpbf16ps adds a[k] * b[k] + a[k+1] * b[k+1] into 16 float32 lanes per
// instruction, 8 x 32 tiles. An odd K is padded with a zero pair member (A's rows are then
// copied, so the pad never reads past a row).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gemm_bf16.h"
#include "gemm_f32.h"  // gemm_thread_grid
#include "gemm_pack_buffer.h"
#include "pack_bf16_pairs.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kMR = 8, kNR = 32;
constexpr int64_t kKC = 1024;  // k values per block (512 pairs)
constexpr int64_t kNC = 256;   // a block: 512 pairs x 256 columns x 4 bytes = 512 KiB

// C[0:mr, 0:nr] (=|+=) A[0:MR, 0:2 kp] (row stride a_rs elements, read as pairs) * (B panel)
// over kp pairs. Rows of A at and beyond mr must still be readable (the caller pads them).
inline void microkernel(int64_t kp, const uint16_t* __restrict a, int64_t a_rs,
                        const uint32_t* __restrict b, float* c, int64_t c_rs, int64_t mr,
                        int64_t nr, bool accumulate) {
  __m512 acc[kMR][2];
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t r = 0; r < mr; ++r) {  // fetch the C tile while the products run
    __builtin_prefetch(c + r * c_rs, 1, 3);
    __builtin_prefetch(c + r * c_rs + kNR - 1, 1, 3);
  }
  for (int64_t q = 0; q < kp; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(int(load_pair(a + r * a_rs + 2 * q)));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
    b += kNR;
  }
  if (mr == kMR && nr == kNR) {
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      float* row = c + r * c_rs;
      if (accumulate) {
        _mm512_storeu_ps(row, _mm512_add_ps(acc[r][0], _mm512_loadu_ps(row)));
        _mm512_storeu_ps(row + 16, _mm512_add_ps(acc[r][1], _mm512_loadu_ps(row + 16)));
      } else {
        _mm512_storeu_ps(row, acc[r][0]);
        _mm512_storeu_ps(row + 16, acc[r][1]);
      }
    }
    return;
  }
  alignas(64) float tile[kMR * kNR];
  for (int r = 0; r < kMR; ++r) {
    _mm512_storeu_ps(tile + r * kNR, acc[r][0]);
    _mm512_storeu_ps(tile + r * kNR + 16, acc[r][1]);
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t j = 0; j < nr; ++j)
      c[r * c_rs + j] = accumulate ? c[r * c_rs + j] + tile[r * kNR + j] : tile[r * kNR + j];
}

// A[i:i+h, k0:k0+kc] -> rows of 2 kp elements (row stride 2 kp; an odd kc gets a zero
// element), rows h..rows-1 zero.
void copy_a_pairs(const uint16_t* A, int64_t a_rs, int64_t a_cs, int64_t i, int64_t h,
                 int64_t rows, int64_t k0, int64_t kc, uint16_t* out) {
  const int64_t width = 2 * ((kc + 1) / 2);
  for (int64_t r = 0; r < h; ++r) {
    const uint16_t* src = A + (i + r) * a_rs + k0 * a_cs;
    uint16_t* dst = out + r * width;
    if (a_cs == 1) std::memcpy(dst, src, size_t(kc) * sizeof(uint16_t));
    else
      for (int64_t k = 0; k < kc; ++k) dst[k] = src[k * a_cs];
    if (width > kc) dst[kc] = 0;
  }
  for (int64_t r = h; r < rows; ++r) std::fill(out + r * width, out + (r + 1) * width, uint16_t(0));
}

// The part of C in row tiles [tile_begin, tile_end) and panels [p_begin, p_end), with this
// thread's own packed B blocks (as in gemm_f32_blocked.inc).
void blocked_part(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs,
                  int64_t a_cs, const uint16_t* B, int64_t b_rs, int64_t b_cs, float* C,
                  int64_t c_rs, int64_t tile_begin, int64_t tile_end, int64_t p_begin,
                  int64_t p_end) {
  if (tile_begin >= tile_end || p_begin >= p_end) return;
  constexpr int64_t kBlockPanels = kNC / kNR;
  thread_local std::vector<uint32_t> packed_b;
  thread_local std::vector<uint16_t> a_rows;
  const int64_t kp_max = (std::min(kKC, K) + 1) / 2;
  const size_t b_size = size_t(kp_max * std::min(p_end - p_begin, kBlockPanels) * kNR);
  if (a_rows.size() < size_t(kMR * 2 * kp_max)) a_rows.resize(size_t(kMR * 2 * kp_max));
  uint32_t* const pb = aligned_buffer(packed_b, b_size);
  for (int64_t jp = p_begin; jp < p_end; jp += kBlockPanels) {
    const int64_t j0 = jp * kNR;
    const int64_t nc = std::min(std::min(p_end - jp, kBlockPanels) * kNR, N - j0);
    const int64_t np = (nc + kNR - 1) / kNR;
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = std::min(kKC, K - k0), kp = (kc + 1) / 2;
      const bool accumulate = k0 > 0;
      // A in place needs contiguous rows and whole pairs (an odd block would read past a row).
      const bool a_in_place = a_cs == 1 && kc % 2 == 0;
      pack_b_pairs(B, b_rs, b_cs, K, k0, kc, j0, nc, kp, pb);
      for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
        const int64_t i = tile * kMR, mr = std::min(kMR, M - i);
        const uint16_t* a = A + i * a_rs + k0;
        int64_t lda = a_rs;
        if (!a_in_place || mr < kMR) {
          copy_a_pairs(A, a_rs, a_cs, i, mr, kMR, k0, kc, a_rows.data());
          a = a_rows.data();
          lda = 2 * kp;
        }
        for (int64_t p = 0; p < np; ++p)
          microkernel(kp, a, lda, pb + p * kp * kNR, C + i * c_rs + j0 + p * kNR, c_rs, mr,
                      std::min(kNR, nc - p * kNR), accumulate);
      }
    }
  }
}

}  // namespace

void gemm_bf16_avx512bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs,
                          int64_t a_cs, const uint16_t* B, int64_t b_rs, int64_t b_cs, float* C,
                          int64_t c_rs) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * c_rs, C + i * c_rs + N, 0.0f);
    return;
  }
  const int64_t row_tiles = (M + kMR - 1) / kMR, panels = (N + kNR - 1) / kNR;
  const bool parallel = M * N * K >= (int64_t(1) << 18) && omp_get_max_threads() > 1;
  parallel_region(parallel, [&] {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const auto [tr, tp] = gemm_thread_grid(row_tiles, panels, threads, kMR, kNC / kNR,
                                              K * N * 2);
    const int64_t r = t / tp, c = t % tp;
    blocked_part(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, row_tiles * r / tr,
                 row_tiles * (r + 1) / tr, panels * c / tp, panels * (c + 1) / tp);
  });
}

// GCC 12 reports the placeholder register inside _mm512_reduce_add_ps (`__Y = __Y`) as
// uninitialized when it inlines differently; the values are all defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// _mm512_reduce_add_ps's extract intrinsics trip GCC 12's maybe-uninitialized analysis.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace {
// Four accumulators hide vdpbf16ps's latency; the tail is a masked load (zeros add 0).
struct DotBf16Acc {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(),
         acc3 = _mm512_setzero_ps();
  static __m512bh pairs(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
  void step128(const uint16_t* a, const uint16_t* b) {
    acc0 = _mm512_dpbf16_ps(acc0, pairs(a), pairs(b));
    acc1 = _mm512_dpbf16_ps(acc1, pairs(a + 32), pairs(b + 32));
    acc2 = _mm512_dpbf16_ps(acc2, pairs(a + 64), pairs(b + 64));
    acc3 = _mm512_dpbf16_ps(acc3, pairs(a + 96), pairs(b + 96));
  }
  float finish(const uint16_t* a, const uint16_t* b, int64_t i, int64_t n) {
    for (; i + 32 <= n; i += 32) acc0 = _mm512_dpbf16_ps(acc0, pairs(a + i), pairs(b + i));
    if (i < n) {
      const __mmask32 m = __mmask32((uint64_t(1) << (n - i)) - 1);
      acc1 = _mm512_dpbf16_ps(acc1, (__m512bh)_mm512_maskz_loadu_epi16(m, a + i),
                              (__m512bh)_mm512_maskz_loadu_epi16(m, b + i));
    }
    return _mm512_reduce_add_ps(
        _mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
  }
};

inline float dot_bf16_body(const uint16_t* a, const uint16_t* b, int64_t n) {
  DotBf16Acc acc;
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) acc.step128(a + i, b + i);
  return acc.finish(a, b, i, n);
}

// Each step of 128 values also prefetches into L2 the 256 bytes kDotAhead values further
// along the weight stream: in b, then past its end at the start of `next` (the weight row
// dotted after this one; null for none). One weight row streamed at a time reached 24 GB/s of
// a 36-38 GB/s read on one AMX Xeon ([1, 4096] x [4096, 4096]^T, two threads), 8 KiB ahead
// into L1 34-35 GB/s there (decision 0116). On a second AMX Xeon (31 GB/s read) that form
// gave 19-25 GB/s; into L2 (the hint) with two loops, so that no step chooses its address,
// 28-29 GB/s in this build (30-32 in one whose code landed elsewhere), into L1 with two
// loops 28-30 (decision 0130).
constexpr int64_t kDotAhead = 4096;
inline void prefetch256_l2(const uint16_t* p) {
  for (int q = 0; q < 4; ++q)
    _mm_prefetch(reinterpret_cast<const char*>(p + 32 * q), _MM_HINT_T1);
}
inline float dot_bf16_prefetching(const uint16_t* a, const uint16_t* b, int64_t n,
                                  const uint16_t* next) {
  DotBf16Acc acc;
  // Steps whose prefetch lies in b, then the rest (prefetching in next where there is one).
  const int64_t steps = n / 128, in_b = std::max<int64_t>(0, (n - kDotAhead) / 128);
  const uint16_t* p = b + kDotAhead;
  int64_t s = 0;
  for (; s < in_b; ++s, p += 128) {
    prefetch256_l2(p);
    acc.step128(a + s * 128, b + s * 128);
  }
  if (next) {
    p = next + (s * 128 + kDotAhead - n);
    for (; s < steps; ++s, p += 128) {
      prefetch256_l2(p);
      acc.step128(a + s * 128, b + s * 128);
    }
  }
  for (; s < steps; ++s) acc.step128(a + s * 128, b + s * 128);
  return acc.finish(a, b, steps * 128, n);
}
}  // namespace

float dot_bf16_avx512bf16(const uint16_t* a, const uint16_t* b, int64_t n) {
  return dot_bf16_body(a, b, n);
}

void dot_rows_bf16_avx512bf16(const uint16_t* a, const uint16_t* w, int64_t w_rs, int64_t rows,
                              int64_t n, float* out) {
  for (int64_t j = 0; j < rows; ++j)
    out[j] = dot_bf16_prefetching(a, w + j * w_rs, n, j + 1 < rows ? w + (j + 1) * w_rs : nullptr);
}

namespace {
// A rows x C tile of dot products (vec_math.h, VecDotTileBf16): 32 values of each weight row
// loaded once per step for all R activation rows, the tail a masked load (zeros add 0).
template <int R, int C>
void dot_tile(const uint16_t* a, int64_t a_rs, const uint16_t* w, int64_t w_rs, int64_t n,
              float* out, int64_t out_rs) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  // The next tile's weight rows (C rows on) at the same place, prefetched: four rows streamed
  // at a time without it kept too few reads in flight ([8, 4096] x [4096, 4096]^T: 19.5 GB/s
  // of a 36 GB/s read on the AMX Xeon; decision 0116). Integer arithmetic: past the last
  // tile the addresses lie beyond the weight, which a prefetch may name.
  const uintptr_t next = reinterpret_cast<uintptr_t>(w) + uintptr_t(C * w_rs) * 2;
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    for (int c = 0; c < C; ++c)
      __builtin_prefetch(reinterpret_cast<const void*>(next + uintptr_t(c * w_rs + k) * 2), 0, 3);
    __m512bh wv[C];
    for (int c = 0; c < C; ++c) wv[c] = (__m512bh)_mm512_loadu_si512(w + c * w_rs + k);
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_loadu_si512(a + r * a_rs + k);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], av, wv[c]);
    }
  }
  if (k < n) {
    const __mmask32 m = __mmask32((uint64_t(1) << (n - k)) - 1);
    __m512bh wv[C];
    for (int c = 0; c < C; ++c) wv[c] = (__m512bh)_mm512_maskz_loadu_epi16(m, w + c * w_rs + k);
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_maskz_loadu_epi16(m, a + r * a_rs + k);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], av, wv[c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) out[r * out_rs + c] = _mm512_reduce_add_ps(acc[r][c]);
}
}  // namespace

void dot_tile_bf16_avx512bf16(const uint16_t* a, int64_t a_rs, int rows, const uint16_t* w,
                              int64_t w_rs, int cols, int64_t n, float* out, int64_t out_rs) {
  using Fn = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, int64_t, float*,
                      int64_t);
  // 7 or 8 rows take at most 3 weight rows (24 accumulators; vec_math.h's dot_tile_cols).
  static constexpr Fn kTiles[8][4] = {
      {dot_tile<1, 1>, dot_tile<1, 2>, dot_tile<1, 3>, dot_tile<1, 4>},
      {dot_tile<2, 1>, dot_tile<2, 2>, dot_tile<2, 3>, dot_tile<2, 4>},
      {dot_tile<3, 1>, dot_tile<3, 2>, dot_tile<3, 3>, dot_tile<3, 4>},
      {dot_tile<4, 1>, dot_tile<4, 2>, dot_tile<4, 3>, dot_tile<4, 4>},
      {dot_tile<5, 1>, dot_tile<5, 2>, dot_tile<5, 3>, dot_tile<5, 4>},
      {dot_tile<6, 1>, dot_tile<6, 2>, dot_tile<6, 3>, dot_tile<6, 4>},
      {dot_tile<7, 1>, dot_tile<7, 2>, dot_tile<7, 3>, nullptr},
      {dot_tile<8, 1>, dot_tile<8, 2>, dot_tile<8, 3>, nullptr}};
  kTiles[rows - 1][cols - 1](a, a_rs, w, w_rs, n, out, out_rs);
}
#pragma GCC diagnostic pop

}  // namespace kiln::cpu
