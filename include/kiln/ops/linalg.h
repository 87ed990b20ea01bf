#pragma once
// Linear algebra: matmul with every broadcasting case PyTorch accepts, and its relatives.
#include <optional>
#include <string>

#include "kiln/tensor/tensor.h"

namespace kiln {

Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * self + alpha * (a @ b)
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
             const Scalar& alpha = 1);
Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
               const Scalar& alpha = 1);
Tensor outer(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
// x @ weight.T + bias (bias may be undefined)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// The activation a fused linear layer applies to its float32 sums (as torch.nn's modules).
enum class LinearActivation { None, Relu, Gelu, GeluTanh, Silu };
// "none", "relu", "gelu", "gelu_tanh", "silu" <-> LinearActivation; an unknown name raises
// ValueError listing the accepted ones.
LinearActivation parse_linear_activation(const std::string& name);
const char* linear_activation_name(LinearActivation act);

// One Linear layer with its epilogue fused into the matrix product:
//   out = act(x @ weight.T + bias) + residual, converted once to out_dtype
// x: [..., K] float32 or bfloat16; weight [N, K] and bias [N] (optional) of x's dtype;
// residual (optional) of the output's shape [..., N] (or broadcastable to it), any floating
// dtype; out_dtype: float32 or bfloat16 (default: x's dtype). The activation and the residual
// act on the float32 sums before the one rounding, so bfloat16 layers round once, not per
// step. Tall products run as one oneDNN matmul whose weight is packed once per weight tensor
// (and repacked only when the weight changes) with bias, activation and residual as
// post-ops; the rest run kiln's kernels and an epilogue pass. Under autograd (an input that
// requires grad) it records the plain ops (linear, activation, add) instead.
Tensor fused_linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                    LinearActivation act = LinearActivation::None,
                    const Tensor& residual = Tensor(),
                    std::optional<DType> out_dtype = std::nullopt);

// 8-bit integer matrix product with int32 results, as torch._int_mm: a int8 or uint8 [M, K],
// b int8 [K, N] -> int32 [M, N] (sums wrap in int32).
Tensor int_mm(const Tensor& a, const Tensor& b);

}  // namespace kiln
