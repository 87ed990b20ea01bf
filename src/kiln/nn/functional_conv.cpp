// nn::functional convolution and pooling: unbatched inputs, "same"/"valid" padding and the
// per-rank entry points over the ops in ops/conv.h and ops/pooling.h.
#include "kiln/nn/functional_conv.h"

#include "kiln/core/error.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/pooling.h"
#include "kiln/ops/views.h"

namespace kiln::nn::functional {

namespace {

std::vector<int64_t> per_dim(const char* op, const char* what, const IntList& v, int64_t nd) {
  if (int64_t(v.size()) == nd) return v;
  KILN_CHECK(v.size() == 1, Error, op, ": expected ", what, " to be a single integer or a list "
             "of ", nd, " integers, got a list of ", v.size());
  return IntList(size_t(nd), v[0]);
}

// Adds the batch dim to an unbatched input; `batched` tells the caller to drop it again.
Tensor batch(const char* op, const Tensor& x, int64_t nd, bool& added) {
  KILN_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, ShapeError, "Expected ", nd + 1,
             "D (unbatched) or ", nd + 2, "D (batched) input to ", op,
             ", but got input of size: ", shape_str(x.shape()));
  added = x.dim() == nd + 1;
  return added ? unsqueeze(x, 0) : x;
}

Tensor conv_nd(const char* op, int64_t nd, const Tensor& x_in, const Tensor& weight,
               const Tensor& bias, const IntList& stride, const ConvPadding& padding,
               const IntList& dilation, int64_t groups) {
  KILN_CHECK(weight.dim() == nd + 2, ShapeError, op, ": expected a weight of ", nd + 2,
             " dims [out, in / groups, *kernel], got ", shape_str(weight.shape()));
  bool added = false;
  Tensor x = batch(op, x_in, nd, added);
  ConvOptions o;
  o.stride = per_dim(op, "stride", stride, nd);
  o.dilation = per_dim(op, "dilation", dilation, nd);
  o.groups = groups;
  if (padding.mode.empty() || padding.mode == "valid") {
    o.padding = padding.mode.empty() ? per_dim(op, "padding", padding.values, nd)
                                     : IntList(size_t(nd), 0);
  } else {
    KILN_CHECK(padding.mode == "same", ValueError, "Invalid padding string '", padding.mode,
               "', should be one of {'valid', 'same'}");
    for (int64_t s : o.stride)
      KILN_CHECK(s == 1, ValueError, "padding='same' is not supported for strided convolutions");
    // Total padding dilation*(k-1) per dim; an odd total puts the extra row at the end,
    // padded explicitly since the convolution pads symmetrically.
    o.padding.assign(size_t(nd), 0);
    std::vector<int64_t> extra;  // F.pad order: last dim first
    bool asymmetric = false;
    for (int64_t d = nd - 1; d >= 0; --d) {
      const int64_t total = o.dilation[size_t(d)] * (weight.size(d + 2) - 1);
      o.padding[size_t(d)] = total / 2;
      extra.push_back(0);
      extra.push_back(total % 2);
      asymmetric = asymmetric || total % 2 != 0;
    }
    if (asymmetric) x = pad(x, extra);
  }
  Tensor y = convolution(x, weight, bias, o);
  return added ? squeeze(y, std::vector<int64_t>{0}) : y;
}

Tensor conv_transpose_nd(const char* op, int64_t nd, const Tensor& x_in, const Tensor& weight,
                         const Tensor& bias, const IntList& stride, const IntList& padding,
                         const IntList& output_padding, int64_t groups,
                         const IntList& dilation) {
  KILN_CHECK(weight.dim() == nd + 2, ShapeError, op, ": expected a weight of ", nd + 2,
             " dims [in, out / groups, *kernel], got ", shape_str(weight.shape()));
  bool added = false;
  Tensor x = batch(op, x_in, nd, added);
  ConvOptions o{per_dim(op, "stride", stride, nd), per_dim(op, "padding", padding, nd),
                per_dim(op, "dilation", dilation, nd), true,
                per_dim(op, "output_padding", output_padding, nd), groups};
  Tensor y = convolution(x, weight, bias, o);
  return added ? squeeze(y, std::vector<int64_t>{0}) : y;
}

PoolOptions pool_options(const char* op, int64_t nd, const IntList& kernel, const IntList& stride,
                         const IntList& padding) {
  PoolOptions o;
  o.kernel_size = per_dim(op, "kernel_size", kernel, nd);
  o.stride = stride.empty() ? o.kernel_size : per_dim(op, "stride", stride, nd);
  o.padding = per_dim(op, "padding", padding, nd);
  return o;
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, const IntList& s,
              const ConvPadding& p, const IntList& d, int64_t g) {
  return conv_nd("conv1d", 1, x, w, b, s, p, d, g);
}
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const IntList& s,
              const ConvPadding& p, const IntList& d, int64_t g) {
  return conv_nd("conv2d", 2, x, w, b, s, p, d, g);
}
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b, const IntList& s,
              const ConvPadding& p, const IntList& d, int64_t g) {
  return conv_nd("conv3d", 3, x, w, b, s, p, d, g);
}
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b, const IntList& s,
                        const IntList& p, const IntList& op, int64_t g, const IntList& d) {
  return conv_transpose_nd("conv_transpose1d", 1, x, w, b, s, p, op, g, d);
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, const IntList& s,
                        const IntList& p, const IntList& op, int64_t g, const IntList& d) {
  return conv_transpose_nd("conv_transpose2d", 2, x, w, b, s, p, op, g, d);
}
Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const Tensor& b, const IntList& s,
                        const IntList& p, const IntList& op, int64_t g, const IntList& d) {
  return conv_transpose_nd("conv_transpose3d", 3, x, w, b, s, p, op, g, d);
}

