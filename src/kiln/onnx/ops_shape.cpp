// Shape and data-movement operators: views where kiln has them, index ops otherwise.
// Shapes, axes, pads and counts given as inputs are read to the host.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/onnx/tensor_convert.h"
#include "kiln/onnx/tensor_proto.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

Tensor int64_vector(const std::vector<int64_t>& v, Device device) {
  return to_device(tensor_from(v, Shape{int64_t(v.size())}), device);
}

// Negative indices count from the end of a dimension of size n.
Tensor wrap_indices(const Tensor& idx, int64_t n) {
  Tensor i = cast(idx, DType::I64);
  // Small index tensors on the host (shape arithmetic, a few positions) are checked and
  // wrapped here: three ops (lt, add, where) per Gather were a tenth of Silero VAD's run.
  if (i.device().type == DeviceType::CPU && i.numel() <= 4096) {
    std::vector<int64_t> v = i.to_vector<int64_t>();
    if (std::none_of(v.begin(), v.end(), [](int64_t k) { return k < 0; })) return i;
    for (int64_t& k : v) k = k < 0 ? k + n : k;
    return tensor_from(v, i.shape());
  }
  return where(lt(i, int64_t(0)), add(i, n), i);
}

std::vector<Tensor> op_reshape(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> shape = ctx.opset() >= 5 ? ctx.input_ints(1) : ctx.attr_ints("shape");
  const bool allow_zero = ctx.attr_int("allowzero", 0) != 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allow_zero) {
      KILN_CHECK(int64_t(i) < x.dim(), ShapeError, "shape entry ", i,
                 " is 0 (copy the input's size) but the input has rank ", x.dim());
      shape[i] = x.size(int64_t(i));
    }
  }
  return one(reshape(x, Shape(shape.begin(), shape.end())));
}

std::vector<Tensor> op_flatten(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < 0) axis += x.dim();
  KILN_CHECK(axis >= 0 && axis <= x.dim(), IndexError, "axis ", ctx.attr_int("axis", 1),
             " is out of range for rank ", x.dim());
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.size(d);
  int64_t inner = 1;
  for (int64_t d = axis; d < x.dim(); ++d) inner *= x.size(d);
  return one(reshape(x, Shape{outer, inner}));
}

std::vector<Tensor> op_transpose(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> perm;
  for (int64_t d = x.dim() - 1; d >= 0; --d) perm.push_back(d);
  perm = ctx.attr_ints("perm", perm);
  return one(permute(x, perm));
}

std::vector<Tensor> op_squeeze(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes = axes_from(ctx, "axes", 1, 13);
  if (axes.empty()) return one(squeeze(x));
  for (auto& a : axes) {
    a = normalize_axis(a, x.dim());
    KILN_CHECK(x.size(a) == 1, ShapeError, "cannot squeeze axis ", a, " of shape ", shape_str(x.shape()),
               " (its size is not 1)");
  }
  return one(squeeze(x, axes));
}

std::vector<Tensor> op_unsqueeze(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes = axes_from(ctx, "axes", 1, 13);
  const int64_t out_rank = x.dim() + int64_t(axes.size());
  for (auto& a : axes) a = normalize_axis(a, out_rank);
  std::sort(axes.begin(), axes.end());
  Tensor y = x;
  for (int64_t a : axes) y = unsqueeze(y, a);
  return one(y);
}

std::vector<Tensor> op_concat(OpContext& ctx) {
  std::vector<Tensor> xs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) xs.push_back(ctx.input(i));
  const int64_t axis = normalize_axis(ctx.attr_int("axis"), xs.at(0).dim());
  return one(cat(xs, axis));
}

