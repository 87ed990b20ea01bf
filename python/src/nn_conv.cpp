// kiln._C._nn (continued): convolution, pooling and scaled_dot_product_attention of
// kiln::nn::functional and ops/pooling.h, for kiln.nn.functional. The Python wrappers turn
// torch's int-or-tuple arguments into lists (one entry, repeated, or one per spatial dim);
// pooling goes through the ops of ops/pooling.h so that every rank also returns indices.
#include <nanobind/stl/pair.h>

#include "bind.h"
#include "kiln/nn/functional_attention.h"
#include "kiln/nn/functional_conv.h"
#include "kiln/nn/functional_resize.h"
#include "kiln/ops/pooling.h"

namespace kiln::py {

namespace {

namespace F = kiln::nn::functional;
using Opt = std::optional<Tensor>;
using IntList = std::vector<int64_t>;

Tensor opt(const Opt& t) { return t ? *t : Tensor(); }

// padding: "same" / "valid" or a list of ints.
F::ConvPadding conv_padding(nb::handle h) {
  if (nb::isinstance<nb::str>(h)) return F::ConvPadding(nb::cast<std::string>(h));
  return F::ConvPadding(nb::cast<IntList>(h));
}

PoolOptions pool_options(IntList kernel, IntList stride, IntList padding) {
  PoolOptions o;
  o.kernel_size = std::move(kernel);
  o.stride = std::move(stride);
  o.padding = std::move(padding);
  return o;
}

}  // namespace

void bind_nn_conv(nb::module_& m) {
  m.def("conv", [](const Tensor& x, const Tensor& w, const Opt& b, int64_t nd, IntList stride,
                   nb::handle padding, IntList dilation, int64_t groups) {
    F::ConvPadding p = conv_padding(padding);
    return nogil([&] {
      Tensor bias = opt(b);
      if (nd == 1) return F::conv1d(x, w, bias, stride, p, dilation, groups);
      if (nd == 2) return F::conv2d(x, w, bias, stride, p, dilation, groups);
      KILN_CHECK(nd == 3, ValueError, "conv: 1, 2 or 3 spatial dims, got ", nd);
      return F::conv3d(x, w, bias, stride, p, dilation, groups);
    });
  }, nb::arg("input"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("nd"),
     nb::arg("stride"), nb::arg("padding"), nb::arg("dilation"), nb::arg("groups"));

  m.def("conv_transpose", [](const Tensor& x, const Tensor& w, const Opt& b, int64_t nd,
                             IntList stride, IntList padding, IntList output_padding,
                             int64_t groups, IntList dilation) {
    return nogil([&] {
      Tensor bias = opt(b);
      if (nd == 1)
        return F::conv_transpose1d(x, w, bias, stride, padding, output_padding, groups, dilation);
      if (nd == 2)
        return F::conv_transpose2d(x, w, bias, stride, padding, output_padding, groups, dilation);
      KILN_CHECK(nd == 3, ValueError, "conv_transpose: 1, 2 or 3 spatial dims, got ", nd);
      return F::conv_transpose3d(x, w, bias, stride, padding, output_padding, groups, dilation);
    });
  }, nb::arg("input"), nb::arg("weight"), nb::arg("bias").none(), nb::arg("nd"),
     nb::arg("stride"), nb::arg("padding"), nb::arg("output_padding"), nb::arg("groups"),
     nb::arg("dilation"));

  // (values, indices) over the trailing nd dims; the values alone without return_indices.
  m.def("max_pool", [](const Tensor& x, int64_t nd, IntList kernel, IntList stride,
                       IntList padding, IntList dilation, bool ceil_mode,
                       bool return_indices) -> nb::object {
    PoolOptions o = pool_options(std::move(kernel), std::move(stride), std::move(padding));
    o.dilation = std::move(dilation);
    o.ceil_mode = ceil_mode;
    if (!return_indices) return nb::cast(nogil([&] { return max_pool(x, nd, o); }));
    return nb::cast(nogil([&] { return max_pool_with_indices(x, nd, o); }));
  }, nb::arg("input"), nb::arg("nd"), nb::arg("kernel"), nb::arg("stride"), nb::arg("padding"),
     nb::arg("dilation"), nb::arg("ceil_mode"), nb::arg("return_indices") = true);
  m.def("avg_pool", [](const Tensor& x, int64_t nd, IntList kernel, IntList stride,
                       IntList padding, bool ceil_mode, bool count_include_pad,
                       std::optional<int64_t> divisor_override) {
    PoolOptions o = pool_options(std::move(kernel), std::move(stride), std::move(padding));
    o.ceil_mode = ceil_mode;
    o.count_include_pad = count_include_pad;
    o.divisor_override = divisor_override;
    return nogil([&] { return avg_pool(x, nd, o); });
  }, nb::arg("input"), nb::arg("nd"), nb::arg("kernel_size"), nb::arg("stride"),
     nb::arg("padding"), nb::arg("ceil_mode"), nb::arg("count_include_pad"),
     nb::arg("divisor_override").none());
  m.def("interpolate", [](const Tensor& x, const IntList& size, const std::vector<double>& scale,
                          const std::string& mode, std::optional<bool> align_corners,
                          std::optional<bool> recompute_scale_factor) {
    F::InterpolateOptions o;
    o.size = size;
    o.scale_factor = scale;
    o.mode = mode;
    o.align_corners = align_corners;
    o.recompute_scale_factor = recompute_scale_factor;
    return nogil([&] { return F::interpolate(x, o); });
  });
  m.def("adaptive_avg_pool", [](const Tensor& x, const IntList& output_size) {
    return adaptive_avg_pool(x, output_size);
  }, nb::call_guard<nb::gil_scoped_release>());
  m.def("adaptive_max_pool", [](const Tensor& x, const IntList& output_size) {
    return adaptive_max_pool_with_indices(x, output_size);
  }, nb::call_guard<nb::gil_scoped_release>());

  m.def("scaled_dot_product_attention", [](const Tensor& q, const Tensor& k, const Tensor& v,
                                           const Opt& mask, double dropout_p, bool is_causal,
                                           std::optional<double> scale, bool enable_gqa,
                                           Generator* gen) {
    return F::scaled_dot_product_attention(q, k, v, opt(mask), dropout_p, is_causal, scale, gen,
                                           enable_gqa);
  }, nb::arg("query"), nb::arg("key"), nb::arg("value"), nb::arg("attn_mask").none(),
     nb::arg("dropout_p"), nb::arg("is_causal"), nb::arg("scale").none(),
     nb::arg("enable_gqa"), nb::arg("generator").none() = nb::none(),
     nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace kiln::py
