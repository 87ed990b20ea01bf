// Dim validation, shared reduction meta functions and PyTorch's dtype names.
#include "reduction_util.h"

#include <array>

#include "kiln/core/error.h"
#include "kiln/core/shape.h"
#include "kiln/dispatch/registry.h"
#include "kiln/tensor/tensor.h"

namespace kiln::ops {

std::string_view torch_type_name(DType t) {
  static constexpr std::array<std::string_view, kNumDTypes> names = {
      "Bool", "Byte", "Char", "Short", "Int", "Long", "Half", "BFloat16", "Float", "Double",
      "ComplexFloat", "ComplexDouble"};
  return names[size_t(t)];
}

std::string_view cpp_type_name(DType t) {
  static constexpr std::array<std::string_view, kNumDTypes> names = {
      "bool",     "unsigned char", "signed char",    "short int", "int",
      "long int", "c10::Half",     "c10::BFloat16", "float",     "double",
      "c10::complex<float>", "c10::complex<double>"};
  return names[size_t(t)];
}

std::string base_name(const std::string& op_name) {
  return op_name.substr(0, op_name.find('.'));
}

std::vector<bool> reduction_mask(const char* name, const Shape& shape,
                                 const std::vector<int64_t>& dims) {
  const int64_t ndim = int64_t(shape.size());
  std::vector<bool> mask(shape.size(), dims.empty());
  std::vector<bool> seen(std::max<size_t>(shape.size(), 1), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim);
    KILN_CHECK(!seen[size_t(w)], ValueError, name, "(): dim ", w,
               " appears multiple times in the list of dims");
    seen[size_t(w)] = true;
    if (w < ndim) mask[size_t(w)] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!mask[i]) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

void check_nonempty_reduction(const char* name, const Shape& shape,
                              const std::vector<bool>& mask) {
  for (size_t i = 0; i < shape.size(); ++i)
    KILN_CHECK(!mask[i] || shape[i] != 0, IndexError, name, "(): Expected reduction dim ", i,
               " to have non-zero size.");
}

namespace {
struct Reduced {
  Shape shape;
  std::vector<bool> mask;
};
Reduced reduce_shape_of(const OpCall& call) {
  std::string name = base_name(call.op->name);
  const Shape& in = call.inputs[0].shape();
  Reduced r;
  r.mask = reduction_mask(name.c_str(), in, call.ints_attr(0));
  r.shape = reduced_shape(in, r.mask, call.bool_attr(1));
  return r;
}
Reduced nonempty_shape_of(const OpCall& call) {
  Reduced r = reduce_shape_of(call);
  check_nonempty_reduction(base_name(call.op->name).c_str(), call.inputs[0].shape(), r.mask);
  return r;
}
}  // namespace

std::vector<TensorMeta> reduce_meta(const OpCall& call) {
  return {{reduce_shape_of(call).shape, call.inputs[0].dtype()}};
}
// sum: bool and integer inputs are summed into int64 by the kernel itself (as PyTorch's
// accumulation), with no widened copy of the input.
std::vector<TensorMeta> reduce_sum_meta(const OpCall& call) {
  const DType in = call.inputs[0].dtype();
  return {{reduce_shape_of(call).shape, is_integral(in, /*include_bool=*/true) ? DType::I64 : in}};
}
std::vector<TensorMeta> reduce_bool_meta(const OpCall& call) {
  return {{reduce_shape_of(call).shape, DType::Bool}};
}
std::vector<TensorMeta> reduce_nonempty_meta(const OpCall& call) {
  return {{nonempty_shape_of(call).shape, call.inputs[0].dtype()}};
}
std::vector<TensorMeta> reduce_index_meta(const OpCall& call) {
  return {{nonempty_shape_of(call).shape, DType::I64}};
}
std::vector<TensorMeta> reduce_value_index_meta(const OpCall& call) {
  Shape s = nonempty_shape_of(call).shape;
  return {{s, call.inputs[0].dtype()}, {s, DType::I64}};
}

std::vector<TensorMeta> along_dim_meta(const OpCall& call) {
  wrap_dim(call.int_attr(0), call.inputs[0].dim());
  return {{call.inputs[0].shape(), call.inputs[0].dtype()}};
}

}  // namespace kiln::ops
