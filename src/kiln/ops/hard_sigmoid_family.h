#pragma once
// hardsigmoid and hardswish as ops, for the forward that autograd records: one pass each way
// where the composition (add, clamp, mul, div) recorded four nodes and its derivative about
// six passes (5x PyTorch's forward + backward of [512, 3072] float32). Without a gradient to
// record nn::functional keeps the pointwise program (bit for bit the same values). CPU kernels
// for float32, float64 and bfloat16 (computed in float32, rounded once).
#include "kiln/tensor/tensor.h"

namespace kiln {

// min(max(x + 3, 0), 6) / 6 and x * min(max(x + 3, 0), 6) / 6, each step rounded.
Tensor hardsigmoid_op(const Tensor& x);
Tensor hardswish_op(const Tensor& x);
// Their derivatives times grad_output, as PyTorch's vector loops: hardsigmoid grad * (1 / 6)
// for -3 < x < 3, else 0 (NaN: 0); hardswish 0 up to -3, grad * (x / 3 + 0.5) below 3 (and
// for NaN), grad from 3 on. (PyTorch's float64 hardsigmoid_backward multiplies by the float32
// 1 / 6; kiln's by the float64 one.)
Tensor hardsigmoid_backward(const Tensor& grad_output, const Tensor& self);
Tensor hardswish_backward(const Tensor& grad_output, const Tensor& self);

}  // namespace kiln
