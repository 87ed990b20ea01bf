// Philox 4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011). Written from the paper's description; the tests check Random123's known-answer
// vectors. The 64-bit key is the seed (low word first); the 128-bit counter is
// (counter_lo, counter_hi), each split low word first.
#include <cstdint>

#include "kiln/runtime/generator.h"

namespace kiln {

namespace {
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

inline void mul_hi_lo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

inline void philox_round(std::array<uint32_t, 4>& c, uint32_t k0, uint32_t k1) {
  uint32_t hi0, lo0, hi1, lo1;
  mul_hi_lo(kMul0, c[0], hi0, lo0);
  mul_hi_lo(kMul1, c[2], hi1, lo1);
  c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
}
}  // namespace

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_lo, uint64_t counter_hi) {
  std::array<uint32_t, 4> c = {uint32_t(counter_lo), uint32_t(counter_lo >> 32),
                               uint32_t(counter_hi), uint32_t(counter_hi >> 32)};
  uint32_t k0 = uint32_t(key);
  uint32_t k1 = uint32_t(key >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {  // the key schedule bumps the key between rounds
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    philox_round(c, k0, k1);
  }
  return c;
}

}  // namespace kiln
