#pragma once
// 16-bit floating-point storage types. Conversions from float round to nearest even and keep
// NaN (quiet), +-Inf and subnormals exact; arithmetic happens in float.
#include <cstdint>
#include <cstring>

namespace kiln {

namespace detail {
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace detail

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a builtin float type
  operator float() const { return detail::bits_f32(uint32_t(bits) << 16); }

  static uint16_t from_float(float f) {
    uint32_t u = detail::f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // quiet NaN
    uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);  // round half to even
    return uint16_t((u + rounding_bias) >> 16);
  }
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(from_float(f)) {}  // NOLINT
  operator float() const { return to_float(bits); }

  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  static uint16_t from_float(float f);
  static float to_float(uint16_t h);
};

inline uint16_t Half::from_float(float f) {
  uint32_t u = detail::f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: Inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero) in half: value = abs / 2^-24 rounded to nearest even.
    if (abs < 0x33000000u) return uint16_t(sign);  // below half the smallest subnormal
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;  // 14..24 bits of mantissa to drop
    uint32_t result = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (result & 1u))) ++result;
    return uint16_t(sign | result);
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
}

inline float Half::to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0x1fu) {
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      out = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return detail::bits_f32(out);
}

}  // namespace kiln
