#pragma once
// Scalar: a Python-like number (bool, integer or float) passed to ops. Its category (not
// its width) takes part in type promotion, as in PyTorch.
#include <cstdint>
#include <iosfwd>
#include <type_traits>

#include "kiln/core/dtype.h"

namespace kiln {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };

  Scalar() : kind_(Kind::Int), i_(0) {}
  Scalar(bool b) : kind_(Kind::Bool), i_(b) {}  // NOLINT: numbers convert implicitly
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(int64_t(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(double(v)) {}  // NOLINT
  Scalar(Half v) : kind_(Kind::Float), d_(float(v)) {}      // NOLINT
  Scalar(BFloat16 v) : kind_(Kind::Float), d_(float(v)) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_floating() const { return kind_ == Kind::Float; }

  double to_double() const { return kind_ == Kind::Float ? d_ : double(i_); }
  int64_t to_int() const { return kind_ == Kind::Float ? int64_t(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return T(to_int());
    else return T(to_double());
  }

  // The dtype a 0-d tensor made from this scalar gets: bool, int64 or the default float.
  DType default_dtype() const {
    return kind_ == Kind::Bool ? DType::Bool
           : kind_ == Kind::Int ? DType::I64
                                : default_float_dtype();
  }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace kiln
