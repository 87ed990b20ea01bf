// View ops. Each is registered as a view op so interceptors (autograd, tracer) see it, and
// each computes only new geometry over the same storage.
#include "kiln/ops/views.h"

#include <algorithm>

#include "kiln/ops/copy.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

Shape infer_shape(const Shape& shape, int64_t numel) {
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      KILN_CHECK(infer < 0, ShapeError, "only one dimension can be inferred, got shape ",
                 shape_str(shape));
      infer = int(i);
    } else {
      KILN_CHECK(shape[i] >= 0, ShapeError, "invalid shape dimension ", shape[i], " in ",
                 shape_str(shape));
      known *= shape[i];
    }
  }
  Shape out = shape;
  if (infer >= 0) {
    KILN_CHECK(known != 0 && numel % known == 0, ShapeError, "shape '", shape_str(shape),
               "' is invalid for input of size ", numel);
    out[size_t(infer)] = numel / known;
  } else {
    KILN_CHECK(known == numel, ShapeError, "shape '", shape_str(shape),
               "' is invalid for input of size ", numel);
  }
  return out;
}

std::optional<Strides> view_strides(const Shape& shape, const Strides& strides,
                                    const Shape& new_shape) {
  Strides out(new_shape.size());
  // Zero or one element: any layout of the same count views it.
  if (numel_of(shape) <= 1) return contiguous_strides(new_shape);
  // Walk the old dims in chunks of contiguous memory; each chunk must map onto a run of
  // new dims with the same number of elements.
  int64_t view_d = int64_t(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[size_t(d)];
    if (d == 0 || (shape[size_t(d - 1)] != 1 &&
                   strides[size_t(d - 1)] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[size_t(view_d)] == 1)) {
        out[size_t(view_d)] = view_numel * chunk_base_stride;
        view_numel *= new_shape[size_t(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[size_t(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

namespace {

const Tensor& self(const OpCall& c) { return c.inputs[0]; }

Tensor view_fn(const OpCall& c) {
  const Tensor& t = self(c);
  Shape shape = infer_shape(c.ints_attr(0), t.numel());
  auto st = view_strides(t.shape(), t.strides(), shape);
  KILN_CHECK(st.has_value(), ShapeError, "view size is not compatible with input tensor's size "
             "and stride (at least one dimension spans across two contiguous subspaces): "
             "can't view shape ", shape_str(t.shape()), " with strides ",
             shape_str(t.strides()), " as ", shape_str(shape), ". Use .reshape(...) instead.");
  return make_view(t, shape, *st, t.storage_offset());
}

// view(dtype): the same bytes read as another dtype, as torch's Tensor.view(dtype). With a
// different element size the last dim (which must have stride 1) is rescaled, and every
// other stride and the offset must convert exactly.
Tensor view_dtype_fn(const OpCall& c) {
  const Tensor& t = self(c);
  const DType to = c.dtype_attr(0);
  const int64_t from_size = int64_t(t.element_size()), to_size = int64_t(element_size(to));
  if (from_size == to_size) return make_view(t, t.shape(), t.strides(), t.storage_offset(), to);
  const std::string_view from_name = dtype_name(t.dtype());
  const std::string_view to_name = dtype_name(to);
  KILN_CHECK(t.dim() > 0, Error, "self.dim() cannot be 0 to view ", from_name, " as ", to_name,
             " (different element sizes)");
  KILN_CHECK(t.stride(-1) == 1, Error, "self.stride(-1) must be 1 to view ", from_name, " as ",
             to_name, " (different element sizes), but got ", t.stride(-1));
  Shape shape = t.shape();
  Strides strides = t.strides();
  const size_t last = shape.size() - 1;
  int64_t offset = t.storage_offset();
  if (to_size > from_size) {
    const int64_t ratio = to_size / from_size;
    KILN_CHECK(shape[last] % ratio == 0, Error, "self.size(-1) must be divisible by ", ratio,
               " to view ", from_name, " as ", to_name, " (different element sizes), but got ",
               shape[last]);
    KILN_CHECK(offset % ratio == 0, Error, "self.storage_offset() must be divisible by ", ratio,
               " to view ", from_name, " as ", to_name, ", but got ", offset);
    for (size_t i = 0; i < last; ++i)
      KILN_CHECK(strides[i] % ratio == 0, Error, "self.stride(", i, ") must be divisible by ",
                 ratio, " to view ", from_name, " as ", to_name, ", but got ", strides[i]);
    shape[last] /= ratio;
    for (size_t i = 0; i < last; ++i) strides[i] /= ratio;
    offset /= ratio;
  } else {
    const int64_t ratio = from_size / to_size;
    shape[last] *= ratio;
    for (size_t i = 0; i < last; ++i) strides[i] *= ratio;
    offset *= ratio;
  }
  return make_view(t, shape, strides, offset, to);
}

Tensor permute_fn(const OpCall& c) {
  const Tensor& t = self(c);
  const auto& dims = c.ints_attr(0);
  int64_t nd = t.dim();
  KILN_CHECK(int64_t(dims.size()) == nd, ShapeError, "permute: number of dims don't match: "
             "input has ", nd, " dims but ", dims.size(), " were given");
  Shape shape(static_cast<size_t>(nd));
  Strides strides(static_cast<size_t>(nd));
  std::vector<bool> seen(size_t(nd), false);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = wrap_dim(dims[size_t(i)], nd);
    KILN_CHECK(!seen[size_t(d)], ValueError, "permute: repeated dim ", dims[size_t(i)]);
    seen[size_t(d)] = true;
    shape[size_t(i)] = t.shape()[size_t(d)];
    strides[size_t(i)] = t.strides()[size_t(d)];
  }
  return make_view(t, shape, strides, t.storage_offset());
}

Tensor expand_fn(const OpCall& c) {
  const Tensor& t = self(c);
  const Shape& sizes = c.ints_attr(0);
  KILN_CHECK(sizes.size() >= size_t(t.dim()), ShapeError, "expand: the number of sizes provided (",
             sizes.size(), ") must be greater or equal to the number of dimensions in the tensor (",
             t.dim(), ")");
  size_t lead = sizes.size() - size_t(t.dim());
  Shape shape(sizes.size());
  Strides strides(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i < lead) {
      KILN_CHECK(sizes[i] >= 0, ShapeError, "expand: the expanded size ", sizes[i],
                 " is not allowed in a leading, non-existing dimension ", i);
      shape[i] = sizes[i];
      strides[i] = 0;
      continue;
    }
    int64_t have = t.shape()[i - lead];
    int64_t want = sizes[i] == -1 ? have : sizes[i];
    KILN_CHECK(have == want || have == 1, ShapeError, "The expanded size of the tensor (", want,
               ") must match the existing size (", have, ") at non-singleton dimension ", i,
               ".  Target sizes: ", shape_str(sizes), ".  Tensor sizes: ", shape_str(t.shape()));
    shape[i] = want;
    strides[i] = have == want ? t.strides()[i - lead] : 0;
  }
  return make_view(t, shape, strides, t.storage_offset());
}

// slice(dim, start, end, step); start/end absent (monostate) mean the ends.
Tensor slice_fn(const OpCall& c) {
  const Tensor& t = self(c);
  KILN_CHECK(t.dim() > 0, IndexError, "slice() cannot be applied to a 0-dim tensor.");
  int64_t dim = wrap_dim(c.int_attr(0), t.dim());
  int64_t size = t.shape()[size_t(dim)];
  int64_t step = c.int_attr(3);
  KILN_CHECK(step > 0, ValueError, "slice step must be positive, got ", step);
  int64_t start = c.has_attr(1) ? c.int_attr(1) : 0;
  int64_t end = c.has_attr(2) ? c.int_attr(2) : size;
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape shape = t.shape();
  Strides strides = t.strides();
  shape[size_t(dim)] = (end - start + step - 1) / step;
  strides[size_t(dim)] *= step;
  return make_view(t, shape, strides, t.storage_offset() + start * t.strides()[size_t(dim)]);
}

Tensor select_fn(const OpCall& c) {
  const Tensor& t = self(c);
  KILN_CHECK(t.dim() > 0, IndexError, "select() cannot be applied to a 0-dim tensor.");
  int64_t dim = wrap_dim(c.int_attr(0), t.dim());
  int64_t size = t.shape()[size_t(dim)];
  int64_t index = c.int_attr(1);
  KILN_CHECK(index >= -size && index < size, IndexError, "index ", index,
             " is out of bounds for dimension ", dim, " with size ", size);
  if (index < 0) index += size;
  Shape shape = t.shape();
  Strides strides = t.strides();
  shape.erase(shape.begin() + dim);
  strides.erase(strides.begin() + dim);
  return make_view(t, shape, strides, t.storage_offset() + index * t.strides()[size_t(dim)]);
}

// squeeze(dims): dims empty means every size-1 dim.
Tensor squeeze_fn(const OpCall& c) {
  const Tensor& t = self(c);
  std::vector<bool> drop(size_t(t.dim()), false);
  if (!c.has_attr(0)) {
    for (int64_t d = 0; d < t.dim(); ++d) drop[size_t(d)] = t.shape()[size_t(d)] == 1;
  } else {
    for (int64_t d : c.ints_attr(0)) {
      int64_t w = wrap_dim(d, t.dim());
      if (t.dim() > 0 && t.shape()[size_t(w)] == 1) drop[size_t(w)] = true;
    }
  }
  Shape shape;
  Strides strides;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (!drop[size_t(d)]) {
      shape.push_back(t.shape()[size_t(d)]);
      strides.push_back(t.strides()[size_t(d)]);
    }
  return make_view(t, shape, strides, t.storage_offset());
}

Tensor unsqueeze_fn(const OpCall& c) {
  const Tensor& t = self(c);
  int64_t dim = wrap_dim(c.int_attr(0), t.dim() + 1);
  Shape shape = t.shape();
  Strides strides = t.strides();
  int64_t st = dim < t.dim() ? t.shape()[size_t(dim)] * t.strides()[size_t(dim)] : 1;
  shape.insert(shape.begin() + dim, 1);
  strides.insert(strides.begin() + dim, st);
  return make_view(t, shape, strides, t.storage_offset());
}

Tensor as_strided_fn(const OpCall& c) {
  const Tensor& t = self(c);
  const Shape& shape = c.ints_attr(0);
  const Strides& strides = c.ints_attr(1);
  int64_t offset = c.has_attr(2) ? c.int_attr(2) : t.storage_offset();
  KILN_CHECK(shape.size() == strides.size(), ShapeError, "as_strided: mismatch in length of "
             "strides and shape: ", shape.size(), " vs ", strides.size());
  KILN_CHECK(offset >= 0, ValueError, "as_strided: negative storage offset ", offset);
  // The view must stay inside the storage: never read or write outside it.
  int64_t last = offset;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_CHECK(shape[i] >= 0, ShapeError, "as_strided: negative size ", shape[i]);
    KILN_CHECK(strides[i] >= 0, ValueError, "as_strided: negative stride ", strides[i]);
    if (shape[i] == 0) empty = true;
    else last += (shape[i] - 1) * strides[i];
  }
  int64_t capacity = int64_t(t.impl()->storage()->nbytes() / t.element_size());
  KILN_CHECK(empty || last < capacity, ValueError, "as_strided: setStorage: sizes ",
             shape_str(shape), ", strides ", shape_str(strides), " and storage offset ", offset,
             " require a storage of ", last + 1, " elements, but it has only ", capacity);
  return make_view(t, shape, strides, offset);
}

Tensor diagonal_fn(const OpCall& c) {
  const Tensor& t = self(c);
  KILN_CHECK(t.dim() >= 2, ShapeError, "diagonal: expected a tensor with at least 2 dims, got ",
             t.dim());
  int64_t offset = c.int_attr(0);
  int64_t d1 = wrap_dim(c.int_attr(1), t.dim()), d2 = wrap_dim(c.int_attr(2), t.dim());
  KILN_CHECK(d1 != d2, ValueError, "diagonal dimensions cannot be identical ", c.int_attr(1),
             ", ", c.int_attr(2));
  int64_t n1 = t.shape()[size_t(d1)], n2 = t.shape()[size_t(d2)];
  int64_t len, start = t.storage_offset();
  if (offset >= 0) {
    len = std::max<int64_t>(std::min(n1, n2 - offset), 0);
    if (len > 0) start += offset * t.strides()[size_t(d2)];
  } else {
    len = std::max<int64_t>(std::min(n1 + offset, n2), 0);
    if (len > 0) start -= offset * t.strides()[size_t(d1)];
  }
  Shape shape;
  Strides strides;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d != d1 && d != d2) {
      shape.push_back(t.shape()[size_t(d)]);
      strides.push_back(t.strides()[size_t(d)]);
    }
  shape.push_back(len);
  strides.push_back(t.strides()[size_t(d1)] + t.strides()[size_t(d2)]);
  return make_view(t, shape, strides, len > 0 ? start : t.storage_offset());
}

Tensor unfold_fn(const OpCall& c) {
  const Tensor& t = self(c);
  int64_t dim = wrap_dim(c.int_attr(0), t.dim());
  int64_t size = c.int_attr(1), step = c.int_attr(2);
  int64_t n = t.dim() == 0 ? 1 : t.shape()[size_t(dim)];
  KILN_CHECK(size >= 0 && size <= n, ValueError, "maximum size for tensor at dimension ", dim,
             " is ", n, " but size is ", size);
  KILN_CHECK(step > 0, ValueError, "step is ", step, " but must be > 0");
  Shape shape = t.shape();
  Strides strides = t.strides();
  int64_t st = t.dim() == 0 ? 1 : strides[size_t(dim)];
  if (t.dim() > 0) {
    shape[size_t(dim)] = (n - size) / step + 1;
    strides[size_t(dim)] = st * step;
  }
  shape.push_back(size);
  strides.push_back(st);
  return make_view(t, shape, strides, t.storage_offset());
}

std::vector<Tensor> reshape_composite(OpCall& c) {
  const Tensor& t = self(c);
  Shape shape = infer_shape(c.ints_attr(0), t.numel());
  if (view_strides(t.shape(), t.strides(), shape)) return {kiln::view(t, shape)};
  return {kiln::view(contiguous(t), shape)};  // (clone would keep a channels-last layout)
}

}  // namespace

Tensor view(const Tensor& t, const Shape& shape) { return call_op(KILN_OP("view"), {t}, {shape}); }
Tensor view(const Tensor& t, DType dtype) { return call_op(KILN_OP("view.dtype"), {t}, {dtype}); }
Tensor reshape(const Tensor& t, const Shape& shape) {
  return call_op(KILN_OP("reshape"), {t}, {shape});
}
Tensor permute(const Tensor& t, const std::vector<int64_t>& dims) {
  return call_op(KILN_OP("permute"), {t}, {dims});
}
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1) {
  int64_t nd = t.dim();
  if (nd == 0) {
    wrap_dim(d0, 0);
    wrap_dim(d1, 0);
    return permute(t, {});
  }
  d0 = wrap_dim(d0, nd);
  d1 = wrap_dim(d1, nd);
  std::vector<int64_t> dims(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) dims[size_t(i)] = i;
  std::swap(dims[size_t(d0)], dims[size_t(d1)]);
  return permute(t, dims);
}
Tensor t(const Tensor& x) {
  KILN_CHECK(x.dim() <= 2, ShapeError, "t() expects a tensor with <= 2 dimensions, but self is ",
             x.dim(), "D");
  return x.dim() < 2 ? permute(x, x.dim() == 1 ? std::vector<int64_t>{0} : std::vector<int64_t>{})
                     : transpose(x, 0, 1);
}
Tensor expand(const Tensor& t, const Shape& shape) {
  return call_op(KILN_OP("expand"), {t}, {shape});
}
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  KILN_CHECK(t.dim() > 0, IndexError, "narrow() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, t.dim());
  int64_t size = t.shape()[size_t(d)];
  KILN_CHECK(start >= -size && start <= size, IndexError, "start out of range (expected to be in "
             "range of [", -size, ", ", size, "], but got ", start, ")");
  if (start < 0) start += size;
  KILN_CHECK(length >= 0, Error, "narrow(): length must be non-negative.");
  KILN_CHECK(start <= size - length, Error, "start (", start,
             ") + length (", length, ") exceeds dimension size (", size, ").");
  return slice(t, d, start, start + length, 1);
}
Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start,
             std::optional<int64_t> end, int64_t step) {
  return call_op(KILN_OP("slice"), {t},
                 {dim, start ? AttrValue(*start) : AttrValue(), end ? AttrValue(*end) : AttrValue(),
                  step});
}
Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  return call_op(KILN_OP("select"), {t}, {dim, index});
}
Tensor squeeze(const Tensor& t) { return call_op(KILN_OP("squeeze"), {t}, {AttrValue()}); }
Tensor squeeze(const Tensor& t, const std::vector<int64_t>& dims) {
  return call_op(KILN_OP("squeeze"), {t}, {dims});
}
Tensor unsqueeze(const Tensor& t, int64_t dim) {
  return call_op(KILN_OP("unsqueeze"), {t}, {dim});
}
Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  if (t.dim() == 0) return reshape(t, {1});
  int64_t s = wrap_dim(start_dim, t.dim()), e = wrap_dim(end_dim, t.dim());
  KILN_CHECK(s <= e, ValueError, "flatten() has invalid args: start_dim (", start_dim,
             ") cannot come after end_dim (", end_dim, ")");
  Shape shape(t.shape().begin(), t.shape().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= t.shape()[size_t(d)];
  shape.push_back(n);
  shape.insert(shape.end(), t.shape().begin() + e + 1, t.shape().end());
  return reshape(t, shape);
}
Tensor unflatten(const Tensor& t, int64_t dim, const Shape& sizes) {
  int64_t d = wrap_dim(dim, t.dim());
  KILN_CHECK(!sizes.empty(), ValueError, "unflatten: sizes must be non-empty");
  Shape inner = infer_shape(sizes, t.dim() == 0 ? 1 : t.shape()[size_t(d)]);
  Shape shape(t.shape().begin(), t.shape().begin() + d);
  shape.insert(shape.end(), inner.begin(), inner.end());
  if (t.dim() > 0) shape.insert(shape.end(), t.shape().begin() + d + 1, t.shape().end());
  return view(t, shape);
}
Tensor as_strided(const Tensor& t, const Shape& shape, const Strides& strides,
                  std::optional<int64_t> storage_offset) {
  return call_op(KILN_OP("as_strided"), {t},
                 {shape, strides, storage_offset ? AttrValue(*storage_offset) : AttrValue()});
}
Tensor diagonal(const Tensor& t, int64_t offset, int64_t dim1, int64_t dim2) {
  return call_op(KILN_OP("diagonal"), {t}, {offset, dim1, dim2});
}
Tensor unfold(const Tensor& t, int64_t dim, int64_t size, int64_t step) {
  return call_op(KILN_OP("unfold"), {t}, {dim, size, step});
}
Tensor movedim(const Tensor& t, int64_t source, int64_t destination) {
  int64_t nd = t.dim();
  int64_t s = wrap_dim(source, nd), d = wrap_dim(destination, nd);
  std::vector<int64_t> order;
  for (int64_t i = 0; i < nd; ++i)
    if (i != s) order.push_back(i);
  if (nd > 0) order.insert(order.begin() + d, s);
  return permute(t, order);
}

