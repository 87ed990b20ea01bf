#pragma once
// gradcheck: compares the gradients autograd computes with central finite differences in
// float64, element by element of the full Jacobian (inputs should be small float64 tensors).
#include <functional>
#include <string>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln::autograd {

struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch: input, element, analytic vs numeric
  explicit operator bool() const { return ok; }
};

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// inputs that require grad are checked. eps: finite-difference step.
GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                          double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3);
// Second derivatives: gradcheck of the function inputs -> grad(fn(inputs)·v, inputs).
GradcheckResult gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs,
                              double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3);

}  // namespace kiln::autograd
