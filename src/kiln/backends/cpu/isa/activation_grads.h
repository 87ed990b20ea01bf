#pragma once
// The fused activation derivatives' float32 loops (kiln/ops/activation_backward.h), vectorised
// per ISA level (compiled in vec_math_<level>.cpp for its vector macros). Selects, not
// branches: a branch on the sign of random activations mispredicts half the time (leaky_relu's
// derivative as a scalar loop took 4 ms for 1.5M values). bfloat16 callers widen chunks first.
#include <cstdint>

namespace kiln::cpu {

// out[i] = f(g[i], x[i]) over n values, with the function's two parameters a and b:
// threshold (a = threshold): x <= a ? 0 : g (a NaN x passes g, as PyTorch);
// clamp (a = min, b = max, infinite when absent): a <= x <= b ? g : 0 (a NaN x gives 0);
// leaky_relu (a = negative slope): x > 0 ? g : g * a;
// softplus (a = beta, b = threshold): x * a > b ? g : g * sigmoid(x * a);
// hardswish: x <= -3 ? 0 : x < 3 ? g * (x / 3 + 0.5) : g (a NaN x gives NaN);
// hardsigmoid: -3 < x < 3 ? g * (1 / 6) : 0 (PyTorch's vector loops, bit for bit).
using ActivationGradFn = void (*)(const float* g, const float* x, float a, float b, float* out,
                                  int64_t n);

// hardsigmoid's (times_x false) and hardswish's forward: min(max(x + 3, 0), 6) [* x] / 6,
// rounded after each step as the op sequence (a NaN stays NaN).
using HardSigmoidFamilyFn = void (*)(const float* x, float* out, int64_t n, bool times_x);

struct ActivationGrads {
  ActivationGradFn threshold = nullptr, clamp = nullptr, leaky_relu = nullptr,
                   softplus = nullptr, hardswish = nullptr, hardsigmoid = nullptr;
  HardSigmoidFamilyFn hard_sigmoid_family = nullptr;
};

const ActivationGrads& activation_grads_avx2();
const ActivationGrads& activation_grads_avx512();

// The table for the current ISA level; null entries (baseline level) mean "use scalar code".
const ActivationGrads& activation_grads();

}  // namespace kiln::cpu
