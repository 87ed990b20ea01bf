#pragma once
// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
#include <limits>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln::nn::utils {

// Scales the .grad of every parameter (those without one are skipped) in place so that
// their total norm is at most max_norm: each gradient is multiplied by
// min(1, max_norm / (total_norm + 1e-6)). norm_type: any p > 0, or infinity (the largest
// absolute element). Returns the total norm before clipping (a 0-d tensor; 0 when no
// parameter has a gradient). error_if_nonfinite: Error when the total norm is NaN or inf.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);
// Clamps every gradient element into [-clip_value, clip_value] in place.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace kiln::nn::utils
