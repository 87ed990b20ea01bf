// Convolution and pooling. ONNX pads may differ at the two ends of a dim (and auto_pad
// derives them from the input size); kiln's ops pad symmetrically, so uneven padding is
// applied to the input first (zeros for convolution, -inf for max pooling) and the op runs
// unpadded. Ceil mode is reproduced by padding the end so the last window fits.
#include <algorithm>
#include <limits>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/conv.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/pooling.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end;
};

std::vector<int64_t> per_dim(const OpContext& ctx, const char* name, size_t n, int64_t dflt) {
  std::vector<int64_t> v = ctx.attr_ints(name, std::vector<int64_t>(n, dflt));
  KILN_CHECK(v.size() == n, ValueError, "attribute ", name, " has ", v.size(), " entries; expected ", n,
             " (one per spatial dim)");
  return v;
}

// Window attributes for an input [N, C, *spatial] and the given kernel size.
Window window_attrs(const OpContext& ctx, const Tensor& x, std::vector<int64_t> kernel) {
  const size_t n = size_t(x.dim() - 2);
  KILN_CHECK(x.dim() >= 3, ShapeError, "input must be [N, C, spatial...], got ", shape_str(x.shape()));
  KILN_CHECK(kernel.size() == n, ValueError, "kernel has ", kernel.size(), " dims but the input has ", n,
             " spatial dims");
  Window w;
  w.kernel = std::move(kernel);
  w.strides = per_dim(ctx, "strides", n, 1);
  w.dilations = per_dim(ctx, "dilations", n, 1);
  for (size_t i = 0; i < n; ++i) {
    KILN_CHECK(w.kernel[i] >= 1 && w.strides[i] >= 1 && w.dilations[i] >= 1, ValueError,
               "kernel, strides and dilations must be positive");
  }
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  w.pad_begin.assign(n, 0);
  w.pad_end.assign(n, 0);
  if (auto_pad == "NOTSET") {
    std::vector<int64_t> pads = per_dim(ctx, "pads", 2 * n, 0);
    for (size_t i = 0; i < n; ++i) {
      w.pad_begin[i] = pads[i];
      w.pad_end[i] = pads[i + n];
      KILN_CHECK(pads[i] >= 0 && pads[i + n] >= 0, ValueError, "pads must not be negative");
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      const int64_t in = x.size(int64_t(i) + 2), s = w.strides[i];
      const int64_t out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + (w.kernel[i] - 1) * w.dilations[i] + 1 - in);
      w.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[i] = total - w.pad_begin[i];
    }
  } else {
    KILN_CHECK(auto_pad == "VALID", ValueError, "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got ",
               quoted(auto_pad));
  }
  return w;
}

// kiln pad pairs (last dim first) from per-spatial-dim begin/end amounts.
std::vector<int64_t> pad_pairs(const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
  std::vector<int64_t> pairs;
  for (size_t i = begin.size(); i-- > 0;) {
    pairs.push_back(begin[i]);
    pairs.push_back(end[i]);
  }
  return pairs;
}

bool symmetric(const Window& w) { return w.pad_begin == w.pad_end; }

std::vector<Tensor> op_conv(OpContext& ctx) {
  Tensor x = ctx.input(0);
  const Tensor& weight = ctx.input(1);
  KILN_CHECK(weight.dim() == x.dim(), ShapeError, "weight ", shape_str(weight.shape()),
             " must have the input's rank ", x.dim());
  std::vector<int64_t> kernel(weight.shape().begin() + 2, weight.shape().end());
  Window w = window_attrs(ctx, x, ctx.attr_ints("kernel_shape", kernel));
  ConvOptions o;
  o.stride = w.strides;
  o.dilation = w.dilations;
  o.groups = ctx.attr_int("group", 1);
  if (symmetric(w)) {
    o.padding = w.pad_begin;
  } else {
    x = pad(x, pad_pairs(w.pad_begin, w.pad_end), "constant", 0);
    o.padding.assign(w.kernel.size(), 0);
  }
  // Image layers run on channels-last activations (decision 0062): oneDNN's direct kernels
  // read and write nhwc as it is, where NCHW costs a reorder to its blocked layout and back
  // in every layer; the output stays channels-last, so the next layer's input already is.
  if (x.dim() == 4 && (x.dtype() == DType::F32 || x.dtype() == DType::BF16) && x.size(1) > 1 &&
      !x.is_channels_last())
    x = x.contiguous(MemoryFormat::ChannelsLast);
  // An activation folded into this Conv at load (conv_folding.cpp): applied as the
  // convolution writes its output.
  ConvEpilogue e;
  if (ctx.has_attr("kiln_activation")) {
    e.activation = ConvActivation(ctx.attr_int("kiln_activation"));
    e.alpha = ctx.attr_float("kiln_alpha", 0.0f);
    e.beta = ctx.attr_float("kiln_beta", 0.0f);
  }
  return one(convolution_activation(x, weight, ctx.has_input(2) ? ctx.input(2) : Tensor(), o,
                                    e));
}

