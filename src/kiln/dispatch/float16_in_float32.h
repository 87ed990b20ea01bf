#pragma once
// Which ops the CPU runs in float32 for float16 inputs (float16_in_float32.cpp).
#include <string_view>

namespace kiln {

// Whether op `name`'s float16 result is, by PyTorch's definition, its float32 result on the
// widened inputs rounded once to float16 (elementwise math, reductions, normalisations and
// products compute in float, PyTorch's "opmath" type for float16). Data-movement ops (copies,
// indexing, cat) and ops whose float16 form has its own constants (nan_to_num's default
// replacements) are not listed: they keep their own float16 kernels.
bool computes_float16_in_float32(std::string_view name);

}  // namespace kiln
