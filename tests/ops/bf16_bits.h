#pragma once
// bfloat16 bit patterns for the tests that check results bit for bit, written out
// independently of kiln's converters.
#include <cstdint>
#include <cstring>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln::test {

// float32 -> bfloat16 bits: round to nearest even; a NaN keeps its sign and high payload bits
// with the quiet bit set.
inline uint16_t round_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The raw bits of a bfloat16 tensor's elements in logical order.
inline std::vector<uint16_t> bf16_bits_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint16_t> b(size_t(c.numel()));
  std::memcpy(b.data(), c.raw_data(), b.size() * 2);
  return b;
}

}  // namespace kiln::test
