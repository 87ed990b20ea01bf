// Indexing ops along one dim — index_select, gather, the scatter family — and the mask ops
// masked_fill, masked_select, nonzero: definitions (schema + meta) and public functions.
// Index values are checked by the kernels (they need the data); shapes and dtypes here.
#include "kiln/ops/copy.h"
#include "kiln/ops/indexing.h"

#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing_common.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

std::vector<TensorMeta> index_select_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& index = c.inputs[1];
  int64_t d = wrap_dim(c.int_attr(0), x.dim());
  KILN_CHECK(index.dim() <= 1, IndexError,
             "index_select(): Index is supposed to be a vector, got a tensor of shape ",
             shape_str(index.shape()));
  if (x.dim() == 0) {
    KILN_CHECK(index.numel() == 1, IndexError,
               "index_select(): Index to scalar can have only 1 value, got ", index.numel(),
               " value(s)");
    return {{{}, x.dtype()}};
  }
  Shape s = x.shape();
  s[size_t(d)] = index.numel();
  return {{s, x.dtype()}};
}

std::vector<TensorMeta> gather_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& index = c.inputs[1];
  int64_t d = wrap_dim(c.int_attr(0), x.dim());
  KILN_CHECK(ops::nonempty_dim(index) == ops::nonempty_dim(x), ShapeError,
             "gather(): Index tensor must have the same number of dimensions as input tensor, "
             "expected ", ops::nonempty_dim(x), ", got ", ops::nonempty_dim(index));
  if (index.numel() > 0) {
    for (int64_t k = 0; k < ops::nonempty_dim(x); ++k) {
      if (k == d) continue;
      KILN_CHECK(ops::nonempty_size(index, k) <= ops::nonempty_size(x, k), ShapeError,
                 "gather(): Size does not match at dimension ", k, " expected index ",
                 shape_str(index.shape()), " to be smaller than self ", shape_str(x.shape()),
                 " apart from dimension ", d);
    }
  }
  return {{index.shape(), x.dtype()}};
}

// inputs: self, index[, src]. Output: self's shape and dtype.
std::vector<TensorMeta> scatter_meta(const OpCall& c) {
  const std::string& name = c.op->name;
  const Tensor& x = c.inputs[0];
  const Tensor& index = c.inputs[1];
  const Tensor* src = c.inputs.size() > 2 ? &c.inputs[2] : nullptr;
  int64_t d = wrap_dim(c.int_attr(0), x.dim());
  KILN_CHECK(ops::nonempty_dim(index) == ops::nonempty_dim(x), ShapeError, name,
             "(): Index tensor must have the same number of dimensions as self tensor, "
             "expected ", ops::nonempty_dim(x), ", got ", ops::nonempty_dim(index));
  if (src) {
    KILN_CHECK(src->dtype() == x.dtype(), Error, name, "(): Expected self.dtype to be equal "
               "to src.dtype, got ", dtype_name(x.dtype()), " and ", dtype_name(src->dtype()));
    KILN_CHECK(ops::nonempty_dim(index) == ops::nonempty_dim(*src), ShapeError, name,
               "(): Index tensor must have the same number of dimensions as src tensor, "
               "expected ", ops::nonempty_dim(*src), ", got ", ops::nonempty_dim(index));
  }
  if (index.numel() > 0) {
    for (int64_t k = 0; k < ops::nonempty_dim(x); ++k) {
      bool ok = k == d || ops::nonempty_size(index, k) <= ops::nonempty_size(x, k);
      if (src) ok = ok && ops::nonempty_size(index, k) <= ops::nonempty_size(*src, k);
      KILN_CHECK(ok, ShapeError, name, "(): Expected index ", shape_str(index.shape()),
                 " to be smaller than self ", shape_str(x.shape()), " apart from dimension ", d,
                 src ? " and to be smaller size than src " : "",
                 src ? shape_str(src->shape()) : "");
    }
  }
  return {{x.shape(), x.dtype()}};
}

