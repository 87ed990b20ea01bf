#pragma once
// nn::init: in-place initialisation of parameters, as torch.nn.init. Every function runs
// without recording gradients, takes an optional Generator (nullptr: the default generator
// of the tensor's device) and returns its argument.
#include <string>

#include "kiln/runtime/generator.h"
#include "kiln/tensor/tensor.h"

namespace kiln::nn::init {

// "fan_in" or "fan_out".
enum class FanMode { FanIn, FanOut };

// The recommended gain for a nonlinearity: "linear", "conv1d".."conv3d", "sigmoid" -> 1;
// "tanh" -> 5/3; "relu" -> sqrt(2); "leaky_relu" -> sqrt(2 / (1 + slope^2)) with
// slope = param (0.01 by default); "selu" -> 3/4. ValueError for anything else.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);
// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field, where the
// receptive field is the product of the sizes after the first two (tensor needs >= 2 dims).
struct Fans {
  int64_t fan_in, fan_out;
};
Fans calculate_fan_in_and_fan_out(const Tensor& t);

Tensor& uniform_(Tensor& t, double a = 0, double b = 1, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
// The identity matrix in a 2-d tensor.
Tensor& eye_(Tensor& t);
// Uniform in [-a, a], a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1, Generator* gen = nullptr);
// Normal(0, std), std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1, Generator* gen = nullptr);
// Uniform in [-bound, bound], bound = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).
Tensor& kaiming_uniform_(Tensor& t, double a = 0, FanMode mode = FanMode::FanIn,
                         const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
// Normal(0, std), std = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& t, double a = 0, FanMode mode = FanMode::FanIn,
                        const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
// Normal(mean, std) truncated to [a, b] (values outside are redrawn until all are inside).
Tensor& trunc_normal_(Tensor& t, double mean = 0, double std = 1, double a = -2, double b = 2,
                      Generator* gen = nullptr);
// A (semi-)orthogonal matrix (rows or columns orthonormal) scaled by gain; tensors with
// more than 2 dims are treated as [size(0), numel / size(0)]. As PyTorch: the QR factor Q
// of a normal matrix with the signs making diag(R) positive.
Tensor& orthogonal_(Tensor& t, double gain = 1, Generator* gen = nullptr);

}  // namespace kiln::nn::init
