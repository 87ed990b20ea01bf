// Unary elementwise ops: definitions (schema + meta) and the public functions.
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

namespace {

enum class Kind { Float, Same, Bool };  // result dtype rule

struct UnaryInfo {
  const char* name;
  Kind kind;
};

// Float-only functions promote integer (and bool) inputs to the default float dtype.
Tensor promote_input(const Tensor& x, Kind kind) {
  if (kind == Kind::Float && !is_floating(x.dtype()) && !is_complex(x.dtype()))
    return to_dtype(x, default_float_dtype());
  return x;
}

Tensor unary(const OpDef& op, const Tensor& x, Kind kind, std::vector<AttrValue> attrs = {}) {
  return call_op(op, {promote_input(x, kind)}, std::move(attrs));
}

Tensor& unary_out(const OpDef& op, const Tensor& x, Kind kind, Tensor& out,
                  std::vector<AttrValue> attrs = {}) {
  Tensor in = promote_input(x, kind);
  DType result = kind == Kind::Bool ? DType::Bool : in.dtype();
  if (out.dtype() == result && out.shape() == in.shape() && !ops::partially_overlaps(out, in)) {
    call_op_out(op, {in}, std::move(attrs), {out});
  } else if (out.dtype() == result && out.numel() == 0) {
    call_op_out(op, {in}, std::move(attrs), {out});
  } else {
    ops::write_result(op.name.c_str(), out, call_op(op, {in}, std::move(attrs)));
  }
  return out;
}

std::vector<TensorMeta> bool_meta(const OpCall& c) { return {{c.inputs[0].shape(), DType::Bool}}; }

void check_not_bool(const char* what, const Tensor& x) {
  KILN_CHECK(x.dtype() != DType::Bool, Error, what);
}

}  // namespace

#define KILN_DEFINE_UNARY(fn, opname, kind)                                              \
  Tensor fn(const Tensor& x) { return unary(KILN_OP(opname), x, kind); }                 \
  Tensor& fn##_(Tensor& x) { return unary_out(KILN_OP(opname), x, kind, x); }            \
  Tensor& fn##_out(const Tensor& x, Tensor& out) { return unary_out(KILN_OP(opname), x, kind, out); }

KILN_DEFINE_UNARY(abs, "abs", Kind::Same)
KILN_DEFINE_UNARY(exp, "exp", Kind::Float)
KILN_DEFINE_UNARY(exp2, "exp2", Kind::Float)
KILN_DEFINE_UNARY(log, "log", Kind::Float)
KILN_DEFINE_UNARY(log2, "log2", Kind::Float)
KILN_DEFINE_UNARY(log1p, "log1p", Kind::Float)
KILN_DEFINE_UNARY(expm1, "expm1", Kind::Float)
KILN_DEFINE_UNARY(sqrt, "sqrt", Kind::Float)
KILN_DEFINE_UNARY(rsqrt, "rsqrt", Kind::Float)
KILN_DEFINE_UNARY(sin, "sin", Kind::Float)
KILN_DEFINE_UNARY(cos, "cos", Kind::Float)
KILN_DEFINE_UNARY(tan, "tan", Kind::Float)
KILN_DEFINE_UNARY(tanh, "tanh", Kind::Float)
KILN_DEFINE_UNARY(sigmoid, "sigmoid", Kind::Float)
KILN_DEFINE_UNARY(relu, "relu", Kind::Same)
KILN_DEFINE_UNARY(silu, "silu", Kind::Float)
KILN_DEFINE_UNARY(erf, "erf", Kind::Float)
KILN_DEFINE_UNARY(erfc, "erfc", Kind::Float)
KILN_DEFINE_UNARY(erfinv, "erfinv", Kind::Float)
KILN_DEFINE_UNARY(lgamma, "lgamma", Kind::Float)
KILN_DEFINE_UNARY(digamma, "digamma", Kind::Float)
KILN_DEFINE_UNARY(floor, "floor", Kind::Same)
KILN_DEFINE_UNARY(ceil, "ceil", Kind::Same)
KILN_DEFINE_UNARY(round, "round", Kind::Same)
KILN_DEFINE_UNARY(trunc, "trunc", Kind::Same)
KILN_DEFINE_UNARY(sign, "sign", Kind::Same)
KILN_DEFINE_UNARY(reciprocal, "reciprocal", Kind::Float)
KILN_DEFINE_UNARY(logical_not, "logical_not", Kind::Bool)
#undef KILN_DEFINE_UNARY

