// Elementwise math, comparison, logic and activation operators. ONNX requires equal operand
// types for arithmetic, so kiln's promotion keeps the type; where it would not (integer
// division, mixed-type Pow), the result is cast back to the ONNX output type.
#include <cmath>

#include "kiln/onnx/op_table.h"
#include "kiln/onnx/ops_util.h"
#include "kiln/onnx/tensor_proto.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"

namespace kiln::onnx {

namespace {

#define KILN_ONNX_UNARY(Name, expr)                      \
  std::vector<Tensor> Name(OpContext& ctx) {             \
    const Tensor& x = ctx.input(0);                      \
    return one(expr);                                    \
  }

KILN_ONNX_UNARY(op_abs, abs(x))
KILN_ONNX_UNARY(op_neg, neg(x))
KILN_ONNX_UNARY(op_exp, exp(x))
KILN_ONNX_UNARY(op_log, log(x))
KILN_ONNX_UNARY(op_sqrt, sqrt(x))
KILN_ONNX_UNARY(op_reciprocal, reciprocal(x))
KILN_ONNX_UNARY(op_sin, sin(x))
KILN_ONNX_UNARY(op_cos, cos(x))
KILN_ONNX_UNARY(op_tan, tan(x))
KILN_ONNX_UNARY(op_tanh, tanh(x))
KILN_ONNX_UNARY(op_sigmoid, sigmoid(x))
KILN_ONNX_UNARY(op_relu, relu(x))
KILN_ONNX_UNARY(op_erf, erf(x))
KILN_ONNX_UNARY(op_floor, floor(x))
KILN_ONNX_UNARY(op_ceil, ceil(x))
KILN_ONNX_UNARY(op_round, round(x))  // half to even, as ONNX
KILN_ONNX_UNARY(op_sign, sign(x))
KILN_ONNX_UNARY(op_not, logical_not(x))
KILN_ONNX_UNARY(op_isnan, isnan(x))
// Identity passes any value through, sequences included.
std::vector<Tensor> op_identity(OpContext& ctx) {
  ctx.set_value_output(0, ctx.value_input(0));
  return {};
}
// Inverse and hyperbolic trigonometry composed from what kiln has.
KILN_ONNX_UNARY(op_asin, atan2(x, sqrt(rsub(mul(x, x), 1.0))))
KILN_ONNX_UNARY(op_acos, atan2(sqrt(rsub(mul(x, x), 1.0)), x))
KILN_ONNX_UNARY(op_atan, atan2(x, ones_like(x)))
KILN_ONNX_UNARY(op_sinh, mul(sub(exp(x), exp(neg(x))), 0.5))
KILN_ONNX_UNARY(op_cosh, mul(add(exp(x), exp(neg(x))), 0.5))
KILN_ONNX_UNARY(op_asinh, log(add(x, sqrt(add(mul(x, x), 1.0)))))
KILN_ONNX_UNARY(op_acosh, log(add(x, sqrt(sub(mul(x, x), 1.0)))))
KILN_ONNX_UNARY(op_atanh, mul(log(div(add(x, 1.0), rsub(x, 1.0))), 0.5))
KILN_ONNX_UNARY(op_softsign, div(x, add(abs(x), 1.0)))
KILN_ONNX_UNARY(op_softplus, log1p(exp(x)))
KILN_ONNX_UNARY(op_mish, mul(x, tanh(softplus(x))))
#undef KILN_ONNX_UNARY

std::vector<Tensor> op_isinf(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool neg_inf = ctx.attr_int("detect_negative", 1) != 0;
  const bool pos_inf = ctx.attr_int("detect_positive", 1) != 0;
  Tensor inf = isinf(x);
  if (neg_inf && pos_inf) return one(inf);
  if (!neg_inf && !pos_inf) return one(zeros_like(x, DType::Bool));
  return one(logical_and(inf, pos_inf ? gt(x, 0.0) : lt(x, 0.0)));
}

// The second operand of a binary operator. Before opset 7 broadcasting was opt-in
// (broadcast=1) and B could align with A at `axis` instead of at A's trailing dims; numpy
// broadcasting covers the rest once B is reshaped to line up.
Tensor rhs(const OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (ctx.opset() >= 7 || !ctx.has_attr("axis") || ctx.attr_int("broadcast", 0) == 0) return b;
  const int64_t axis = normalize_axis(ctx.attr_int("axis"), a.dim());
  KILN_CHECK(axis + b.dim() <= a.dim(), ShapeError, "B ", shape_str(b.shape()), " does not fit in A ",
             shape_str(a.shape()), " from axis ", axis);
  Shape s(size_t(axis), 1);
  s.insert(s.end(), b.shape().begin(), b.shape().end());
  s.resize(size_t(a.dim()), 1);
  return reshape(b, s);
}

// Binary arithmetic: ONNX gives both operands the same type; integer division truncates.
std::vector<Tensor> op_add(OpContext& ctx) { return one(add(ctx.input(0), rhs(ctx))); }
std::vector<Tensor> op_sub(OpContext& ctx) { return one(sub(ctx.input(0), rhs(ctx))); }
std::vector<Tensor> op_mul(OpContext& ctx) { return one(mul(ctx.input(0), rhs(ctx))); }
std::vector<Tensor> op_div(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor b = rhs(ctx);
  if (is_integral(a.dtype(), true)) return one(cast(div(a, b, "trunc"), a.dtype()));
  return one(div(a, b));
}
std::vector<Tensor> op_pow(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  return one(cast(pow(a, rhs(ctx)), a.dtype()));
}
std::vector<Tensor> op_mod(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const bool c_fmod = ctx.attr_int("fmod", 0) != 0;
  KILN_CHECK(c_fmod || !is_floating(a.dtype()), ValueError,
             "attribute fmod must be 1 for floating-point inputs, got 0");
  return one(cast(c_fmod ? fmod(a, b) : remainder(a, b), a.dtype()));
}

// Variadic Max/Min/Sum/Mean: every input broadcast together.
template <Tensor (*Combine)(const Tensor&, const Tensor&)>
std::vector<Tensor> variadic(OpContext& ctx) {
  Tensor acc = ctx.input(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) acc = Combine(acc, ctx.input(i));
  return one(acc);
}
Tensor add2(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor max2(const Tensor& a, const Tensor& b) { return maximum(a, b); }
Tensor min2(const Tensor& a, const Tensor& b) { return minimum(a, b); }
std::vector<Tensor> op_mean(OpContext& ctx) {
  Tensor sum = variadic<add2>(ctx)[0];
  return one(div(sum, scalar_like(sum, double(ctx.num_inputs()))));
}

#define KILN_ONNX_BINARY(Name, fn) \
  std::vector<Tensor> Name(OpContext& ctx) { return one(fn(ctx.input(0), rhs(ctx))); }
KILN_ONNX_BINARY(op_equal, eq)
KILN_ONNX_BINARY(op_less, lt)
KILN_ONNX_BINARY(op_less_equal, le)
KILN_ONNX_BINARY(op_greater, gt)
KILN_ONNX_BINARY(op_greater_equal, ge)
KILN_ONNX_BINARY(op_and, logical_and)
KILN_ONNX_BINARY(op_or, logical_or)
KILN_ONNX_BINARY(op_xor, logical_xor)
#undef KILN_ONNX_BINARY

std::vector<Tensor> op_where(OpContext& ctx) {
  return one(where(cast(ctx.input(0), DType::Bool), ctx.input(1), ctx.input(2)));
}

// The target type: a TensorProto.DataType number, or (before opset 6) its name.
int64_t cast_target(const OpContext& ctx) {
  const pb::AttributeProto* a = ctx.find_attr("to");
  if (ctx.opset() >= 6 || a == nullptr || a->type() != pb::AttributeProto::STRING) return ctx.attr_int("to");
  for (int32_t code = 1; code <= 16; ++code) {
    if (onnx_type_name(code) == a->s()) return code;
  }
  KILN_THROW(ValueError, "attribute 'to' names no ONNX type: ", quoted(a->s(), 50));
}

std::vector<Tensor> op_cast(OpContext& ctx) {
  const int64_t to = cast_target(ctx);
  std::optional<DType> dtype = dtype_from_onnx(int32_t(to));
  KILN_CHECK(dtype.has_value(), NotImplementedError, "cast to ", onnx_type_name(int32_t(to)),
             " is not supported (kiln has no such element type)");
  return one(cast(ctx.input(0), *dtype));
}
std::vector<Tensor> op_cast_like(OpContext& ctx) { return one(cast(ctx.input(0), ctx.input(1).dtype())); }

// Activations with parameters.
std::vector<Tensor> op_leaky_relu(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double alpha = ctx.attr_float("alpha", 0.01f);
  return one(where(ge(x, 0.0), x, mul(x, scalar_like(x, alpha))));
}
std::vector<Tensor> op_elu(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double alpha = ctx.attr_float("alpha", 1.0f);
  return one(where(gt(x, 0.0), x, mul(expm1(x), scalar_like(x, alpha))));
}
std::vector<Tensor> op_celu(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double alpha = ctx.attr_float("alpha", 1.0f);
  Tensor negative = mul(expm1(div(x, scalar_like(x, alpha))), scalar_like(x, alpha));
  return one(add(relu(x), minimum(zeros_like(x), negative)));
}
std::vector<Tensor> op_selu(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double alpha = ctx.attr_float("alpha", 1.67326319217681884765625f);
  const double gamma = ctx.attr_float("gamma", 1.05070102214813232421875f);
  Tensor y = where(gt(x, 0.0), x, mul(expm1(x), scalar_like(x, alpha)));
  return one(mul(y, scalar_like(x, gamma)));
}
std::vector<Tensor> op_thresholded_relu(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double alpha = ctx.attr_float("alpha", 1.0f);
  return one(where(gt(x, alpha), x, zeros_like(x)));
}
std::vector<Tensor> op_hard_sigmoid(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double alpha = ctx.attr_float("alpha", 0.2f);
  const double beta = ctx.attr_float("beta", 0.5f);
  return one(clamp(add(mul(x, scalar_like(x, alpha)), scalar_like(x, beta)), Scalar(0.0), Scalar(1.0)));
}
std::vector<Tensor> op_hard_swish(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor hs = clamp(add(mul(x, scalar_like(x, 1.0 / 6)), scalar_like(x, 0.5)), Scalar(0.0), Scalar(1.0));
  return one(mul(x, hs));
}
// Before opset 7 a 1-d slope of C values is per channel (dim 1), not numpy-broadcast.
std::vector<Tensor> op_prelu(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor slope = ctx.input(1);
  if (ctx.opset() < 7 && slope.dim() == 1 && slope.numel() > 1 && x.dim() >= 2 && slope.numel() == x.size(1)) {
    Shape s(size_t(x.dim() - 1), 1);
    s[0] = slope.numel();
    slope = reshape(slope, s);
  }
  return one(where(ge(x, 0.0), x, mul(x, slope)));
}
std::vector<Tensor> op_shrink(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double bias = ctx.attr_float("bias", 0.0f);
  const double lambd = ctx.attr_float("lambd", 0.5f);
  Tensor below = lt(x, -lambd);
  Tensor above = gt(x, lambd);
  Tensor y = where(below, add(x, scalar_like(x, bias)), zeros_like(x));
  return one(where(above, sub(x, scalar_like(x, bias)), y));
}

// Clip: bounds are attributes before opset 11, optional inputs after.
std::vector<Tensor> op_clip(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (ctx.opset() < 11) {
    std::optional<Scalar> lo, hi;
    if (ctx.has_attr("min")) lo = Scalar(double(ctx.attr_float("min")));
    if (ctx.has_attr("max")) hi = Scalar(double(ctx.attr_float("max")));
    if (!lo && !hi) return one(x);
    return one(cast(clamp(x, lo, hi), x.dtype()));
  }
  // Bounds are 0-d: as host scalars, one clamp pass instead of a maximum and a minimum.
  std::optional<Scalar> lo, hi;
  auto bound = [&](size_t i) -> Scalar {
    const double v = ctx.input_scalar(i);
    return is_floating(x.dtype()) ? Scalar(v) : Scalar(int64_t(v));
  };
  if (ctx.has_input(1)) lo = bound(1);
  if (ctx.has_input(2)) hi = bound(2);
  if (!lo && !hi) return one(x);
  if (lo && hi && lo->to_double() > hi->to_double()) return one(full_like(x, *hi));  // ONNX: all max
  return one(cast(clamp(x, lo, hi), x.dtype()));
}

// BitShift on uint8 (kiln's only unsigned type): products and quotients by 2^y in int64,
// wrapped back to 8 bits; shifts of 8 or more give 0.
std::vector<Tensor> op_bit_shift(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  KILN_CHECK(x.dtype() == DType::U8, NotImplementedError, "BitShift on ", x.dtype(),
             " is not supported (uint8 is; ONNX defines it for unsigned types only)");
  const std::string direction = ctx.attr_string("direction");
  KILN_CHECK(direction == "LEFT" || direction == "RIGHT", ValueError, "direction must be LEFT or RIGHT, got ",
             quoted(direction, 20));
  Tensor y = clamp(cast(rhs(ctx), DType::I64), Scalar(int64_t(0)), Scalar(int64_t(8)));
  Tensor factor = pow(Scalar(int64_t(2)), y);
  Tensor wide = cast(x, DType::I64);
  Tensor r = direction == "LEFT" ? bitwise_and(mul(wide, factor), scalar_like(wide, 255)) : div(wide, factor, "floor");
  return one(cast(r, DType::U8));
}

}  // namespace

void register_math_ops(OpTable& t) {
  t.add("Abs", op_abs);
  t.add("Neg", op_neg);
  t.add("Exp", op_exp);
  t.add("Log", op_log);
  t.add("Sqrt", op_sqrt);
  t.add("Reciprocal", op_reciprocal);
  t.add("Sin", op_sin);
  t.add("Cos", op_cos);
  t.add("Tan", op_tan);
  t.add("Tanh", op_tanh);
  t.add("Sigmoid", op_sigmoid);
  t.add("Relu", op_relu);
  t.add("Erf", op_erf);
  t.add("Floor", op_floor);
  t.add("Ceil", op_ceil);
  t.add("Round", op_round);
  t.add("Sign", op_sign);
  t.add("Not", op_not);
  t.add("IsNaN", op_isnan);
  t.add("IsInf", op_isinf);
  t.add("Identity", op_identity);
  t.add("Asin", op_asin);
  t.add("Acos", op_acos);
  t.add("Atan", op_atan);
  t.add("Sinh", op_sinh);
  t.add("Cosh", op_cosh);
  t.add("Asinh", op_asinh);
  t.add("Acosh", op_acosh);
  t.add("Atanh", op_atanh);
  t.add("Softsign", op_softsign);
  t.add("Softplus", op_softplus);
  t.add("Mish", op_mish);
  t.add("Add", op_add);
  t.add("Sub", op_sub);
  t.add("Mul", op_mul);
  t.add("Div", op_div);
  t.add("Pow", op_pow);
  t.add("Mod", op_mod);
  t.add("Max", variadic<max2>);
  t.add("Min", variadic<min2>);
  t.add("Sum", variadic<add2>);
  t.add("Mean", op_mean);
  t.add("Equal", op_equal);
  t.add("Less", op_less);
  t.add("LessOrEqual", op_less_equal);
  t.add("Greater", op_greater);
  t.add("GreaterOrEqual", op_greater_equal);
  t.add("And", op_and);
  t.add("Or", op_or);
  t.add("Xor", op_xor);
  t.add("Where", op_where);
  t.add("Cast", op_cast);
  t.add("CastLike", op_cast_like);
  t.add("LeakyRelu", op_leaky_relu);
  t.add("Elu", op_elu);
  t.add("Celu", op_celu);
  t.add("Selu", op_selu);
  t.add("ThresholdedRelu", op_thresholded_relu);
  t.add("HardSigmoid", op_hard_sigmoid);
  t.add("HardSwish", op_hard_swish);
  t.add("PRelu", op_prelu);
  t.add("BitShift", op_bit_shift);
  t.add("Shrink", op_shrink);
  t.add("Clip", op_clip);
}

}  // namespace kiln::onnx
