#pragma once
// The safetensors names of kiln's dtypes ("F32", "BF16", "BOOL", ...) and the order in which
// the reference implementation lays tensors out in a file.
#include <optional>
#include <string_view>

#include "kiln/core/dtype.h"

namespace kiln::io::detail {

std::string_view safetensors_dtype_name(DType t);
// The kiln dtype of a safetensors dtype name, or nullopt if kiln has no such dtype.
std::optional<DType> dtype_from_safetensors(std::string_view name);
// True for dtype names the safetensors format defines but kiln does not support
// (F8_E4M3, U16, C64, ...): those get a TypeError rather than "unknown dtype".
bool is_foreign_safetensors_dtype(std::string_view name);
// The position of t in the reference implementation's Dtype enum (increasing alignment);
// files list tensors by decreasing rank, then by name.
int safetensors_dtype_rank(DType t);

}  // namespace kiln::io::detail
