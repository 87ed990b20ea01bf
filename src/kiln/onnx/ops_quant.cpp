// Linear quantisation: QuantizeLinear (round half to even, saturate to the zero point's
// type, uint8 by default) and DequantizeLinear, per tensor or per axis (opset 13).
#include <cmath>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

// A per-axis parameter [C] shaped to broadcast along axis of x; a scalar stays as it is.
Tensor along_axis(const OpContext& ctx, const Tensor& p, const Tensor& x) {
  if (p.dim() == 0 || p.numel() == 1) return reshape(p, Shape{});
  const int64_t axis = normalize_axis(ctx.attr_int("axis", 1), x.dim());
  KILN_CHECK(p.dim() == 1 && p.numel() == x.size(axis), ShapeError, "per-axis parameter ", shape_str(p.shape()),
             " must have ", x.size(axis), " entries (axis ", axis, " of ", shape_str(x.shape()), ")");
  Shape s(size_t(x.dim()), 1);
  s[size_t(axis)] = p.numel();
  return reshape(p, s);
}

std::vector<Tensor> op_quantize_linear(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor scale = along_axis(ctx, ctx.input(1), x);
  const DType out = ctx.has_input(2) ? ctx.input(2).dtype() : DType::U8;
  KILN_CHECK(out == DType::U8 || out == DType::I8, NotImplementedError, "quantizing to ", out,
             " is not supported (uint8 and int8 are)");
  Tensor zp = ctx.has_input(2) ? cast(along_axis(ctx, ctx.input(2), x), DType::F32) : scalar_like(cast(x, DType::F32), 0);
  Tensor q = add(round(div(cast(x, DType::F32), cast(scale, DType::F32))), zp);
  const double lo = out == DType::U8 ? 0 : -128, hi = out == DType::U8 ? 255 : 127;
  return one(cast(clamp(q, Scalar(lo), Scalar(hi)), out));
}

std::vector<Tensor> op_dequantize_linear(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor scale = along_axis(ctx, ctx.input(1), x);
  Tensor xf = cast(x, DType::F32);
  if (ctx.has_input(2)) xf = sub(xf, cast(along_axis(ctx, ctx.input(2), x), DType::F32));
  return one(cast(mul(xf, cast(scale, DType::F32)), scale.dtype()));
}

}  // namespace

void register_quant_ops(OpTable& t) {
  t.add("QuantizeLinear", op_quantize_linear);
  t.add("DequantizeLinear", op_dequantize_linear);
}

}  // namespace kiln::onnx
