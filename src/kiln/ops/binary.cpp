// Binary and ternary elementwise ops: PyTorch type promotion, broadcasting, in-place and
// out= forms, then one kernel call with inputs of a common dtype.
#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

enum class Kind {
  Arith,      // result = promoted type
  TrueDiv,    // integers promote to the default float
  FloatOnly,  // like TrueDiv (atan2)
  Compare,    // inputs promoted, result bool
  Bitwise,    // integral/bool only
};

DType compute_type(const char* name, DType promoted, Kind kind) {
  if (kind == Kind::FloatOnly)
    KILN_CHECK(!is_complex(promoted), NotImplementedError, "\"", name, "\" not implemented for '",
               dtype_name(promoted), "'");
  if ((kind == Kind::TrueDiv || kind == Kind::FloatOnly) && !is_floating(promoted) &&
      !is_complex(promoted))
    return default_float_dtype();
  if (kind == Kind::Bitwise)
    KILN_CHECK(!is_floating(promoted) && !is_complex(promoted), NotImplementedError, "\"", name, "\" not implemented for '",
               dtype_name(promoted), "'; bitwise ops need integral or bool tensors");
  return promoted;
}

DType result_dtype(DType compute, Kind kind) { return kind == Kind::Compare ? DType::Bool : compute; }

Tensor run(const OpDef& op, const Tensor& a, const Tensor& b, Kind kind,
           std::vector<AttrValue> attrs) {
  DType t = compute_type(op.name.c_str(), result_type(a, b), kind);
  return call_op(op, {to_dtype(a, t), to_dtype(b, t)}, std::move(attrs));
}

Tensor run_scalar(const OpDef& op, const Tensor& a, const Scalar& b, Kind kind,
                  std::vector<AttrValue> attrs) {
  DType t = compute_type(op.name.c_str(), result_type(a, b), kind);
  return call_op(op, {to_dtype(a, t), ops::wrap_scalar(b, t, a.device())}, std::move(attrs));
}

// Writes op(a, b) into out; out may be a itself (in-place).
Tensor& run_out(const OpDef& op, const Tensor& a, const Tensor& b, Kind kind,
                std::vector<AttrValue> attrs, Tensor& out) {
  DType t = compute_type(op.name.c_str(), result_type(a, b), kind);
  Shape shape = broadcast_shapes(a.shape(), b.shape());
  Tensor a2 = to_dtype(a, t), b2 = to_dtype(b, t);
  if (out.dtype() == result_dtype(t, kind) && out.shape() == shape) {
    if (ops::partially_overlaps(out, a2)) a2 = clone(a2);
    if (ops::partially_overlaps(out, b2)) b2 = clone(b2);
    call_op_out(op, {a2, b2}, std::move(attrs), {out});
  } else {
    ops::write_result(op.name.c_str(), out, call_op(op, {a2, b2}, std::move(attrs)));
  }
  return out;
}

// A wrapped-number tensor holding b at full precision (float64 / int64 / bool): promotion
// treats it as a Python scalar whatever its storage dtype (see tensor/promotion.h), and the
// op converts it once to the computation type, so float64 math sees the exact value.
Tensor scalar_like(const Tensor& a, const Scalar& b) {
  DType storage = b.is_floating() ? DType::F64 : b.is_complex() ? DType::C128 : b.default_dtype();
  return ops::wrap_scalar(b, storage, a.device());
}

}  // namespace

#define KILN_DEFINE_BINARY(fn, opname, kind)                                             \
  Tensor fn(const Tensor& a, const Tensor& b) { return run(KILN_OP(opname), a, b, kind, {}); } \
  Tensor fn(const Tensor& a, const Scalar& b) {                                          \
    return run_scalar(KILN_OP(opname), a, b, kind, {});                                  \
  }                                                                                      \
  Tensor& fn##_(Tensor& a, const Tensor& b) { return run_out(KILN_OP(opname), a, b, kind, {}, a); } \
  Tensor& fn##_(Tensor& a, const Scalar& b) {                                            \
    return run_out(KILN_OP(opname), a, scalar_like(a, b), kind, {}, a);                  \
  }                                                                                      \
  Tensor& fn##_out(const Tensor& a, const Tensor& b, Tensor& out) {                      \
    return run_out(KILN_OP(opname), a, b, kind, {}, out);                                \
  }

