#include "kiln/autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/reduction.h"

namespace kiln::autograd {

namespace {

// Values of fn(inputs) as a flat host vector (grad stays enabled: fn may itself
// differentiate, as in gradgradcheck).
std::vector<double> evaluate(const TensorFn& fn, const std::vector<Tensor>& inputs) {
  return fn(inputs).to_vector<double>();
}

}  // namespace

GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps,
                          double atol, double rtol) {
  GradcheckResult result;
  Tensor out = fn(inputs);
  int64_t n_out = out.numel();
  std::vector<Tensor> diff_inputs;
  std::vector<size_t> diff_index;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && requires_grad(inputs[i])) {
      diff_inputs.push_back(inputs[i]);
      diff_index.push_back(i);
    }
  if (diff_inputs.empty()) return result;
  // Analytic Jacobian rows: one backward per output element.
  std::vector<std::vector<std::vector<double>>> analytic(diff_inputs.size());  // [input][out][elem]
  for (int64_t j = 0; j < n_out; ++j) {
    Tensor onehot = zeros_like(out);
    onehot.view({-1}).narrow(0, j, 1).fill_(1);
    std::vector<Tensor> g;
    if (requires_grad(out)) g = grad({out}, diff_inputs, {onehot}, true, false, true);
    for (size_t k = 0; k < diff_inputs.size(); ++k) {
      std::vector<double> row(size_t(diff_inputs[k].numel()), 0.0);
      if (k < g.size() && g[k].defined()) row = g[k].to_vector<double>();
      analytic[k].push_back(row);
    }
  }
  // Numeric Jacobian by central differences, perturbing each input element in place.
  for (size_t k = 0; k < diff_inputs.size(); ++k) {
    Tensor x = diff_inputs[k];
    Tensor flat = detach(x).view({-1});
    for (int64_t e = 0; e < x.numel(); ++e) {
      Tensor cell = flat.narrow(0, e, 1);
      double orig = cell.item<double>();
      cell.fill_(orig + eps);
      auto plus = evaluate(fn, inputs);
      cell.fill_(orig - eps);
      auto minus = evaluate(fn, inputs);
      cell.fill_(orig);
      for (int64_t j = 0; j < n_out; ++j) {
        double numeric = (plus[size_t(j)] - minus[size_t(j)]) / (2 * eps);
        double a = analytic[k][size_t(j)][size_t(e)];
        if (!(std::fabs(a - numeric) <= atol + rtol * std::fabs(numeric))) {
          std::ostringstream os;
          os << "Jacobian mismatch for output 0 with respect to input " << diff_index[k]
             << ", output element " << j << ", input element " << e << ": analytic " << a
             << " vs numeric " << numeric;
          result.ok = false;
          result.message = os.str();
          return result;
        }
      }
    }
  }
  return result;
}

GradcheckResult gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps,
                              double atol, double rtol) {
  // A fixed random-free direction v (alternating signs) for the vector-Jacobian product.
  Tensor out0;
  {
    NoGradGuard ng;
    out0 = fn(inputs);
  }
  Tensor v = to_dtype(arange(out0.numel(), TensorOptions(DType::F64, out0.device())), out0.dtype())
                 .view(out0.shape()) * 0.37 + 0.5;
  TensorFn first = [&fn, v](const std::vector<Tensor>& in) -> Tensor {
    std::vector<Tensor> diff;
    for (const auto& t : in)
      if (t.defined() && requires_grad(t)) diff.push_back(t);
    Tensor o = fn(in);
    auto g = grad({o}, diff, {v}, true, true, true);
    Tensor total;
    for (auto& t : g) {
      if (!t.defined()) continue;
      Tensor s = sum(t * t);
      total = total.defined() ? total + s : s;
    }
    return total.defined() ? total : zeros({}, TensorOptions(DType::F64));
  };
  return gradcheck(first, inputs, eps, atol, rtol);
}

}  // namespace kiln::autograd
