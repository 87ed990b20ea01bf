#pragma once
// Small helpers shared by the operator files.
#include <vector>

#include "kiln/onnx/op_context.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"

namespace kiln::onnx {

inline std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

// t converted to dtype (no copy when it already has it).
inline Tensor cast(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : to_dtype(t, dtype); }

// A 0-d tensor of value with t's dtype and device (ONNX keeps operand types; a wrapped
// Scalar could promote).
inline Tensor scalar_like(const Tensor& t, double value) {
  return to_device(scalar_tensor(value, TensorOptions(t.dtype())), t.device());
}

// Input i's axes given as an attribute (older opsets) or as an input (newer ones).
inline std::vector<int64_t> axes_from(const OpContext& ctx, const char* attr, size_t input_index,
                                      int64_t input_since_opset) {
  if (ctx.opset() >= input_since_opset) {
    return ctx.has_input(input_index) ? ctx.input_ints(input_index) : std::vector<int64_t>{};
  }
  return ctx.attr_ints(attr, std::vector<int64_t>{});
}

}  // namespace kiln::onnx
