// Convolution layers: parameter shapes and PyTorch's initialisation, forward through
// nn::functional.
#include "kiln/nn/conv.h"

#include <cmath>

#include "kiln/nn/init.h"

namespace kiln::nn {

namespace {

std::vector<int64_t> expand(const char* layer, const char* what, std::vector<int64_t> v,
                            int64_t nd) {
  if (int64_t(v.size()) == nd) return v;
  KILN_CHECK(v.size() == 1, ValueError, layer, ": expected ", what, " to have 1 or ", nd,
             " entries, got ", v.size());
  return std::vector<int64_t>(size_t(nd), v[0]);
}

Shape weight_shape(const char* layer, bool transposed, int64_t in, int64_t out,
                   const std::vector<int64_t>& k, int64_t groups) {
  KILN_CHECK(in > 0 && out > 0, ValueError, layer, ": in_channels and out_channels must be "
             "positive, got ", in, " and ", out);
  KILN_CHECK(groups > 0, ValueError, layer, ": groups must be a positive integer, got ", groups);
  KILN_CHECK(in % groups == 0, ValueError, "in_channels must be divisible by groups (", in,
             " vs ", groups, ")");
  KILN_CHECK(out % groups == 0, ValueError, "out_channels must be divisible by groups (", out,
             " vs ", groups, ")");
  for (int64_t v : k)
    KILN_CHECK(v > 0, ValueError, layer, ": kernel_size must be positive, got ", v);
  Shape s = transposed ? Shape{in, out / groups} : Shape{out, in / groups};
  s.insert(s.end(), k.begin(), k.end());
  return s;
}

}  // namespace

ConvNd::ConvNd(const char* name, int64_t nd, bool tr, int64_t in, int64_t out,
               std::vector<int64_t> k, ConvOptionsNd o)
    : Module(name),
      in_channels(in),
      out_channels(out),
      spatial_dims(nd),
      transposed(tr),
      kernel_size(expand(name, "kernel_size", std::move(k), nd)),
      options(std::move(o)),
      weight(register_parameter(
          "weight", empty(weight_shape(name, tr, in, out, kernel_size, options.groups),
                          options.tensor))),
      bias(register_parameter("bias", options.bias ? empty({out}, options.tensor) : Tensor())) {
  KILN_CHECK(!options.tensor.dtype || is_floating(*options.tensor.dtype), TypeError, name,
             ": needs a floating-point parameter dtype, got ", dtype_name(*options.tensor.dtype));
  if (!options.padding.mode.empty())
    KILN_CHECK(!tr, ValueError, name, ": padding must be a list of integers for transposed "
               "convolution, got '", options.padding.mode, "'");
  reset_parameters();
}

void ConvNd::reset_parameters(Generator* gen) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, "leaky_relu", gen);
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).fan_in;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor ConvNd::run(const Tensor& x) const {
  namespace F = functional;
  const ConvOptionsNd& o = options;
  if (!transposed) {
    if (spatial_dims == 1) return F::conv1d(x, weight, bias, o.stride, o.padding, o.dilation, o.groups);
    if (spatial_dims == 2) return F::conv2d(x, weight, bias, o.stride, o.padding, o.dilation, o.groups);
    return F::conv3d(x, weight, bias, o.stride, o.padding, o.dilation, o.groups);
  }
  if (spatial_dims == 1)
    return F::conv_transpose1d(x, weight, bias, o.stride, o.padding.values, o.output_padding,
                               o.groups, o.dilation);
  return F::conv_transpose2d(x, weight, bias, o.stride, o.padding.values, o.output_padding,
                             o.groups, o.dilation);
}

std::string ConvNd::extra_repr() const {
  auto list = [](const std::vector<int64_t>& v) {
    std::string s = "(";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + (v.size() == 1 ? ",)" : ")");
  };
  std::string r = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + list(kernel_size) + ", stride=" +
                  list(expand("Conv", "stride", options.stride, spatial_dims));
  if (!options.padding.mode.empty())
    r += ", padding=" + options.padding.mode;
  else if (options.padding.values != std::vector<int64_t>{0})
    r += ", padding=" + list(options.padding.values);
  if (options.dilation != std::vector<int64_t>{1}) r += ", dilation=" + list(options.dilation);
  if (options.groups != 1) r += ", groups=" + std::to_string(options.groups);
  if (!bias.defined()) r += ", bias=False";
  return r;
}

}  // namespace kiln::nn
