// Matrix products: matmul (every broadcasting case PyTorch accepts), mm, bmm, addmm,
// baddbmm, dot, outer and linear. Operands must share a dtype (no promotion, as PyTorch);
// shape errors use PyTorch's wording. One CPU kernel computes all of them (see
// backends/cpu/linalg_kernels.cpp); outer and linear are written in terms of other ops.
#include "kiln/ops/linalg.h"

#include <algorithm>

#include "kiln/autograd/autograd.h"
#include "kiln/dispatch/autocast.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"
#include "op_helpers.h"
#include "reduction_util.h"

namespace kiln {

namespace {

using ops::cpp_type_name;

std::string mat_str(const Tensor& t) {
  std::string s;
  for (int64_t d : t.shape()) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

void check_same_dtype(const char* what1, const char* what2, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() == b.dtype(), Error, "expected ", what1, " and ", what2,
             " to have the same dtype, but got: ", cpp_type_name(a.dtype()), " != ",
             cpp_type_name(b.dtype()));
}

void check_mm_shapes(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.shape()[1] == b.shape()[0], ShapeError, "mat1 and mat2 shapes cannot be "
             "multiplied (", mat_str(a), " and ", mat_str(b), ")");
}

void check_dim(const char* op, const char* what, const Tensor& t, int64_t ndim) {
  KILN_CHECK(t.dim() == ndim, ShapeError, op, ": expected ", what, " to be a ", ndim,
             "-D tensor, but got a ", t.dim(), "-D tensor of shape ", shape_str(t.shape()));
}

// The matmul result shape; validates dtypes and shapes with PyTorch's messages.
Shape matmul_shape(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() >= 1 && b.dim() >= 1, ShapeError,
             "both arguments to matmul need to be at least 1D, but they are ", a.dim(), "D and ",
             b.dim(), "D");
  check_same_dtype("m1", "m2", a, b);
  const int64_t K = a.shape().back();
  if (a.dim() == 1 && b.dim() == 1) {
    KILN_CHECK(K == b.shape()[0], ShapeError, "inconsistent tensor size, expected tensor [", K,
               "] and src [", b.shape()[0], "] to have the same number of elements, but got ",
               K, " and ", b.shape()[0], " elements respectively");
    return {};
  }
  if (a.dim() == 2 && b.dim() == 1) {
    KILN_CHECK(K == b.shape()[0], ShapeError, "size mismatch, got input (", a.shape()[0],
               "), mat (", mat_str(a), "), vec (", b.shape()[0], ")");
    return {a.shape()[0]};
  }
  const int64_t Kb = b.dim() == 1 ? b.shape()[0] : b.shape()[size_t(b.dim() - 2)];
  if (a.dim() <= 2 && b.dim() == 2) {
    KILN_CHECK(K == Kb, ShapeError, "mat1 and mat2 shapes cannot be multiplied (",
               a.dim() == 1 ? "1x" + mat_str(a) : mat_str(a), " and ", mat_str(b), ")");
    return a.dim() == 1 ? Shape{b.shape()[1]} : Shape{a.shape()[0], b.shape()[1]};
  }
  KILN_CHECK(K == Kb, ShapeError, "matmul: shapes ", shape_str(a.shape()), " and ",
             shape_str(b.shape()), " cannot be multiplied (expected size ", K, " at dim ",
             b.dim() == 1 ? 0 : -2, " of the second operand, got ", Kb, ")");
  Shape ab(a.shape().begin(), a.shape().end() - std::min<int64_t>(a.dim(), 2));
  Shape bb(b.shape().begin(), b.shape().end() - std::min<int64_t>(b.dim(), 2));
  Shape out;
  try {
    out = broadcast_shapes(ab, bb);
  } catch (const ShapeError&) {
    KILN_THROW(ShapeError, "matmul: the batch dimensions of shapes ", shape_str(a.shape()),
               " and ", shape_str(b.shape()), " cannot be broadcast (", shape_str(ab), " and ",
               shape_str(bb), ")");
  }
  if (a.dim() >= 2) out.push_back(a.shape()[size_t(a.dim() - 2)]);
  if (b.dim() >= 2) out.push_back(b.shape().back());
  return out;
}

