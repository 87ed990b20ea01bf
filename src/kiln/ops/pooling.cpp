// Max, average and adaptive pooling: PyTorch's argument checks and output sizes, the public
// functions, and the op definitions. Pooled dims are the trailing `spatial_dims` dims; the
// leading dims (batch, channels) are independent planes.
#include "kiln/ops/pooling.h"

#include "conv_geometry.h"
#include "kiln/ops/op_helpers.h"
#include "kiln/ops/reduction.h"
#include "reduction_util.h"

namespace kiln {

namespace {

int64_t pool_output_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  // The last window must start inside the input or its left padding.
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

struct PoolAttrs {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode;
};

// Checks x and the options for pooling the trailing nd dims; returns expanded lists.
PoolAttrs check_pool(const char* op, const Tensor& x, int64_t nd, const PoolOptions& o,
                     bool with_dilation) {
  KILN_CHECK(nd >= 1 && nd <= 3, ValueError, op, ": pools 1, 2 or 3 spatial dims, got ", nd);
  KILN_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, ShapeError, op, ": Expected ", nd + 1,
             "D or ", nd + 2, "D (batch mode) tensor for input, but got: ",
             shape_str(x.shape()));
  for (int64_t d = 1; d < x.dim() - nd; ++d)
    KILN_CHECK(x.size(d) > 0, ShapeError, op, ": Expected input's non-batch dimensions to have "
               "positive length, but input has a shape of ", shape_str(x.shape()));
  KILN_CHECK(is_floating(x.dtype()), NotImplementedError, "\"", op, "\" not implemented for '",
             ops::torch_type_name(x.dtype()), "'");
  KILN_CHECK(!o.kernel_size.empty(), Error, op, ": kernel_size must be given");
  PoolAttrs a;
  a.kernel = ops::expand_param(op, "kernel_size", o.kernel_size, nd);
  a.stride = o.stride.empty() ? a.kernel : ops::expand_param(op, "stride", o.stride, nd);
  a.padding = ops::expand_param(op, "padding", o.padding, nd);
  a.dilation = with_dilation ? ops::expand_param(op, "dilation", o.dilation, nd)
                             : std::vector<int64_t>(size_t(nd), 1);
  a.ceil_mode = o.ceil_mode;
  for (size_t i = 0; i < size_t(nd); ++i) {
    KILN_CHECK(a.kernel[i] > 0, Error, op, ": kernel size should be greater than zero, but got "
               "kernel_size ", a.kernel[i]);
    KILN_CHECK(a.stride[i] > 0, Error, op, ": stride should be greater than zero, but got ",
               a.stride[i]);
    KILN_CHECK(a.dilation[i] > 0, Error, op, ": dilation should be greater than zero, but got ",
               a.dilation[i]);
    KILN_CHECK(a.padding[i] >= 0 && a.padding[i] <= a.kernel[i] / 2, Error, op,
               ": pad should be at most half of effective kernel size, but got pad=",
               a.padding[i], ", kernel_size=", a.kernel[i], " and dilation=", a.dilation[i]);
    const int64_t in = x.size(x.dim() - nd + int64_t(i));
    const int64_t out = pool_output_size(in, a.kernel[i], a.stride[i], a.padding[i],
                                         a.dilation[i], a.ceil_mode);
    KILN_CHECK(out >= 1, ShapeError, op, ": Given input size ", shape_str(x.shape()),
               ", the calculated output size along pooled dim ", i, " is ", out,
               ". Output size is too small");
  }
  return a;
}

Shape pooled_shape(const Tensor& x, const PoolAttrs& a) {
  Shape s = x.shape();
  const size_t lead = s.size() - a.kernel.size();
  for (size_t i = 0; i < a.kernel.size(); ++i)
    s[lead + i] = pool_output_size(s[lead + i], a.kernel[i], a.stride[i], a.padding[i],
                                   a.dilation[i], a.ceil_mode);
  return s;
}

// max_pool: attrs {kernel, stride, padding, dilation, ceil_mode} -> values, int64 indices.
std::vector<TensorMeta> max_pool_meta(const OpCall& c) {
  PoolAttrs a{c.ints_attr(0), c.ints_attr(1), c.ints_attr(2), c.ints_attr(3), c.bool_attr(4)};
  Shape s = pooled_shape(c.inputs[0], a);
  return {{s, c.inputs[0].dtype()}, {s, DType::I64}};
}
// avg_pool: attrs {kernel, stride, padding, ceil_mode, count_include_pad, divisor?}.
std::vector<TensorMeta> avg_pool_meta(const OpCall& c) {
  const auto& k = c.ints_attr(0);
  PoolAttrs a{k, c.ints_attr(1), c.ints_attr(2), std::vector<int64_t>(k.size(), 1),
              c.bool_attr(3)};
  return {{pooled_shape(c.inputs[0], a), c.inputs[0].dtype()}};
}
// Backward ops: attrs[0] is the input shape.
std::vector<TensorMeta> input_shape_meta(const OpCall& c) {
  const auto& s = c.ints_attr(0);
  return {{Shape(s.begin(), s.end()), c.inputs[0].dtype()}};
}
// adaptive pools: attrs {output_size}.
std::vector<TensorMeta> adaptive_meta(const OpCall& c) {
  Shape s = c.inputs[0].shape();
  const auto& o = c.ints_attr(0);
  for (size_t i = 0; i < o.size(); ++i) s[s.size() - o.size() + i] = o[i];
  return {{s, c.inputs[0].dtype()}};
}
std::vector<TensorMeta> adaptive_max_meta(const OpCall& c) {
  auto m = adaptive_meta(c);
  m.push_back({m[0].shape, DType::I64});
  return m;
}

void check_adaptive(const char* op, const Tensor& x, const std::vector<int64_t>& out) {
  const int64_t nd = int64_t(out.size());
  KILN_CHECK(nd >= 1 && nd <= 3, ValueError, op, ": output_size needs 1, 2 or 3 entries, got ",
             nd);
  KILN_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, ShapeError, op, ": Expected ", nd + 1,
             "D or ", nd + 2, "D tensor, but got ", shape_str(x.shape()));
  for (int64_t d = 1; d < x.dim(); ++d)
    KILN_CHECK(x.size(d) > 0, ShapeError, op, ": Expected input to have non-zero size for "
               "non-batch dimensions, but input has sizes ", shape_str(x.shape()),
               " with dimension ", d, " being empty");
  for (int64_t v : out)
    KILN_CHECK(v >= 0, Error, op, ": elements of output_size must be greater than or equal "
               "to 0 but received ", v);
  KILN_CHECK(is_floating(x.dtype()), NotImplementedError, "\"", op, "\" not implemented for '",
             ops::torch_type_name(x.dtype()), "'");
}

