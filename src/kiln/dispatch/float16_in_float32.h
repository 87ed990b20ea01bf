#pragma once
// Which ops the CPU runs in float32 for float16 inputs (float16_in_float32.cpp).
#include <string_view>

#include "kiln/dispatch/op_call.h"

namespace kiln {

// Whether op `name`'s float16 result is, by PyTorch's definition, its float32 result on the
// widened inputs rounded once to float16 (elementwise math, reductions, normalisations and
// products compute in float, PyTorch's "opmath" type for float16). Data-movement ops (copies,
// indexing, cat) and ops whose float16 form has its own constants (nan_to_num's default
// replacements) are not listed: they keep their own float16 kernels.
bool computes_float16_in_float32(std::string_view name);

// A backend's float16 kernels may take some calls of those ops themselves (the CPU's product of
// a few rows with a transposed float16 weight reads the weight as float16): `native(call)`
// true leaves the call float16. One hook, set by the CPU backend at registration.
using Float16Native = bool (*)(const OpCall& call);
void set_float16_native(Float16Native native);
bool float16_native(const OpCall& call);

}  // namespace kiln
