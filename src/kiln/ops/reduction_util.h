#pragma once
// Internal helpers of the reduction, softmax and linalg op families: dim validation, the
// meta functions shared by reductions, and dtype names as PyTorch's messages spell them.
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dispatch/op_call.h"

namespace kiln::ops {

// PyTorch's ScalarType names ("Float", "Long", ...), used in messages copied from PyTorch.
std::string_view torch_type_name(DType t);
// The C++ element type names PyTorch prints in matmul dtype errors ("float", "c10::Half").
std::string_view cpp_type_name(DType t);

// The op's user-facing name: "max.dim" -> "max".
std::string base_name(const std::string& op_name);

// Which dims of shape a reduction over dims covers (empty dims: all). IndexError for a dim
// out of range, ValueError for a repeated dim. A 0-d shape gives an empty mask.
std::vector<bool> reduction_mask(const char* name, const Shape& shape,
                                 const std::vector<int64_t>& dims);
Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim);
// IndexError when a reduced dim has size 0 (ops without an identity: max, argmax, ...).
void check_nonempty_reduction(const char* name, const Shape& shape, const std::vector<bool>& mask);

// Meta functions of reductions with attrs (int[] dims, bool keepdim, ...).
std::vector<TensorMeta> reduce_meta(const OpCall& call);          // input dtype
std::vector<TensorMeta> reduce_sum_meta(const OpCall& call);      // int64 for bool / integers
std::vector<TensorMeta> reduce_bool_meta(const OpCall& call);     // bool
std::vector<TensorMeta> reduce_nonempty_meta(const OpCall& call); // input dtype, no identity
std::vector<TensorMeta> reduce_index_meta(const OpCall& call);    // int64 indices, no identity
std::vector<TensorMeta> reduce_value_index_meta(const OpCall& call);  // (values, indices)
// Ops along one dim (attrs[0]) with an output like the input: cumsum, softmax, ...
std::vector<TensorMeta> along_dim_meta(const OpCall& call);

}  // namespace kiln::ops
