// Philox 4x32-10, eight blocks per step (compiler flags set in CMakeLists.txt). Each of the
// four counter words lives in the low half of a 64-bit lane, so vpmuludq gives a round's
// full 32 x 32 -> 64-bit products directly: the high word by a shift, the low word is the
// product's low half as it stands (the upper halves of the lanes are never read), and the
// two three-way xors of a round are one vpternlogq each. A scalar block costs about 60
// dependent operations; this step about 70 for eight blocks.
#include <immintrin.h>

#include "philox_blocks.h"

namespace kiln::cpu {
namespace {

// The constants of Salmon et al. (kiln/runtime/philox.cpp).
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
constexpr int kRounds = 10;

inline __m512i xor3(__m512i a, __m512i b, __m512i c) {
  return _mm512_ternarylogic_epi64(a, b, c, 0x96);
}

void philox_blocks_avx512_impl(uint64_t key, uint64_t counter, int64_t blocks, uint32_t* out) {
  __m512i k0[kRounds], k1[kRounds];  // the key schedule: key + r * Weyl per round r
  uint32_t a = uint32_t(key), b = uint32_t(key >> 32);
  for (int r = 0; r < kRounds; ++r, a += kWeyl0, b += kWeyl1) {
    k0[r] = _mm512_set1_epi64(int64_t(a));
    k1[r] = _mm512_set1_epi64(int64_t(b));
  }
  const __m512i m0 = _mm512_set1_epi64(kMul0), m1 = _mm512_set1_epi64(kMul1);
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  // Blocks 0-3 and 4-7 of the step as (words 0-1, words 2-3) pairs, in memory order.
  const __m512i first_half = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
  const __m512i second_half = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  for (int64_t j = 0; j < blocks; j += kPhiloxBlocksStep) {
    const __m512i ctr = _mm512_add_epi64(_mm512_set1_epi64(int64_t(counter + uint64_t(j))), lane);
    __m512i c0 = ctr, c1 = _mm512_srli_epi64(ctr, 32);
    __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
    for (int r = 0; r < kRounds; ++r) {
      const __m512i p0 = _mm512_mul_epu32(c0, m0), p1 = _mm512_mul_epu32(c2, m1);
      // (c0, c1, c2, c3) <- (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
      c0 = xor3(_mm512_srli_epi64(p1, 32), c1, k0[r]);
      c2 = xor3(_mm512_srli_epi64(p0, 32), c3, k1[r]);
      c1 = p1;
      c3 = p0;
    }
    // Low words only: words 0 | 1 << 32 and 2 | 3 << 32 of each block, interleaved by block.
    const __m512i w01 = _mm512_mask_blend_epi32(0xAAAA, c0, _mm512_slli_epi64(c1, 32));
    const __m512i w23 = _mm512_mask_blend_epi32(0xAAAA, c2, _mm512_slli_epi64(c3, 32));
    _mm512_storeu_si512(out + 4 * j, _mm512_permutex2var_epi64(w01, first_half, w23));
    _mm512_storeu_si512(out + 4 * j + 16, _mm512_permutex2var_epi64(w01, second_half, w23));
  }
}

}  // namespace

PhiloxBlocksFn philox_blocks_avx512() { return philox_blocks_avx512_impl; }

}  // namespace kiln::cpu