Tensor neg(const Tensor& x) {
  check_not_bool("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                 "trying to invert a mask, use the `~` or `logical_not()` operator instead.", x);
  return unary(KILN_OP("neg"), x, Kind::Same);
}
Tensor& neg_(Tensor& x) {
  check_not_bool("Negation, the `-` operator, on a bool tensor is not supported.", x);
  return unary_out(KILN_OP("neg"), x, Kind::Same, x);
}
Tensor& neg_out(const Tensor& x, Tensor& out) {
  check_not_bool("Negation, the `-` operator, on a bool tensor is not supported.", x);
  return unary_out(KILN_OP("neg"), x, Kind::Same, out);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", ValueError,
             "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  KILN_CHECK(is_floating(x.dtype()), NotImplementedError, "\"gelu\" not implemented for '",
             dtype_name(x.dtype()), "'");
  return unary(KILN_OP("gelu"), x, Kind::Float, {approximate});
}

Tensor gelu_backward(const Tensor& grad_output, const Tensor& x, const std::string& approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", ValueError,
             "gelu_backward: approximate must be 'none' or 'tanh', got '", approximate, "'");
  KILN_CHECK(is_floating(x.dtype()) && grad_output.dtype() == x.dtype(), TypeError,
             "gelu_backward: expected grad_output and self of one floating dtype, got ",
             dtype_name(grad_output.dtype()), " and ", dtype_name(x.dtype()));
  KILN_CHECK(grad_output.shape() == x.shape(), ValueError,
             "gelu_backward: expected grad_output of self's shape ", shape_str(x.shape()),
             ", got ", shape_str(grad_output.shape()));
  return call_op(KILN_OP("gelu_backward"), {grad_output, x}, {approximate});
}

Tensor silu_backward(const Tensor& grad_output, const Tensor& x) {
  KILN_CHECK(is_floating(x.dtype()) && grad_output.dtype() == x.dtype(), TypeError,
             "silu_backward: expected grad_output and self of one floating dtype, got ",
             dtype_name(grad_output.dtype()), " and ", dtype_name(x.dtype()));
  KILN_CHECK(grad_output.shape() == x.shape(), ValueError,
             "silu_backward: expected grad_output of self's shape ", shape_str(x.shape()),
             ", got ", shape_str(grad_output.shape()));
  return call_op(KILN_OP("silu_backward"), {grad_output, x});
}

Tensor softplus(const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  return unary(KILN_OP("softplus"), x, Kind::Float, {beta.to_double(), threshold.to_double()});
}

namespace ops {
// The leaky_relu op (nn::functional::leaky_relu calls it for floating tensors on the CPU).
Tensor leaky_relu_op(const Tensor& x, double negative_slope) {
  return unary(KILN_OP("leaky_relu"), x, Kind::Float, {negative_slope});
}
}  // namespace ops

Tensor isnan(const Tensor& x) { return unary(KILN_OP("isnan"), x, Kind::Bool); }
Tensor isinf(const Tensor& x) { return unary(KILN_OP("isinf"), x, Kind::Bool); }
Tensor isfinite(const Tensor& x) { return unary(KILN_OP("isfinite"), x, Kind::Bool); }