std::vector<Tensor> op_split(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), x.dim());
  std::vector<int64_t> sizes = axes_from(ctx, "split", 1, 13);
  const int64_t n = int64_t(ctx.num_outputs());
  if (sizes.empty()) {
    const int64_t len = x.size(axis);
    const int64_t chunk = (len + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, len - i * chunk)));
  }
  KILN_CHECK(int64_t(sizes.size()) == n, ValueError, "split has ", sizes.size(), " sizes but the node has ",
             n, " outputs");
  return split(x, sizes, axis);
}

// Slice: per axis, start/end clamped as numpy does; negative steps walk backwards (done as a
// flip followed by a forward slice).
std::vector<Tensor> op_slice(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.attr_ints("starts");
    ends = ctx.attr_ints("ends");
    axes = ctx.attr_ints("axes", std::vector<int64_t>{});
  } else {
    starts = ctx.input_ints(1);
    ends = ctx.input_ints(2);
    if (ctx.has_input(3)) axes = ctx.input_ints(3);
    if (ctx.has_input(4)) steps = ctx.input_ints(4);
  }
  KILN_CHECK(starts.size() == ends.size(), ValueError, "starts has ", starts.size(), " entries but ends has ",
             ends.size());
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  KILN_CHECK(axes.size() == starts.size() && steps.size() == starts.size(), ValueError,
             "starts, ends, axes and steps must have the same length");
  Tensor y = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = normalize_axis(axes[i], x.dim());
    const int64_t dim = x.size(axis);
    const int64_t step = steps[i];
    KILN_CHECK(step != 0, ValueError, "slice step must not be 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e = e == std::numeric_limits<int64_t>::min() ? -1 : e + dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      y = slice(y, axis, s, std::max(s, e), step);
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      // Index j of the flipped axis is dim - 1 - j of the original.
      const int64_t fs = dim - 1 - s, fe = dim - 1 - e;
      y = slice(flip(y, {axis}), axis, fs, std::max(fs, fe), -step);
    }
  }
  return one(y);
}

std::vector<Tensor> op_gather(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), x.dim());
  Tensor flat = reshape(wrap_indices(idx, x.size(axis)), Shape{idx.numel()});
  Tensor y = index_select(x, axis, flat);
  Shape shape(x.shape().begin(), x.shape().begin() + axis);
  shape.insert(shape.end(), idx.shape().begin(), idx.shape().end());
  shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
  return one(reshape(y, shape));
}

std::vector<Tensor> op_gather_elements(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), x.dim());
  return one(gather(x, axis, wrap_indices(ctx.input(1), x.size(axis))));
}

// The index tensors that address x[idx[..., 0], idx[..., 1], ...] after batch_dims leading
// dims shared by x and idx.
std::vector<Tensor> nd_indices(const Tensor& x, const Tensor& idx, int64_t batch_dims) {
  const int64_t k = idx.size(-1);
  KILN_CHECK(k >= 1 && batch_dims + k <= x.dim(), ShapeError, "the last dim of indices (", k,
             ") plus batch_dims (", batch_dims, ") exceeds the data rank ", x.dim());
  std::vector<Tensor> out;
  const int64_t rank = idx.dim() - 1;
  for (int64_t b = 0; b < batch_dims; ++b) {
    Shape s(size_t(rank), 1);
    s[size_t(b)] = x.size(b);
    out.push_back(reshape(arange(x.size(b), TensorOptions(DType::I64, x.device())), s));
  }
  for (int64_t j = 0; j < k; ++j) out.push_back(wrap_indices(select(idx, -1, j), x.size(batch_dims + j)));
  return out;
}

std::vector<Tensor> op_gather_nd(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  return one(index(x, nd_indices(x, ctx.input(1), ctx.attr_int("batch_dims", 0))));
}

