// Activation layers, Softmax and Dropout.
#include "kiln/nn/activation.h"

#include "kiln/nn/functional.h"

namespace kiln::nn {

Tensor ReLU::forward(const Tensor& x) { return functional::relu(x); }

GELU::GELU(std::string approx) : Module("GELU"), approximate(std::move(approx)) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", ValueError,
             "GELU: approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
}
Tensor GELU::forward(const Tensor& x) { return functional::gelu(x, approximate); }
std::string GELU::extra_repr() const {
  return approximate == "none" ? "" : "approximate='" + approximate + "'";
}

Tensor SiLU::forward(const Tensor& x) { return functional::silu(x); }
Tensor Tanh::forward(const Tensor& x) { return functional::tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return functional::sigmoid(x); }

Tensor Softmax::forward(const Tensor& x) { return functional::softmax(x, dim); }
std::string Softmax::extra_repr() const { return "dim=" + std::to_string(dim); }

Dropout::Dropout(double prob, Generator* gen) : Module("Dropout"), p(prob), generator(gen) {
  KILN_CHECK(p >= 0 && p <= 1, ValueError,
             "Dropout: probability has to be between 0 and 1, but got ", p);
}
Tensor Dropout::forward(const Tensor& x) {
  return functional::dropout(x, p, is_training(), generator);
}
std::string Dropout::extra_repr() const {
  std::string s = std::to_string(p);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s += '0';
  return "p=" + s;
}

}  // namespace kiln::nn
