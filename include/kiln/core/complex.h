#pragma once
// The C++ types of kiln's complex dtypes and a dispatch macro over them. Kept apart from
// dtype.h so that only the complex kernels pay for <complex>.
#include <complex>

#include "kiln/core/dtype.h"
#include "kiln/core/scalar.h"

namespace kiln {

template <>
struct CppTypeToDType<std::complex<float>> {
  static constexpr DType value = DType::C64;
};
template <>
struct CppTypeToDType<std::complex<double>> {
  static constexpr DType value = DType::C128;
};

template <typename T> struct IsComplex : std::false_type {};
template <typename T> struct IsComplex<std::complex<T>> : std::true_type {};
template <typename T> inline constexpr bool is_complex_v = IsComplex<T>::value;

// A Scalar's value as a complex number of part type R.
template <typename R>
std::complex<R> scalar_to_complex(const Scalar& s) {
  return {R(s.real()), R(s.imag())};
}

}  // namespace kiln

// KILN_DISPATCH_COMPLEX(dtype, "opname", [&]<typename C>() { ... }) instantiates the body for
// std::complex<float> (complex64) or std::complex<double> (complex128).
#define KILN_DISPATCH_COMPLEX(DTYPE, NAME, ...)                                             \
  [&] {                                                                                     \
    switch (DTYPE) {                                                                        \
      KILN_DTYPE_CASE(C64, std::complex<float>, __VA_ARGS__)                                \
      KILN_DTYPE_CASE(C128, std::complex<double>, __VA_ARGS__)                              \
      default:                                                                              \
        break;                                                                              \
    }                                                                                       \
    KILN_THROW(::kiln::NotImplementedError, NAME, ": expected a complex dtype, got ", (DTYPE)); \
  }()
