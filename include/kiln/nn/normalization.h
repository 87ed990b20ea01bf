#pragma once
// Normalisation layers: LayerNorm, RMSNorm, GroupNorm, BatchNorm1d, BatchNorm2d.
#include <optional>

#include "kiln/nn/module.h"
#include "kiln/ops/factory.h"

namespace kiln::nn {

// Normalises over the trailing normalized_shape dims; weight ones, bias zeros.
class LayerNorm : public Module {
 public:
  LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
            bool bias = true, TensorOptions options = {});
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  void reset_parameters();
  std::string extra_repr() const override;

  const Shape normalized_shape;
  const double eps;
  const bool elementwise_affine;
  Tensor& weight;
  Tensor& bias;
};

// x / sqrt(mean(x^2) + eps) * weight over the trailing dims; eps unset: machine epsilon of
// the input dtype.
class RMSNorm : public Module {
 public:
  RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt,
          bool elementwise_affine = true, TensorOptions options = {});
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  void reset_parameters();
  std::string extra_repr() const override;

  const Shape normalized_shape;
  const std::optional<double> eps;
  const bool elementwise_affine;
  Tensor& weight;
};

class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            TensorOptions options = {});
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  void reset_parameters();
  std::string extra_repr() const override;

  const int64_t num_groups, num_channels;
  const double eps;
  const bool affine;
  Tensor& weight;
  Tensor& bias;
};

// Batch normalisation over [N, C, *]. Training: batch statistics, and (track_running_stats)
// running_mean/running_var updated with momentum (unset: the cumulative average,
// 1 / num_batches_tracked); eval: the running statistics.
class BatchNormBase : public Module {
 public:
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  void reset_running_stats();
  void reset_parameters();
  std::string extra_repr() const override;

  const int64_t num_features;
  const double eps;
  const std::optional<double> momentum;
  const bool affine, track_running_stats;
  Tensor& weight;
  Tensor& bias;
  Tensor& running_mean;
  Tensor& running_var;
  Tensor& num_batches_tracked;  // int64 scalar

 protected:
  BatchNormBase(const char* type_name, int64_t num_features, double eps,
                std::optional<double> momentum, bool affine, bool track_running_stats,
                TensorOptions options);
  virtual void check_input_dim(const Tensor& x) const = 0;
};

// Input [N, C] or [N, C, L].
class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true, TensorOptions options = {})
      : BatchNormBase("BatchNorm1d", num_features, eps, momentum, affine, track_running_stats,
                      options) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

// Input [N, C, H, W].
class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true, TensorOptions options = {})
      : BatchNormBase("BatchNorm2d", num_features, eps, momentum, affine, track_running_stats,
                      options) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

}  // namespace kiln::nn