std::vector<Tensor> op_scatter_elements(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx.attr_int("axis", 0), x.dim());
  Tensor idx = wrap_indices(ctx.input(1), x.size(axis));
  const Tensor& upd = ctx.input(2);
  const std::string red = ctx.attr_string("reduction", "none");
  if (red == "none") return one(scatter(x, axis, idx, upd));
  if (red == "add") return one(scatter_add(x, axis, idx, upd));
  if (red == "mul") return one(scatter_reduce(x, axis, idx, upd, "prod"));
  if (red == "max") return one(scatter_reduce(x, axis, idx, upd, "amax"));
  if (red == "min") return one(scatter_reduce(x, axis, idx, upd, "amin"));
  KILN_THROW(ValueError, "reduction must be none, add, mul, max or min, got ", quoted(red));
}

std::vector<Tensor> op_scatter_nd(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::string red = ctx.attr_string("reduction", "none");
  std::vector<Tensor> idx = nd_indices(x, ctx.input(1), 0);
  if (red == "none") return one(index_put(x, idx, ctx.input(2), false));
  if (red == "add") return one(index_put(x, idx, ctx.input(2), true));
  if (red == "mul") {
    // Updates apply in order, so repeated indices multiply: one index row at a time.
    const Tensor& indices = ctx.input(1);
    const int64_t k = indices.size(-1);
    const int64_t rows = indices.numel() / std::max<int64_t>(k, 1);
    Tensor flat_idx = reshape(indices, Shape{rows, k});
    Shape upd_shape{rows};
    upd_shape.insert(upd_shape.end(), x.shape().begin() + k, x.shape().end());
    Tensor upd = reshape(ctx.input(2), upd_shape);
    Tensor y = clone(x);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<Tensor> row = nd_indices(x, unsqueeze(select(flat_idx, 0, r), 0), 0);
      Tensor current = index(y, row);
      y = index_put(y, row, mul(current, unsqueeze(select(upd, 0, r), 0)), false);
    }
    return one(y);
  }
  KILN_THROW(NotImplementedError, "reduction ", quoted(red), " is not supported");
}

std::vector<Tensor> op_expand(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> shape = ctx.input_ints(1);
  // Bidirectional broadcasting: the result has the larger rank and, per dim, the size != 1.
  const size_t rank = std::max(size_t(x.dim()), shape.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t a = i + size_t(x.dim()) >= rank ? x.size(int64_t(i + x.dim() - rank)) : 1;
    const int64_t b = i + shape.size() >= rank ? shape[i + shape.size() - rank] : 1;
    KILN_CHECK(a == b || a == 1 || b == 1, ShapeError, "cannot expand shape ", shape_str(x.shape()),
               " to ", shape_str(Shape(shape.begin(), shape.end())));
    out[i] = a == 1 ? b : a;
  }
  return one(expand(x, out));
}

std::vector<Tensor> op_tile(OpContext& ctx) { return one(repeat(ctx.input(0), ctx.input_ints(1))); }

