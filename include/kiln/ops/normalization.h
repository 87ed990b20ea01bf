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

// Their gradients from the saved statistics (mean and rstd as native_layer_norm returns them),
// in one pass over each row for the sums and one for dx: (dx, dweight, dbias), dweight /
// dbias of the normalised shape in x's dtype (computed whether or not weight is defined).
// Not differentiable: autograd uses them where no graph of the backward is recorded.
std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(const Tensor& grad_y,
                                                              const Tensor& x, const Tensor& mean,
                                                              const Tensor& rstd,
                                                              const Tensor& weight,
                                                              int64_t normalized_ndim);
std::tuple<Tensor, Tensor> native_rms_norm_backward(const Tensor& grad_y, const Tensor& x,
                                                    const Tensor& rstd, const Tensor& weight,
                                                    int64_t normalized_ndim);

// Batch normalization with the batch's statistics (training) over a contiguous [N, C, *]
// float32 or bfloat16 CPU input (decision 0051): y = (x - mean) / sqrt(var + eps) * weight +
// bias per channel, and the per-channel mean and biased variance (float32, shape [C]) for the
// running statistics and the derivative. weight / bias: x's dtype, shape [C], or undefined.
// nn::functional::batch_norm checks the arguments and calls this where it applies.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& x, const Tensor& weight,
                                                     const Tensor& bias, double eps);
// Its gradients from the saved statistics, in one pass for the sums and one for dx:
// (dx, dweight, dbias), dweight / dbias of shape [C] in x's dtype.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(const Tensor& grad_y,
                                                              const Tensor& x, const Tensor& mean,
                                                              const Tensor& var,
                                                              const Tensor& weight, double eps);

// Group normalization of an [N, C, *] input (C divisible by num_groups): each group of C /
// num_groups channels of one sample is normalised by its own mean and biased variance, then
// scaled and shifted per channel: y = (x - mean) * rstd * weight[c] + bias[c], written as
// x * scale[c] + shift[c] (as PyTorch's kernel). Returns (y, mean [N, G], rstd [N, G]), the
// statistics in float32 for 16-bit inputs and x's dtype otherwise. weight / bias: x's dtype,
// shape [C], or undefined. CPU kernels (float32, bfloat16, float64; float16 through float32);
// nn::functional::group_norm calls this for CPU inputs and composes ops elsewhere.
std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& x, const Tensor& weight,
                                                     const Tensor& bias, int64_t num_groups,
                                                     double eps);
// Its gradients from the saved statistics, in one pass over each group for the per-channel
// sums and one for dx: (dx, dweight [C], dbias [C]) in x's dtype. Not differentiable:
// autograd uses it where no graph of the backward is recorded.
std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(const Tensor& grad_y,
                                                              const Tensor& x, const Tensor& mean,
                                                              const Tensor& rstd,
                                                              const Tensor& weight,
                                                              int64_t num_groups);

}  // namespace kiln
