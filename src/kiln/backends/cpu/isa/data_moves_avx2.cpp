// Data moves with AVX2 (compiler flags set in CMakeLists.txt): 16 x 16 tile transposes by
// shuffles, reversed rows, checked row gathers. The AVX-512 level uses them too: a tile is
// too small for wider registers to pay, and reversals and gathers are bound by memory.
#include <immintrin.h>

#include "data_moves.h"

namespace kiln::cpu {
namespace {

// GCC 12 reports the intentionally undefined placeholder inside its shuffle intrinsics
// (`__Y = __Y`) as uninitialized once they are inlined; the values are all defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The classic 8 x 8 transpose of 4-byte lanes: pairs interleaved, then quads, then the two
// 128-bit halves exchanged.
inline void transpose8_b32(const uint32_t* src, int64_t ss, uint32_t* dst, int64_t ds) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(src + i * ss));
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + c * ds),
                     _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + (c + 4) * ds),
                     _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
  }
}

// Four 8 x 8 blocks: each source and destination row segment is 64 bytes, a whole line.
void transpose16_b32(const uint32_t* src, int64_t ss, uint32_t* dst, int64_t ds) {
  for (int bi = 0; bi < 16; bi += 8)
    for (int bj = 0; bj < 16; bj += 8)
      transpose8_b32(src + bi * ss + bj, ss, dst + bj * ds + bi, ds);
}

// 16 rows of 16 two-byte values, one register each: 16-, 32- and 64-bit interleaves inside
// the 128-bit halves, then the halves exchanged. After the 16-bit step s1[2p] holds elements
// {0..3 | 8..11} of rows 2p, 2p + 1 side by side, s1[2p + 1] elements {4..7 | 12..15}; after
// the 32-bit step each 64-bit unit is one element of four rows; after the 64-bit step each
// half is one element of eight rows.
void transpose16_b16(const uint16_t* src, int64_t ss, uint16_t* dst, int64_t ds) {
  __m256i a[16], s1[16], s2[16], s3[2][8];
  for (int i = 0; i < 16; ++i)
    a[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * ss));
  for (int p = 0; p < 8; ++p) {
    s1[2 * p] = _mm256_unpacklo_epi16(a[2 * p], a[2 * p + 1]);
    s1[2 * p + 1] = _mm256_unpackhi_epi16(a[2 * p], a[2 * p + 1]);
  }
  for (int q = 0; q < 4; ++q) {  // rows 4q .. 4q + 3
    s2[4 * q] = _mm256_unpacklo_epi32(s1[4 * q], s1[4 * q + 2]);          // elements 0, 1 | 8, 9
    s2[4 * q + 1] = _mm256_unpackhi_epi32(s1[4 * q], s1[4 * q + 2]);      // 2, 3 | 10, 11
    s2[4 * q + 2] = _mm256_unpacklo_epi32(s1[4 * q + 1], s1[4 * q + 3]);  // 4, 5 | 12, 13
    s2[4 * q + 3] = _mm256_unpackhi_epi32(s1[4 * q + 1], s1[4 * q + 3]);  // 6, 7 | 14, 15
  }
  for (int h = 0; h < 2; ++h)  // rows 8h .. 8h + 7
    for (int m = 0; m < 4; ++m) {
      s3[h][2 * m] = _mm256_unpacklo_epi64(s2[8 * h + m], s2[8 * h + 4 + m]);      // 2m | 2m + 8
      // 2m + 1 | 2m + 9
      s3[h][2 * m + 1] = _mm256_unpackhi_epi64(s2[8 * h + m], s2[8 * h + 4 + m]);
    }
  for (int c = 0; c < 8; ++c) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c * ds),
                        _mm256_permute2x128_si256(s3[0][c], s3[1][c], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (c + 8) * ds),
                        _mm256_permute2x128_si256(s3[0][c], s3[1][c], 0x31));
  }
}

#pragma GCC diagnostic pop

}  // namespace

namespace {
// Plain loops: with this unit's flags GCC reverses whole vectors with lane permutes (the
// baseline build moved 4 bytes at a time: flip(-1) of [2048, 512] float32 took 160 us
// against PyTorch's 74).
template <typename W>
void reverse(const W* src_last, W* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dst[j] = src_last[-j];
}

// Four indices per step: both bounds tested with two signed compares before the hardware
// gather reads through them; the tail one at a time.
template <typename W>
bool gather(const W* row, const int64_t* idx, int64_t n, int64_t size, W* dst) {
  const __m256i last = _mm256_set1_epi64x(size - 1), zero = _mm256_setzero_si256();
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + j));
    const __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi64(v, last), _mm256_cmpgt_epi64(zero, v));
    if (!_mm256_testz_si256(bad, bad)) return false;
    if constexpr (sizeof(W) == 4) {
      const __m128i g = _mm256_i64gather_epi32(reinterpret_cast<const int*>(row), v, 4);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), g);
    } else {
      const __m256i g = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(row), v, 8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), g);
    }
  }
  for (; j < n; ++j) {
    if (idx[j] < 0 || idx[j] >= size) return false;
    dst[j] = row[idx[j]];
  }
  return true;
}
// 32-byte moves, the last one ending at the run's end (overlapping the one before when the
// length is not a multiple of 32): a run of 112 bytes is four loads and four stores, where
// the baseline unit's memcpy of a compile-time 64 bytes took four 16-byte moves per half.
void move_runs(const char* src, int64_t src_step, char* dst, int64_t dst_step, int64_t runs,
               int64_t bytes) {
  const int64_t last = bytes - 32;
  for (int64_t i = 0; i < runs; ++i, src += src_step, dst += dst_step) {
    for (int64_t o = 0; o < last; o += 32)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + o),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + o)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + last),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + last)));
  }
}
}  // namespace

const DataMoves& data_moves_avx2() {
  static const DataMoves table{transpose16_b32,   transpose16_b16,   reverse<uint64_t>,
                               reverse<uint32_t>, reverse<uint16_t>, gather<uint64_t>,
                               gather<uint32_t>,  move_runs};
  return table;
}

}  // namespace kiln::cpu
