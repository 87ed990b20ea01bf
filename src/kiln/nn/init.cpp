// nn::init: parameter initialisation as torch.nn.init.
#include "kiln/nn/init.h"

#include <cmath>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/random.h"

namespace kiln::nn::init {

namespace {

using autograd::NoGradGuard;

void check_float(const Tensor& t, const char* fn) {
  KILN_CHECK(t.defined(), ValueError, "nn::init::", fn, ": the tensor is undefined");
  KILN_CHECK(is_floating(t.dtype()), TypeError, "nn::init::", fn,
             ": expected a floating-point tensor, got ", dtype_name(t.dtype()));
}

int64_t fan(const Tensor& t, FanMode mode) {
  Fans f = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::FanIn ? f.fan_in : f.fan_out;
}

// Writes host values (row-major) into t, whatever its dtype and device.
void assign(Tensor& t, const std::vector<double>& v) {
  Tensor src = tensor_from(v, t.shape(), TensorOptions(DType::F64));
  Tensor dst = autograd::detach(t);
  copy_(dst, src);
}

// Inverse error function: an initial guess (Giles, 2010) refined by Newton steps.
double erfinv(double y) {
  if (y <= -1) return -INFINITY;
  if (y >= 1) return INFINITY;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    x = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941})
      x = c + x * w;
  } else {
    w = std::sqrt(w) - 3.0;
    x = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682})
      x = c + x * w;
  }
  x *= y;
  for (int i = 0; i < 3; ++i) {
    double err = std::erf(x) - y;
    x -= err / (2.0 / std::sqrt(M_PI) * std::exp(-x * x));
  }
  return x;
}

double norm_cdf(double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; }

}  // namespace

double calculate_gain(const std::string& nl, double param) {
  if (nl == "linear" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" ||
      nl == "conv_transpose1d" || nl == "conv_transpose2d" || nl == "conv_transpose3d" ||
      nl == "sigmoid")
    return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nl == "selu") return 3.0 / 4.0;
  KILN_THROW(ValueError, "calculate_gain: unsupported nonlinearity \"", nl,
             "\"; expected linear, conv1d/2d/3d, conv_transpose1d/2d/3d, sigmoid, tanh, relu, "
             "leaky_relu or selu");
}

Fans calculate_fan_in_and_fan_out(const Tensor& t) {
  KILN_CHECK(t.dim() >= 2, ValueError,
             "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
             "(got shape ", shape_str(t.shape()), ")");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double a, double b, Generator* gen) {
  check_float(t, "uniform_");
  KILN_CHECK(a <= b, ValueError, "nn::init::uniform_: expected a <= b, got a=", a, ", b=", b);
  NoGradGuard ng;
  kiln::uniform_(t, a, b, gen);
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_float(t, "normal_");
  KILN_CHECK(std >= 0, ValueError, "nn::init::normal_: expected std >= 0, got ", std);
  NoGradGuard ng;
  kiln::normal_(t, mean, std, gen);
  return t;
}

Tensor& constant_(Tensor& t, double value) {
  KILN_CHECK(t.defined(), ValueError, "nn::init::constant_: the tensor is undefined");
  NoGradGuard ng;
  t.fill_(value);
  return t;
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

Tensor& eye_(Tensor& t) {
  KILN_CHECK(t.defined() && t.dim() == 2, ValueError,
             "nn::init::eye_: only tensors with 2 dimensions are supported");
  NoGradGuard ng;
  Tensor dst = autograd::detach(t);
  copy_(dst, eye(t.size(0), t.size(1), TensorOptions(t.dtype(), t.device())));
  return t;
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check_float(t, "xavier_uniform_");
  Fans f = calculate_fan_in_and_fan_out(t);
  double std = gain * std::sqrt(2.0 / double(f.fan_in + f.fan_out));
  double a = std::sqrt(3.0) * std;
  return init::uniform_(t, -a, a, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  check_float(t, "xavier_normal_");
  Fans f = calculate_fan_in_and_fan_out(t);
  double std = gain * std::sqrt(2.0 / double(f.fan_in + f.fan_out));
  return init::normal_(t, 0.0, std, gen);
}

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, const std::string& nonlinearity,
                         Generator* gen) {
  check_float(t, "kaiming_uniform_");
  if (t.numel() == 0) return t;  // as PyTorch: nothing to initialise (no fan to divide by)
  double gain = calculate_gain(nonlinearity, a);
  double std = gain / std::sqrt(double(fan(t, mode)));
  double bound = std::sqrt(3.0) * std;
  return init::uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, const std::string& nonlinearity,
                        Generator* gen) {
  check_float(t, "kaiming_normal_");
  if (t.numel() == 0) return t;
  double gain = calculate_gain(nonlinearity, a);
  double std = gain / std::sqrt(double(fan(t, mode)));
  return init::normal_(t, 0.0, std, gen);
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, Generator* gen) {
  check_float(t, "trunc_normal_");
  KILN_CHECK(a < b && std > 0, ValueError,
             "nn::init::trunc_normal_: expected a < b and std > 0, got a=", a, ", b=", b,
             ", std=", std);
  // As PyTorch: uniform values in [2l-1, 2u-1] (l, u: the normal CDF at the bounds) mapped
  // through the inverse CDF, then clamped against rounding.
  double l = norm_cdf((a - mean) / std), u = norm_cdf((b - mean) / std);
  init::uniform_(t, 2 * l - 1, 2 * u - 1, gen);
  NoGradGuard ng;
  std::vector<double> v = t.to_vector<double>();
  for (double& x : v) x = std::min(std::max(erfinv(x) * std * std::sqrt(2.0) + mean, a), b);
  assign(t, v);
  return t;
}

Tensor& orthogonal_(Tensor& t, double gain, Generator* gen) {
  check_float(t, "orthogonal_");
  KILN_CHECK(t.dim() >= 2, ValueError,
             "nn::init::orthogonal_: only tensors with 2 or more dimensions are supported, got "
             "shape ", shape_str(t.shape()));
  if (t.numel() == 0) return t;
  int64_t rows = t.size(0), cols = t.numel() / rows;
  Tensor draw = empty({rows, cols}, TensorOptions(t.dtype(), t.device()));
  init::normal_(draw, 0, 1, gen);
  std::vector<double> a = draw.to_vector<double>();
  // Work on the tall matrix m x n (m >= n) whose columns are orthonormalised.
  bool transposed = rows < cols;
  int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;
  auto at = [&](int64_t i, int64_t j) -> double& {
    return transposed ? a[size_t(j * cols + i)] : a[size_t(i * cols + j)];
  };
  // Modified Gram-Schmidt, applied twice per column for stability. The result is the Q of
  // the QR decomposition whose R has a positive diagonal, which is what PyTorch produces.
  for (int64_t j = 0; j < n; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t k = 0; k < j; ++k) {
        double dot = 0;
        for (int64_t i = 0; i < m; ++i) dot += at(i, k) * at(i, j);
        for (int64_t i = 0; i < m; ++i) at(i, j) -= dot * at(i, k);
      }
    double norm = 0;
    for (int64_t i = 0; i < m; ++i) norm += at(i, j) * at(i, j);
    norm = std::sqrt(norm);
    KILN_CHECK(norm > 0, Error, "nn::init::orthogonal_: degenerate random matrix; try again");
    for (int64_t i = 0; i < m; ++i) at(i, j) /= norm;
  }
  for (double& x : a) x *= gain;
  NoGradGuard ng;
  assign(t, a);
  return t;
}

}  // namespace kiln::nn::init
