#pragma once
// DType: the element types of kiln tensors, their sizes and names, and PyTorch's type
// promotion rules.
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "kiln/core/error.h"
#include "kiln/core/half.h"

namespace kiln {

// The order is the promotion lattice order inside each category (bool < ints < floats <
// complex). complex64 / complex128 hold std::complex<float / double> (kiln/core/complex.h);
// only the kernels registered for them accept them (kComplexDTypes in the registry).
enum class DType : uint8_t { Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64, C64, C128 };
inline constexpr int kNumDTypes = 12;

size_t element_size(DType t);
std::string_view dtype_name(DType t);  // "float32", "bfloat16", ... as PyTorch names them
DType dtype_from_name(std::string_view name);  // accepts "float32", "f32", "float", ...
std::ostream& operator<<(std::ostream& os, DType t);

inline bool is_floating(DType t) { return t >= DType::F16 && t <= DType::F64; }
inline bool is_complex(DType t) { return t == DType::C64 || t == DType::C128; }
// The real type of a complex type's parts (complex64 -> float32), else t itself.
inline DType real_part_dtype(DType t) {
  return t == DType::C64 ? DType::F32 : t == DType::C128 ? DType::F64 : t;
}
// The complex type with parts of t's precision (float64 -> complex128, every other real type
// -> complex64, as torch without complex32), complex types themselves unchanged.
inline DType complex_dtype_for(DType t) {
  return is_complex(t) ? t : t == DType::F64 ? DType::C128 : DType::C64;
}
inline bool is_integral(DType t, bool include_bool = false) {
  return (t >= DType::U8 && t <= DType::I64) || (include_bool && t == DType::Bool);
}
inline bool is_signed(DType t) { return t != DType::Bool && t != DType::U8; }

// Category used by scalar/0-d promotion: bool < integral < floating < complex.
enum class DTypeCategory : uint8_t { Bool = 0, Integral = 1, Floating = 2, Complex = 3 };
inline DTypeCategory category(DType t) {
  return t == DType::Bool  ? DTypeCategory::Bool
         : is_complex(t)   ? DTypeCategory::Complex
         : is_floating(t)  ? DTypeCategory::Floating
                           : DTypeCategory::Integral;
}

// promote_types(a, b): the smallest type both a and b convert to without losing range, as
// torch.promote_types (u8 with i8 gives i16; f16 with bf16 gives f32).
DType promote_types(DType a, DType b);

// Default dtype for floating factories and Python floats (PyTorch: float32).
DType default_float_dtype();
void set_default_float_dtype(DType t);

template <typename T>
struct CppTypeToDType;
#define KILN_DTYPE_MAP(cpp, dt) \
  template <>                   \
  struct CppTypeToDType<cpp> {  \
    static constexpr DType value = DType::dt; \
  };
KILN_DTYPE_MAP(bool, Bool)
KILN_DTYPE_MAP(uint8_t, U8)
KILN_DTYPE_MAP(int8_t, I8)
KILN_DTYPE_MAP(int16_t, I16)
KILN_DTYPE_MAP(int32_t, I32)
KILN_DTYPE_MAP(int64_t, I64)
KILN_DTYPE_MAP(Half, F16)
KILN_DTYPE_MAP(BFloat16, BF16)
KILN_DTYPE_MAP(float, F32)
KILN_DTYPE_MAP(double, F64)
#undef KILN_DTYPE_MAP
template <typename T>
inline constexpr DType dtype_of = CppTypeToDType<T>::value;

// The type arithmetic on T is done in: float for the 16-bit floats, T otherwise.
template <typename T> struct OpMath { using type = T; };
template <> struct OpMath<Half> { using type = float; };
template <> struct OpMath<BFloat16> { using type = float; };
template <typename T> using opmath_t = typename OpMath<T>::type;

}  // namespace kiln

// KILN_DISPATCH_ALL(dtype, "opname", [&]<typename scalar_t>() { ... }) instantiates the body
// for the C++ type of dtype. The _FLOAT / _INTEGRAL variants reject the other categories.
#define KILN_DTYPE_CASE(DT, CPP, ...) \
  case ::kiln::DType::DT:             \
    return __VA_ARGS__.template operator()<CPP>();

#define KILN_DISPATCH_FLOAT_CASES(...)                  \
  KILN_DTYPE_CASE(F32, float, __VA_ARGS__)              \
  KILN_DTYPE_CASE(F64, double, __VA_ARGS__)             \
  KILN_DTYPE_CASE(F16, ::kiln::Half, __VA_ARGS__)       \
  KILN_DTYPE_CASE(BF16, ::kiln::BFloat16, __VA_ARGS__)
#define KILN_DISPATCH_INT_CASES(...)                    \
  KILN_DTYPE_CASE(U8, uint8_t, __VA_ARGS__)             \
  KILN_DTYPE_CASE(I8, int8_t, __VA_ARGS__)              \
  KILN_DTYPE_CASE(I16, int16_t, __VA_ARGS__)            \
  KILN_DTYPE_CASE(I32, int32_t, __VA_ARGS__)            \
  KILN_DTYPE_CASE(I64, int64_t, __VA_ARGS__)

#define KILN_DISPATCH_ALL(DTYPE, NAME, ...)                                  \
  [&] {                                                                      \
    switch (DTYPE) {                                                         \
      KILN_DISPATCH_FLOAT_CASES(__VA_ARGS__)                                 \
      KILN_DISPATCH_INT_CASES(__VA_ARGS__)                                   \
      KILN_DTYPE_CASE(Bool, bool, __VA_ARGS__)                               \
      default: /* complex dtypes: their own kernels (kiln/core/complex.h) */  \
        break;                                                               \
    }                                                                        \
    KILN_THROW(::kiln::NotImplementedError, NAME, ": unsupported dtype ", (DTYPE));    \
  }()
#define KILN_DISPATCH_FLOAT(DTYPE, NAME, ...)                                        \
  [&] {                                                                              \
    switch (DTYPE) {                                                                 \
      KILN_DISPATCH_FLOAT_CASES(__VA_ARGS__)                                         \
      default:                                                                       \
        break;                                                                       \
    }                                                                                \
    KILN_THROW(::kiln::NotImplementedError, NAME, ": expected a floating-point dtype, got ", (DTYPE)); \
  }()
#define KILN_DISPATCH_INTEGRAL(DTYPE, NAME, ...)                                       \
  [&] {                                                                                \
    switch (DTYPE) {                                                                   \
      KILN_DISPATCH_INT_CASES(__VA_ARGS__)                                             \
      KILN_DTYPE_CASE(Bool, bool, __VA_ARGS__)                                         \
      default:                                                                         \
        break;                                                                         \
    }                                                                                  \
    KILN_THROW(::kiln::NotImplementedError, NAME, ": expected an integral or bool dtype, got ", (DTYPE)); \
  }()
