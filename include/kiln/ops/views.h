#pragma once
// View ops: results share storage (and the version counter) with their input.
#include <optional>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {

Tensor view(const Tensor& t, const Shape& shape);  // one dim may be -1
// The same bytes as another dtype (torch's Tensor.view(dtype)); a different element size
// rescales the last dim, which must have stride 1.
Tensor view(const Tensor& t, DType dtype);
Tensor reshape(const Tensor& t, const Shape& shape);  // a view when possible, else a copy
Tensor permute(const Tensor& t, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1);
Tensor t(const Tensor& t);  // 0-, 1- and 2-d tensors only
Tensor expand(const Tensor& t, const Shape& shape);  // -1 keeps a size
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start,
             std::optional<int64_t> end, int64_t step = 1);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor squeeze(const Tensor& t);
Tensor squeeze(const Tensor& t, const std::vector<int64_t>& dims);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& t, int64_t dim, const Shape& sizes);
Tensor as_strided(const Tensor& t, const Shape& shape, const Strides& strides,
                  std::optional<int64_t> storage_offset = std::nullopt);
Tensor diagonal(const Tensor& t, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
Tensor unfold(const Tensor& t, int64_t dim, int64_t size, int64_t step);
Tensor movedim(const Tensor& t, int64_t source, int64_t destination);

// Strides for viewing a tensor of (shape, strides) as new_shape without copying, or
// nullopt when the memory layout does not allow it.
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides,
                                    const Shape& new_shape);
// Resolves one -1 entry of shape for numel elements; ShapeError when impossible.
Shape infer_shape(const Shape& shape, int64_t numel);

}  // namespace kiln
