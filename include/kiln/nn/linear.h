#pragma once
// Linear, Bilinear, Identity and Flatten layers.
#include "kiln/nn/module.h"
#include "kiln/ops/factory.h"
#include "kiln/runtime/generator.h"

namespace kiln::nn {

// y = x @ weight.T + bias. weight [out, in] is initialised as PyTorch does:
// kaiming_uniform_(a = sqrt(5)), i.e. uniform in +-1/sqrt(in); bias uniform in +-1/sqrt(in).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions options = {});
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  void reset_parameters(Generator* gen = nullptr);
  std::string extra_repr() const override;

  const int64_t in_features, out_features;
  Tensor& weight;  // [out_features, in_features]
  Tensor& bias;    // [out_features] or undefined
};

// y[..., k] = x1 . weight[k] . x2 + bias[k]; weight [out, in1, in2], all initialised
// uniform in +-1/sqrt(in1) as PyTorch.
class Bilinear : public Module {
 public:
  Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias = true,
           TensorOptions options = {});
  Tensor forward(const Tensor& x1, const Tensor& x2);
  Tensor operator()(const Tensor& x1, const Tensor& x2) { return forward(x1, x2); }
  void reset_parameters(Generator* gen = nullptr);
  std::string extra_repr() const override;

  const int64_t in1_features, in2_features, out_features;
  Tensor& weight;
  Tensor& bias;
};

class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) { return x; }
  Tensor operator()(const Tensor& x) { return forward(x); }
};

// Flattens dims start_dim..end_dim into one (default: all but the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  std::string extra_repr() const override;
  const int64_t start_dim, end_dim;
};

}  // namespace kiln::nn
