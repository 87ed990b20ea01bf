#pragma once
// The backward rows of layer_norm and rms_norm (and group_norm's channel runs) over contiguous float32 / bfloat16 rows,
// vectorised per ISA level (compiled in vec_math_<level>.cpp for its vector macros). Row sums
// accumulate in float32 lanes (as PyTorch's kernels); bfloat16 values are widened in
// registers and dx rounded once.
#include <cstdint>

namespace kiln::cpu {

// One row of n values: with xh = (x - mean) * rstd (rms_norm: mean = 0) and gw = g * w (w
// null: g), dx = rstd * (gw - sum(gw) / n - xh * sum(gw * xh) / n) (rms_norm: without the
// sum(gw) term), and dw[i] += g[i] * xh[i], db[i] += g[i] into float32 accumulators of n values.
template <typename E>
using NormGradRowFn = void (*)(const E* g, const E* x, const float* w, float mean, float rstd,
                               bool centred, E* dx, float* dw, float* db, int64_t n);

// One channel's run of n values in group_norm's backward: sums[0] = sum(g) and sums[1] =
// sum(g * (x - mean)), in float32 lanes (the caller adds runs of a few thousand in double).
template <typename E>
using ChannelGradSumsFn = void (*)(const E* g, const E* x, float mean, int64_t n, float* sums);

// dx = a * g + (b * x + k) over n values, both products fused (the tail too, so a value does
// not depend on its position); bfloat16 rounded once.
template <typename E>
using AffineGradFn = void (*)(const E* g, const E* x, float a, float b, float k, E* dx,
                              int64_t n);

struct NormGradRows {
  NormGradRowFn<float> f32 = nullptr;
  NormGradRowFn<uint16_t> bf16 = nullptr;
  ChannelGradSumsFn<float> channel_sums_f32 = nullptr;
  ChannelGradSumsFn<uint16_t> channel_sums_bf16 = nullptr;
  AffineGradFn<float> affine_grad_f32 = nullptr;
  AffineGradFn<uint16_t> affine_grad_bf16 = nullptr;
};

const NormGradRows& norm_grad_rows_avx2();
const NormGradRows& norm_grad_rows_avx512();

// The table for the current ISA level; null entries (baseline level) mean "use scalar code".
const NormGradRows& norm_grad_rows();

}  // namespace kiln::cpu
