// xpu kernels of the elementwise ops: copies and conversions, fill, arange, unary, binary
// and ternary ops. Each is one OpenCL C statement over the generic strided kernel
// (xpu_kernel_util.h); the op's name picks the statement, the dtypes pick the types.
#include <limits>
#include <string>
#include <unordered_map>

#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "xpu_elementwise_bodies.h"
#include "xpu_kernel_util.h"
#include "xpu_tensor_util.h"

namespace kiln::xpu {

namespace {

// add / sub with alpha 1, div without a rounding mode.
constexpr const char* kAddBody = "r = a + b;";
constexpr const char* kSubBody = "r = a - b;";
constexpr const char* kDivBody = "r = a / b;";

// In the statements: R is the output's compute type; a, b, c the inputs; s0, s1 scalars.
std::string with_result_type(DType out, const std::string& body) {
  return std::string("typedef CT_") + dtype_tag(out) + " R; " + body;
}

void copy_kernel(OpCall& call) {
  const Tensor& src = call.inputs[0];
  const Tensor& dst = call.outs[0];
  if (src.dtype() == dst.dtype()) elementwise(dst, {src}, "r = a;", {}, /*raw=*/true);
  else if (dst.dtype() == DType::Bool) elementwise(dst, {src}, "r = (a != 0);");  // not via int: 0.5 is true
  else elementwise(dst, {src}, with_result_type(dst.dtype(), "r = (R)a;"));
}

void fill_kernel(OpCall& call) {
  const Tensor& dst = call.outs[0];
  elementwise(dst, {}, "r = s0;", {{call.scalar_attr(0), dst.dtype()}});
}

void arange_kernel(OpCall& call) {
  const Tensor& dst = call.outs[0];
  const Scalar& start = call.scalar_attr(0);
  const Scalar& step = call.scalar_attr(2);
  if (start.is_floating() || step.is_floating() || is_floating(dst.dtype())) {
    // As the CPU: start + i * step in double (float where the device has no fp64).
    const DType t = device_has_fp64(dst.device().index) ? DType::F64 : DType::F32;
    elementwise(dst, {}, with_result_type(dst.dtype(), "r = (R)(s0 + (SC_" +
                                                           std::string(dtype_tag(t)) + ")i * s1);"),
                {{start, t}, {step, t}});
  } else {
    elementwise(dst, {}, with_result_type(dst.dtype(), "r = (R)(s0 + i * s1);"),
                {{start, DType::I64}, {step, DType::I64}});
  }
}

// linspace: the first half counts up from start, the second down from end (both ends exact),
// as the CPU kernel; out is a fresh contiguous vector, so i is its element index.
void linspace_kernel(OpCall& call) {
  const Tensor& dst = call.outs[0];
  const double start = call.double_attr(0), end = call.double_attr(1);
  const int64_t n = dst.numel();
  const double step = n > 1 ? (end - start) / double(n - 1) : 0.0;
  const DType t = device_has_fp64(dst.device().index) ? DType::F64 : DType::F32;
  const std::string sc = std::string("SC_") + dtype_tag(t);
  elementwise(dst, {},
              with_result_type(dst.dtype(), "r = (R)(i < s3 ? s0 + s2 * (" + sc + ")i : s1 - s2 * (" +
                                                sc + ")(s4 - 1 - i));"),
              {{Scalar(start), t}, {Scalar(end), t}, {Scalar(step), t}, {Scalar(n / 2), DType::I64},
               {Scalar(n), DType::I64}});
}

// eye: ones where row == column of the fresh contiguous [rows, cols] output.
void eye_kernel(OpCall& call) {
  const Tensor& dst = call.outs[0];
  elementwise(dst, {}, with_result_type(dst.dtype(), "r = (R)((i / s0) == (i % s0));"),
              {{Scalar(dst.size(1)), DType::I64}});
}

// ---- unary ----
struct UnaryBodies {
  const char* floating;
  const char* integral;  // nullptr: the op takes floating tensors only
};

const std::unordered_map<std::string, UnaryBodies>& unary_bodies() {
  static const std::unordered_map<std::string, UnaryBodies> m = {
      {"neg", {"r = -a;", "r = -a;"}},
      {"abs", {"r = fabs(a);", "r = (R)abs(a);"}},
      {"exp", {"r = exp(a);", nullptr}},
      {"exp2", {"r = exp2(a);", nullptr}},
      {"log", {"r = log(a);", nullptr}},
      {"log2", {"r = log2(a);", nullptr}},
      {"log1p", {"r = log1p(a);", nullptr}},
      {"expm1", {"r = expm1(a);", nullptr}},
      {"sqrt", {"r = sqrt(a);", nullptr}},
      {"rsqrt", {"r = (R)1 / sqrt(a);", nullptr}},
      {"sin", {"r = sin(a);", nullptr}},
      {"cos", {"r = cos(a);", nullptr}},
      {"tan", {"r = tan(a);", nullptr}},
      {"tanh", {"r = tanh(a);", nullptr}},
      {"sigmoid", {"r = (R)1 / ((R)1 + exp(-a));", nullptr}},
      {"relu", {"r = (a > (R)0 || isnan(a)) ? a : (R)0;", "r = a > 0 ? a : (R)0;"}},
      {"silu", {"r = a / ((R)1 + exp(-a));", nullptr}},
      {"erf", {"r = erf(a);", nullptr}},
      {"erfc", {"r = erfc(a);", nullptr}},
      {"lgamma", {"r = lgamma(a);", nullptr}},
      {"digamma", {"r = (R)kiln_digamma((KILN_SPT)a);", nullptr}},
      {"trigamma", {"r = (R)kiln_trigamma((KILN_SPT)a);", nullptr}},
      {"erfinv", {"r = (R)kiln_erfinv((KILN_SPT)a);", nullptr}},
      {"reciprocal", {"r = (R)1 / a;", nullptr}},
      {"floor", {"r = floor(a);", "r = a;"}},
      {"ceil", {"r = ceil(a);", "r = a;"}},
      {"round", {"r = rint(a);", "r = a;"}},
      {"trunc", {"r = trunc(a);", "r = a;"}},
      {"logical_not", {"r = (a == (R)0);", "r = (a == 0);"}},
      {"isnan", {"r = isnan(a);", "r = 0;"}},
      {"isinf", {"r = isinf(a);", "r = 0;"}},
      {"isfinite", {"r = isfinite(a);", "r = 1;"}},
      // NaN and zeros give +0, as torch.
      {"sign", {"r = (R)((a > (R)0) - (a < (R)0));", "r = (R)((a > 0) - (a < 0));"}},
  };
  return m;
}

void unary_kernel(OpCall& call) {
  const Tensor& in = call.inputs[0];
  const Tensor& out = call.outs[0];
  const UnaryBodies& b = unary_bodies().at(call.op->name);
  const char* body = is_floating(in.dtype()) ? b.floating : b.integral;
  KILN_CHECK(body != nullptr, NotImplementedError, "\"", call.op->name, "\" not implemented for '",
             dtype_name(in.dtype()), "' on xpu");
  // Comparisons and tests (bool outputs) compute in the input's type.
  const DType r = out.dtype() == DType::Bool ? in.dtype() : out.dtype();
  elementwise(out, {in}, with_result_type(r, body));
}

void gelu_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const bool tanh_form = call.has_attr(0) && call.string_attr(0) == "tanh";
  elementwise(out, {call.inputs[0]},
              with_result_type(out.dtype(),
                               tanh_form ? "r = (R)0.5 * a * ((R)1 + tanh((R)0.7978845608028654 * "
                                           "(a + (R)0.044715 * a * a * a)));"
                                         : // 1 + erf cancels in the far negative tail: erfc there (a branch rarely taken,
                                         // erfc everywhere halved the op's speed on an H200).
                                         "if (a > (R)-3) r = (R)0.5 * a * ((R)1 + erf(a * (R)0.7071067811865476));"
                                         " else r = (R)0.5 * a * erfc(-a * (R)0.7071067811865476);"));
}

void leaky_relu_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  elementwise(out, {call.inputs[0]}, with_result_type(out.dtype(), "r = a > (R)0 ? a : a * (R)s0;"),
              {{Scalar(call.double_attr(0)), out.dtype()}});
}