Tensor max_pool1d(const Tensor& x, const IntList& k, const IntList& s, const IntList& p,
                  const IntList& d, bool ceil) {
  PoolOptions o = pool_options("max_pool1d", 1, k, s, p);
  o.dilation = per_dim("max_pool1d", "dilation", d, 1);
  o.ceil_mode = ceil;
  return max_pool(x, 1, o);
}
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const IntList& k,
                                                  const IntList& s, const IntList& p,
                                                  const IntList& d, bool ceil) {
  PoolOptions o = pool_options("max_pool2d", 2, k, s, p);
  o.dilation = per_dim("max_pool2d", "dilation", d, 2);
  o.ceil_mode = ceil;
  return max_pool_with_indices(x, 2, o);
}
Tensor max_pool2d(const Tensor& x, const IntList& k, const IntList& s, const IntList& p,
                  const IntList& d, bool ceil) {
  PoolOptions o = pool_options("max_pool2d", 2, k, s, p);
  o.dilation = per_dim("max_pool2d", "dilation", d, 2);
  o.ceil_mode = ceil;
  return max_pool(x, 2, o);
}
Tensor avg_pool1d(const Tensor& x, const IntList& k, const IntList& s, const IntList& p,
                  bool ceil, bool include_pad) {
  PoolOptions o = pool_options("avg_pool1d", 1, k, s, p);
  o.ceil_mode = ceil;
  o.count_include_pad = include_pad;
  return avg_pool(x, 1, o);
}
Tensor avg_pool2d(const Tensor& x, const IntList& k, const IntList& s, const IntList& p,
                  bool ceil, bool include_pad, std::optional<int64_t> divisor) {
  PoolOptions o = pool_options("avg_pool2d", 2, k, s, p);
  o.ceil_mode = ceil;
  o.count_include_pad = include_pad;
  o.divisor_override = divisor;
  return avg_pool(x, 2, o);
}
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  return adaptive_avg_pool(x, {output_size});
}
Tensor adaptive_avg_pool2d(const Tensor& x, const IntList& output_size) {
  return adaptive_avg_pool(x, per_dim("adaptive_avg_pool2d", "output_size", output_size, 2));
}
Tensor adaptive_max_pool2d(const Tensor& x, const IntList& output_size) {
  return adaptive_max_pool_with_indices(
             x, per_dim("adaptive_max_pool2d", "output_size", output_size, 2))
      .first;
}

}  // namespace kiln::nn::functional