std::vector<TensorMeta> matmul_meta(const OpCall& c) {
  return {{matmul_shape(c.inputs[0], c.inputs[1]), c.inputs[0].dtype()}};
}

Shape mm_shape(const char* op, const Tensor& a, const Tensor& b) {
  check_dim(op, "mat1", a, 2);
  check_dim(op, "mat2", b, 2);
  check_same_dtype("m1", "m2", a, b);
  check_mm_shapes(a, b);
  return {a.shape()[0], b.shape()[1]};
}

std::vector<TensorMeta> mm_meta(const OpCall& c) {
  return {{mm_shape("mm", c.inputs[0], c.inputs[1]), c.inputs[0].dtype()}};
}

Shape bmm_shape(const char* op, const Tensor& a, const Tensor& b) {
  check_dim(op, "batch1", a, 3);
  check_dim(op, "batch2", b, 3);
  check_same_dtype("batch1", "batch2", a, b);
  KILN_CHECK(b.shape()[0] == a.shape()[0] && b.shape()[1] == a.shape()[2], ShapeError,
             "Expected size for first two dimensions of batch2 tensor to be: [", a.shape()[0],
             ", ", a.shape()[2], "] but got: [", b.shape()[0], ", ", b.shape()[1], "].");
  return {a.shape()[0], a.shape()[1], b.shape()[2]};
}

std::vector<TensorMeta> bmm_meta(const OpCall& c) {
  return {{bmm_shape("bmm", c.inputs[0], c.inputs[1]), c.inputs[0].dtype()}};
}

std::vector<TensorMeta> dot_meta(const OpCall& c) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, ShapeError, "1D tensors expected, but got ", a.dim(),
             "D and ", b.dim(), "D tensors");
  KILN_CHECK(a.dtype() == b.dtype(), Error,
             "dot : expected both vectors to have same dtype, but found ",
             ops::torch_type_name(a.dtype()), " and ", ops::torch_type_name(b.dtype()));
  return {{matmul_shape(a, b), a.dtype()}};
}

// addmm / baddbmm: self must broadcast to the product's shape and share its dtype.
void check_self(const char* op, const Tensor& self, const Tensor& mat2, const Shape& out) {
  KILN_CHECK(self.dtype() == mat2.dtype(), Error, op,
             ": self and mat2 must have the same dtype, but got ",
             ops::torch_type_name(self.dtype()), " and ", ops::torch_type_name(mat2.dtype()));
  bool ok = self.dim() <= int64_t(out.size());
  for (int64_t i = 1; ok && i <= self.dim(); ++i) {
    int64_t s = self.shape()[size_t(self.dim() - i)];
    ok = s == 1 || s == out[out.size() - size_t(i)];
  }
  KILN_CHECK(ok, ShapeError, op, ": self of shape ", shape_str(self.shape()),
             " can't be broadcast to the result shape ", shape_str(out));
}

std::vector<TensorMeta> addmm_meta(const OpCall& c) {
  Shape s = mm_shape("addmm", c.inputs[1], c.inputs[2]);
  check_self("addmm", c.inputs[0], c.inputs[2], s);
  return {{s, c.inputs[1].dtype()}};
}

std::vector<TensorMeta> baddbmm_meta(const OpCall& c) {
  Shape s = bmm_shape("baddbmm", c.inputs[1], c.inputs[2]);
  check_self("baddbmm", c.inputs[0], c.inputs[2], s);
  return {{s, c.inputs[1].dtype()}};
}

void check_alpha_beta(const char* op, const Tensor& t, const Scalar& beta, const Scalar& alpha) {
  KILN_CHECK(is_floating(t.dtype()) || (!beta.is_floating() && !alpha.is_floating()), Error,
             "For integral input tensors, argument alpha and beta must not be a floating point "
             "number (in ", op, ")");
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  return call_op(KILN_OP("matmul"), {a, b});
}

Tensor mm(const Tensor& a, const Tensor& b) { return call_op(KILN_OP("mm"), {a, b}); }

Tensor bmm(const Tensor& a, const Tensor& b) { return call_op(KILN_OP("bmm"), {a, b}); }