// Pad: ONNX lists all begins then all ends; kiln takes (begin, end) pairs from the last dim.
std::vector<Tensor> op_pad(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::string mode = ctx.attr_string("mode", "constant");
  std::vector<int64_t> pads;
  double value = 0;
  std::vector<int64_t> axes;
  if (ctx.opset() < 11) {
    pads = ctx.attr_ints("pads");
    value = ctx.attr_float("value", 0.0f);
  } else {
    pads = ctx.input_ints(1);
    if (ctx.has_input(2)) value = ctx.input_scalar(2);
    if (ctx.has_input(3)) axes = ctx.input_ints(3);
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) axes.push_back(d);
  }
  KILN_CHECK(pads.size() == 2 * axes.size(), ValueError, "pads has ", pads.size(), " entries; expected ",
             2 * axes.size());
  std::vector<int64_t> begin(size_t(x.dim()), 0), end(size_t(x.dim()), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = normalize_axis(axes[i], x.dim());
    begin[size_t(a)] = pads[i];
    end[size_t(a)] = pads[i + axes.size()];
  }
  int64_t first = x.dim();
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (begin[size_t(d)] || end[size_t(d)]) {
      first = d;
      break;
    }
  }
  if (first == x.dim()) return one(x);
  std::vector<int64_t> pairs;
  for (int64_t d = x.dim() - 1; d >= first; --d) {
    pairs.push_back(begin[size_t(d)]);
    pairs.push_back(end[size_t(d)]);
  }
  if (mode == "constant") return one(pad(x, pairs, "constant", value));
  KILN_CHECK(mode == "reflect" || mode == "edge" || mode == "wrap", ValueError,
             "mode must be constant, reflect, edge or wrap, got ", quoted(mode));
  const std::string kiln_mode = mode == "edge" ? "replicate" : mode == "wrap" ? "circular" : "reflect";
  // kiln pads the last 1-3 dims of a batched tensor: give it two leading dims of size 1.
  const int64_t padded = x.dim() - first;
  KILN_CHECK(padded <= 3, NotImplementedError, "mode ", mode, " pads at most the last 3 dims, got ", padded);
  Tensor t = reshape(x, [&] {
    Shape s{1, 1};
    int64_t lead = 1;
    for (int64_t d = 0; d < first; ++d) lead *= x.size(d);
    s[1] = lead;
    s.insert(s.end(), x.shape().begin() + first, x.shape().end());
    return s;
  }());
  Tensor y = pad(t, pairs, kiln_mode, 0);
  Shape out(x.shape().begin(), x.shape().begin() + first);
  out.insert(out.end(), y.shape().begin() + 2, y.shape().end());
  return one(reshape(y, out));
}

std::vector<Tensor> op_shape(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t start = ctx.attr_int("start", 0), end = ctx.attr_int("end", x.dim());
  if (start < 0) start += x.dim();
  if (end < 0) end += x.dim();
  start = std::clamp<int64_t>(start, 0, x.dim());
  end = std::clamp<int64_t>(end, start, x.dim());
  return one(int64_vector(std::vector<int64_t>(x.shape().begin() + start, x.shape().begin() + end),
                          ctx.device()));
}

std::vector<Tensor> op_size(OpContext& ctx) {
  return one(ctx.on_device(scalar_tensor(ctx.input(0).numel(), TensorOptions(DType::I64))));
}

std::vector<Tensor> op_constant_of_shape(OpContext& ctx) {
  std::vector<int64_t> shape = ctx.input_ints(0);
  for (int64_t d : shape) KILN_CHECK(d >= 0, ShapeError, "negative dimension ", d, " in the shape");
  Tensor value = ctx.has_attr("value") ? ctx.attr_tensor("value")
                                       : ctx.on_device(zeros(Shape{1}, TensorOptions(DType::F32)));
  KILN_CHECK(value.numel() == 1, ShapeError, "attribute value must hold one element, got ", value.numel());
  return one(contiguous(expand(reshape(value, Shape{}), Shape(shape.begin(), shape.end()))));
}

std::vector<Tensor> op_constant(OpContext& ctx) {
  if (ctx.has_attr("value")) return one(ctx.attr_tensor("value"));
  if (ctx.has_attr("value_float"))
    return one(ctx.on_device(scalar_tensor(double(ctx.attr_float("value_float")), TensorOptions(DType::F32))));
  if (ctx.has_attr("value_int"))
    return one(ctx.on_device(scalar_tensor(ctx.attr_int("value_int"), TensorOptions(DType::I64))));
  if (ctx.has_attr("value_floats")) {
    auto v = ctx.attr_floats("value_floats");
    return one(ctx.on_device(tensor_from(v)));
  }
  if (ctx.has_attr("value_ints")) return one(int64_vector(ctx.attr_ints("value_ints"), ctx.device()));
  KILN_THROW(NotImplementedError, "only tensor, float(s) and int(s) constants are supported");
}

