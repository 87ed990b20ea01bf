#pragma once
// Random ops. Every op takes an optional Generator (nullptr: the device's default one);
// values come from Philox counters, so a seed gives the same numbers on every backend.
#include "kiln/runtime/generator.h"
#include "kiln/ops/factory.h"

namespace kiln {

Tensor& uniform_(Tensor& x, double from = 0, double to = 1, Generator* gen = nullptr);
Tensor& normal_(Tensor& x, double mean = 0, double std = 1, Generator* gen = nullptr);
Tensor& bernoulli_(Tensor& x, double p = 0.5, Generator* gen = nullptr);
Tensor bernoulli(const Tensor& probs, Generator* gen = nullptr);
Tensor dropout(const Tensor& x, double p, bool train = true, Generator* gen = nullptr);
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator* gen = nullptr);
// Samplers with a variable number of draws per value (PyTorch's torch._standard_gamma,
// torch.poisson, torch.binomial): Gamma(alpha, 1) (differentiable in alpha by implicit
// reparameterisation), Poisson(rates), Binomial(count, prob) (count and prob broadcast).
Tensor standard_gamma(const Tensor& alpha, Generator* gen = nullptr);
Tensor poisson(const Tensor& rates, Generator* gen = nullptr);
Tensor binomial(const Tensor& count, const Tensor& prob, Generator* gen = nullptr);
// d sample / d alpha of Gamma(alpha, 1) samples (the derivative _standard_gamma uses).
Tensor standard_gamma_grad(const Tensor& alpha, const Tensor& sample);
Tensor randperm(int64_t n, TensorOptions opts = DType::I64, Generator* gen = nullptr);

}  // namespace kiln