namespace {
// beta * self + alpha * product for complex operands, composed (the fused kernels are real
// only); beta == 0 ignores self's values (NaN included) as the fused form does.
Tensor complex_scaled_sum(const Tensor& self, const Tensor& product, const Scalar& beta,
                          const Scalar& alpha) {
  const Tensor scaled = mul(product, alpha);
  const bool beta_zero = beta.is_complex() ? beta.real() == 0 && beta.imag() == 0
                                           : beta.to_double() == 0;
  if (beta_zero) return add(scaled, zeros_like(self));  // self's shape and dtype, not values
  return add(mul(self, beta), scaled);
}
}  // namespace

Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
             const Scalar& alpha) {
  if (is_complex(self.dtype()) || is_complex(a.dtype()) || is_complex(b.dtype()))
    return complex_scaled_sum(self, mm(a, b), beta, alpha);
  check_alpha_beta("addmm", a, beta, alpha);
  return call_op(KILN_OP("addmm"), {self, a, b}, {beta, alpha});
}

Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
               const Scalar& alpha) {
  if (is_complex(self.dtype()) || is_complex(a.dtype()) || is_complex(b.dtype()))
    return complex_scaled_sum(self, bmm(a, b), beta, alpha);
  check_alpha_beta("baddbmm", a, beta, alpha);
  return call_op(KILN_OP("baddbmm"), {self, a, b}, {beta, alpha});
}

Tensor dot(const Tensor& a, const Tensor& b) {
  if (is_complex(a.dtype()) || is_complex(b.dtype())) {
    // torch's checks, then the sum of products (no conjugate: that is vdot).
    KILN_CHECK(a.dim() == 1 && b.dim() == 1, Error, "1D tensors expected, but got ", a.dim(),
               "D and ", b.dim(), "D tensors");
    KILN_CHECK(a.dtype() == b.dtype(), Error, "dot : expected both vectors to have same dtype, "
               "but found ", ops::torch_type_name(a.dtype()), " and ", ops::torch_type_name(b.dtype()));
    KILN_CHECK(a.numel() == b.numel(), Error, "inconsistent tensor size, expected tensor [",
               a.numel(), "] and src [", b.numel(), "] to have the same number of elements, "
               "but got ", a.numel(), " and ", b.numel(), " elements respectively");
    return sum(mul(a, b));
  }
  return call_op(KILN_OP("dot"), {a, b});
}

Tensor outer(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, ShapeError, "outer: expected 1-D tensors, but got ",
             a.dim(), "-D and ", b.dim(), "-D tensors");
  return mul(a.unsqueeze(1), b.unsqueeze(0));
}