KILN_DEFINE_BINARY(mul, "mul", Kind::Arith)
KILN_DEFINE_BINARY(pow, "pow", Kind::Arith)
KILN_DEFINE_BINARY(maximum, "maximum", Kind::Arith)
KILN_DEFINE_BINARY(minimum, "minimum", Kind::Arith)
KILN_DEFINE_BINARY(fmod, "fmod", Kind::Arith)
KILN_DEFINE_BINARY(remainder, "remainder", Kind::Arith)
KILN_DEFINE_BINARY(atan2, "atan2", Kind::FloatOnly)
KILN_DEFINE_BINARY(eq, "eq", Kind::Compare)
KILN_DEFINE_BINARY(ne, "ne", Kind::Compare)
KILN_DEFINE_BINARY(lt, "lt", Kind::Compare)
KILN_DEFINE_BINARY(le, "le", Kind::Compare)
KILN_DEFINE_BINARY(gt, "gt", Kind::Compare)
KILN_DEFINE_BINARY(ge, "ge", Kind::Compare)
KILN_DEFINE_BINARY(logical_and, "logical_and", Kind::Compare)
KILN_DEFINE_BINARY(logical_or, "logical_or", Kind::Compare)
KILN_DEFINE_BINARY(logical_xor, "logical_xor", Kind::Compare)
KILN_DEFINE_BINARY(bitwise_and, "bitwise_and", Kind::Bitwise)
KILN_DEFINE_BINARY(bitwise_or, "bitwise_or", Kind::Bitwise)
KILN_DEFINE_BINARY(bitwise_xor, "bitwise_xor", Kind::Bitwise)
#undef KILN_DEFINE_BINARY

Tensor pow(const Scalar& a, const Tensor& b) {
  DType t = result_type(b, a);
  return call_op(KILN_OP("pow"), {ops::wrap_scalar(a, t, b.device()), to_dtype(b, t)}, {});
}

// ---- add / sub (alpha) ----
namespace {
void check_alpha(const char* name, DType t, const Scalar& alpha) {
  KILN_CHECK(is_floating(t) || !alpha.is_floating(), Error, "For integral input tensors, "
             "argument alpha must not be a floating point number (in ", name, ")");
}
void check_sub(const Tensor& a, const Tensor& b) {
  KILN_CHECK(!(a.dtype() == DType::Bool && b.dtype() == DType::Bool), Error,
             "Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
             "`^` or `logical_xor()` operator instead.");
  KILN_CHECK(!(a.dtype() == DType::Bool || b.dtype() == DType::Bool), Error,
             "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
             "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_alpha("add", result_type(a, b), alpha);
  return run(KILN_OP("add"), a, b, Kind::Arith, {alpha});
}
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  check_alpha("add", result_type(a, b), alpha);
  return run_scalar(KILN_OP("add"), a, b, Kind::Arith, {alpha});
}
Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_alpha("add_", result_type(a, b), alpha);
  return run_out(KILN_OP("add"), a, b, Kind::Arith, {alpha}, a);
}
Tensor& add_(Tensor& a, const Scalar& b, const Scalar& alpha) {
  return add_(a, scalar_like(a, b), alpha);
}
Tensor& add_out(const Tensor& a, const Tensor& b, Tensor& out, const Scalar& alpha) {
  check_alpha("add", result_type(a, b), alpha);
  return run_out(KILN_OP("add"), a, b, Kind::Arith, {alpha}, out);
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_sub(a, b);
  check_alpha("sub", result_type(a, b), alpha);
  return run(KILN_OP("sub"), a, b, Kind::Arith, {alpha});
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return sub(a, scalar_like(a, b), alpha);
}
Tensor& sub_(Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_sub(a, b);
  check_alpha("sub_", result_type(a, b), alpha);
  return run_out(KILN_OP("sub"), a, b, Kind::Arith, {alpha}, a);
}
Tensor& sub_(Tensor& a, const Scalar& b, const Scalar& alpha) {
  return sub_(a, scalar_like(a, b), alpha);
}
Tensor& sub_out(const Tensor& a, const Tensor& b, Tensor& out, const Scalar& alpha) {
  check_sub(a, b);
  return run_out(KILN_OP("sub"), a, b, Kind::Arith, {alpha}, out);
}
Tensor rsub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return sub(scalar_like(a, b), a, alpha);
}

// ---- div ----
namespace {
Kind div_kind(const std::string& mode) {
  KILN_CHECK(mode.empty() || mode == "trunc" || mode == "floor", ValueError,
             "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
             mode, "'");
  return mode.empty() ? Kind::TrueDiv : Kind::Arith;
}
}  // namespace
Tensor div(const Tensor& a, const Tensor& b, const std::string& mode) {
  return run(KILN_OP("div"), a, b, div_kind(mode), {mode});
}
Tensor div(const Tensor& a, const Scalar& b, const std::string& mode) {
  return run_scalar(KILN_OP("div"), a, b, div_kind(mode), {mode});
}
Tensor div(const Scalar& a, const Tensor& b) { return div(scalar_like(b, a), b); }
Tensor& div_(Tensor& a, const Tensor& b, const std::string& mode) {
  return run_out(KILN_OP("div"), a, b, div_kind(mode), {mode}, a);
}
Tensor& div_(Tensor& a, const Scalar& b, const std::string& mode) {
  return div_(a, scalar_like(a, b), mode);
}
Tensor& div_out(const Tensor& a, const Tensor& b, Tensor& out, const std::string& mode) {
  return run_out(KILN_OP("div"), a, b, div_kind(mode), {mode}, out);
}
Tensor floor_divide(const Tensor& a, const Tensor& b) { return div(a, b, "floor"); }