std::vector<Tensor> op_range(OpContext& ctx) {
  const Tensor& start_t = ctx.input(0);
  const double start = ctx.input_scalar(0), limit = ctx.input_scalar(1), delta = ctx.input_scalar(2);
  KILN_CHECK(delta != 0, ValueError, "delta must not be 0");
  const int64_t n = std::max<int64_t>(0, int64_t(std::ceil((limit - start) / delta)));
  Tensor i = arange(n, TensorOptions(DType::I64, ctx.device()));
  if (is_integral(start_t.dtype()))
    return one(cast(add(mul(i, int64_t(delta)), int64_t(start)), start_t.dtype()));
  Tensor f = cast(i, start_t.dtype());
  return one(add(mul(f, scalar_like(f, delta)), scalar_like(f, start)));
}

std::vector<Tensor> op_nonzero(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dim() == 0) return one(reshape(nonzero(reshape(x, Shape{1})), Shape{0, -1}));
  return one(contiguous(transpose(nonzero(x), 0, 1)));
}

std::vector<Tensor> op_topk(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t k = ctx.opset() >= 10 ? ctx.input_ints(1).at(0) : ctx.attr_int("k");
  const int64_t axis = normalize_axis(ctx.attr_int("axis", -1), x.dim());
  const bool largest = ctx.attr_int("largest", 1) != 0;
  KILN_CHECK(k >= 0 && k <= x.size(axis), ValueError, "k = ", k, " is outside 0..", x.size(axis));
  // A stable sort keeps equal values in index order, as ONNX wants.
  auto [values, indices] = sort(x, axis, largest, true);
  return {narrow(values, axis, 0, k), narrow(indices, axis, 0, k)};
}

std::vector<Tensor> op_dropout(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (ctx.opset() >= 12 && ctx.has_input(2)) {
    const bool training = ctx.input_scalar(2) != 0;
    const double ratio = ctx.has_input(1) ? ctx.input_scalar(1) : 0.5;
    KILN_CHECK(!training || ratio == 0, NotImplementedError, "training-mode dropout is not supported");
  }
  // Before opset 7, is_test=0 (the default) asked for training mode.
  KILN_CHECK(ctx.opset() >= 7 || ctx.attr_int("is_test", 0) != 0 || ctx.attr_float("ratio", 0.5f) == 0,
             NotImplementedError, "training-mode dropout (is_test=0) is not supported");
  return {x, ones_like(x, DType::Bool)};
}

std::vector<Tensor> op_one_hot(OpContext& ctx) {
  const Tensor& idx = ctx.input(0);
  const int64_t depth = int64_t(ctx.input_scalar(1));
  const Tensor& values = ctx.input(2);
  KILN_CHECK(values.numel() == 2, ShapeError, "values must hold [off, on], got ", values.numel(), " elements");
  const int64_t axis = normalize_axis(ctx.attr_int("axis", -1), idx.dim() + 1);
  Tensor i = cast(idx, DType::I64);
  i = where(lt(i, int64_t(0)), add(i, depth), i);
  Shape s(size_t(idx.dim() + 1), 1);
  s[size_t(axis)] = depth;
  Tensor classes = reshape(arange(depth, TensorOptions(DType::I64, ctx.device())), s);
  Tensor mask = eq(unsqueeze(i, axis), classes);
  Tensor flat = reshape(values, Shape{2});
  return one(where(mask, select(flat, 0, 1), select(flat, 0, 0)));
}

std::vector<Tensor> op_trilu(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t k = ctx.has_input(1) ? int64_t(ctx.input_scalar(1)) : 0;
  return one(ctx.attr_int("upper", 1) ? triu(x, k) : tril(x, k));
}

std::vector<Tensor> op_depth_to_space(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t b = ctx.attr_int("blocksize");
  const std::string mode = ctx.attr_string("mode", "DCR");
  KILN_CHECK(x.dim() == 4, ShapeError, "input must be 4-d, got ", shape_str(x.shape()));
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  KILN_CHECK(b > 0 && c % (b * b) == 0, ShapeError, "channels ", c, " are not divisible by blocksize^2");
  Tensor y = mode == "DCR" ? permute(reshape(x, Shape{n, b, b, c / (b * b), h, w}), {0, 3, 4, 1, 5, 2})
                           : permute(reshape(x, Shape{n, c / (b * b), b, b, h, w}), {0, 1, 4, 2, 5, 3});
  return one(reshape(y, Shape{n, c / (b * b), h * b, w * b}));
}