// PyTorch keeps a channels-last input's layout in the pooled result; kiln's pooling kernels
// work on contiguous NC[D]HW, so a channels-last input is pooled from a contiguous copy and
// the result laid out channels-last again.
Tensor like_input(const Tensor& result, bool channels_last) {
  return channels_last ? result.contiguous(MemoryFormat::ChannelsLast) : result;
}

}  // namespace

namespace {

// want_indices false: the indices come back as the op left them (undefined layout), unused.
std::pair<Tensor, Tensor> max_pool_impl(const Tensor& x, int64_t nd, const PoolOptions& o,
                                        bool want_indices) {
  PoolAttrs a = check_pool("max_pool", x, nd, o, true);
  // 2-D channels-last input: the kernel pools it in place into channels-last outputs.
  const bool cl = x.is_channels_last();
  // (Tap positions are tracked in 32 bits there: planes beyond 2^31 elements take the
  // planar kernel.)
  const bool fits = nd == 2 && x.dim() == 4 && x.size(2) * x.size(3) < (int64_t(1) << 31);
  const bool in_place = cl && fits;
  // A planar CPU input with enough channels to fill vectors (ResNet's first pool): pooled
  // channels-last and copied back, 5-10x faster than the planar kernel's one scalar window
  // per output, the two layout copies included.
  const bool via_channels_last = !cl && fits && x.is_contiguous() && x.size(1) >= 16 &&
                                 x.device().type == DeviceType::CPU;
  const Tensor in = in_place ? x : via_channels_last ? x.contiguous(MemoryFormat::ChannelsLast)
                                                     : x.contiguous();
  auto r = call_op_multi(KILN_OP("max_pool"), {in},
                         {a.kernel, a.stride, a.padding, a.dilation, a.ceil_mode});
  if (in_place) return {r[0], r[1]};
  if (via_channels_last) return {r[0].contiguous(), want_indices ? r[1].contiguous() : r[1]};
  return {like_input(r[0], cl), want_indices ? like_input(r[1], cl) : r[1]};
}

}  // namespace

std::pair<Tensor, Tensor> max_pool_with_indices(const Tensor& x, int64_t nd,
                                                const PoolOptions& o) {
  return max_pool_impl(x, nd, o, true);
}

// ResNet-50's first pool in bfloat16, batch 16, planar ([16, 64, 112, 112]): 13.4 ms with the
// indices laid out, 9.7 ms without (a timing loop, best of 20, two threads).
Tensor max_pool(const Tensor& x, int64_t nd, const PoolOptions& o) {
  return max_pool_impl(x, nd, o, false).first;
}

Tensor avg_pool(const Tensor& x, int64_t nd, const PoolOptions& o) {
  PoolAttrs a = check_pool("avg_pool", x, nd, o, false);
  if (o.divisor_override)
    KILN_CHECK(*o.divisor_override != 0, Error, "avg_pool: divisor must be not zero");
  AttrValue divisor = o.divisor_override ? AttrValue(*o.divisor_override) : AttrValue();
  // 2-D channels-last input on the CPU: the kernel pools it in place into a channels-last
  // output (other devices pool a contiguous copy).
  const bool in_place = x.is_channels_last() && nd == 2 && x.device().type == DeviceType::CPU;
  Tensor y = call_op(KILN_OP("avg_pool"), {in_place ? x : x.contiguous()},
                     {a.kernel, a.stride, a.padding, a.ceil_mode, o.count_include_pad, divisor});
  return in_place ? y : like_input(y, x.is_channels_last());
}

