// lstm_cell (include/kiln/ops/lstm_cell.h); the CPU kernel is backends/cpu/lstm_cell_kernel.cpp.
#include "kiln/ops/lstm_cell.h"

#include "kiln/dispatch/dispatcher.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

std::vector<TensorMeta> lstm_cell_meta(const OpCall& call) {
  const Tensor& gates = call.inputs[0];
  const Tensor& c = call.inputs[1];
  KILN_CHECK(gates.dtype() == DType::F32 && c.dtype() == DType::F32, TypeError,
             "lstm_cell: expected float32 gates and cell state, got ", dtype_name(gates.dtype()),
             " and ", dtype_name(c.dtype()));
  KILN_CHECK(gates.dim() == 2 && c.dim() == 2 && gates.size(0) == c.size(0) &&
                 gates.size(1) == 4 * c.size(1),
             ShapeError, "lstm_cell: expected gates [batch, 4 * H] and c [batch, H], got ",
             shape_str(gates.shape()), " and ", shape_str(c.shape()));
  const Shape shape{c.size(0), c.size(1)};
  return {{shape, DType::F32}, {shape, DType::F32}};
}

}  // namespace

std::vector<Tensor> lstm_cell(const Tensor& gates, const Tensor& c) {
  return call_op_multi(KILN_OP("lstm_cell"), {gates.contiguous(), c.contiguous()}, {});
}

namespace ops {
void register_lstm_cell_op() {
  register_op("lstm_cell", "lstm_cell(Tensor gates, Tensor c) -> (Tensor, Tensor)",
              lstm_cell_meta);
}
}  // namespace ops

}  // namespace kiln
