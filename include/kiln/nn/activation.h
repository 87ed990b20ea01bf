#pragma once
// Parameter-free layers: activations, Softmax and Dropout.
#include <string>

#include "kiln/nn/module.h"
#include "kiln/runtime/generator.h"

namespace kiln::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
};

class GELU : public Module {
 public:
  // approximate: "none" (erf form) or "tanh".
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  std::string extra_repr() const override;
  const std::string approximate;
};

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
};

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : Module("Softmax"), dim(dim) {}
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  std::string extra_repr() const override;
  const int64_t dim;
};

// Zeroes elements with probability p in training mode (scaling the rest by 1/(1-p));
// the identity in eval mode. gen: the generator to draw from (nullptr: the default one).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  std::string extra_repr() const override;
  const double p;
  Generator* generator;
};

}  // namespace kiln::nn
