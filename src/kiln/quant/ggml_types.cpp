#include "kiln/quant/ggml_types.h"

#include "kiln/core/error.h"

namespace kiln::quant {

namespace {

// Sizes as ggml defines the block structs (QK_K = 256 values per super-block).
constexpr GGMLTypeInfo kTypes[] = {
    {GGMLType::F32, "F32", 1, 4, false},      {GGMLType::F16, "F16", 1, 2, false},
    {GGMLType::Q4_0, "Q4_0", 32, 18, true},   {GGMLType::Q4_1, "Q4_1", 32, 20, true},
    {GGMLType::Q5_0, "Q5_0", 32, 22, true},   {GGMLType::Q5_1, "Q5_1", 32, 24, true},
    {GGMLType::Q8_0, "Q8_0", 32, 34, true},   {GGMLType::Q8_1, "Q8_1", 32, 36, true},
    {GGMLType::Q2_K, "Q2_K", 256, 84, true},  {GGMLType::Q3_K, "Q3_K", 256, 110, true},
    {GGMLType::Q4_K, "Q4_K", 256, 144, true}, {GGMLType::Q5_K, "Q5_K", 256, 176, true},
    {GGMLType::Q6_K, "Q6_K", 256, 210, true}, {GGMLType::Q8_K, "Q8_K", 256, 292, true},
    {GGMLType::I8, "I8", 1, 1, false},        {GGMLType::I16, "I16", 1, 2, false},
    {GGMLType::I32, "I32", 1, 4, false},      {GGMLType::I64, "I64", 1, 8, false},
    {GGMLType::F64, "F64", 1, 8, false},      {GGMLType::BF16, "BF16", 1, 2, false},
};

}  // namespace

const GGMLTypeInfo* ggml_type_info(uint32_t type) {
  for (const GGMLTypeInfo& t : kTypes)
    if (uint32_t(t.type) == type) return &t;
  return nullptr;
}

const GGMLTypeInfo& ggml_type_info(GGMLType type) {
  const GGMLTypeInfo* t = ggml_type_info(uint32_t(type));
  KILN_CHECK(t != nullptr, Error, "ggml type ", uint32_t(type), " is not in kiln's table");
  return *t;
}

std::string ggml_type_name(uint32_t type) {
  const GGMLTypeInfo* t = ggml_type_info(type);
  return t ? std::string(t->name) : "type " + std::to_string(type);
}

int64_t ggml_row_bytes(GGMLType type, int64_t n) {
  const GGMLTypeInfo& t = ggml_type_info(type);
  KILN_CHECK(n >= 0 && n % t.block_elems == 0, ValueError, "a row of ", t.name, " values must hold a "
             "multiple of ", t.block_elems, " values (its block size), got ", n);
  return n / t.block_elems * t.block_bytes;
}

}  // namespace kiln::quant
