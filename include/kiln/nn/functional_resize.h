#pragma once
// interpolate, as torch.nn.functional.interpolate: resizes the spatial dims of an input
// [N, C, d1[, d2[, d3]]].
#include <optional>
#include <string>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln::nn::functional {

struct InterpolateOptions {
  std::vector<int64_t> size{};        // one per spatial dim, or empty
  std::vector<double> scale_factor{};  // one per spatial dim, or empty (exactly one is given)
  // "nearest", "nearest-exact", "linear" (3-d input), "bilinear" / "bicubic" (4-d),
  // "trilinear" (5-d), "area" (adaptive average pooling).
  std::string mode = "nearest";
  std::optional<bool> align_corners{};  // only for linear, bilinear, bicubic, trilinear
  // With scale_factor: true takes the coordinate scale from the sizes (in / out) instead of
  // 1 / scale_factor, as PyTorch.
  std::optional<bool> recompute_scale_factor{};
};

// Separable: each spatial dim is resized in turn by index_select of its source taps and their
// weights (so autograd follows); bfloat16 / float16 inputs are computed in float32 and rounded
// once, as PyTorch's kernels accumulate in float32.
Tensor interpolate(const Tensor& input, const InterpolateOptions& options);

}  // namespace kiln::nn::functional