void softplus_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  elementwise(out, {call.inputs[0]},
              with_result_type(out.dtype(), "r = a * s0 > s1 ? a : log1p(exp(a * s0)) / s0;"),
              {{Scalar(call.double_attr(0)), out.dtype()}, {Scalar(call.double_attr(1)), out.dtype()}});
}

// nan_to_num(nan?, posinf?, neginf?): absent replacements are 0 and the dtype's largest and
// lowest finite values (the CPU kernel's rule).
void nan_to_num_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const DType t = out.dtype();
  const double big = t == DType::F16    ? 65504.0
                     : t == DType::BF16 ? 3.3895313892515355e38
                     : t == DType::F32  ? double(std::numeric_limits<float>::max())
                                        : std::numeric_limits<double>::max();
  const double nan_v = call.has_attr(0) ? call.double_attr(0) : 0.0;
  const double pos_v = call.has_attr(1) ? call.double_attr(1) : big;
  const double neg_v = call.has_attr(2) ? call.double_attr(2) : -big;
  elementwise(out, {call.inputs[0]},
              with_result_type(t, "r = isnan(a) ? (R)s0 : isinf(a) ? (a > (R)0 ? (R)s1 : (R)s2) : a;"),
              {{Scalar(nan_v), t}, {Scalar(pos_v), t}, {Scalar(neg_v), t}});
}

