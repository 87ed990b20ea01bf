#pragma once
// Scalar math shared by the CPU elementwise kernels. Integer arithmetic wraps (two's
// complement) instead of invoking undefined behaviour, as PyTorch's kernels do in practice;
// float math follows PyTorch's definitions (NaN propagation in max/min, Python-style
// floor division and remainder).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kiln/core/dtype.h"

namespace kiln::cpu {

template <typename T>
inline T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
  else
    return a + b;
}
template <typename T>
inline T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return T(std::make_unsigned_t<T>(a) - std::make_unsigned_t<T>(b));
  else
    return a - b;
}
template <typename T>
inline T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return T(U(a) * U(b));
  } else {
    return a * b;
  }
}
template <typename T>
inline T wrap_neg(T a) {
  if constexpr (std::is_integral_v<T>) return wrap_sub(T(0), a);
  else return -a;
}

[[noreturn]] void throw_zero_division();

// Integer division truncating toward zero; INT_MIN / -1 wraps.
template <typename T>
inline T int_div_trunc(T a, T b) {
  if (b == 0) throw_zero_division();
  if constexpr (std::is_signed_v<T>)
    if (b == -1) return wrap_neg(a);
  return T(a / b);
}
template <typename T>
inline T int_div_floor(T a, T b) {
  if (b == 0) throw_zero_division();
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return wrap_neg(a);
    T q = T(a / b);
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return T(a / b);
  }
}
template <typename T>
inline T int_mod(T a, T b) {  // C fmod semantics (sign of a)
  if (b == 0) throw_zero_division();
  if constexpr (std::is_signed_v<T>)
    if (b == -1) return 0;
  return T(a % b);
}
template <typename T>
inline T int_remainder(T a, T b) {  // Python semantics (sign of b)
  T r = int_mod(a, b);
  if constexpr (std::is_signed_v<T>)
    if (r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
  return r;
}

template <typename F>
inline F float_div_floor(F a, F b) {
  if (b == 0) return a / b;  // inf or nan, as PyTorch
  F mod = std::fmod(a, b);
  F div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= F(1);
  F floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > F(0.5)) floordiv += F(1);
  } else {
    floordiv = std::copysign(F(0), a / b);
  }
  return floordiv;
}
template <typename F>
inline F float_remainder(F a, F b) {
  F r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

template <typename T>
inline T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2) ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exp = T(exp >> 1);
  }
  return result;
}

template <typename F>
inline F nan_max(F a, F b) {
  if constexpr (std::is_floating_point_v<F>)
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  return a > b ? a : b;
}
template <typename F>
inline F nan_min(F a, F b) {
  if constexpr (std::is_floating_point_v<F>)
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  return a < b ? a : b;
}

}  // namespace kiln::cpu