std::vector<TensorMeta> masked_fill_meta(const OpCall& c) {
  return {{broadcast_shapes(c.inputs[0].shape(), c.inputs[1].shape()), c.inputs[0].dtype()}};
}

void check_mask(const char* op, const Tensor& mask) {
  KILN_CHECK(mask.dtype() == DType::Bool, Error, op,
             " only supports boolean masks, but got mask with dtype ", dtype_name(mask.dtype()));
}

void check_reduce(const std::string& reduce, DType t) {
  KILN_CHECK(reduce == "sum" || reduce == "prod" || reduce == "mean" || reduce == "amax" ||
                 reduce == "amin",
             ValueError, "scatter_reduce(): reduce argument must be either sum, prod, mean, "
             "amax or amin, got ", reduce);
  KILN_CHECK(!(reduce == "mean" && t == DType::Bool), Error,
             "scatter_reduce(): reduce 'mean' is not supported for bool tensors");
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  ops::check_index_dtype("index_select", index);
  return call_op(KILN_OP("index_select"), {x, index}, {dim});
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  ops::check_index_dtype("gather", index);
  return call_op(KILN_OP("gather"), {x, index}, {dim});
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  ops::check_index_dtype("scatter", index);
  return call_op(KILN_OP("scatter"), {x, index, src}, {dim});
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  ops::check_index_dtype("scatter", index);
  return call_op(KILN_OP("scatter.value"), {x, index}, {dim, value});
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  ops::check_index_dtype("scatter_add", index);
  return call_op(KILN_OP("scatter_add"), {x, index, src}, {dim});
}

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self) {
  ops::check_index_dtype("scatter_reduce", index);
  check_reduce(reduce, x.dtype());
  return call_op(KILN_OP("scatter_reduce"), {x, index, src}, {dim, reduce, include_self});
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  check_mask("masked_fill", mask);
  return call_op(KILN_OP("masked_fill"), {x, mask}, {value});
}

Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value) {
  check_mask("masked_fill_", mask);
  Shape s = broadcast_shapes(x.shape(), mask.shape());
  KILN_CHECK(s == x.shape(), ShapeError, "masked_fill_: expected a mask broadcastable to self's "
             "shape ", shape_str(x.shape()), ", got a mask of shape ", shape_str(mask.shape()));
  Tensor m = ops::partially_overlaps(x, mask) ? clone(mask) : mask;
  call_op_out(KILN_OP("masked_fill"), {x, m}, {value}, {x});
  return x;
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  check_mask("masked_select", mask);
  Shape s = broadcast_shapes(x.shape(), mask.shape());
  return call_op(KILN_OP("masked_select"), {x.expand(s), mask.expand(s)});
}

Tensor nonzero(const Tensor& x) {
  // A complex element is nonzero when either part is.
  return call_op(KILN_OP("nonzero"), {is_complex(x.dtype()) ? ne(x, 0) : x});
}

namespace ops {

void register_index_select_ops() {
  register_op("index_select", "index_select(Tensor self, int dim, Tensor index) -> Tensor",
              index_select_meta);
  register_op("gather", "gather(Tensor self, int dim, Tensor index) -> Tensor", gather_meta);
  register_op("scatter", "scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
              scatter_meta);
  register_op("scatter.value",
              "scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor",
              scatter_meta);
  register_op("scatter_add",
              "scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
              scatter_meta);
  register_op("scatter_reduce",
              "scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, "
              "bool include_self=True) -> Tensor",
              scatter_meta);
  register_op("masked_fill", "masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
              masked_fill_meta);
  register_op("masked_select", "masked_select(Tensor self, Tensor mask) -> Tensor", nullptr)
      .dynamic_shape = true;
  register_op("nonzero", "nonzero(Tensor self) -> Tensor", nullptr).dynamic_shape = true;
}

// Every op definition of the indexing, shape-building and sorting families.
void register_indexing_ops() {
  register_index_select_ops();
  register_advanced_index_ops();
  register_shape_ops();
  register_pad_ops();
  register_sort_ops();
  register_index_lerp_ops();
}

}  // namespace ops

}  // namespace kiln
