// Gradient clipping by total norm and by value.
#include "kiln/nn/clip_grad.h"

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"

namespace kiln::nn::utils {

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  KILN_CHECK(norm_type > 0 || std::isinf(norm_type), ValueError,
             "clip_grad_norm_: norm_type must be positive or inf, got ", norm_type);
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> grads, norms;
  for (const Tensor& p : parameters) {
    Tensor g = autograd::grad(p);
    if (!g.defined()) continue;
    grads.push_back(autograd::detach(g));
    norms.push_back(norm(grads.back(), norm_type));
  }
  if (grads.empty()) return scalar_tensor(0.0);
  // As PyTorch: the norm of the per-gradient norms, in the first gradient's dtype.
  DType dt = grads[0].dtype();
  Device dev = grads[0].device();
  for (auto& n : norms) n = to_device(n, dev).to(dt).reshape({1});
  Tensor total = norm(cat(norms), norm_type);
  if (error_if_nonfinite) {
    double t = total.item<double>();
    KILN_CHECK(std::isfinite(t), Error, "The total norm of order ", norm_type,
               " for gradients from `parameters` is non-finite, so it cannot be clipped. To "
               "disable this error and scale the gradients by the non-finite norm anyway, set "
               "`error_if_nonfinite=false`");
  }
  // Always multiply by the clamped coefficient (1 when under the limit), as PyTorch.
  Tensor coef = clamp(full_like(total, max_norm) / (total + 1e-6), std::nullopt, Scalar(1.0));
  for (Tensor& g : grads) g.mul_(to_device(coef, g.device()).to(g.dtype()));
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  KILN_CHECK(clip_value >= 0, ValueError, "clip_grad_value_: clip_value must be non-negative, got ",
             clip_value);
  autograd::NoGradGuard no_grad;
  for (const Tensor& p : parameters) {
    Tensor g = autograd::grad(p);
    if (!g.defined()) continue;
    Tensor gd = autograd::detach(g);
    clamp_(gd, Scalar(-clip_value), Scalar(clip_value));
  }
}

}  // namespace kiln::nn::utils
