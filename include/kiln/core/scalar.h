#pragma once
// Scalar: a Python-like number (bool, integer, float or complex) passed to ops. Its category (not
// its width) takes part in type promotion, as in PyTorch.
#include <cstdint>
#include <iosfwd>
#include <type_traits>

#include "kiln/core/dtype.h"

namespace kiln {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float, Complex };

  Scalar() : kind_(Kind::Int), i_(0) {}
  Scalar(bool b) : kind_(Kind::Bool), i_(b) {}  // NOLINT: numbers convert implicitly
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(int64_t(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(double(v)) {}  // NOLINT
  Scalar(Half v) : kind_(Kind::Float), d_(float(v)) {}      // NOLINT
  Scalar(BFloat16 v) : kind_(Kind::Float), d_(float(v)) {}  // NOLINT
  // A complex number (re + im i): a distinct constructor, as std::complex is not included here.
  static Scalar complex(double re, double im) {
    Scalar s(re);
    s.kind_ = Kind::Complex;
    s.im_ = im;
    return s;
  }

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_complex() const { return kind_ == Kind::Complex; }

  // A complex value converts to a real type only without an imaginary part (torch's "value
  // cannot be converted ... without overflow"): real kernels never drop one silently.
  double to_double() const {
    if (kind_ == Kind::Complex) check_real();
    return kind_ == Kind::Float || kind_ == Kind::Complex ? d_ : double(i_);
  }
  int64_t to_int() const { return is_float_kind() ? int64_t(to_double()) : i_; }
  bool to_bool() const {
    return kind_ == Kind::Complex ? d_ != 0.0 || im_ != 0.0 : kind_ == Kind::Float ? d_ != 0.0 : i_ != 0;
  }
  // Real and imaginary parts (imag 0 for the real kinds).
  double real() const { return is_float_kind() ? d_ : double(i_); }
  double imag() const { return kind_ == Kind::Complex ? im_ : 0.0; }
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return T(to_int());
    else return T(to_double());
  }

  // The dtype a 0-d tensor made from this scalar gets: bool, int64, the default float or its
  // complex type.
  DType default_dtype() const {
    return kind_ == Kind::Bool      ? DType::Bool
           : kind_ == Kind::Int     ? DType::I64
           : kind_ == Kind::Complex ? complex_dtype_for(default_float_dtype())
                                    : default_float_dtype();
  }

 private:
  bool is_float_kind() const { return kind_ == Kind::Float || kind_ == Kind::Complex; }
  void check_real() const;  // throws TypeError when im_ != 0
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
  double im_ = 0.0;
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace kiln
