// Pooling layers over nn::functional.
#include "kiln/nn/pooling.h"

#include "kiln/nn/functional_conv.h"
#include "kiln/ops/pooling.h"

namespace kiln::nn {

namespace {
std::string list(const std::vector<int64_t>& v) {
  if (v.size() == 1) return std::to_string(v[0]);
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}
}  // namespace

PoolNd::PoolNd(const char* name, Kind k, int64_t nd, std::vector<int64_t> kernel,
               PoolLayerOptions o)
    : Module(name), kind(k), spatial_dims(nd), kernel_size(std::move(kernel)),
      options(std::move(o)) {}

Tensor PoolNd::forward(const Tensor& x) const {
  PoolOptions o;
  o.kernel_size = kernel_size;
  o.stride = options.stride;
  o.padding = options.padding;
  o.dilation = options.dilation;
  o.ceil_mode = options.ceil_mode;
  o.count_include_pad = options.count_include_pad;
  o.divisor_override = options.divisor_override;
  if (kind == Kind::Max) return max_pool(x, spatial_dims, o);
  return avg_pool(x, spatial_dims, o);
}

std::string PoolNd::extra_repr() const {
  std::string r = "kernel_size=" + list(kernel_size) +
                  ", stride=" + list(options.stride.empty() ? kernel_size : options.stride) +
                  ", padding=" + list(options.padding);
  if (kind == Kind::Max) r += ", dilation=" + list(options.dilation);
  r += std::string(", ceil_mode=") + (options.ceil_mode ? "True" : "False");
  return r;
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) const {
  return functional::adaptive_avg_pool2d(x, output_size);
}
std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + list(output_size); }
Tensor AdaptiveAvgPool1d::forward(const Tensor& x) const {
  return functional::adaptive_avg_pool1d(x, output_size);
}
std::string AdaptiveAvgPool1d::extra_repr() const {
  return "output_size=" + std::to_string(output_size);
}
Tensor AdaptiveMaxPool2d::forward(const Tensor& x) const {
  return functional::adaptive_max_pool2d(x, output_size);
}
std::string AdaptiveMaxPool2d::extra_repr() const { return "output_size=" + list(output_size); }

}  // namespace kiln::nn