// gelu_backward(grad_output, self, approximate): grad_output * gelu'(x) in one pass, in float
// (double for float64), with the CPU kernel's formulas (gelu_backward_kernel.cpp) but one.
void gelu_backward_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const bool tanh_form = call.string_attr(0) == "tanh";
  // tanh form: 1 - tanh(u)^2 as 1 / cosh(u)^2, since a tanh one ulp short of 1 (OpenCL
  // allows it) times x * dinner (~85 at x = 9) was 5e-6 off where the derivative is 1.
  const char* body =
      tanh_form ? "R x2 = b * b; R u = (R)0.7978845608028654 * (b + (R)0.044715 * x2 * b);"
                  " R t = tanh(u); R ch = cosh(u);"
                  " R dinner = (R)0.7978845608028654 * ((R)1 + (R)0.134145 * x2);"
                  " r = a * ((R)0.5 * ((R)1 + t) + (R)0.5 * b * ((R)1 / (ch * ch)) * dinner);"
                : "R cdf = (R)0.5 * ((R)1 + erf(b * (R)0.7071067811865476));"
                  " R pdf = exp((R)-0.5 * b * b) * (R)0.3989422804014327;"
                  " r = a * (cdf + b * pdf);";
  elementwise(out, {call.inputs[0], call.inputs[1]}, with_result_type(out.dtype(), body));
}

void clamp_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  // NaN stays NaN (comparisons with it are false); min > max gives max, as torch.
  std::string body = "r = a;";
  std::vector<ScalarArg> scalars;
  const bool lo = call.has_attr(0), hi = call.has_attr(1);
  if (lo) {
    body += " if (r < (R)s0) r = (R)s0;";
    scalars.push_back({call.scalar_attr(0), out.dtype()});
  }
  if (hi) {
    body += lo ? " if (r > (R)s1) r = (R)s1;" : " if (r > (R)s0) r = (R)s0;";
    scalars.push_back({call.scalar_attr(1), out.dtype()});
  }
  elementwise(out, {call.inputs[0]}, with_result_type(out.dtype(), body), scalars);
}

// ---- binary and ternary ----
struct BinaryBodies {
  const char* floating;
  const char* integral;
};

