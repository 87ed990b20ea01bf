#pragma once
// OpCall: one boxed call of an op — the op, its tensor inputs (an undefined Tensor stands for
// an absent optional input) and its non-tensor arguments (attrs, positional as in the
// schema). Interceptors and fallbacks see every op in this one generic form.
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kiln/core/scalar.h"
#include "kiln/runtime/device.h"
#include "kiln/tensor/tensor.h"

namespace kiln {

struct OpDef;

using AttrValue = std::variant<std::monostate, bool, int64_t, double, Scalar,
                               std::vector<int64_t>, DType, Device, std::string>;

struct OpCall {
  const OpDef* op = nullptr;
  std::vector<Tensor> inputs;
  std::vector<AttrValue> attrs;
  // Preallocated outputs (out= and in-place forms); empty: the dispatcher allocates them.
  std::vector<Tensor> outs;
  // Device for ops without tensor inputs (factories).
  std::optional<Device> device;

  // Typed attribute access; throws an internal error naming the op on a schema mismatch.
  int64_t int_attr(size_t i) const;
  double double_attr(size_t i) const;
  bool bool_attr(size_t i) const;
  const Scalar& scalar_attr(size_t i) const;
  const std::vector<int64_t>& ints_attr(size_t i) const;
  DType dtype_attr(size_t i) const;
  const std::string& string_attr(size_t i) const;
  bool has_attr(size_t i) const {
    return i < attrs.size() && !std::holds_alternative<std::monostate>(attrs[i]);
  }
};

// Shape, dtype and device of one output, computed by an op's meta function.
struct TensorMeta {
  Shape shape;
  DType dtype;
};

}  // namespace kiln
