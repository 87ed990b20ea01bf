#pragma once
// Shared pieces of the accuracy tests of the vector table's own approximations (erf, tanh):
// float bit patterns, float32 ulps, and the bfloat16 check (computed in float32 and rounded
// once, so within one bfloat16 ulp of the float64 value).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/test_util.h"

namespace kiln::test {

inline float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One float32 ulp at |want| (the spacing above the float nearest to it; subnormal spacing
// below the normal range).
inline double ulp_at(double want) {
  const float w = std::fabs(float(want));
  return double(std::nextafter(w, std::numeric_limits<float>::infinity())) - double(w);
}

// op on bfloat16 values amplitude * sin(i * 0.173) * decay^(i % 40) (40000 of them: a threaded
// size; contiguous and transposed) within half a bfloat16 ulp of ref plus the float32 error
// (well inside one bfloat16 ulp, 2^-8 relative).
inline void expect_bf16_within_one_ulp(const char* name, Tensor (*op)(const Tensor&),
                                       double (*ref)(double), double amplitude, double decay) {
  std::vector<double> v;
  for (int i = 0; i < 40000; ++i)
    v.push_back(std::sin(i * 0.173) * amplitude * std::pow(decay, i % 40));
  Tensor x = tensor_from(v, {200, 200}).to(DType::BF16);
  for (const Tensor& in : {x, x.t()}) {
    const std::vector<double> xs = in.to(DType::F64).to_vector<double>();
    const std::vector<double> got = op(in).to(DType::F64).to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = ref(xs[i]);
      ASSERT_LE(std::fabs(got[i] - want), std::fabs(want) * std::ldexp(1.0, -8) + 1e-38)
          << name << "(" << xs[i] << ")";
    }
  }
}

}  // namespace kiln::test