namespace ops {
void register_view_ops() {
  register_view_op("view", "view(Tensor(a) self, SymInt[] size) -> Tensor(a)", view_fn);
  register_view_op("view.dtype", "view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)",
                   view_dtype_fn);
  register_composite_op("reshape", "reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)",
                        reshape_composite);
  register_view_op("permute", "permute(Tensor(a) self, int[] dims) -> Tensor(a)", permute_fn);
  register_view_op("expand", "expand(Tensor(a) self, SymInt[] size) -> Tensor(a)", expand_fn);
  register_view_op("slice",
                   "slice(Tensor(a) self, int dim, SymInt? start, SymInt? end, SymInt step) -> Tensor(a)",
                   slice_fn);
  register_view_op("select", "select(Tensor(a) self, int dim, SymInt index) -> Tensor(a)",
                   select_fn);
  register_view_op("squeeze", "squeeze(Tensor(a) self, int[]? dim) -> Tensor(a)", squeeze_fn);
  register_view_op("unsqueeze", "unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", unsqueeze_fn);
  register_view_op("as_strided",
                   "as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset) -> Tensor(a)",
                   as_strided_fn);
  register_view_op("diagonal",
                   "diagonal(Tensor(a) self, int offset, int dim1, int dim2) -> Tensor(a)",
                   diagonal_fn);
  register_view_op("unfold", "unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)",
                   unfold_fn);
}
}  // namespace ops

}  // namespace kiln