// ---- ternary ----
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  KILN_CHECK(cond.dtype() == DType::Bool, Error,
             "where expected condition to be a boolean tensor, but got a tensor with dtype ",
             dtype_name(cond.dtype()));
  DType t = result_type(a, b);
  return call_op(KILN_OP("where"), {cond, to_dtype(a, t), to_dtype(b, t)}, {});
}
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  return where(cond, scalar_like(b, a), b);
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  return where(cond, a, scalar_like(a, b));
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  KILN_CHECK(start.dtype() == end.dtype(), Error, "lerp: expected dtype ",
             dtype_name(start.dtype()), " for `end` but got dtype ", dtype_name(end.dtype()));
  KILN_CHECK(is_floating(start.dtype()), NotImplementedError, "\"lerp\" not implemented for '",
             dtype_name(start.dtype()), "'");
  return call_op(KILN_OP("lerp"), {start, end, to_dtype(weight, start.dtype())}, {});
}
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) {
  // A number weight on bfloat16 CPU arrays stays a float32 value, as PyTorch (its opmath
  // weight): rounding 0.7 to bfloat16 moved 40% of the results by one bfloat16 ulp. The CPU
  // lerp kernel reads a float32 weight for bfloat16 (binary_kernels.cpp; the testing device
  // runs the CPU kernels). With autograd the weight keeps the tensors' dtype (the derivative's
  // products would otherwise promote the gradients to float32), as on xpu.
  const DType dt = start.dtype();
  const DeviceType where = start.device().type;
  if (dt == DType::BF16 && (where == DeviceType::CPU || where == DeviceType::Testing) &&
      end.dtype() == dt && !autograd::requires_grad(start) && !autograd::requires_grad(end))
    return call_op(KILN_OP("lerp"), {start, end, ops::wrap_scalar(weight, DType::F32,
                                                                  start.device())}, {});
  return lerp(start, end, ops::wrap_scalar(weight, dt, start.device()));
}

namespace {
DType addc_type(const Tensor& s, const Tensor& t1, const Tensor& t2) {
  ResultTypeState st;
  st.add(s);
  st.add(t1);
  st.add(t2);
  return st.result();
}
Tensor addc(const char* name, const Tensor& s, const Tensor& t1, const Tensor& t2,
            const Scalar& value) {
  DType t = addc_type(s, t1, t2);
  if (std::string(name) == "addcdiv")
    KILN_CHECK(is_floating(t), Error, "Integer division with addcdiv is no longer "
               "supported; use floating-point tensors");
  return call_op(get_op(name), {to_dtype(s, t), to_dtype(t1, t), to_dtype(t2, t)}, {value});
}
}  // namespace
Tensor addcmul(const Tensor& s, const Tensor& t1, const Tensor& t2, const Scalar& v) {
  return addc("addcmul", s, t1, t2, v);
}
Tensor addcdiv(const Tensor& s, const Tensor& t1, const Tensor& t2, const Scalar& v) {
  return addc("addcdiv", s, t1, t2, v);
}
Tensor& addcmul_(Tensor& s, const Tensor& t1, const Tensor& t2, const Scalar& v) {
  ops::write_result("addcmul_", s, addcmul(s, t1, t2, v));
  return s;
}
Tensor& addcdiv_(Tensor& s, const Tensor& t1, const Tensor& t2, const Scalar& v) {
  ops::write_result("addcdiv_", s, addcdiv(s, t1, t2, v));
  return s;
}

namespace ops {
void register_binary_ops() {
  // Every binary op is pointwise: results are laid out as the inputs (channels-last,
  // transposed, permuted; kiln/tensor/pointwise_layout.h).
  const auto mark = [](OpDef& def) { def.pointwise_layout = true; };
  for (const char* name : {"mul", "pow", "maximum", "minimum", "fmod", "remainder", "atan2",
                           "bitwise_and", "bitwise_or", "bitwise_xor"})
    mark(register_op(name, std::string(name) + "(Tensor self, Tensor other) -> Tensor", broadcast_meta));
  for (const char* name : {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                           "logical_xor"})
    mark(register_op(name, std::string(name) + "(Tensor self, Tensor other) -> Tensor",
                broadcast_bool_meta));
  mark(register_op("add", "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", broadcast_meta));
  mark(register_op("sub", "sub(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", broadcast_meta));
  mark(register_op("div", "div(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor",
              broadcast_meta));
  mark(register_op("where", "where(Tensor condition, Tensor self, Tensor other) -> Tensor",
              [](const OpCall& c) -> std::vector<TensorMeta> {
                return one_meta(broadcast_all(c.inputs), c.inputs[1].dtype());
              }));
  mark(register_op("lerp", "lerp(Tensor self, Tensor end, Tensor weight) -> Tensor", broadcast_meta));
  mark(register_op("addcmul", "addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
              broadcast_meta));
  mark(register_op("addcdiv", "addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
              broadcast_meta));
}
}  // namespace ops

}  // namespace kiln
