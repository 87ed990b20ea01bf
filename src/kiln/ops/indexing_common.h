#pragma once
// Helpers shared by the indexing, shape and sorting op definitions.
#include <algorithm>
#include <string>

#include "kiln/core/error.h"
#include "kiln/tensor/tensor.h"

namespace kiln::ops {

// Index tensors must hold int64 or int32 values.
inline void check_index_dtype(const char* op, const Tensor& index, const char* what = "index") {
  KILN_CHECK(index.defined(), ValueError, op, "(): expected a defined ", what, " tensor");
  KILN_CHECK(index.dtype() == DType::I64 || index.dtype() == DType::I32, Error, op,
             "(): Expected dtype int64 or int32 for ", what, ", got ", dtype_name(index.dtype()));
}

// A 0-d tensor counts as one dim of size 1 (PyTorch's ensure_nonempty_dim/size).
inline int64_t nonempty_dim(const Tensor& t) { return std::max<int64_t>(1, t.dim()); }
inline int64_t nonempty_size(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); }
inline Shape nonempty_shape(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.shape(); }

// Registration of each op-definition file (called from register_indexing_ops).
void register_index_select_ops();
void register_advanced_index_ops();
void register_shape_ops();
void register_pad_ops();
void register_sort_ops();
void register_index_lerp_ops();

}  // namespace kiln::ops
