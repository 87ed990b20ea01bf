#pragma once
// The backward rows of softmax and log_softmax over contiguous float32 / bfloat16 rows,
// vectorised per ISA level (compiled in vec_math_<level>.cpp, whose vector macros and exp they
// use). Each row's sum accumulates in float32 lanes (as PyTorch's kernels); bfloat16 values are
// widened in registers and the result rounded once.
#include <cstdint>

namespace kiln::cpu {

struct SoftmaxGradRows {
  // softmax: out = y * (g - sum(g * y)), y the forward's output.
  void (*softmax_f32)(const float* g, const float* y, float* out, int64_t n) = nullptr;
  void (*softmax_bf16)(const uint16_t* g, const uint16_t* y, uint16_t* out, int64_t n) = nullptr;
  // log_softmax: out = g - exp(y) * sum(g), y the forward's output.
  void (*log_softmax_f32)(const float* g, const float* y, float* out, int64_t n) = nullptr;
  void (*log_softmax_bf16)(const uint16_t* g, const uint16_t* y, uint16_t* out,
                           int64_t n) = nullptr;
  // cross_entropy's backward (cross_entropy_rows): out = exp(x - lse) * scale, the softmax of
  // a row of logits times the row's share of the loss's gradient (the caller subtracts scale
  // at the target class).
  void (*cross_entropy_f32)(const float* x, float lse, float scale, float* out,
                            int64_t n) = nullptr;
  void (*cross_entropy_bf16)(const uint16_t* x, float lse, float scale, uint16_t* out,
                             int64_t n) = nullptr;
};

const SoftmaxGradRows& softmax_grad_rows_avx2();
const SoftmaxGradRows& softmax_grad_rows_avx512();

// The table for the current ISA level; null entries (baseline level) mean "use scalar code".
const SoftmaxGradRows& softmax_grad_rows();

}  // namespace kiln::cpu
