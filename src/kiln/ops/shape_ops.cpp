// Shape-building ops: cat, stack, split, chunk, tril, triu, repeat, repeat_interleave, flip
// and roll. split and chunk are views; stack is unsqueeze + cat; repeat_interleave with an
// integer count is unsqueeze + expand + reshape; the others have kernels.
#include <algorithm>

#include "kiln/ops/copy.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/indexing_common.h"
#include "kiln/ops/op_helpers.h"
#include "kiln/ops/views.h"

namespace kiln {

namespace {

// x as 1-D (a 0-d tensor becomes [1]).
Tensor flat(const Tensor& x) { return x.dim() == 0 ? unsqueeze(x, 0) : flatten(x); }

// PyTorch's legacy rule: 1-D tensors of shape [0] are skipped by cat whatever their size.
bool skipped_by_cat(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

// inputs: the tensors (same dtype and rank, sizes equal except at dim); attrs: dim.
std::vector<TensorMeta> cat_meta(const OpCall& c) {
  const Tensor& ref = c.inputs[0];
  int64_t d = wrap_dim(c.int_attr(0), ref.dim());
  Shape s = ref.shape();
  s[size_t(d)] = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.inputs[i];
    KILN_CHECK(t.dim() == ref.dim(), ShapeError, "Tensors must have same number of dimensions: "
               "got ", ref.dim(), " and ", t.dim());
    KILN_CHECK(t.dtype() == ref.dtype(), Error, "cat: expected all inputs of dtype ",
               dtype_name(ref.dtype()), ", got ", dtype_name(t.dtype()));
    for (int64_t k = 0; k < ref.dim(); ++k)
      KILN_CHECK(k == d || t.size(k) == ref.size(k), ShapeError,
                 "Sizes of tensors must match except in dimension ", d, ". Expected size ",
                 ref.size(k), " but got size ", t.size(k), " for tensor number ", i,
                 " in the list.");
    s[size_t(d)] += t.size(d);
  }
  return {{s, ref.dtype()}};
}

std::vector<TensorMeta> tri_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  KILN_CHECK(x.dim() >= 2, ShapeError, c.op->name,
             ": input tensor must have at least 2 dimensions, got ", x.dim());
  return {{x.shape(), x.dtype()}};
}

std::vector<TensorMeta> repeat_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& reps = c.ints_attr(0);
  KILN_CHECK(int64_t(reps.size()) >= x.dim(), ShapeError,
             "Number of dimensions of repeat dims can not be smaller than number of dimensions "
             "of tensor (repeat dims: ", reps.size(), ", tensor dims: ", x.dim(), ")");
  size_t lead = reps.size() - size_t(x.dim());
  Shape s(reps.size());
  for (size_t i = 0; i < reps.size(); ++i) {
    KILN_CHECK(reps[i] >= 0, ValueError, "repeat: expected non-negative repeats, got ",
               shape_str(reps));
    s[i] = reps[i] * (i < lead ? 1 : x.shape()[i - lead]);
  }
  return {{s, x.dtype()}};
}

