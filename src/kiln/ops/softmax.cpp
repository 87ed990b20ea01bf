// softmax and log_softmax along one dim: definitions and public functions. A dtype argument
// converts the input first (as PyTorch); the computation needs a floating dtype.
#include "kiln/ops/copy.h"
#include "kiln/ops/reduction.h"
#include "op_helpers.h"
#include "reduction_util.h"

namespace kiln {

namespace {

Tensor softmax_like(const char* op, const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  wrap_dim(dim, x.dim());
  Tensor in = dtype ? to_dtype(x, *dtype) : x;
  KILN_CHECK(is_floating(in.dtype()), NotImplementedError, "\"", op, "\" not implemented for '",
             ops::torch_type_name(in.dtype()),
             "': expected a floating point input (or pass a floating dtype)");
  return call_op(get_op(op), {in}, {dim});
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_like("softmax", x, dim, dtype);
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_like("log_softmax", x, dim, dtype);
}

namespace ops {
void register_softmax_ops() {
  register_op("softmax", "softmax(Tensor self, int dim) -> Tensor", along_dim_meta);
  register_op("log_softmax", "log_softmax(Tensor self, int dim) -> Tensor", along_dim_meta);
}
}  // namespace ops

}  // namespace kiln