std::vector<Tensor> op_space_to_depth(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t b = ctx.attr_int("blocksize");
  KILN_CHECK(x.dim() == 4, ShapeError, "input must be 4-d, got ", shape_str(x.shape()));
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  KILN_CHECK(b > 0 && h % b == 0 && w % b == 0, ShapeError, "spatial dims are not divisible by blocksize");
  Tensor y = permute(reshape(x, Shape{n, c, h / b, b, w / b, b}), {0, 3, 5, 1, 2, 4});
  return one(reshape(y, Shape{n, c * b * b, h / b, w / b}));
}

std::vector<Tensor> op_eye_like(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_CHECK(x.dim() == 2, ShapeError, "input must be 2-d, got ", shape_str(x.shape()));
  const int64_t k = ctx.attr_int("k", 0);
  DType dtype = x.dtype();
  if (ctx.has_attr("dtype")) {
    auto d = dtype_from_onnx(int32_t(ctx.attr_int("dtype")));
    KILN_CHECK(d.has_value(), NotImplementedError, "dtype ", onnx_type_name(int32_t(ctx.attr_int("dtype"))),
               " is not supported");
    dtype = *d;
  }
  Tensor rows = reshape(arange(x.size(0), TensorOptions(DType::I64, ctx.device())), Shape{x.size(0), 1});
  Tensor cols = reshape(arange(x.size(1), TensorOptions(DType::I64, ctx.device())), Shape{1, x.size(1)});
  return one(cast(eq(sub(cols, rows), k), dtype));
}

std::vector<Tensor> op_compress(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor cond = cast(ctx.input(1), DType::Bool);
  Tensor data = x;
  int64_t axis = 0;
  if (ctx.has_attr("axis")) axis = normalize_axis(ctx.attr_int("axis"), x.dim());
  else data = reshape(x, Shape{x.numel()});
  const int64_t n = std::min(cond.numel(), data.size(axis));
  Tensor picked = select(nonzero(narrow(reshape(cond, Shape{cond.numel()}), 0, 0, n)), 1, 0);
  return one(index_select(data, axis, picked));
}

}  // namespace

void register_shape_ops(OpTable& t) {
  t.add("Reshape", op_reshape);
  t.add("Flatten", op_flatten);
  t.add("Transpose", op_transpose);
  t.add("Squeeze", op_squeeze);
  t.add("Unsqueeze", op_unsqueeze);
  t.add("Concat", op_concat);
  t.add("Split", op_split);
  t.add("Slice", op_slice);
  t.add("Gather", op_gather);
  t.add("GatherElements", op_gather_elements);
  t.add("GatherND", op_gather_nd);
  t.add("ScatterElements", op_scatter_elements);
  t.add("Scatter", op_scatter_elements);
  t.add("ScatterND", op_scatter_nd);
  t.add("Expand", op_expand);
  t.add("Tile", op_tile);
  t.add("Pad", op_pad);
  t.add("Shape", op_shape);
  t.add("Size", op_size);
  t.add("ConstantOfShape", op_constant_of_shape);
  t.add("Constant", op_constant);
  t.add("Range", op_range);
  t.add("NonZero", op_nonzero);
  t.add("TopK", op_topk);
  t.add("Dropout", op_dropout);
  t.add("OneHot", op_one_hot);
  t.add("Trilu", op_trilu);
  t.add("DepthToSpace", op_depth_to_space);
  t.add("SpaceToDepth", op_space_to_depth);
  t.add("EyeLike", op_eye_like);
  t.add("Compress", op_compress);
}

}  // namespace kiln::onnx
