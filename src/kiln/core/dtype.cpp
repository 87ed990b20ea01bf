#include "kiln/core/dtype.h"

#include <array>
#include <atomic>
#include <ostream>

namespace kiln {

size_t element_size(DType t) {
  static constexpr std::array<size_t, kNumDTypes> sizes = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};
  return sizes[size_t(t)];
}

std::string_view dtype_name(DType t) {
  static constexpr std::array<std::string_view, kNumDTypes> names = {
      "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
      "float64", "complex64", "complex128"};
  return names[size_t(t)];
}

DType dtype_from_name(std::string_view n) {
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias aliases[] = {
      {"bool", DType::Bool},     {"uint8", DType::U8},     {"u8", DType::U8},
      {"int8", DType::I8},       {"i8", DType::I8},        {"int16", DType::I16},
      {"short", DType::I16},     {"i16", DType::I16},      {"int32", DType::I32},
      {"int", DType::I32},       {"i32", DType::I32},      {"int64", DType::I64},
      {"long", DType::I64},      {"i64", DType::I64},      {"float16", DType::F16},
      {"half", DType::F16},      {"f16", DType::F16},      {"bfloat16", DType::BF16},
      {"bf16", DType::BF16},     {"float32", DType::F32},  {"float", DType::F32},
      {"f32", DType::F32},       {"float64", DType::F64},  {"double", DType::F64},
      {"f64", DType::F64},      {"complex64", DType::C64}, {"cfloat", DType::C64},
      {"c64", DType::C64},       {"complex128", DType::C128}, {"cdouble", DType::C128},
      {"c128", DType::C128}};
  for (const auto& a : aliases)
    if (a.name == n) return a.dtype;
  KILN_THROW(TypeError, "unknown dtype name '", n,
             "'; expected one of bool, uint8, int8, int16, int32, int64, float16, bfloat16, "
             "float32, float64, complex64, complex128");
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << "kiln." << dtype_name(t); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // With a complex type: the complex type whose parts hold both parts' real types
  // (complex64 with float64 gives complex128, as torch.promote_types).
  if (is_complex(a) || is_complex(b))
    return complex_dtype_for(promote_types(real_part_dtype(a), real_part_dtype(b)));
  // Mixed 16-bit floats have no common 16-bit type.
  if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16))
    return DType::F32;
  // u8 is the only unsigned type: with a signed int it needs the next wider signed type
  // that can hold 0..255, which is at least i16.
  if (a == DType::U8 && (b == DType::I8)) return DType::I16;
  if (b == DType::U8 && (a == DType::I8)) return DType::I16;
  // Otherwise the lattice order of the enum is the promotion order.
  return a > b ? a : b;
}

namespace {
std::atomic<DType> g_default_float{DType::F32};
}
DType default_float_dtype() { return g_default_float.load(std::memory_order_relaxed); }
void set_default_float_dtype(DType t) {
  KILN_CHECK(is_floating(t), TypeError, "set_default_dtype: expected a floating dtype, got ", t);
  g_default_float.store(t);
}

}  // namespace kiln