const std::unordered_map<std::string, BinaryBodies>& binary_bodies() {
  static const std::unordered_map<std::string, BinaryBodies> m = {
      {"mul", {"r = a * b;", "r = a * b;"}},
      {"maximum", {"r = (isnan(a) || isnan(b)) ? a + b : (a > b ? a : b);", "r = a > b ? a : b;"}},
      {"minimum", {"r = (isnan(a) || isnan(b)) ? a + b : (a < b ? a : b);", "r = a < b ? a : b;"}},
      {"pow",
       {"r = pow(a, b);",
        "{ R base = a; long e = (long)b; R acc = 1;"
        "  if (e < 0) { acc = (a == 1) ? (R)1 : ((a == -1) ? ((e & 1) ? (R)-1 : (R)1) : (R)0); }"
        "  else { while (e) { if (e & 1) acc *= base; base *= base; e >>= 1; } }"
        "  r = acc; }"}},
      // Integers: C's % (the sign of a), 0 for b = -1 (INT_MIN % -1 overflows); zero divisors
      // are refused on the host first (check_integer_divisor).
      {"fmod", {"r = fmod(a, b);", "r = (b == -1) ? (R)0 : (R)(a % b);"}},
      {"remainder",
       {"{ R m = fmod(a, b); if (m != (R)0 && ((b < (R)0) != (m < (R)0))) m += b; r = m; }",
        "{ R m = (b == -1) ? (R)0 : (R)(a % b); if (m != 0 && ((m < 0) != (b < 0))) m = (R)(m + b); r = m; }"}},
      {"atan2", {"r = atan2(a, b);", nullptr}},
      {"eq", {"r = a == b;", "r = a == b;"}},
      {"ne", {"r = a != b;", "r = a != b;"}},
      {"lt", {"r = a < b;", "r = a < b;"}},
      {"le", {"r = a <= b;", "r = a <= b;"}},
      {"gt", {"r = a > b;", "r = a > b;"}},
      {"ge", {"r = a >= b;", "r = a >= b;"}},
      {"logical_and", {"r = (a != (R)0) && (b != (R)0);", "r = (a != 0) && (b != 0);"}},
      {"logical_or", {"r = (a != (R)0) || (b != (R)0);", "r = (a != 0) || (b != 0);"}},
      {"logical_xor", {"r = (a != (R)0) != (b != (R)0);", "r = (a != 0) != (b != 0);"}},
      {"bitwise_and", {nullptr, "r = a & b;"}},
      {"bitwise_or", {nullptr, "r = a | b;"}},
      {"bitwise_xor", {nullptr, "r = a ^ b;"}},
  };
  return m;
}

// Integer division by zero is the CPU kernel's error (a kernel cannot raise): the divisor is
// read on the host first (a copy and a wait; integer division is index arithmetic, rarely a
// hot path).
void check_integer_divisor(const Tensor& b) {
  if (is_floating(b.dtype()) || b.numel() == 0) return;
  for (int64_t v : to_host(b).to_vector<int64_t>())
    KILN_CHECK(v != 0, Error, "ZeroDivisionError: integer division by zero");
}

void binary_kernel(OpCall& call) {
  const Tensor& a = call.inputs[0];
  const Tensor& out = call.outs[0];
  const BinaryBodies& b = binary_bodies().at(call.op->name);
  const char* body = is_floating(a.dtype()) ? b.floating : b.integral;
  KILN_CHECK(body != nullptr, NotImplementedError, "\"", call.op->name, "\" not implemented for '",
             dtype_name(a.dtype()), "' on xpu");
  if (call.op->name == "fmod" || call.op->name == "remainder") check_integer_divisor(call.inputs[1]);
  const DType r = out.dtype() == DType::Bool ? a.dtype() : out.dtype();
  elementwise(out, {a, call.inputs[1]}, with_result_type(r, body));
}

// add / sub with alpha: a + alpha * b (alpha 1: a + b exactly).
template <bool kSub>
void add_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const Scalar alpha = call.has_attr(0) ? call.scalar_attr(0) : Scalar(int64_t(1));
  const bool one = alpha.is_floating() ? alpha.to_double() == 1.0 : alpha.to_int() == 1;
  std::string body = one ? (kSub ? kSubBody : kAddBody)
                         : (kSub ? "r = a - (R)s0 * b;" : "r = a + (R)s0 * b;");
  std::vector<ScalarArg> scalars;
  if (!one) scalars.push_back({alpha, out.dtype()});
  elementwise(out, {call.inputs[0], call.inputs[1]}, with_result_type(out.dtype(), body), scalars);
}

void div_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  std::string mode = call.has_attr(0) ? call.string_attr(0) : "";
  if (!is_floating(out.dtype())) {
    // Integers (a rounding mode given): the CPU's int_div_trunc / int_div_floor; INT_MIN / -1
    // wraps (negation through ulong).
    KILN_CHECK(mode == "trunc" || mode == "floor", Error, "div: integer division needs a rounding "
               "mode, got '", mode, "'");
    check_integer_divisor(call.inputs[1]);
    const std::string body =
        "{ R q = (b == -1) ? (R)(0UL - (ulong)(long)a) : (R)(a / b);" +
        std::string(mode == "floor" ? " if (b != -1 && (a % b != 0) && ((a < 0) != (b < 0))) q = (R)(q - 1);" : "") +
        " r = q; }";
    elementwise(out, {call.inputs[0], call.inputs[1]}, with_result_type(out.dtype(), body));
    return;
  }
  const char* body = mode == "trunc" ? "r = trunc(a / b);"
                     : mode == "floor" ? "r = floor(a / b);"
                                       : kDivBody;
  elementwise(out, {call.inputs[0], call.inputs[1]}, with_result_type(out.dtype(), body));
}