Tensor adaptive_avg_pool(const Tensor& x, const std::vector<int64_t>& output_size) {
  check_adaptive("adaptive_avg_pool", x, output_size);
  // Windows that tile the input exactly: global pooling (CNN heads) is the mean over the
  // spatial dims, and other exact tilings are avg_pool with kernel = stride = in / out. The
  // window kernel sums one output at a time in scalar double: [8, 32, 28, 28] to 1x1 took
  // 164 us against torch's 10.
  const int64_t nd = int64_t(output_size.size()), lead = x.dim() - nd;
  bool global = x.numel() > 0, tiles = x.numel() > 0;
  std::vector<int64_t> window;
  Dims spatial;
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t in = x.size(lead + i), out = output_size[size_t(i)];
    global = global && out == 1;
    tiles = tiles && out > 0 && in % out == 0;
    window.push_back(out > 0 ? in / out : 1);
    spatial.push_back(lead + i);
  }
  if (global) return mean(x, spatial, true);
  if (tiles) return avg_pool(x, nd, PoolOptions{window, window});
  return like_input(call_op(KILN_OP("adaptive_avg_pool"), {x.contiguous()}, {output_size}),
                    x.is_channels_last());
}

std::pair<Tensor, Tensor> adaptive_max_pool_with_indices(const Tensor& x,
                                                         const std::vector<int64_t>& output_size) {
  check_adaptive("adaptive_max_pool", x, output_size);
  auto r = call_op_multi(KILN_OP("adaptive_max_pool"), {x.contiguous()}, {output_size});
  return {r[0], r[1]};
}

Tensor avg_pool_backward(const Tensor& grad_output, const Shape& input_shape,
                         const PoolOptions& o) {
  AttrValue divisor = o.divisor_override ? AttrValue(*o.divisor_override) : AttrValue();
  // A channels-last gradient stays so: the CPU kernel runs that layout (into a channels-last
  // grad_input: the op keeps channels-last), the XPU kernel reads any layout.
  return call_op(KILN_OP("avg_pool_backward"),
                 {grad_output.is_channels_last() ? grad_output : grad_output.contiguous()},
                 {std::vector<int64_t>(input_shape.begin(), input_shape.end()), o.kernel_size,
                  o.stride, o.padding, o.ceil_mode, o.count_include_pad, divisor});
}

Tensor adaptive_avg_pool_backward(const Tensor& grad_output, const Shape& input_shape,
                                  int64_t spatial_dims) {
  return call_op(KILN_OP("adaptive_avg_pool_backward"), {grad_output.contiguous()},
                 {std::vector<int64_t>(input_shape.begin(), input_shape.end()), spatial_dims});
}

Tensor max_pool_backward(const Tensor& grad_output, const Tensor& indices, const Shape& input_shape,
                         const PoolOptions& o) {
  KILN_CHECK(indices.dtype() == DType::I64 && indices.shape() == grad_output.shape(), ShapeError,
             "max_pool_backward: expected int64 indices of the gradient's shape ",
             shape_str(grad_output.shape()), ", got ", dtype_name(indices.dtype()), " ",
             shape_str(indices.shape()));
  return call_op(KILN_OP("max_pool_backward"), {grad_output.contiguous(), indices.contiguous()},
                 {std::vector<int64_t>(input_shape.begin(), input_shape.end()), o.kernel_size,
                  o.stride, o.padding, o.dilation});
}

namespace ops {
void register_pooling_ops() {
  register_op("max_pool",
              "max_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, "
              "int[] dilation, bool ceil_mode) -> (Tensor, Tensor)",
              max_pool_meta)
      .keeps_channels_last = true;
  register_op("avg_pool",
              "avg_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, "
              "bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor",
              avg_pool_meta)
      .keeps_channels_last = true;
  register_op("avg_pool_backward",
              "avg_pool_backward(Tensor grad_output, int[] input_size, int[] kernel_size, "
              "int[] stride, int[] padding, bool ceil_mode, bool count_include_pad, "
              "int? divisor_override) -> Tensor",
              input_shape_meta)
      .keeps_channels_last = true;
  register_op("max_pool_backward",
              "max_pool_backward(Tensor grad_output, Tensor indices, int[] input_size, "
              "int[] kernel_size, int[] stride, int[] padding, int[] dilation) -> Tensor",
              input_shape_meta);
  register_op("adaptive_avg_pool", "adaptive_avg_pool(Tensor self, int[] output_size) -> Tensor",
              adaptive_meta);
  register_op("adaptive_avg_pool_backward",
              "adaptive_avg_pool_backward(Tensor grad_output, int[] input_size, int spatial_dims) "
              "-> Tensor",
              input_shape_meta);
  register_op("adaptive_max_pool",
              "adaptive_max_pool(Tensor self, int[] output_size) -> (Tensor, Tensor)",
              adaptive_max_meta);
}
}  // namespace ops

}  // namespace kiln
