// index_lerp: two positions picked along a dim and blended, the one-pass form of linear
// interpolation's taps (interpolate's linear, bilinear and trilinear modes, resize in ONNX).
#include "kiln/core/error.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/indexing_common.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

// inputs: x, index0, index1 (int64 vectors of one length n), weight (x's dtype, length n);
// attr: dim. The output is x with dim resized to n.
std::vector<TensorMeta> index_lerp_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& i0 = c.inputs[1];
  const Tensor& i1 = c.inputs[2];
  const Tensor& w = c.inputs[3];
  KILN_CHECK(x.dim() >= 1, ShapeError, "index_lerp(): expected a tensor of at least 1 dim, got "
             "a 0-d tensor");
  const int64_t d = wrap_dim(c.int_attr(0), x.dim());
  KILN_CHECK(is_floating(x.dtype()), TypeError, "index_lerp(): expected a floating tensor, got ",
             dtype_name(x.dtype()));
  for (const Tensor* i : {&i0, &i1})
    KILN_CHECK(i->dtype() == DType::I64 && i->dim() == 1, IndexError,
               "index_lerp(): expected int64 index vectors, got ", dtype_name(i->dtype()),
               " of shape ", shape_str(i->shape()));
  KILN_CHECK(w.dtype() == x.dtype() && w.dim() == 1, TypeError,
             "index_lerp(): expected a weight vector of the input's dtype ",
             dtype_name(x.dtype()), ", got ", dtype_name(w.dtype()), " of shape ",
             shape_str(w.shape()));
  const int64_t n = i0.numel();
  KILN_CHECK(i1.numel() == n && w.numel() == n, ShapeError,
             "index_lerp(): index0, index1 and weight must have one length, got ", n, ", ",
             i1.numel(), " and ", w.numel());
  Shape s = x.shape();
  s[size_t(d)] = n;
  return {{s, x.dtype()}};
}

// inputs: x, index0, index1, weight (along dim), index2, index3, weight2 (along dim + 1);
// attr: dim. Weights of x's computation dtype (float64 for float64, else float32).
std::vector<TensorMeta> index_lerp2_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  KILN_CHECK(x.dim() >= 2, ShapeError, "index_lerp2(): expected a tensor of at least 2 dims, "
             "got ", x.dim());
  KILN_CHECK(is_floating(x.dtype()), TypeError, "index_lerp2(): expected a floating tensor, "
             "got ", dtype_name(x.dtype()));
  const int64_t d = wrap_dim(c.int_attr(0), x.dim());
  KILN_CHECK(d + 1 < x.dim(), IndexError, "index_lerp2(): dim ", c.int_attr(0),
             " has no next dim in a ", x.dim(), "-d tensor");
  const DType wt = x.dtype() == DType::F64 ? DType::F64 : DType::F32;
  Shape s = x.shape();
  for (int pass = 0; pass < 2; ++pass) {
    const Tensor& i0 = c.inputs[size_t(1 + 3 * pass)];
    const Tensor& i1 = c.inputs[size_t(2 + 3 * pass)];
    const Tensor& w = c.inputs[size_t(3 + 3 * pass)];
    for (const Tensor* i : {&i0, &i1})
      KILN_CHECK(i->dtype() == DType::I64 && i->dim() == 1, IndexError,
                 "index_lerp2(): expected int64 index vectors, got ", dtype_name(i->dtype()),
                 " of shape ", shape_str(i->shape()));
    KILN_CHECK(w.dtype() == wt && w.dim() == 1, TypeError, "index_lerp2(): expected a ",
               dtype_name(wt), " weight vector, got ", dtype_name(w.dtype()), " of shape ",
               shape_str(w.shape()));
    const int64_t n = i0.numel();
    KILN_CHECK(i1.numel() == n && w.numel() == n, ShapeError,
               "index_lerp2(): the indices and weights of a dim must have one length, got ", n,
               ", ", i1.numel(), " and ", w.numel());
    s[size_t(d + pass)] = n;
  }
  return {{s, x.dtype()}};
}

// inputs: grad, index0, index1, weight (grad's dtype, each of grad's length along dim);
// attrs: dim, size. The output is grad with dim resized to size.
std::vector<TensorMeta> index_lerp_backward_meta(const OpCall& c) {
  const Tensor& g = c.inputs[0];
  KILN_CHECK(g.dim() >= 1 && is_floating(g.dtype()), TypeError, "index_lerp_backward(): "
             "expected a floating gradient of at least 1 dim, got ", dtype_name(g.dtype()),
             " of shape ", shape_str(g.shape()));
  const int64_t d = wrap_dim(c.int_attr(0), g.dim()), size = c.int_attr(1);
  KILN_CHECK(size >= 0, ValueError, "index_lerp_backward(): expected a size >= 0, got ", size);
  for (int k = 1; k <= 3; ++k) {
    const Tensor& v = c.inputs[size_t(k)];
    const DType want = k == 3 ? g.dtype() : DType::I64;
    KILN_CHECK(v.dtype() == want && v.dim() == 1 && v.numel() == g.size(d), ShapeError,
               "index_lerp_backward(): expected ", k == 3 ? "a weight" : "an index",
               " vector of ", dtype_name(want), " and length ", g.size(d), ", got ",
               dtype_name(v.dtype()), " of shape ", shape_str(v.shape()));
  }
  Shape s = g.shape();
  s[size_t(d)] = size;
  return {{s, g.dtype()}};
}
}  // namespace

Tensor index_lerp2(const Tensor& x, int64_t dim, const Tensor& index0, const Tensor& index1,
                   const Tensor& weight, const Tensor& index2, const Tensor& index3,
                   const Tensor& weight2) {
  return call_op(KILN_OP("index_lerp2"),
                 {x.contiguous(), index0.contiguous(), index1.contiguous(), weight.contiguous(),
                  index2.contiguous(), index3.contiguous(), weight2.contiguous()},
                 {dim});
}

Tensor index_lerp_backward(const Tensor& grad, int64_t dim, int64_t size, const Tensor& index0,
                           const Tensor& index1, const Tensor& weight) {
  return call_op(KILN_OP("index_lerp_backward"),
                 {grad.contiguous(), index0.contiguous(), index1.contiguous(),
                  weight.contiguous()},
                 {dim, size});
}

Tensor index_lerp(const Tensor& x, int64_t dim, const Tensor& index0, const Tensor& index1,
                  const Tensor& weight) {
  return call_op(KILN_OP("index_lerp"),
                 {x.contiguous(), index0.contiguous(), index1.contiguous(), weight.contiguous()},
                 {dim});
}

namespace ops {
void register_index_lerp_ops() {
  register_op("index_lerp",
              "index_lerp(Tensor self, Tensor index0, Tensor index1, Tensor weight, int dim) "
              "-> Tensor",
              index_lerp_meta);
  register_op("index_lerp2",
              "index_lerp2(Tensor self, Tensor index0, Tensor index1, Tensor weight, "
              "Tensor index2, Tensor index3, Tensor weight2, int dim) -> Tensor",
              index_lerp2_meta);
  register_op("index_lerp_backward",
              "index_lerp_backward(Tensor grad, Tensor index0, Tensor index1, Tensor weight, "
              "int dim, int size) -> Tensor",
              index_lerp_backward_meta);
}
}  // namespace ops

}  // namespace kiln