std::vector<Tensor> op_conv_transpose(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& weight = ctx.input(1);
  const size_t n = size_t(x.dim() - 2);
  KILN_CHECK(x.dim() >= 3 && weight.dim() == x.dim(), ShapeError, "input ", shape_str(x.shape()),
             " and weight ", shape_str(weight.shape()), " must be [N, C, spatial...] of equal rank");
  std::vector<int64_t> kernel = ctx.attr_ints(
      "kernel_shape", std::vector<int64_t>(weight.shape().begin() + 2, weight.shape().end()));
  std::vector<int64_t> strides = per_dim(ctx, "strides", n, 1);
  std::vector<int64_t> dilations = per_dim(ctx, "dilations", n, 1);
  std::vector<int64_t> out_pad = per_dim(ctx, "output_padding", n, 0);
  std::vector<int64_t> pads = per_dim(ctx, "pads", 2 * n, 0);
  std::vector<int64_t> begin(pads.begin(), pads.begin() + int64_t(n)), end(pads.begin() + int64_t(n), pads.end());
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  const bool has_output_shape = ctx.has_attr("output_shape");
  if (has_output_shape || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    std::vector<int64_t> out_shape = has_output_shape ? ctx.attr_ints("output_shape") : std::vector<int64_t>{};
    if (out_shape.size() == n + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    for (size_t i = 0; i < n; ++i) {
      const int64_t in = x.size(int64_t(i) + 2);
      const int64_t target = has_output_shape ? out_shape.at(i) : in * strides[i];
      const int64_t total = strides[i] * (in - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - target;
      // Floor division, as the ONNX reference: a negative total (an output larger than the
      // unpadded result) adds its extra rows at the end.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (auto_pad == "SAME_UPPER") {
        begin[i] = half;
        end[i] = total - half;
      } else {
        begin[i] = total - half;
        end[i] = half;
      }
    }
  } else if (auto_pad == "VALID") {
    std::fill(begin.begin(), begin.end(), 0);
    std::fill(end.begin(), end.end(), 0);
  }
  ConvOptions o;
  o.transposed = true;
  o.stride = strides;
  o.dilation = dilations;
  o.groups = ctx.attr_int("group", 1);
  o.padding.assign(n, 0);
  o.output_padding.assign(n, 0);
  // The unpadded result, then output_padding zeros at the end and the pads cropped (a
  // negative kiln pad crops).
  Tensor y = convolution(x, weight, Tensor(), o);
  std::vector<int64_t> crop_begin(n), crop_end(n);
  for (size_t i = 0; i < n; ++i) {
    crop_begin[i] = -begin[i];
    crop_end[i] = out_pad[i] - end[i];
  }
  if (std::any_of(crop_begin.begin(), crop_begin.end(), [](int64_t v) { return v != 0; }) ||
      std::any_of(crop_end.begin(), crop_end.end(), [](int64_t v) { return v != 0; }))
    y = pad(y, pad_pairs(crop_begin, crop_end), "constant", 0);
  if (ctx.has_input(2)) {
    Shape s(size_t(y.dim()), 1);
    s[1] = ctx.input(2).numel();
    y = add(y, reshape(ctx.input(2), s));
  }
  return one(y);
}

// The padding at the end each dim needs beyond pad_end so that ceil mode's last window fits.
std::vector<int64_t> ceil_extra(const Tensor& x, const Window& w, bool ceil_mode) {
  std::vector<int64_t> extra(w.kernel.size(), 0);
  if (!ceil_mode) return extra;
  for (size_t i = 0; i < extra.size(); ++i) {
    const int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
    const int64_t len = x.size(int64_t(i) + 2) + w.pad_begin[i] + w.pad_end[i];
    const int64_t out = (len - span + w.strides[i] - 1) / w.strides[i] + 1;
    extra[i] = std::max<int64_t>(0, (out - 1) * w.strides[i] + span - len);
  }
  return extra;
}

std::vector<int64_t> plus(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

std::vector<Tensor> op_max_pool(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Window w = window_attrs(ctx, x, ctx.attr_ints("kernel_shape"));
  const bool ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
  const size_t n = w.kernel.size();
  std::vector<int64_t> end = plus(w.pad_end, ceil_extra(x, w, ceil_mode));
  // kiln pools floating tensors; integer inputs are pooled exactly in float64.
  Tensor xf = is_floating(x.dtype()) ? x : to_dtype(x, DType::F64);
  Tensor xp = pad(xf, pad_pairs(w.pad_begin, end), "constant", -std::numeric_limits<double>::infinity());
  PoolOptions o;
  o.kernel_size = w.kernel;
  o.stride = w.strides;
  o.padding.assign(n, 0);
  o.dilation = w.dilations;
  auto [values, flat] = max_pool_with_indices(xp, int64_t(n), o);
  std::vector<Tensor> out{cast(values, x.dtype())};
  if (ctx.wants_output(1)) {
    // kiln's index is flat in the padded plane; ONNX's is flat in the whole unpadded input
    // (row-major, or column-major over the spatial dims with storage_order = 1).
    const bool col_major = ctx.attr_int("storage_order", 0) != 0;
    Tensor rem = flat;
    std::vector<Tensor> coord(n);
    for (size_t i = n; i-- > 0;) {
      const int64_t padded_size = xp.size(int64_t(i) + 2);
      coord[i] = sub(remainder(rem, padded_size), w.pad_begin[i]);
      rem = div(rem, padded_size, "floor");
    }
    Tensor idx = zeros_like(flat);
    int64_t plane = 1;
    if (col_major) {
      for (size_t i = n; i-- > 0;) {
        idx = add(mul(idx, x.size(int64_t(i) + 2)), coord[i]);
        plane *= x.size(int64_t(i) + 2);
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        idx = add(mul(idx, x.size(int64_t(i) + 2)), coord[i]);
        plane *= x.size(int64_t(i) + 2);
      }
    }
    const int64_t channels = x.size(0) * x.size(1);
    Shape s(size_t(x.dim()), 1);
    s[0] = x.size(0);
    s[1] = x.size(1);
    Tensor base = reshape(mul(arange(channels, TensorOptions(DType::I64, x.device())), plane), s);
    out.push_back(add(idx, base));
  }
  return out;
}

// Average pooling as window sums divided by window counts, which covers uneven pads,
// count_include_pad and ceil mode alike.
std::vector<Tensor> op_avg_pool(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Window w = window_attrs(ctx, x, ctx.attr_ints("kernel_shape"));
  const bool ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
  const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  const size_t n = w.kernel.size();
  std::vector<int64_t> extra = ceil_extra(x, w, ceil_mode);
  std::vector<int64_t> end = plus(w.pad_end, extra);
  PoolOptions o;
  o.kernel_size = w.kernel;
  o.stride = w.strides;
  o.padding.assign(n, 0);
  o.divisor_override = 1;
  Tensor sums = avg_pool(pad(x, pad_pairs(w.pad_begin, end), "constant", 0), int64_t(n), o);
  Shape plane_shape(x.shape().begin() + 2, x.shape().end());
  plane_shape.insert(plane_shape.begin(), {1, 1});
  Tensor mask = ones(plane_shape, TensorOptions(x.dtype(), x.device()));
  if (include_pad) {
    mask = pad(pad(mask, pad_pairs(w.pad_begin, w.pad_end), "constant", 1),
               pad_pairs(std::vector<int64_t>(n, 0), extra), "constant", 0);
  } else {
    mask = pad(mask, pad_pairs(w.pad_begin, end), "constant", 0);
  }
  Tensor counts = avg_pool(mask, int64_t(n), o);
  return one(div(sums, counts));
}

std::vector<Tensor> op_lp_pool(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Window w = window_attrs(ctx, x, ctx.attr_ints("kernel_shape"));
  const double p = double(ctx.attr_int("p", 2));
  const size_t n = w.kernel.size();
  PoolOptions o;
  o.kernel_size = w.kernel;
  o.stride = w.strides;
  o.padding.assign(n, 0);
  o.divisor_override = 1;
  Tensor powered = pow(abs(x), scalar_like(x, p));
  Tensor sums = avg_pool(pad(powered, pad_pairs(w.pad_begin, w.pad_end), "constant", 0), int64_t(n), o);
  return one(pow(sums, scalar_like(sums, 1.0 / p)));
}

Dims spatial_dims(const Tensor& x) {
  Dims d;
  for (int64_t i = 2; i < x.dim(); ++i) d.push_back(i);
  return d;
}

std::vector<Tensor> op_global_avg_pool(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  return one(mean(x, spatial_dims(x), true));
}
std::vector<Tensor> op_global_max_pool(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  return one(amax(x, spatial_dims(x), true));
}
std::vector<Tensor> op_global_lp_pool(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double p = double(ctx.attr_int("p", 2));
  Tensor s = sum(pow(abs(x), scalar_like(x, p)), spatial_dims(x), true);
  return one(pow(s, scalar_like(s, 1.0 / p)));
}

// MaxUnpool: X's values scattered to the positions MaxPool's indices name (flat over the
// whole tensor of the size the pooling window implies), zeros elsewhere. A larger
// output_shape pads that result at the end of each spatial dim, as the ONNX reference does.
std::vector<Tensor> op_max_unpool(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  KILN_CHECK(indices.shape() == x.shape(), ShapeError, "indices ", shape_str(indices.shape()),
             " must have X's shape ", shape_str(x.shape()));
  Window w = window_attrs(ctx, x, ctx.attr_ints("kernel_shape"));
  Shape inferred{x.size(0), x.size(1)};
  for (size_t i = 0; i < w.kernel.size(); ++i) {
    inferred.push_back((x.size(int64_t(i) + 2) - 1) * w.strides[i] - w.pad_begin[i] - w.pad_end[i] + w.kernel[i]);
  }
  int64_t total = 1;
  for (int64_t d : inferred) total *= d;
  Tensor flat = zeros({total}, TensorOptions(x.dtype(), x.device()));
  Tensor idx = reshape(cast(indices, DType::I64), Shape{-1});
  Tensor y = reshape(scatter(flat, 0, idx, reshape(x, Shape{-1})), inferred);
  if (!ctx.has_input(2)) return one(y);
  const std::vector<int64_t> given = ctx.input_ints(2);
  KILN_CHECK(int64_t(given.size()) == x.dim(), ShapeError, "output_shape has ", given.size(), " entries for a rank-",
             x.dim(), " input");
  std::vector<int64_t> pads;  // kiln's pad order: last dim first, (begin, end) pairs
  for (int64_t d = x.dim() - 1; d >= 0; --d) {
    KILN_CHECK(given[size_t(d)] >= inferred[size_t(d)] && (d >= 2 || given[size_t(d)] == inferred[size_t(d)]),
               ShapeError, "output_shape ", shape_str(Shape(given.begin(), given.end())),
               " is smaller than the unpooled shape ", shape_str(inferred));
    if (d >= 2) pads.insert(pads.end(), {0, given[size_t(d)] - inferred[size_t(d)]});
  }
  return one(pad(y, pads));
}

}  // namespace

void register_conv_pool_ops(OpTable& t) {
  t.add("Conv", op_conv);
  t.add("ConvTranspose", op_conv_transpose);
  t.add("MaxPool", op_max_pool);
  t.add("MaxUnpool", op_max_unpool);
  t.add("AveragePool", op_avg_pool);
  t.add("LpPool", op_lp_pool);
  t.add("GlobalAveragePool", op_global_avg_pool);
  t.add("GlobalMaxPool", op_global_max_pool);
  t.add("GlobalLpPool", op_global_lp_pool);
}

}  // namespace kiln::onnx