std::vector<int64_t> wrap_dims(const char* op, const std::vector<int64_t>& dims, int64_t nd,
                               bool unique) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, nd);
    KILN_CHECK(!unique || std::find(out.begin(), out.end(), w) == out.end(), ValueError, op,
               ": dim ", w, " appears multiple times in the list of dims");
    out.push_back(w);
  }
  return out;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  KILN_CHECK(!xs.empty(), ValueError, "cat(): expected a non-empty list of Tensors");
  ResultTypeState st;
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < xs.size(); ++i) {
    KILN_CHECK(xs[i].defined(), ValueError, "cat(): expected a defined tensor at position ", i);
    KILN_CHECK(xs[i].dim() > 0, ShapeError, "zero-dimensional tensor (at position ", i,
               ") cannot be concatenated");
    KILN_CHECK(xs[i].device() == xs[0].device(), DeviceError, "Expected all tensors to be on "
               "the same device, but found at least two devices, ", xs[0].device(), " and ",
               xs[i].device(), " (in op 'cat')");
    st.add(xs[i]);
    if (!ref && !skipped_by_cat(xs[i])) ref = &xs[i];
  }
  DType dtype = st.result();
  if (!ref) return empty_tensor({0}, dtype, xs[0].device());
  int64_t d = wrap_dim(dim, ref->dim());
  std::vector<Tensor> inputs;
  for (const Tensor& t : xs)
    if (!skipped_by_cat(t)) inputs.push_back(to_dtype(t, dtype));
  // PyTorch's layout rule: the result is channels-last when every input is; a mix gives a
  // contiguous result, so the channels-last inputs are made contiguous first.
  bool all_channels_last = true, any_channels_last = false;
  for (const Tensor& t : inputs) {
    all_channels_last = all_channels_last && t.is_channels_last();
    any_channels_last = any_channels_last || t.is_channels_last();
  }
  if (any_channels_last && !all_channels_last)
    for (Tensor& t : inputs) t = t.contiguous();
  return call_op(KILN_OP("cat"), std::move(inputs), {d});
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  KILN_CHECK(!xs.empty(), Error, "stack expects a non-empty TensorList");
  for (size_t i = 0; i < xs.size(); ++i) {
    KILN_CHECK(xs[i].defined(), ValueError, "stack(): expected a defined tensor at position ", i);
    KILN_CHECK(xs[i].shape() == xs[0].shape(), ShapeError,
               "stack expects each tensor to be equal size, but got ", shape_str(xs[0].shape()),
               " at entry 0 and ", shape_str(xs[i].shape()), " at entry ", i);
  }
  int64_t d = wrap_dim(dim, xs[0].dim() + 1);
  std::vector<Tensor> us;
  for (const Tensor& t : xs) us.push_back(unsqueeze(t, d));
  return cat(us, d);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  KILN_CHECK(x.dim() > 0, ShapeError, "split expects at least a 1-dimensional tensor");
  int64_t d = wrap_dim(dim, x.dim());
  int64_t n = x.size(d), total = 0;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, ValueError, "split_with_sizes expects split_sizes have only non-negative "
               "entries, but got split_sizes=", shape_str(sizes));
    total += s;
  }
  KILN_CHECK(total == n, ValueError, "split_with_sizes expects split_sizes to sum exactly to ", n,
             " (input tensor's size at dimension ", d, "), but got split_sizes=",
             shape_str(sizes));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  KILN_CHECK(x.dim() > 0, ShapeError, "split expects at least a 1-dimensional tensor");
  int64_t d = wrap_dim(dim, x.dim());
  int64_t n = x.size(d);
  KILN_CHECK(split_size >= 0, ValueError,
             "split expects split_size be non-negative, but got split_size=", split_size);
  KILN_CHECK(split_size != 0 || n == 0, ValueError, "split_size can only be 0 if dimension size "
             "is 0, but got dimension size of ", n);
  int64_t parts = split_size == 0 ? 1 : std::max<int64_t>((n + split_size - 1) / split_size, 1);
  std::vector<int64_t> sizes(size_t(parts), split_size);
  sizes.back() = n - split_size * (parts - 1);
  return split(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  KILN_CHECK(x.dim() > 0, ShapeError, "chunk expects at least a 1-dimensional tensor");
  KILN_CHECK(chunks > 0, ValueError, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  int64_t d = wrap_dim(dim, x.dim());
  int64_t n = x.size(d);
  int64_t split_size = (n + chunks - 1) / chunks;
  if (split_size == 0 && n == 0) return split(x, std::vector<int64_t>(size_t(chunks), 0), d);
  return split(x, split_size, d);
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  return call_op(KILN_OP("tril"), {x}, {diagonal});
}
Tensor triu(const Tensor& x, int64_t diagonal) {
  return call_op(KILN_OP("triu"), {x}, {diagonal});
}

Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  return call_op(KILN_OP("repeat"), {x}, {repeats});
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  KILN_CHECK(repeats >= 0, ValueError, "repeat_interleave: repeats can not be negative, got ",
             repeats);
  Tensor t = dim ? x : flat(x);
  int64_t d = wrap_dim(dim.value_or(0), t.dim());
  if (t.dim() == 0) t = unsqueeze(t, 0);
  Shape s = t.shape();
  Tensor u = unsqueeze(t, d + 1);
  Shape e = u.shape();
  e[size_t(d + 1)] = repeats;
  s[size_t(d)] *= repeats;
  return reshape(expand(u, e), s);
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  ops::check_index_dtype("repeat_interleave", repeats, "repeats");
  KILN_CHECK(repeats.dim() <= 1, ShapeError,
             "repeat_interleave: repeats must be 0-dim or 1-dim tensor, got shape ",
             shape_str(repeats.shape()));
  Tensor t = dim ? x : flat(x);
  int64_t d = wrap_dim(dim.value_or(0), t.dim());
  if (t.dim() == 0) t = unsqueeze(t, 0);
  KILN_CHECK(repeats.numel() == 1 || repeats.numel() == t.size(d), ShapeError,
             "repeat_interleave: repeats must have the same size as input along dim, but got "
             "repeats.size(0) = ", repeats.numel(), " and input.size(", d, ") = ", t.size(d));
  return call_op(KILN_OP("repeat_interleave"), {t, repeats}, {d});
}

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> w = wrap_dims("flip", dims, x.dim(), true);
  if (x.dim() == 0) w.clear();
  return call_op(KILN_OP("flip"), {x}, {w});
}

Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  if (dims.empty()) {
    KILN_CHECK(shifts.size() == 1, ValueError, "roll: shifts and dimensions must align. shifts: ",
               shifts.size(), ", dims: 0");
    return reshape(roll(flat(x), shifts, {0}), x.shape());
  }
  KILN_CHECK(shifts.size() == dims.size(), ValueError,
             "roll: shifts and dimensions must align. shifts: ", shifts.size(), ", dims: ",
             dims.size());
  std::vector<int64_t> w = wrap_dims("roll", dims, x.dim(), false);
  if (x.dim() == 0) return clone(x);
  return call_op(KILN_OP("roll"), {x}, {shifts, w});
}

namespace ops {
void register_shape_ops() {
  // Channels-last inputs give a channels-last result (as PyTorch's cat), so that a network's
  // concatenated feature maps stay in its convolutions' layout (decision 0062).
  register_op("cat", "cat(Tensor[] tensors, int dim=0) -> Tensor", cat_meta)
      .keeps_channels_last = true;
  register_op("tril", "tril(Tensor self, int diagonal=0) -> Tensor", tri_meta);
  register_op("triu", "triu(Tensor self, int diagonal=0) -> Tensor", tri_meta);
  register_op("repeat", "repeat(Tensor self, SymInt[] repeats) -> Tensor", repeat_meta);
  register_op("repeat_interleave",
              "repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int dim) -> Tensor",
              nullptr)
      .dynamic_shape = true;
  register_op("flip", "flip(Tensor self, int[] dims) -> Tensor", same_as_first_meta);
  register_op("roll", "roll(Tensor self, SymInt[] shifts, int[] dims) -> Tensor",
              same_as_first_meta);
}
}  // namespace ops

}  // namespace kiln
