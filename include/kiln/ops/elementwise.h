#pragma once
// Elementwise ops: unary, binary (broadcasting, PyTorch type promotion) and ternary.
// Integer inputs of float-only functions (exp, sin, ...) are promoted to the default float
// dtype, as in PyTorch. `_` suffix: in place; `_out`: writes into out.
#include <optional>
#include <string>

#include "kiln/tensor/tensor.h"

namespace kiln {

#define KILN_DECLARE_UNARY(name)      \
  Tensor name(const Tensor& x);       \
  Tensor& name##_(Tensor& x);         \
  Tensor& name##_out(const Tensor& x, Tensor& out);

KILN_DECLARE_UNARY(neg)
KILN_DECLARE_UNARY(abs)
KILN_DECLARE_UNARY(exp)
KILN_DECLARE_UNARY(exp2)
KILN_DECLARE_UNARY(log)
KILN_DECLARE_UNARY(log2)
KILN_DECLARE_UNARY(log1p)
KILN_DECLARE_UNARY(expm1)
KILN_DECLARE_UNARY(sqrt)
KILN_DECLARE_UNARY(rsqrt)
KILN_DECLARE_UNARY(sin)
KILN_DECLARE_UNARY(cos)
KILN_DECLARE_UNARY(tan)
KILN_DECLARE_UNARY(tanh)
KILN_DECLARE_UNARY(sigmoid)
KILN_DECLARE_UNARY(relu)
KILN_DECLARE_UNARY(silu)
KILN_DECLARE_UNARY(erf)
KILN_DECLARE_UNARY(erfc)
KILN_DECLARE_UNARY(erfinv)  // NaN outside [-1, 1], +-inf at +-1
KILN_DECLARE_UNARY(lgamma)  // log |gamma(x)|
KILN_DECLARE_UNARY(digamma)
KILN_DECLARE_UNARY(floor)
KILN_DECLARE_UNARY(ceil)
KILN_DECLARE_UNARY(round)
KILN_DECLARE_UNARY(trunc)
KILN_DECLARE_UNARY(sign)
KILN_DECLARE_UNARY(reciprocal)
KILN_DECLARE_UNARY(logical_not)
#undef KILN_DECLARE_UNARY

// approximate: "none" (erf form) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
// grad_output * d/dx gelu(x) (as torch's gelu_backward): autograd's derivative of gelu on
// float32 when no graph of the backward is recorded. Same shape and floating dtype.
Tensor gelu_backward(const Tensor& grad_output, const Tensor& x,
                     const std::string& approximate = "none");
// grad_output * d/dx silu(x) = grad_output * s (1 + x (1 - s)), s = sigmoid(x) (as torch's
// silu_backward): autograd's derivative of silu on the CPU when no graph of the backward is
// recorded. Same shape and floating dtype.
Tensor silu_backward(const Tensor& grad_output, const Tensor& x);
Tensor softplus(const Tensor& x, const Scalar& beta = 1, const Scalar& threshold = 20);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);  // undefined: no bound
// The n-th derivative of digamma: n = 0 (digamma), 1 (trigamma), n >= 2 by the Hurwitz zeta
// series (ops/polygamma.cpp).
Tensor polygamma(int64_t n, const Tensor& x);
Tensor nan_to_num(const Tensor& x, std::optional<double> nan = std::nullopt,
                  std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);

#define KILN_DECLARE_BINARY(name)                                    \
  Tensor name(const Tensor& a, const Tensor& b);                     \
  Tensor name(const Tensor& a, const Scalar& b);                     \
  Tensor& name##_(Tensor& a, const Tensor& b);                       \
  Tensor& name##_(Tensor& a, const Scalar& b);                       \
  Tensor& name##_out(const Tensor& a, const Tensor& b, Tensor& out);

KILN_DECLARE_BINARY(mul)
KILN_DECLARE_BINARY(pow)
KILN_DECLARE_BINARY(maximum)
KILN_DECLARE_BINARY(minimum)
KILN_DECLARE_BINARY(fmod)
KILN_DECLARE_BINARY(remainder)
KILN_DECLARE_BINARY(atan2)
KILN_DECLARE_BINARY(eq)
KILN_DECLARE_BINARY(ne)
KILN_DECLARE_BINARY(lt)
KILN_DECLARE_BINARY(le)
KILN_DECLARE_BINARY(gt)
KILN_DECLARE_BINARY(ge)
KILN_DECLARE_BINARY(logical_and)
KILN_DECLARE_BINARY(logical_or)
KILN_DECLARE_BINARY(logical_xor)
KILN_DECLARE_BINARY(bitwise_and)
KILN_DECLARE_BINARY(bitwise_or)
KILN_DECLARE_BINARY(bitwise_xor)
#undef KILN_DECLARE_BINARY

Tensor pow(const Scalar& a, const Tensor& b);

// add/sub: a + alpha * b.
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& add_(Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor& add_out(const Tensor& a, const Tensor& b, Tensor& out, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor& sub_(Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& sub_(Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor& sub_out(const Tensor& a, const Tensor& b, Tensor& out, const Scalar& alpha = 1);
Tensor rsub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);  // b - alpha * a

// div: rounding_mode "" (true division; integers promote to float), "trunc" or "floor".
Tensor div(const Tensor& a, const Tensor& b, const std::string& rounding_mode = "");
Tensor div(const Tensor& a, const Scalar& b, const std::string& rounding_mode = "");
Tensor div(const Scalar& a, const Tensor& b);
Tensor& div_(Tensor& a, const Tensor& b, const std::string& rounding_mode = "");
Tensor& div_(Tensor& a, const Scalar& b, const std::string& rounding_mode = "");
Tensor& div_out(const Tensor& a, const Tensor& b, Tensor& out,
                const std::string& rounding_mode = "");
Tensor floor_divide(const Tensor& a, const Tensor& b);

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);
Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor& addcmul_(Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor& addcdiv_(Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);

Tensor& fill_(Tensor& x, const Scalar& value);

}  // namespace kiln
