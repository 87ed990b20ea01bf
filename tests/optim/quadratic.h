#pragma once
// The test problem of the optimizer tests: parameters w [2] and b [1] (float64) of
//   L = 1.5 w0^2 + 0.5 w1^2 + w0 b0 + 2 b0^2 - w1,
// whose gradient the references compute by hand:
//   dL/dw0 = 3 w0 + b0,  dL/dw1 = w1 - 1,  dL/db0 = w0 + 4 b0.
// Each test writes its optimizer's update equations over the flat values (w0, w1, b0)
// independently of the library and compares the first three steps.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/kiln.h"
#include "kiln/optim/optim.h"

namespace kiln::optim::test {

struct Quadratic {
  Tensor w, b;
  Quadratic() {
    w = tensor_from(std::vector<double>{1.0, -2.0}, {2}, TensorOptions(DType::F64));
    b = tensor_from(std::vector<double>{0.5}, {1}, TensorOptions(DType::F64));
    autograd::set_requires_grad(w);
    autograd::set_requires_grad(b);
  }
  std::vector<Tensor> params() const { return {w, b}; }
  Tensor loss() const {
    Tensor coef = tensor_from(std::vector<double>{1.5, 0.5}, {2}, TensorOptions(DType::F64));
    return sum(coef * w * w) + sum(w.narrow(0, 0, 1) * b) + 2.0 * sum(b * b) -
           sum(w.narrow(0, 1, 1));
  }
  // Flat values (w0, w1, b0).
  std::vector<double> values() const {
    std::vector<double> v = w.to_vector<double>();
    v.push_back(b.item<double>());
    return v;
  }
};

inline std::vector<double> initial_values() { return {1.0, -2.0, 0.5}; }

inline std::vector<double> gradient(const std::vector<double>& p) {
  return {3 * p[0] + p[2], p[1] - 1, p[0] + 4 * p[2]};
}

// Runs `steps` optimizer steps on a fresh problem and compares every step with the reference
// update ref_step(values, grad, step_number) (which updates values in place).
inline void expect_matches_reference(
    const std::function<std::unique_ptr<Optimizer>(const std::vector<Tensor>&)>& make,
    const std::function<void(std::vector<double>&, const std::vector<double>&, int)>& ref_step,
    const std::string& what, int steps = 3, double tol = 1e-14) {
  Quadratic q;
  std::unique_ptr<Optimizer> opt = make(q.params());
  std::vector<double> ref = initial_values();
  for (int s = 1; s <= steps; ++s) {
    opt->zero_grad();
    backward(q.loss());
    opt->step();
    ref_step(ref, gradient(ref), s);
    std::vector<double> got = q.values();
    for (size_t i = 0; i < 3; ++i)
      EXPECT_NEAR(got[i], ref[i], tol * (1 + std::fabs(ref[i])))
          << what << ": step " << s << ", value " << i;
  }
}

}  // namespace kiln::optim::test
