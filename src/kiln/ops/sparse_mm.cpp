// sparse_csr_mm: a sparse matrix in compressed-row form times a dense matrix, the product
// behind kiln.sparse.mm (python/kiln/sparse/, decision 0108). The sparse operand arrives as
// its three dense arrays; the Python layer records autograd around this op (its backward
// reuses other ops), so the op itself has no derivative.
#include "kiln/core/error.h"
#include "kiln/dispatch/dispatcher.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/sparse.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

// inputs: values [nnz], dense [K, N] of the values' dtype (first: the kernel is picked by the
// first input's dtype), crow_indices [R + 1] int64, col_indices [nnz] int64. The output is
// [R, N]. Index ranges are checked by the kernel (they are data).
std::vector<TensorMeta> sparse_csr_mm_meta(const OpCall& c) {
  const Tensor& values = c.inputs[0];
  const Tensor& dense = c.inputs[1];
  const Tensor& crow = c.inputs[2];
  const Tensor& col = c.inputs[3];
  KILN_CHECK(crow.dtype() == DType::I64 && crow.dim() == 1 && crow.numel() >= 1, TypeError,
             "sparse_csr_mm(): expected crow_indices as a non-empty int64 vector, got ",
             dtype_name(crow.dtype()), " of shape ", shape_str(crow.shape()));
  KILN_CHECK(col.dtype() == DType::I64 && col.dim() == 1, TypeError,
             "sparse_csr_mm(): expected col_indices as an int64 vector, got ",
             dtype_name(col.dtype()), " of shape ", shape_str(col.shape()));
  KILN_CHECK(values.dim() == 1 && values.numel() == col.numel(), ShapeError,
             "sparse_csr_mm(): expected one value per column index (", col.numel(), "), got "
             "values of shape ", shape_str(values.shape()));
  KILN_CHECK(is_floating(values.dtype()), TypeError,
             "sparse_csr_mm(): expected floating values, got ", dtype_name(values.dtype()));
  KILN_CHECK(dense.dim() == 2, ShapeError, "sparse_csr_mm(): expected a 2-D dense operand, got ",
             "shape ", shape_str(dense.shape()));
  KILN_CHECK(dense.dtype() == values.dtype(), TypeError,
             "sparse_csr_mm(): expected the dense operand in the values' dtype ",
             dtype_name(values.dtype()), ", got ", dtype_name(dense.dtype()));
  return {{Shape{crow.numel() - 1, dense.size(1)}, values.dtype()}};
}

}  // namespace

Tensor sparse_csr_mm(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                     const Tensor& dense) {
  return call_op(KILN_OP("sparse_csr_mm"), {values.contiguous(), dense.contiguous(),
                                            crow_indices.contiguous(), col_indices.contiguous()});
}

namespace ops {
void register_sparse_mm_op() {
  register_op("sparse_csr_mm",
              "sparse_csr_mm(Tensor values, Tensor dense, Tensor crow_indices, "
              "Tensor col_indices) -> Tensor",
              sparse_csr_mm_meta);
}
}  // namespace ops

}  // namespace kiln
