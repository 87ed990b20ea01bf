#pragma once
// Pooling layers as torch.nn's: MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d,
// AdaptiveMaxPool2d. An empty stride means stride = kernel_size.
#include <optional>
#include <string>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

struct PoolLayerOptions {
  std::vector<int64_t> stride{};
  std::vector<int64_t> padding{0};
  std::vector<int64_t> dilation{1};  // max pooling only
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only
  std::optional<int64_t> divisor_override{};  // AvgPool2d only
};

class PoolNd : public Module {
 public:
  enum class Kind { Max, Avg };
  PoolNd(const char* name, Kind kind, int64_t spatial_dims, std::vector<int64_t> kernel_size,
         PoolLayerOptions options);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;

  const Kind kind;
  const int64_t spatial_dims;
  const std::vector<int64_t> kernel_size;
  const PoolLayerOptions options;
};

#define KILN_POOL_MODULE(NAME, KIND, DIMS)                                              \
  class NAME : public PoolNd {                                                         \
   public:                                                                             \
    explicit NAME(std::vector<int64_t> kernel_size, PoolLayerOptions options = {})     \
        : PoolNd(#NAME, Kind::KIND, DIMS, std::move(kernel_size), std::move(options)) {} \
  };
KILN_POOL_MODULE(MaxPool1d, Max, 1)
KILN_POOL_MODULE(MaxPool2d, Max, 2)
KILN_POOL_MODULE(AvgPool1d, Avg, 1)
KILN_POOL_MODULE(AvgPool2d, Avg, 2)
#undef KILN_POOL_MODULE

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::vector<int64_t> output_size)
      : Module("AdaptiveAvgPool2d"), output_size(std::move(output_size)) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  const std::vector<int64_t> output_size;
};

class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(int64_t output_size)
      : Module("AdaptiveAvgPool1d"), output_size(output_size) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  const int64_t output_size;
};

class AdaptiveMaxPool2d : public Module {
 public:
  explicit AdaptiveMaxPool2d(std::vector<int64_t> output_size)
      : Module("AdaptiveMaxPool2d"), output_size(std::move(output_size)) {}
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  std::string extra_repr() const override;
  const std::vector<int64_t> output_size;
};

}  // namespace kiln::nn
