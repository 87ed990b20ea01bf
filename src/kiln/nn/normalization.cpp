// LayerNorm, RMSNorm, GroupNorm, BatchNorm1d/2d.
#include "kiln/nn/normalization.h"

#include <sstream>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/ops/elementwise.h"

namespace kiln::nn {

namespace {
TensorOptions float_options(TensorOptions o) {
  KILN_CHECK(!o.dtype || is_floating(*o.dtype), TypeError,
             "nn layers need a floating-point parameter dtype, got ", dtype_name(*o.dtype));
  return o;
}
Tensor maybe(bool on, const Shape& shape, TensorOptions o) {
  return on ? empty(shape, float_options(o)) : Tensor();
}
std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
std::string shape_tuple(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}
}  // namespace

LayerNorm::LayerNorm(Shape shape, double e, bool affine, bool with_bias, TensorOptions o)
    : Module("LayerNorm"),
      normalized_shape(std::move(shape)),
      eps(e),
      elementwise_affine(affine),
      weight(register_parameter("weight", maybe(affine, normalized_shape, o))),
      bias(register_parameter("bias", maybe(affine && with_bias, normalized_shape, o))) {
  reset_parameters();
}
void LayerNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}
Tensor LayerNorm::forward(const Tensor& x) {
  return functional::layer_norm(x, normalized_shape, weight, bias, eps);
}
std::string LayerNorm::extra_repr() const {
  return shape_tuple(normalized_shape) + ", eps=" + fmt(eps) +
         ", elementwise_affine=" + (elementwise_affine ? "true" : "false");
}

RMSNorm::RMSNorm(Shape shape, std::optional<double> e, bool affine, TensorOptions o)
    : Module("RMSNorm"),
      normalized_shape(std::move(shape)),
      eps(e),
      elementwise_affine(affine),
      weight(register_parameter("weight", maybe(affine, normalized_shape, o))) {
  reset_parameters();
}
void RMSNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
}
Tensor RMSNorm::forward(const Tensor& x) {
  return functional::rms_norm(x, normalized_shape, weight, eps);
}
std::string RMSNorm::extra_repr() const {
  return shape_tuple(normalized_shape) + ", eps=" + (eps ? fmt(*eps) : "None") +
         ", elementwise_affine=" + (elementwise_affine ? "true" : "false");
}

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double e, bool aff, TensorOptions o)
    : Module("GroupNorm"),
      num_groups(groups),
      num_channels(channels),
      eps(e),
      affine(aff),
      weight(register_parameter("weight", maybe(aff, {channels}, o))),
      bias(register_parameter("bias", maybe(aff, {channels}, o))) {
  KILN_CHECK(groups > 0 && channels >= 0 && channels % groups == 0, ValueError,
             "GroupNorm: num_channels (", channels, ") must be divisible by num_groups (", groups,
             ")");
  reset_parameters();
}
void GroupNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}
Tensor GroupNorm::forward(const Tensor& x) {
  KILN_CHECK(x.dim() >= 2 && x.size(1) == num_channels, ShapeError, "GroupNorm: expected input "
             "[N, ", num_channels, ", *], got shape ", shape_str(x.shape()));
  return functional::group_norm(x, num_groups, weight, bias, eps);
}
std::string GroupNorm::extra_repr() const {
  return std::to_string(num_groups) + ", " + std::to_string(num_channels) + ", eps=" + fmt(eps) +
         ", affine=" + (affine ? "true" : "false");
}

BatchNormBase::BatchNormBase(const char* type_name, int64_t n, double e, std::optional<double> m,
                             bool aff, bool track, TensorOptions o)
    : Module(type_name),
      num_features(n),
      eps(e),
      momentum(m),
      affine(aff),
      track_running_stats(track),
      weight(register_parameter("weight", maybe(aff, {n}, o))),
      bias(register_parameter("bias", maybe(aff, {n}, o))),
      running_mean(register_buffer("running_mean", maybe(track, {n}, o))),
      running_var(register_buffer("running_var", maybe(track, {n}, o))),
      num_batches_tracked(register_buffer(
          "num_batches_tracked",
          track ? zeros({}, TensorOptions(DType::I64, o.device)) : Tensor())) {
  KILN_CHECK(n >= 0, ValueError, type_name, ": num_features must be non-negative, got ", n);
  reset_parameters();
}

void BatchNormBase::reset_running_stats() {
  if (!track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  autograd::NoGradGuard no_grad;
  num_batches_tracked.zero_();
}

void BatchNormBase::reset_parameters() {
  reset_running_stats();
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor BatchNormBase::forward(const Tensor& x) {
  check_input_dim(x);
  KILN_CHECK(x.size(1) == num_features, ShapeError, type_name(), ": expected ", num_features,
             " channels (dim 1), got input of shape ", shape_str(x.shape()));
  double factor = momentum.value_or(0.0);
  if (is_training() && track_running_stats) {
    autograd::NoGradGuard no_grad;
    kiln::add_(num_batches_tracked, Scalar(int64_t(1)));
    if (!momentum) factor = 1.0 / double(num_batches_tracked.item<int64_t>());
  }
  // Batch statistics when training, or when there are no running statistics to use.
  bool use_batch_stats = is_training() || !track_running_stats;
  bool update = is_training() && track_running_stats;
  return functional::batch_norm(x, update || !use_batch_stats ? running_mean : Tensor(),
                                update || !use_batch_stats ? running_var : Tensor(), weight, bias,
                                use_batch_stats, factor, eps);
}

std::string BatchNormBase::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + fmt(eps) +
         ", momentum=" + (momentum ? fmt(*momentum) : "None") +
         ", affine=" + (affine ? "true" : "false") +
         ", track_running_stats=" + (track_running_stats ? "true" : "false");
}

void BatchNorm1d::check_input_dim(const Tensor& x) const {
  KILN_CHECK(x.dim() == 2 || x.dim() == 3, ShapeError,
             "BatchNorm1d: expected 2D or 3D input (got ", x.dim(), "D input)");
}

void BatchNorm2d::check_input_dim(const Tensor& x) const {
  KILN_CHECK(x.dim() == 4, ShapeError, "BatchNorm2d: expected 4D input (got ", x.dim(), "D input)");
}

}  // namespace kiln::nn
