// adam_step_ on the CPU: one pass over parameter, gradient and moments (7 float streams) where
// the op sequence made about 20: AdamW over 94M float32 parameters 187 -> see decision 0052.
// Each element follows the sequence's float32 operations in order, each product rounded before
// its sum except in lerp, which rounds once (a fused multiply-add, as PyTorch's), so the result
// is bit for bit that of mul_, lerp, mul_, addcmul_, sqrt, div, add_ and addcdiv_
// (binary_kernels.cpp's formulas), which the tests check.
#include <immintrin.h>

#include <cmath>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/dispatch/registry.h"
#include "parallel_pieces.h"

namespace kiln::cpu {

namespace {

struct StepScalars {
  float decay, t, t_minus_one, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step;
};

// One element, the sequence's float32 operations in order.
template <bool kLowWeight, bool kMaximize>
__attribute__((optimize("fp-contract=off"))) inline void adam_element(float& p, float g,
                                                                      float& m, float& v,
                                                                      const StepScalars& s) {
  const float gi = kMaximize ? -g : g;
  const float pi = p * s.decay;
  m = kLowWeight ? std::fma(s.t, gi - m, m) : std::fma(s.t_minus_one, gi - m, gi);
  v = v * s.beta2 + s.one_minus_beta2 * (gi * gi);
  const float denom = std::sqrt(v) / s.bc2_sqrt + s.eps;
  p = pi + s.neg_step * (m / denom);
}

// kLowWeight: lerp's branch for |weight| < 0.5 (fma(w, end - start, start)), else its other
// side (fma(w - 1, end - start, end)), as lerp's kernel chooses per call. Four lanes at a
// time with the FMA instructions of AVX2-level CPUs (chosen at run time, KILN_CPU_ISA
// included): the plain loop stayed scalar, since std::sqrt may set errno; the same IEEE
// operations in the same order. Below AVX2 the scalar element (std::fma in software).
template <bool kLowWeight, bool kMaximize>
// (fp-contract off: with FMA enabled GCC would fuse the other products into their sums.)
__attribute__((target("fma"), optimize("fp-contract=off"))) void adam_block_fma(
    float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
    int64_t n, const StepScalars& s) {
  const __m128 decay = _mm_set1_ps(s.decay), t = _mm_set1_ps(s.t);
  const __m128 t_minus_one = _mm_set1_ps(s.t_minus_one), beta2 = _mm_set1_ps(s.beta2);
  const __m128 one_minus_beta2 = _mm_set1_ps(s.one_minus_beta2);
  const __m128 bc2_sqrt = _mm_set1_ps(s.bc2_sqrt), eps = _mm_set1_ps(s.eps);
  const __m128 neg_step = _mm_set1_ps(s.neg_step), sign = _mm_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128 gi = _mm_loadu_ps(g + i);
    if (kMaximize) gi = _mm_xor_ps(gi, sign);
    const __m128 pi = _mm_mul_ps(_mm_loadu_ps(p + i), decay);
    __m128 mi = _mm_loadu_ps(m + i);
    mi = kLowWeight ? _mm_fmadd_ps(t, _mm_sub_ps(gi, mi), mi)
                    : _mm_fmadd_ps(t_minus_one, _mm_sub_ps(gi, mi), gi);
    const __m128 vi = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(v + i), beta2),
                                 _mm_mul_ps(one_minus_beta2, _mm_mul_ps(gi, gi)));
    const __m128 denom = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vi), bc2_sqrt), eps);
    _mm_storeu_ps(m + i, mi);
    _mm_storeu_ps(v + i, vi);
    _mm_storeu_ps(p + i, _mm_add_ps(pi, _mm_mul_ps(neg_step, _mm_div_ps(mi, denom))));
  }
  for (; i < n; ++i) adam_element<kLowWeight, kMaximize>(p[i], g[i], m[i], v[i], s);
}

template <bool kLowWeight, bool kMaximize>
void adam_block_scalar(float* __restrict p, const float* __restrict g, float* __restrict m,
                       float* __restrict v, int64_t n, const StepScalars& s) {
  for (int64_t i = 0; i < n; ++i) adam_element<kLowWeight, kMaximize>(p[i], g[i], m[i], v[i], s);
}

void adam_step_kernel(OpCall& call) {
  const Tensor& grad = call.inputs[1];
  const Tensor& param = call.outs[0];
  const Tensor& exp_avg = call.outs[1];
  const Tensor& exp_avg_sq = call.outs[2];
  KILN_CHECK(param.raw_data() == call.inputs[0].raw_data() &&
                 exp_avg.raw_data() == call.inputs[2].raw_data() &&
                 exp_avg_sq.raw_data() == call.inputs[3].raw_data(),
             Error, "adam_step_ updates its parameter and moments in place");
  StepScalars s;
  s.decay = float(call.double_attr(0));
  s.t = float(call.double_attr(1));
  s.t_minus_one = s.t - 1.0f;  // as lerp's kernel: in float32, from the rounded weight
  s.beta2 = float(call.double_attr(2));
  s.one_minus_beta2 = float(call.double_attr(3));
  s.bc2_sqrt = float(call.double_attr(4));
  s.eps = float(call.double_attr(5));
  s.neg_step = float(call.double_attr(6));
  const bool maximize = call.bool_attr(7), low = std::fabs(s.t) < 0.5f;
  float* p = static_cast<float*>(param.raw_data());
  const float* g = static_cast<const float*>(grad.raw_data());
  float* m = static_cast<float*>(exp_avg.raw_data());
  float* v = static_cast<float*>(exp_avg_sq.raw_data());
  using Block = void (*)(float*, const float*, float*, float*, int64_t, const StepScalars&);
  Block block;
  if (isa_level() >= IsaLevel::Avx2)
    block = low ? (maximize ? &adam_block_fma<true, true> : &adam_block_fma<true, false>)
                : (maximize ? &adam_block_fma<false, true> : &adam_block_fma<false, false>);
  else
    block = low ? (maximize ? &adam_block_scalar<true, true> : &adam_block_scalar<true, false>)
                : (maximize ? &adam_block_scalar<false, true> : &adam_block_scalar<false, false>);
  parallel_pieces(param.numel(), [&](int64_t lo, int64_t hi) {
    block(p + lo, g + lo, m + lo, v + lo, hi - lo, s);
  });
}

}  // namespace

void register_adam_step_kernel() {
  register_kernel("adam_step_", DeviceType::CPU, adam_step_kernel, dtype_bit(DType::F32));
}

}  // namespace kiln::cpu
