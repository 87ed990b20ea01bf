#pragma once
// A Linear layer with its epilogue as one oneDNN matmul (fused_linear's tall products):
// the weight packed once per weight tensor (onednn_packed_weights.h), bias, activation and
// residual as oneDNN post-ops, float32 or bfloat16 output. Built only with KILN_HAVE_DNNL;
// otherwise onednn_linear always returns false and kiln's kernels run.
#include "kiln/ops/linalg.h"
#include "kiln/tensor/tensor.h"

namespace kiln::cpu {

// out[M, N] = act(x[M, K] @ weight[N, K].T + bias) + residual[M, N]. x any strides; weight
// with unit column stride; bias contiguous [N] of x's dtype or undefined; residual with unit
// column stride (float32 or bfloat16) or undefined; out row-major with unit column stride.
// Returns false, having written nothing, where kiln's kernels are the faster (fewer rows
// than oneDNN's matmul rule, decision 0017; float32 from 32 rows at AVX-512, decision 0119),
// oneDNN is absent or switched off, or it has no
// implementation for the combination.
// `reused`: whether the weight is worth oneDNN's packed layout (linear_weight_reused in
// own_packed_weights.h); otherwise the plan reads it in its own layout (decision 0120).
bool onednn_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   LinearActivation act, const Tensor& residual, bool reused, const Tensor& out);

}  // namespace kiln::cpu
