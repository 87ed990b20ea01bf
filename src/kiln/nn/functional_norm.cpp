// nn::functional: layer_norm, rms_norm, group_norm, batch_norm.
#include <tuple>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/normalization.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::nn::functional {

namespace {

// The trailing dims of x that normalized_shape names, checked as PyTorch does.
std::vector<int64_t> trailing_dims(const char* fn, const Tensor& x, const Shape& normalized_shape) {
  int64_t k = int64_t(normalized_shape.size());
  bool ok = k >= 1 && x.dim() >= k &&
            Shape(x.shape().end() - k, x.shape().end()) == normalized_shape;
  KILN_CHECK(ok, ShapeError, fn, ": given normalized_shape=", shape_str(normalized_shape),
             ", expected input with shape [*", [&] {
               std::string s;
               for (int64_t d : normalized_shape) s += ", " + std::to_string(d);
               return s;
             }(), "], but got input of size ", shape_str(x.shape()));
  std::vector<int64_t> dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  return dims;
}

void check_affine(const char* fn, const char* what, const Tensor& t, const Shape& want) {
  KILN_CHECK(!t.defined() || t.shape() == want, ShapeError, fn, ": expected ", what,
             " of shape ", shape_str(want), ", got ", shape_str(t.shape()));
}

// The fused ops need a floating input and affine parameters of its dtype and device; other
// mixes (a float32 weight on a bfloat16 input, ...) take the composite path, which promotes.
bool fusable(const Tensor& x, const Tensor& p) {
  return is_floating(x.dtype()) &&
         (!p.defined() || (p.dtype() == x.dtype() && p.device() == x.device()));
}

double machine_epsilon(DType t) {
  switch (t) {
    case DType::F64: return 2.220446049250313e-16;
    case DType::F16: return 0.0009765625;
    case DType::BF16: return 0.0078125;
    default: return 1.1920928955078125e-07;
  }
}

// Shape [1, C, 1, ...] for per-channel tensors broadcasting against x [N, C, *].
Shape channel_shape(const Tensor& x) {
  Shape s(size_t(x.dim()), 1);
  s[1] = x.size(1);
  return s;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  auto dims = trailing_dims("layer_norm", x, normalized_shape);
  check_affine("layer_norm", "weight", weight, normalized_shape);
  check_affine("layer_norm", "bias", bias, normalized_shape);
  if (fusable(x, weight) && fusable(x, bias))
    return std::get<0>(native_layer_norm(x, int64_t(dims.size()), weight, bias, eps));
  Tensor mu = mean(x, dims, true);
  Tensor v = var(x, dims, 0, true);
  Tensor y = (x - mu) * rsqrt(v + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  auto dims = trailing_dims("rms_norm", x, normalized_shape);
  check_affine("rms_norm", "weight", weight, normalized_shape);
  double e = eps.value_or(machine_epsilon(x.dtype()));
  if (fusable(x, weight)) return std::get<0>(native_rms_norm(x, int64_t(dims.size()), weight, e));
  Tensor y = x * rsqrt(mean(x * x, dims, true) + e);
  if (weight.defined()) y = y * weight;
  return y;
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  KILN_CHECK(x.dim() >= 2, ShapeError, "group_norm: expected an input [N, C, *] with at least 2 "
             "dims, got shape ", shape_str(x.shape()));
  int64_t c = x.size(1);
  KILN_CHECK(num_groups > 0 && c % num_groups == 0, ValueError, "group_norm: expected the number "
             "of channels (", c, ") to be divisible by num_groups (", num_groups, ")");
  check_affine("group_norm", "weight", weight, {c});
  check_affine("group_norm", "bias", bias, {c});
  // The fused op on the CPU (two passes forward, two backward); elsewhere each group is a
  // layer_norm row without affine, then the per-channel affine in one pass.
  if (x.device().is_cpu() && fusable(x, weight) && fusable(x, bias))
    return std::get<0>(native_group_norm(x, weight, bias, num_groups, eps));
  Tensor g = reshape(x, {x.size(0), num_groups, -1});
  Tensor y = reshape(layer_norm(g, {g.size(2)}, Tensor(), Tensor(), eps), x.shape());
  if (weight.defined() && bias.defined())
    return addcmul(reshape(bias, channel_shape(x)), y, reshape(weight, channel_shape(x)));
  if (weight.defined()) y = y * reshape(weight, channel_shape(x));
  if (bias.defined()) y = y + reshape(bias, channel_shape(x));
  return y;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  KILN_CHECK(x.dim() >= 2, ShapeError, "batch_norm: expected an input [N, C, *] with at least 2 "
             "dims, got shape ", shape_str(x.shape()));
  int64_t c = x.size(1);
  for (auto [t, what] : {std::pair{&running_mean, "running_mean"}, {&running_var, "running_var"},
                         {&weight, "weight"}, {&bias, "bias"}})
    check_affine("batch_norm", what, *t, {c});
  Shape cs = channel_shape(x);
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  if (training) {
    int64_t count = c == 0 ? 0 : x.numel() / c;
    KILN_CHECK(count > 1, ValueError, "batch_norm: expected more than 1 value per channel when "
               "training, got input size ", shape_str(x.shape()));
    Tensor mu, v, y;
    // The fused op (decision 0051): contiguous float32 / bfloat16 CPU inputs with parameters of
    // their dtype; channels-last inputs keep the composite, which keeps their layout.
    const bool fused = x.device().is_cpu() && x.is_contiguous() &&
                       (x.dtype() == DType::F32 || x.dtype() == DType::BF16) &&
                       fusable(x, weight) && fusable(x, bias);
    if (fused) {
      std::tie(y, mu, v) = native_batch_norm(x, weight, bias, eps);
    } else {
      mu = mean(x, dims);
      v = var(x, dims, 0);
      y = (x - reshape(mu, cs)) * rsqrt(reshape(v, cs) + eps);
      if (weight.defined()) y = y * reshape(weight, cs);
      if (bias.defined()) y = y + reshape(bias, cs);
    }
    autograd::NoGradGuard no_grad;
    if (running_mean.defined()) {
      Tensor rm = autograd::detach(running_mean);
      copy_(rm, rm * (1 - momentum) + autograd::detach(mu) * momentum);
    }
    if (running_var.defined()) {
      Tensor rv = autograd::detach(running_var);
      Tensor unbiased = autograd::detach(v) * (double(count) / double(count - 1));
      copy_(rv, rv * (1 - momentum) + unbiased * momentum);
    }
    return y;
  }
  KILN_CHECK(running_mean.defined() && running_var.defined(), ValueError,
             "batch_norm: running_mean and running_var are needed when not training");
  // Eval: one scale and one shift per channel.
  Tensor scale = rsqrt(running_var + eps);
  if (weight.defined()) scale = scale * weight;
  Tensor shift = -running_mean * scale;
  if (bias.defined()) shift = shift + bias;
  // One pass over x (addcmul: shift + x * scale), not a multiply and an add.
  return addcmul(reshape(shift, cs), x, reshape(scale, cs));
}

}  // namespace kiln::nn::functional
