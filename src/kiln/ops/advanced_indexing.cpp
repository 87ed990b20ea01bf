// Advanced indexing, x[i0, i1, ...] with integer and bool tensors: index (read) and
// index_put / index_put_ (write, optionally accumulating). Bool masks become the integer
// coordinates of their true elements (nonzero); all index tensors are then broadcast
// together. The result's dims follow PyTorch: when the indexed dims are adjacent the
// broadcast index dims replace them in place; when a full slice separates them, the
// broadcast index dims come first, followed by the remaining dims of x.
#include "kiln/ops/copy.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/indexing_common.h"
#include "kiln/ops/op_helpers.h"
#include "kiln/ops/views.h"

namespace kiln {

namespace {

struct Prepared {
  Tensor x;                 // x, with a new dim for each 0-d bool index
  std::vector<Tensor> idx;  // one per dim of x (undefined: the whole dim), int, broadcast
  bool any = false;         // at least one index defined
};

Prepared prepare_indices(const char* op, const Tensor& x, const std::vector<Tensor>& indices) {
  int64_t needed = 0;
  for (const Tensor& i : indices)
    needed += !i.defined() ? 1 : i.dtype() == DType::Bool ? i.dim() : 1;
  KILN_CHECK(needed <= x.dim(), IndexError, "too many indices for tensor of dimension ", x.dim(),
             " (got ", needed, ")");
  Prepared p;
  p.x = x;
  int64_t pos = 0;  // the next dim of p.x to index
  for (const Tensor& i : indices) {
    if (!i.defined()) {
      p.idx.emplace_back();
      ++pos;
      continue;
    }
    if (i.dtype() == DType::Bool) {
      if (i.dim() == 0) {  // x[True] / x[False]: a new dim of size 1 / 0
        p.x = unsqueeze(p.x, pos);
        p.idx.push_back(select(nonzero(unsqueeze(i, 0)), 1, 0));
        ++pos;
        continue;
      }
      for (int64_t k = 0; k < i.dim(); ++k)
        KILN_CHECK(i.size(k) == p.x.size(pos + k), IndexError, "The shape of the mask ",
                   shape_str(i.shape()), " at index ", k,
                   " does not match the shape of the indexed tensor ", shape_str(p.x.shape()),
                   " at index ", pos + k);
      Tensor nz = nonzero(i);  // [n, i.dim()]
      for (int64_t k = 0; k < i.dim(); ++k) p.idx.push_back(select(nz, 1, k));
      pos += i.dim();
      continue;
    }
    KILN_CHECK(i.dtype() == DType::I64 || i.dtype() == DType::I32, IndexError, op,
               ": tensors used as indices must be long, int or bool tensors, got ",
               dtype_name(i.dtype()));
    p.idx.push_back(i);
    ++pos;
  }
  while (int64_t(p.idx.size()) < p.x.dim()) p.idx.emplace_back();
  // Broadcast the defined indices together.
  Shape b;
  std::string shapes;
  for (const Tensor& i : p.idx) {
    if (!i.defined()) continue;
    shapes += (shapes.empty() ? "" : ", ") + shape_str(i.shape());
    if (!p.any) {
      b = i.shape();
      p.any = true;
      continue;
    }
    try {
      b = broadcast_shapes(b, i.shape());
    } catch (const ShapeError&) {
      KILN_THROW(IndexError, "shape mismatch: indexing tensors could not be broadcast together "
                 "with shapes ", shapes);
    }
  }
  for (Tensor& i : p.idx)
    if (i.defined() && i.shape() != b) i = expand(i, b);
  return p;
}

// The shape of x[idx...] (idx: one entry per dim of x, defined ones of a common shape).
Shape index_result_shape(const Shape& xs, const std::vector<Tensor>& idx) {
  std::vector<size_t> pos;
  Shape b;
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k].defined()) {
      pos.push_back(k);
      b = idx[k].shape();
    }
  if (pos.empty()) return xs;
  bool adjacent = pos.back() - pos.front() + 1 == pos.size();
  Shape out;
  if (adjacent) {
    out.assign(xs.begin(), xs.begin() + int64_t(pos.front()));
    out.insert(out.end(), b.begin(), b.end());
    out.insert(out.end(), xs.begin() + int64_t(pos.back()) + 1, xs.end());
  } else {
    out = b;
    for (size_t k = 0; k < xs.size(); ++k)
      if (k >= idx.size() || !idx[k].defined()) out.push_back(xs[k]);
  }
  return out;
}

std::vector<Tensor> tail(const std::vector<Tensor>& v, size_t from) {
  return std::vector<Tensor>(v.begin() + int64_t(from), v.end());
}