namespace {
AttrValue opt_scalar(const std::optional<Scalar>& s) { return s ? AttrValue(*s) : AttrValue(); }
DType clamp_type(const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  ResultTypeState st;
  st.add(x);
  if (lo) st.add(*lo);
  if (hi) st.add(*hi);
  return st.result();
}
}  // namespace

Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  KILN_CHECK(lo || hi, ValueError, "clamp: at least one of 'min' or 'max' must not be None");
  Tensor in = to_dtype(x, clamp_type(x, lo, hi));
  return call_op(KILN_OP("clamp"), {in}, {opt_scalar(lo), opt_scalar(hi)});
}
Tensor& clamp_(Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  KILN_CHECK(lo || hi, ValueError, "clamp: at least one of 'min' or 'max' must not be None");
  DType t = clamp_type(x, lo, hi);
  if (t == x.dtype()) {
    call_op_out(KILN_OP("clamp"), {x}, {opt_scalar(lo), opt_scalar(hi)}, {x});
  } else {
    ops::write_result("clamp_", x, clamp(x, lo, hi));
  }
  return x;
}
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  KILN_CHECK(lo.defined() || hi.defined(), ValueError,
             "clamp: at least one of 'min' or 'max' must not be None");
  Tensor r = x;
  if (lo.defined()) r = maximum(r, lo);
  if (hi.defined()) r = minimum(r, hi);
  return r;
}

Tensor polygamma_series(int64_t n, const Tensor& x);  // polygamma.cpp (n >= 2)

Tensor polygamma(int64_t n, const Tensor& x) {
  KILN_CHECK(n >= 0, ValueError, "polygamma(n, x) does not support negative n, got ", n);
  KILN_CHECK(n <= 170, ValueError, "polygamma(n, x): n! overflows double for n > 170, got ", n);
  if (n >= 2) return polygamma_series(n, x);
  return n == 0 ? digamma(x) : unary(KILN_OP("trigamma"), x, Kind::Float);
}

Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  if (!is_floating(x.dtype())) return clone(x);
  auto opt = [](const std::optional<double>& v) { return v ? AttrValue(*v) : AttrValue(); };
  return call_op(KILN_OP("nan_to_num"), {x}, {opt(nan), opt(posinf), opt(neginf)});
}

Tensor& fill_(Tensor& x, const Scalar& value) {
  call_op_out(KILN_OP("fill_"), {}, {value}, {x});
  return x;
}

namespace ops {
void register_unary_ops() {
  // abs: a real result for complex input (|re + im i|), else the input's dtype.
  register_op("abs", "abs(Tensor self) -> Tensor", [](const OpCall& c) {
    return one_meta(c.inputs[0].shape(), real_part_dtype(c.inputs[0].dtype()));
  }).pointwise_layout = true;
  for (const char* name : {"neg", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt",
                           "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "silu", "erf",
                           "erfc", "erfinv", "lgamma", "digamma", "trigamma",
                           "floor", "ceil", "round", "trunc", "sign", "reciprocal"})
    register_op(name, std::string(name) + "(Tensor self) -> Tensor", same_as_first_meta)
        .pointwise_layout = true;
  for (const char* name : {"logical_not", "isnan", "isinf", "isfinite"})
    register_op(name, std::string(name) + "(Tensor self) -> Tensor", bool_meta)
        .pointwise_layout = true;
  register_op("gelu", "gelu(Tensor self, *, str approximate='none') -> Tensor", same_as_first_meta)
      .pointwise_layout = true;
  // d/dx gelu(x) times grad_output in one pass (the derivative as a chain of ops made about
  // 17 passes over a GPT-2 MLP activation).
  register_op("gelu_backward",
              "gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor",
              same_as_first_meta)
      .pointwise_layout = true;
  // d/dx silu(x) times grad_output in one pass (the derivative's op chain made 7 passes and
  // two sigmoids: fwd + bwd of [512, 3072] float32 1.9x PyTorch's time).
  register_op("silu_backward", "silu_backward(Tensor grad_output, Tensor self) -> Tensor",
              same_as_first_meta)
      .pointwise_layout = true;
  register_op("softplus", "softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor",
              same_as_first_meta)
      .pointwise_layout = true;
  register_op("leaky_relu", "leaky_relu(Tensor self, float negative_slope=0.01) -> Tensor",
              same_as_first_meta)
      .pointwise_layout = true;
  register_op("clamp", "clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor",
              same_as_first_meta)
      .pointwise_layout = true;
  register_op("nan_to_num",
              "nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor",
              same_as_first_meta)
      .pointwise_layout = true;
}
}  // namespace ops

}  // namespace kiln
