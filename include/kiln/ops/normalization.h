#pragma once
// Fused normalisation over the trailing `normalized_ndim` dims, one pass over each row for
// the statistics and one for the output: layer_norm (mean / biased variance) and rms_norm.
// They also return the statistics that their derivatives use, as PyTorch's
// native_layer_norm: mean and rstd = 1 / sqrt(var + eps) (or 1 / sqrt(mean(x^2) + eps)), with
// the normalised dims kept as size 1, in float32 for 16-bit inputs and x's dtype otherwise.
// weight / bias: x's dtype and the normalised shape, or undefined. nn::functional::layer_norm
// and rms_norm check the arguments and call these.
#include <tuple>

#include "kiln/tensor/tensor.h"

namespace kiln {

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& x, int64_t normalized_ndim,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps);
std::tuple<Tensor, Tensor> native_rms_norm(const Tensor& x, int64_t normalized_ndim,
                                           const Tensor& weight, double eps);

}  // namespace kiln
