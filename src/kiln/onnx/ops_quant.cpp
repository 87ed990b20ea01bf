// Linear quantisation: QuantizeLinear (round half to even, saturate to the zero point's
// type, uint8 by default) and DequantizeLinear, per tensor or per axis (opset 13);
// DynamicQuantizeLinear; the integer products MatMulInteger / ConvInteger and their
// requantising forms QLinearMatMul / QLinearConv. Integer products run in float64, which is
// exact for 8-bit operands until sums pass 2^53, then are cast to int32.
#include <cmath>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/reduction.h"
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

// Rounds (half to even) and saturates v to the 8-bit type dtype.
Tensor saturate(const Tensor& v, DType dtype) {
  KILN_CHECK(dtype == DType::U8 || dtype == DType::I8, NotImplementedError, "quantized type ", dtype,
             " is not supported (uint8 and int8 are)");
  const double lo = dtype == DType::U8 ? 0 : -128, hi = dtype == DType::U8 ? 255 : 127;
  return cast(clamp(round(v), Scalar(lo), Scalar(hi)), dtype);
}

// x [q - zp] in float64. A 1-d zero point of the per-row (A, dim -2) or per-column
// (B / weight output channels) kind is shaped to broadcast.
Tensor centred(const Tensor& q, const Tensor& zp, int64_t zp_dim) {
  Tensor f = cast(q, DType::F64);
  if (!zp.defined() || zp.numel() == 0) return f;
  Tensor z = cast(zp, DType::F64);
  if (z.numel() == 1) return sub(f, reshape(z, Shape{}));
  Shape s(size_t(q.dim()), 1);
  s[size_t(zp_dim < 0 ? zp_dim + q.dim() : zp_dim)] = z.numel();
  return sub(f, reshape(z, s));
}

Tensor optional_input(const OpContext& ctx, size_t i) { return ctx.has_input(i) ? ctx.input(i) : Tensor(); }

std::vector<Tensor> op_dynamic_quantize_linear(OpContext& ctx) {
  const Tensor x = cast(ctx.input(0), DType::F32);
  // The range always includes 0, so that 0 is exact; computed in float32 as the reference.
  const float lo = std::min(0.f, x.numel() ? amin(x).to_vector<float>()[0] : 0.f);
  const float hi = std::max(0.f, x.numel() ? amax(x).to_vector<float>()[0] : 0.f);
  const float scale = (hi - lo) / 255.f;
  const float zp = std::clamp(std::nearbyint(0.f - lo / scale), 0.f, 255.f);
  Tensor scale_t = ctx.on_device(scalar_tensor(scale, TensorOptions(DType::F32)));
  Tensor y = saturate(add(round(div(x, scale_t)), double(zp)), DType::U8);
  return {y, scale_t, ctx.on_device(scalar_tensor(zp, TensorOptions(DType::U8)))};
}

std::vector<Tensor> op_matmul_integer(OpContext& ctx) {
  Tensor a = centred(ctx.input(0), optional_input(ctx, 2), -2);
  Tensor b = centred(ctx.input(1), optional_input(ctx, 3), -1);
  return one(cast(matmul(a, b), DType::I32));
}

// Conv with the node's attributes on already converted operands.
Tensor conv_with(const OpContext& ctx, const Tensor& x, const Tensor& w, const Tensor& bias) {
  std::vector<Value> in{x, w};
  if (bias.defined()) in.emplace_back(bias);
  OpContext inner(ctx.node(), ctx.opset(), std::move(in), ctx.device());
  return op_table().find("Conv")(inner)[0];
}

std::vector<Tensor> op_conv_integer(OpContext& ctx) {
  Tensor x = centred(ctx.input(0), optional_input(ctx, 2), 1);
  Tensor w = centred(ctx.input(1), optional_input(ctx, 3), 0);
  return one(cast(conv_with(ctx, x, w, Tensor()), DType::I32));
}

// a_scale * b_scale / y_scale in float32 (per output column or channel when 1-d), shaped to
// broadcast along dim of the result.
Tensor requant_factor(const Tensor& sa, const Tensor& sb, const Tensor& sy, int64_t rank, int64_t dim) {
  Tensor f = cast(div(mul(cast(sa, DType::F32), cast(sb, DType::F32)), cast(sy, DType::F32)), DType::F64);
  if (f.numel() == 1) return reshape(f, Shape{});
  Shape s(size_t(rank), 1);
  s[size_t(dim < 0 ? dim + rank : dim)] = f.numel();
  return reshape(f, s);
}

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
std::vector<Tensor> op_qlinear_matmul(OpContext& ctx) {
  Tensor acc = matmul(centred(ctx.input(0), ctx.input(2), -2), centred(ctx.input(3), ctx.input(5), -1));
  Tensor y = mul(acc, requant_factor(ctx.input(1), ctx.input(4), ctx.input(6), acc.dim(), -1));
  return one(saturate(add(round(y), cast(ctx.input(7), DType::F64)), ctx.input(7).dtype()));
}

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
std::vector<Tensor> op_qlinear_conv(OpContext& ctx) {
  Tensor x = centred(ctx.input(0), ctx.input(2), 1);
  Tensor w = centred(ctx.input(3), ctx.input(5), 0);
  Tensor acc = conv_with(ctx, x, w, ctx.has_input(8) ? cast(ctx.input(8), DType::F64) : Tensor());
  Tensor y = mul(acc, requant_factor(ctx.input(1), ctx.input(4), ctx.input(6), acc.dim(), 1));
  const Tensor& yzp = ctx.input(7);
  return one(saturate(add(round(y), cast(reshape(yzp, Shape{}), DType::F64)), yzp.dtype()));
}

}  // namespace

void register_quant_ops(OpTable& t) {
  t.add("QuantizeLinear", op_quantize_linear);
  t.add("DequantizeLinear", op_dequantize_linear);
  t.add("DynamicQuantizeLinear", op_dynamic_quantize_linear);
  t.add("MatMulInteger", op_matmul_integer);
  t.add("ConvInteger", op_conv_integer);
  t.add("QLinearMatMul", op_qlinear_matmul);
  t.add("QLinearConv", op_qlinear_conv);
}

}  // namespace kiln::onnx