// Inference-time Linear layers of 4 rows or more run as fused_linear, whose packed weight is
// cached per weight tensor (oneDNN's matmul from 4 rows: decision 0045); under autograd, or
// with fewer rows (kiln's matrix-vector kernels and dot tiles read the plain weight once),
// the (add)mm path below.
// Under CPU autocast to bfloat16 the operands of a Linear may mix float32 and bfloat16 (a layer
// fed by a bfloat16 product): autocast unifies them (fused_linear_mixed_ok, fused_linear.cpp).
static bool linear_can_fuse(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!x.device().is_cpu() || weight.device() != x.device()) return false;
  const auto f32_or_bf16 = [](DType t) { return t == DType::F32 || t == DType::BF16; };
  const bool mixed_ok = fused_linear_mixed_ok(x);
  const auto matches = [&](DType t) { return t == x.dtype() || (mixed_ok && f32_or_bf16(t)); };
  if (!f32_or_bf16(x.dtype()) || !matches(weight.dtype())) return false;
  if (bias.defined() &&
      (bias.dim() != 1 || bias.size(0) != weight.size(0) || bias.device() != x.device() ||
       !matches(bias.dtype())))
    return false;
  // Fewer rows take the (add)mm path (the plain weight read once), except a float32 weight
  // under autocast, whose bfloat16 rounding fused_linear keeps (decision 0121).
  if (x.numel() / std::max<int64_t>(x.shape().back(), 1) < 4 &&
      !(mixed_ok && weight.dtype() == DType::F32))
    return false;
  if (autograd::is_grad_enabled())
    for (const Tensor* t : {&x, &weight, &bias})
      if (t->defined() && autograd::requires_grad(*t)) return false;
  return true;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  KILN_CHECK(weight.dim() == 1 || weight.dim() == 2, ShapeError,
             "linear: expected weight to be 1-D or 2-D, but got a ", weight.dim(),
             "-D tensor of shape ", shape_str(weight.shape()));
  if (x.dim() >= 2 && weight.dim() == 2 && x.shape().back() == weight.size(1) &&
      linear_can_fuse(x, weight, bias))
    return fused_linear(x, weight, bias);  // packed weight, bias added before rounding
  if (x.dim() >= 2 && weight.dim() == 2) {
    // Fold the leading dims into one and run one (add)mm, as PyTorch does.
    int64_t rows = 1;
    for (int64_t i = 0; i + 1 < x.dim(); ++i) rows *= x.shape()[size_t(i)];
    Tensor x2 = x.dim() == 2 ? x : reshape(x, {rows, x.shape().back()});
    // Under autocast the weight is cast before its transpose, as torch's autocast casts
    // linear's operands: the cast of the weight (a leaf) is cached, and its gradient returns
    // in the weight's own layout. A cast of weight.t() came back transposed, and adding GPT-2's
    // tied LM head gradient into the embedding's took 45 ms of a training step (decision 0125).
    const Tensor w = autocast_product_operand(weight);
    Tensor y = bias.defined() ? addmm(bias, x2, w.t()) : mm(x2, w.t());
    if (x.dim() == 2) return y;
    Shape out(x.shape().begin(), x.shape().end() - 1);
    out.push_back(weight.shape()[0]);
    return reshape(y, out);
  }
  Tensor y = matmul(x, weight.dim() == 2 ? weight.t() : weight);
  return bias.defined() ? add(y, bias) : y;
}

Tensor int_mm(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 2 && b.dim() == 2, ShapeError, "int_mm: expected 2-D matrices, got ",
             shape_str(a.shape()), " and ", shape_str(b.shape()));
  KILN_CHECK(a.dtype() == DType::I8 || a.dtype() == DType::U8, Error,
             "int_mm: expected self of dtype int8 or uint8, got ", dtype_name(a.dtype()));
  KILN_CHECK(b.dtype() == DType::I8, Error, "int_mm: expected mat2 of dtype int8, got ",
             dtype_name(b.dtype()));
  KILN_CHECK(a.size(1) == b.size(0), ShapeError, "int_mm: mat1 and mat2 shapes cannot be "
             "multiplied (", a.size(0), "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  KILN_CHECK(a.device() == b.device(), DeviceError, "int_mm: expected both matrices on one "
             "device, got ", a.device().str(), " and ", b.device().str());
  // B may stay as the transpose of a contiguous matrix (x @ W.t()): the kernel reads that
  // layout directly instead of copying the weight every call.
  const bool b_transposed_contiguous = b.t().is_contiguous();
  return call_op(KILN_OP("int_mm"), {a.contiguous(), b_transposed_contiguous && !b.is_contiguous() ? b : b.contiguous()});
}

namespace ops {
void register_linalg_ops() {
  register_op("int_mm", "int_mm(Tensor self, Tensor mat2) -> Tensor",
              [](const OpCall& c) -> std::vector<TensorMeta> {
                return {{Shape{c.inputs[0].size(0), c.inputs[1].size(1)}, DType::I32}};
              });
  register_op("matmul", "matmul(Tensor self, Tensor other) -> Tensor", matmul_meta);
  register_op("mm", "mm(Tensor self, Tensor mat2) -> Tensor", mm_meta);
  register_op("bmm", "bmm(Tensor self, Tensor mat2) -> Tensor", bmm_meta);
  register_op("dot", "dot(Tensor self, Tensor tensor) -> Tensor", dot_meta);
  register_op("addmm",
              "addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
              addmm_meta);
  register_op("baddbmm",
              "baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
              baddbmm_meta);
}
}  // namespace ops

}  // namespace kiln
