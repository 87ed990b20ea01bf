// Philox 4x32-10, eight blocks per step as two groups of four (compiler flags set in
// CMakeLists.txt): the AVX-512 variant's scheme (philox_blocks_avx512.cpp) on ymm registers.
// Each counter word lives in the low half of a 64-bit lane, so vpmuludq gives a round's full
// 32 x 32 -> 64-bit products; AVX2 has no three-way xor, so each is two vpxor. The two groups
// are independent chains, which the core overlaps.
#include <immintrin.h>

#include "philox_blocks.h"

namespace kiln::cpu {
namespace {

// The constants of Salmon et al. (kiln/runtime/philox.cpp).
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
constexpr int kRounds = 10;

struct Group {
  __m256i c0, c1, c2, c3;  // words 0-3 of four blocks, one block per 64-bit lane
};

inline Group start(uint64_t first_counter) {
  const __m256i ctr = _mm256_add_epi64(_mm256_set1_epi64x(int64_t(first_counter)),
                                       _mm256_set_epi64x(3, 2, 1, 0));  // wraps mod 2^64
  return {ctr, _mm256_srli_epi64(ctr, 32), _mm256_setzero_si256(), _mm256_setzero_si256()};
}

inline void philox_round(Group& g, __m256i m0, __m256i m1, __m256i k0, __m256i k1) {
  const __m256i p0 = _mm256_mul_epu32(g.c0, m0), p1 = _mm256_mul_epu32(g.c2, m1);
  // (c0, c1, c2, c3) <- (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
  g.c0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), g.c1), k0);
  g.c2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), g.c3), k1);
  g.c1 = p1;
  g.c3 = p0;
}

// The low words of the four blocks, in memory order: out[4 b + w] = word w of block b.
inline void store(const Group& g, uint32_t* out) {
  const __m256i w01 = _mm256_blend_epi32(g.c0, _mm256_slli_epi64(g.c1, 32), 0xAA);
  const __m256i w23 = _mm256_blend_epi32(g.c2, _mm256_slli_epi64(g.c3, 32), 0xAA);
  const __m256i even = _mm256_unpacklo_epi64(w01, w23);  // blocks 0, 2
  const __m256i odd = _mm256_unpackhi_epi64(w01, w23);   // blocks 1, 3
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(even, odd, 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8),
                      _mm256_permute2x128_si256(even, odd, 0x31));
}

void philox_blocks_avx2_impl(uint64_t key, uint64_t counter, int64_t blocks, uint32_t* out) {
  __m256i k0[kRounds], k1[kRounds];  // the key schedule: key + r * Weyl per round r
  uint32_t a = uint32_t(key), b = uint32_t(key >> 32);
  for (int r = 0; r < kRounds; ++r, a += kWeyl0, b += kWeyl1) {
    k0[r] = _mm256_set1_epi64x(int64_t(a));
    k1[r] = _mm256_set1_epi64x(int64_t(b));
  }
  const __m256i m0 = _mm256_set1_epi64x(kMul0), m1 = _mm256_set1_epi64x(kMul1);
  for (int64_t j = 0; j < blocks; j += kPhiloxBlocksStep) {
    Group lo = start(counter + uint64_t(j)), hi = start(counter + uint64_t(j) + 4);
    for (int r = 0; r < kRounds; ++r) {
      philox_round(lo, m0, m1, k0[r], k1[r]);
      philox_round(hi, m0, m1, k0[r], k1[r]);
    }
    store(lo, out + 4 * j);
    store(hi, out + 4 * j + 16);
  }
}

}  // namespace

PhiloxBlocksFn philox_blocks_avx2() { return philox_blocks_avx2_impl; }

}  // namespace kiln::cpu
