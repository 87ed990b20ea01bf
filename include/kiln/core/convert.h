#pragma once
// Element conversion with defined results for every input (C++ leaves float->int overflow
// and NaN undefined; kiln matches what PyTorch gives on x86: the minimum of int32/int64,
// and narrower ints wrap through int64).
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kiln/core/half.h"

namespace kiln {

template <typename To, typename From>
inline To convert_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>)
      return float(v) != 0.0f;
    else
      return v != From(0);
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return convert_value<To, float>(float(v));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    if constexpr (std::is_same_v<From, double>)
      return To(float(v));  // NOTE: double rounding; matches PyTorch's double->half path
    else
      return To(float(v));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // Truncate toward zero through int64 with defined out-of-range behaviour.
    constexpr double lo = -9223372036854775808.0, hi = 9223372036854775808.0;
    int64_t wide;
    if (!(double(v) >= lo && double(v) < hi))
      wide = std::numeric_limits<int64_t>::min();
    else
      wide = int64_t(v);
    if constexpr (std::is_same_v<To, int32_t>) {
      if (wide < INT32_MIN || wide > INT32_MAX) return INT32_MIN;
      return int32_t(wide);
    } else {
      return static_cast<To>(static_cast<std::make_unsigned_t<int64_t>>(wide));
    }
  } else if constexpr (std::is_integral_v<To> && std::is_integral_v<From>) {
    // Two's-complement wrap (well-defined in C++20).
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace kiln
