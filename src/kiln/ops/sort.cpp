// Sorting and selection: sort, argsort, topk, unique. NaN sorts as the largest value, as in
// PyTorch; sorts are always stable (so stable=false gives one of the allowed orders).
#include "kiln/ops/indexing.h"
#include "kiln/ops/indexing_common.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

// attrs: dim (wrapped), descending, stable. Outputs: values, int64 indices.
std::vector<TensorMeta> sort_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  wrap_dim(c.int_attr(0), x.dim());
  return {{x.shape(), x.dtype()}, {x.shape(), DType::I64}};
}

// attrs: k, dim (wrapped), largest, sorted.
std::vector<TensorMeta> topk_meta(const OpCall& c) {
  const Tensor& x = c.inputs[0];
  int64_t k = c.int_attr(0);
  int64_t d = wrap_dim(c.int_attr(1), x.dim());
  int64_t n = ops::nonempty_size(x, d);
  KILN_CHECK(k >= 0 && k <= n, Error, "topk: selected index k out of range: expected k in "
             "[0, ", n, "] (the size of dimension ", d, "), got k = ", k);
  Shape s = x.shape();
  if (x.dim() > 0) s[size_t(d)] = k;
  return {{s, x.dtype()}, {s, DType::I64}};
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  int64_t d = wrap_dim(dim, x.dim());
  auto outs = call_op_multi(KILN_OP("sort"), {x}, {d, descending, stable});
  return {outs[0], outs[1]};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return std::get<1>(sort(x, dim, descending, stable));
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  int64_t d = wrap_dim(dim, x.dim());
  auto outs = call_op_multi(KILN_OP("topk"), {x}, {k, d, largest, sorted});
  return {outs[0], outs[1]};
}

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted, bool return_inverse,
                                          bool return_counts, std::optional<int64_t> dim) {
  AttrValue d;
  if (dim) {
    KILN_CHECK(x.dim() > 0, ShapeError, "unique: dim is given but the input is 0-dimensional");
    d = wrap_dim(*dim, x.dim());
  }
  auto outs = call_op_multi(KILN_OP("unique"), {x}, {sorted, return_inverse, return_counts, d});
  return {outs[0], outs[1], outs[2]};
}

namespace ops {
void register_sort_ops() {
  register_op("sort",
              "sort.stable(Tensor self, int dim=-1, bool descending=False, bool stable=False) -> "
              "(Tensor values, Tensor indices)",
              sort_meta);
  register_op("topk",
              "topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> "
              "(Tensor values, Tensor indices)",
              topk_meta);
  // Outputs: values, inverse indices and counts (the latter two empty when not asked).
  register_op("unique",
              "unique(Tensor self, bool sorted=True, bool return_inverse=False, bool "
              "return_counts=False, int? dim=None) -> (Tensor, Tensor, Tensor)",
              nullptr)
      .dynamic_shape = true;
}
}  // namespace ops

}  // namespace kiln