// inputs: self, index per dim (undefined: whole dim).
std::vector<TensorMeta> index_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  KILN_CHECK(int64_t(c.inputs.size()) - 1 <= x.dim(), IndexError,
             "too many indices for tensor of dimension ", x.dim(), " (got ", c.inputs.size() - 1,
             ")");
  return {{index_result_shape(x.shape(), tail(c.inputs, 1)), x.dtype()}};
}

// inputs: self, values (broadcast to the indexing result), index per dim.
std::vector<TensorMeta> index_put_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  Shape r = index_result_shape(x.shape(), tail(c.inputs, 2));
  KILN_CHECK(c.inputs[1].shape() == r, ShapeError, "index_put: expected values of shape ",
             shape_str(r), ", got ", shape_str(c.inputs[1].shape()));
  KILN_CHECK(c.inputs[1].dtype() == x.dtype(), Error, "index_put: expected values of dtype ",
             dtype_name(x.dtype()), ", got ", dtype_name(c.inputs[1].dtype()));
  return {{x.shape(), x.dtype()}};
}

// Values converted to x's dtype and broadcast to the indexing result shape r (leading
// size-1 dims beyond r's rank are dropped, as PyTorch allows).
Tensor prepare_values(const Tensor& x, const Tensor& values, const Shape& r) {
  Tensor v = to_dtype(values, x.dtype());
  while (v.dim() > int64_t(r.size()) && v.size(0) == 1) v = select(v, 0, 0);
  bool ok = v.dim() <= int64_t(r.size());
  if (ok) {
    try {
      ok = broadcast_shapes(r, v.shape()) == r;
    } catch (const ShapeError&) {
      ok = false;
    }
  }
  KILN_CHECK(ok, ShapeError, "shape mismatch: value tensor of shape ", shape_str(values.shape()),
             " cannot be broadcast to indexing result of shape ", shape_str(r));
  return v.shape() == r ? v : expand(v, r);
}

std::vector<Tensor> put_inputs(const Prepared& p, const Tensor& v) {
  std::vector<Tensor> in{p.x, v};
  in.insert(in.end(), p.idx.begin(), p.idx.end());
  return in;
}

}  // namespace

Tensor index(const Tensor& x, const std::vector<Tensor>& indices) {
  // x[mask] with a mask of x's whole shape is masked_select (one pass over the mask, no
  // coordinate tensors): the same elements in the same order.
  if (indices.size() == 1 && indices[0].defined() && indices[0].dtype() == DType::Bool &&
      indices[0].dim() > 0 && indices[0].shape() == x.shape() &&
      x.device().type == DeviceType::CPU && indices[0].device() == x.device())
    return masked_select(x, indices[0]);
  Prepared p = prepare_indices("index", x, indices);
  if (!p.any) return clone(p.x);
  std::vector<Tensor> in{p.x};
  in.insert(in.end(), p.idx.begin(), p.idx.end());
  return call_op(KILN_OP("index"), std::move(in));
}

Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate) {
  Prepared p = prepare_indices("index_put", x, indices);
  Shape r = index_result_shape(p.x.shape(), p.idx);
  Tensor v = prepare_values(x, values, r);
  if (!p.any) {
    // A contiguous copy, so that the view below exists (clone keeps a channels-last layout).
    Tensor out = x.is_channels_last() ? contiguous(x) : clone(x);
    Tensor target = p.x.shape() == x.shape() ? out : view(out, p.x.shape());
    if (accumulate) target.add_(v);
    else copy_(target, v);
    return out;
  }
  Tensor out = call_op(KILN_OP("index_put"), put_inputs(p, v), {accumulate});
  return p.x.shape() == x.shape() ? out : view(out, x.shape());
}

Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate) {
  Prepared p = prepare_indices("index_put_", x, indices);
  Shape r = index_result_shape(p.x.shape(), p.idx);
  Tensor v = prepare_values(x, values, r);
  // Never read what the kernel is writing.
  if (v.shares_storage_with(x)) v = clone(v);
  for (Tensor& i : p.idx)
    if (i.shares_storage_with(x)) i = clone(i);
  if (!p.any) {
    if (accumulate) p.x.add_(v);
    else copy_(p.x, v);
    return x;
  }
  call_op_out(KILN_OP("index_put"), put_inputs(p, v), {accumulate}, {p.x});
  return x;
}

namespace ops {
void register_advanced_index_ops() {
  register_op("index", "index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", index_meta);
  register_op("index_put",
              "index_put(Tensor self, Tensor values, Tensor?[] indices, "
              "bool accumulate=False) -> Tensor",
              index_put_meta);
}
}  // namespace ops

}  // namespace kiln