// lerp(start, end, weight) in the two forms PyTorch uses (exact at both ends), rounded once
// (fma) as PyTorch's and the CPU's.
void lerp_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  elementwise(out, {call.inputs[0], call.inputs[1], call.inputs[2]},
              with_result_type(out.dtype(),
                               "r = fabs(c) < (R)0.5 ? fma(c, b - a, a) : fma(c - (R)1, b - a, b);"));
}

void where_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  elementwise(out, {call.inputs[0], call.inputs[1], call.inputs[2]},
              with_result_type(out.dtype(), "r = a ? b : c;"));
}

template <bool kDivide>
void addc_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  const Scalar value = call.has_attr(0) ? call.scalar_attr(0) : Scalar(int64_t(1));
  elementwise(out, {call.inputs[0], call.inputs[1], call.inputs[2]},
              with_result_type(out.dtype(), kDivide ? "r = a + (R)s0 * (b / c);" : "r = a + (R)s0 * (b * c);"),
              {{value, out.dtype()}});
}

}  // namespace

std::string float_elementwise_body(const std::string& op) {
  if (op == "add") return kAddBody;
  if (op == "sub") return kSubBody;
  if (op == "div") return kDivBody;
  auto u = unary_bodies().find(op);
  if (u != unary_bodies().end()) return u->second.floating;
  auto b = binary_bodies().find(op);
  if (b != binary_bodies().end() && b->second.floating) return b->second.floating;
  return "";
}

void register_elementwise_kernels() {
  auto reg = [](const char* name, KernelFn fn, DTypeMask mask) {
    register_kernel(name, DeviceType::XPU, fn, mask);
  };
  reg("_copy_strided", copy_kernel, kAllDTypes);
  reg("fill_", fill_kernel, kAllDTypes);
  reg("arange", arange_kernel, kAllDTypes & ~dtype_bit(DType::Bool));
  reg("linspace", linspace_kernel, kAllDTypes & ~dtype_bit(DType::Bool));
  reg("eye", eye_kernel, kAllDTypes);
  for (const auto& [name, bodies] : unary_bodies()) {
    DTypeMask mask = kFloatDTypes;
    if (bodies.integral) mask |= kIntDTypes;
    if (name == "logical_not" || name == "isnan" || name == "isinf" || name == "isfinite" || name == "sign")
      mask = kAllDTypes;
    reg(name.c_str(), unary_kernel, mask);
  }
  reg("gelu", gelu_kernel, kFloatDTypes);
  reg("leaky_relu", leaky_relu_kernel, kFloatDTypes);
  reg("softplus", softplus_kernel, kFloatDTypes);
  reg("clamp", clamp_kernel, kNumericDTypes);
  reg("nan_to_num", nan_to_num_kernel, kFloatDTypes);
  reg("gelu_backward", gelu_backward_kernel, kFloatDTypes);
  for (const auto& [name, bodies] : binary_bodies()) {
    DTypeMask mask = 0;
    if (bodies.floating) mask |= kFloatDTypes;
    if (bodies.integral) mask |= kIntDTypes;
    if (name == "mul" || name == "maximum" || name == "minimum" || name.rfind("bitwise_", 0) == 0 ||
        name == "eq" || name == "ne" || name == "lt" || name == "le" || name == "gt" ||
        name == "ge" || name.rfind("logical_", 0) == 0)
      if (bodies.integral) mask |= dtype_bit(DType::Bool);
    reg(name.c_str(), binary_kernel, mask);
  }
  reg("add", add_kernel<false>, kAllDTypes);
  reg("sub", add_kernel<true>, kNumericDTypes);
  reg("div", div_kernel, kNumericDTypes);
  reg("where", where_kernel, kAllDTypes);
  reg("lerp", lerp_kernel, kFloatDTypes);
  reg("addcmul", addc_kernel<false>, kNumericDTypes);
  reg("addcdiv", addc_kernel<true>, kFloatDTypes);
}

}  // namespace kiln::xpu
