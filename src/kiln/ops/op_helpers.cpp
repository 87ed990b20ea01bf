#include "kiln/ops/op_helpers.h"

#include "kiln/dispatch/autocast.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/factory.h"

namespace kiln::ops {

std::vector<TensorMeta> one_meta(Shape shape, DType dtype) {
  std::vector<TensorMeta> metas(1);
  metas[0].shape = std::move(shape);
  metas[0].dtype = dtype;
  return metas;
}

std::vector<TensorMeta> same_as_first_meta(const OpCall& call) {
  return one_meta(call.inputs[0].shape(), call.inputs[0].dtype());
}

Shape broadcast_all(const std::vector<Tensor>& ts) {
  // Most calls have equal shapes: one copy of the first, no broadcast_shapes.
  const Shape* first = nullptr;
  bool same = true;
  for (const auto& t : ts) {
    if (!t.defined()) continue;
    if (!first)
      first = &t.shape();
    else
      same = same && t.shape() == *first;
  }
  if (!first) return {};
  if (same) return *first;
  Shape s = *first;
  for (const auto& t : ts)
    if (t.defined() && &t.shape() != first) s = broadcast_shapes(s, t.shape());
  return s;
}

std::vector<TensorMeta> broadcast_meta(const OpCall& call) {
  return one_meta(broadcast_all(call.inputs), call.inputs[0].dtype());
}
std::vector<TensorMeta> broadcast_bool_meta(const OpCall& call) {
  return one_meta(broadcast_all(call.inputs), DType::Bool);
}
std::vector<TensorMeta> out_meta(const OpCall& call) {
  KILN_INTERNAL_ASSERT(!call.outs.empty(), call.op->name, " needs an output tensor");
  return one_meta(call.outs[0].shape(), call.outs[0].dtype());
}

Tensor wrap_scalar(const Scalar& s, DType dtype, Device device) {
  Tensor t = full({}, s, TensorOptions(dtype, device));
  t.impl()->is_wrapped_number = true;
  return t;
}

void write_result(const char* op_name, Tensor& out, const Tensor& result) {
  KILN_CHECK(can_cast(result.dtype(), out.dtype()), Error, "result type ",
             dtype_name(result.dtype()), " can't be cast to the desired output type ",
             dtype_name(out.dtype()), " (in ", op_name, ")");
  KILN_CHECK(result.shape() == out.shape(), ShapeError, op_name, ": output with shape ",
             shape_str(out.shape()), " doesn't match the broadcast shape ",
             shape_str(result.shape()));
  copy_(out, result);
}

bool partially_overlaps(const Tensor& a, const Tensor& b) {
  if (!a.shares_storage_with(b)) return false;
  return !(a.storage_offset() == b.storage_offset() && a.shape() == b.shape() &&
           a.strides() == b.strides());
}

}  // namespace kiln::ops

namespace kiln {
bool autocast_unifies(const Tensor& x, DType other) {
  const auto lower = [](DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; };
  return lower(x.dtype()) && lower(other) && is_autocast_enabled(x.device().type);
}
}  // namespace kiln
