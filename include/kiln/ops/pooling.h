#pragma once
// Pooling over the trailing 1, 2 or 3 spatial dims of [N, C, *spatial] or [C, *spatial]
// inputs, with PyTorch's output sizes (floor or ceil mode) and padding rules. The per-dim
// lists have one entry per spatial dim (a single entry is repeated); an empty stride means
// stride = kernel_size.
#include <optional>
#include <utility>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {

struct PoolOptions {
  std::vector<int64_t> kernel_size;
  std::vector<int64_t> stride{};  // empty: kernel_size
  std::vector<int64_t> padding{0};
  std::vector<int64_t> dilation{1};  // max pooling only
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only
  std::optional<int64_t> divisor_override{};  // average pooling only
};

// Maximum over each window (NaN propagates, padding never wins) and, per output, the flat
// index of the chosen element within its input plane (int64), as PyTorch's
// max_poolNd(return_indices=True). spatial_dims: how many trailing dims are pooled.
std::pair<Tensor, Tensor> max_pool_with_indices(const Tensor& x, int64_t spatial_dims,
                                                const PoolOptions& options);
// The values alone (max_poolNd without return_indices): the same op, without laying out the
// int64 indices for the caller (the largest of the layout copies of a planar input).
Tensor max_pool(const Tensor& x, int64_t spatial_dims, const PoolOptions& options);
Tensor avg_pool(const Tensor& x, int64_t spatial_dims, const PoolOptions& options);
// Windows [floor(o * I / O), ceil((o + 1) * I / O)) per dim; output_size per spatial dim.
Tensor adaptive_avg_pool(const Tensor& x, const std::vector<int64_t>& output_size);
std::pair<Tensor, Tensor> adaptive_max_pool_with_indices(const Tensor& x,
                                                         const std::vector<int64_t>& output_size);

// The gradients of avg_pool / adaptive_avg_pool (linear maps, so their own derivatives are
// the pools again). options as given to avg_pool, lists expanded to one entry per dim.
Tensor avg_pool_backward(const Tensor& grad_output, const Shape& input_shape,
                         const PoolOptions& options);
Tensor adaptive_avg_pool_backward(const Tensor& grad_output, const Shape& input_shape,
                                  int64_t spatial_dims);
// The gradient of max_pool: each output's gradient added to the input element its index
// names (indices as max_pool_with_indices gives them). options as given to max_pool, lists
// expanded to one entry per dim: the windows let a device gather per input element instead
// of scattering (no atomics, the CPU's order of sums).
Tensor max_pool_backward(const Tensor& grad_output, const Tensor& indices, const Shape& input_shape,
                         const PoolOptions& options);

}  // namespace kiln
