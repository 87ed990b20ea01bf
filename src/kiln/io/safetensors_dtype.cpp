#include "kiln/io/safetensors_dtype.h"

#include <array>

namespace kiln::io::detail {

namespace {

struct Entry {
  DType dtype;
  std::string_view name;
  int rank;  // index in the reference Dtype enum (BOOL F4 F6_E2M3 F6_E3M2 U8 I8 F8_E5M2
             // F8_E4M3 F8_E8M0 F8_E4M3FNUZ F8_E5M2FNUZ I16 U16 F16 BF16 I32 U32 F32 C64
             // F64 I64 U64)
};

// complex128 has no safetensors name.
constexpr std::array<Entry, kNumDTypes - 1> kEntries{{
    {DType::Bool, "BOOL", 0},
    {DType::U8, "U8", 4},
    {DType::I8, "I8", 5},
    {DType::I16, "I16", 11},
    {DType::F16, "F16", 13},
    {DType::BF16, "BF16", 14},
    {DType::I32, "I32", 15},
    {DType::F32, "F32", 17},
    {DType::C64, "C64", 18},
    {DType::F64, "F64", 19},
    {DType::I64, "I64", 20},
}};

constexpr std::array<std::string_view, 11> kForeign{
    "F4",          "F6_E2M3",     "F6_E3M2", "F8_E5M2", "F8_E4M3", "F8_E8M0",
    "F8_E4M3FNUZ", "F8_E5M2FNUZ", "U16",     "U32",     "U64"};

const Entry& entry(DType t) {
  for (const Entry& e : kEntries)
    if (e.dtype == t) return e;
  KILN_THROW(TypeError, "safetensors: dtype ", t, " has no safetensors name");
}

}  // namespace

std::string_view safetensors_dtype_name(DType t) { return entry(t).name; }

int safetensors_dtype_rank(DType t) { return entry(t).rank; }

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const Entry& e : kEntries)
    if (e.name == name) return e.dtype;
  return std::nullopt;
}

bool is_foreign_safetensors_dtype(std::string_view name) {
  for (std::string_view f : kForeign)
    if (f == name) return true;
  return false;
}

}  // namespace kiln::io::detail
