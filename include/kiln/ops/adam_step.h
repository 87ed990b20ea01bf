#pragma once
// One Adam / AdamW update of one parameter as a single pass over its four arrays (parameter,
// gradient, first and second moments), for the optimizers (Python and C++).
#include "kiln/tensor/tensor.h"

namespace kiln {

// The update's scalars, computed by the optimizer in double precision exactly as for the op
// sequence it replaces; the kernel rounds each to float32 once, as those ops do.
struct AdamStepScalars {
  double decay = 1;                  // 1 - lr * weight_decay (decoupled decay; 1: none)
  double lerp_weight = 0.1;          // 1 - beta1
  double beta2 = 0.999;
  double one_minus_beta2 = 0.001;
  double bias_correction2_sqrt = 1;  // sqrt(1 - beta2^step)
  double eps = 1e-8;
  double neg_step_size = -1e-3;      // -lr / (1 - beta1^step)
  bool maximize = false;
};

// Whether adam_step_ takes these tensors: float32, contiguous, one shape, on the CPU or the
// testing device. Otherwise the optimizer runs the op sequence.
bool adam_step_supported(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                         const Tensor& exp_avg_sq);

// In place, element by element, bit for bit the result of torch.optim.Adam's single-tensor
// sequence in float32: param *= decay; exp_avg = lerp(exp_avg, g, lerp_weight);
// exp_avg_sq = exp_avg_sq * beta2 + one_minus_beta2 * (g * g);
// param += neg_step_size * (exp_avg / (sqrt(exp_avg_sq) / bias_correction2_sqrt + eps)),
// with g = -grad when maximize. Raises unless adam_step_supported.
void adam_step_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                const AdamStepScalars& s);

}  // namespace kiln
