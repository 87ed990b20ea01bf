#pragma once
// Helpers for the nn tests: float64 tensors from host values, element-wise comparison with a
// host reference, and random leaves for gradcheck.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/gradcheck.h"
#include "kiln/kiln.h"
#include "kiln/nn/nn.h"

namespace kiln::nn::test {

using V = std::vector<Tensor>;

inline Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return tensor_from(v, shape, TensorOptions(DType::F64));
}
inline Tensor i64(const std::vector<int64_t>& v, const Shape& shape) {
  return tensor_from(v, shape, TensorOptions(DType::I64));
}

// Deterministic host values in [lo, hi).
inline std::vector<double> rand_vals(size_t n, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A float64 leaf that requires grad, with values in [lo, hi).
inline Tensor leaf(const Shape& shape, uint32_t seed, double lo = -1, double hi = 1) {
  Tensor t = f64(rand_vals(size_t(numel_of(shape)), seed, lo, hi), shape);
  autograd::set_requires_grad(t);
  return t;
}

inline void expect_values(const Tensor& t, const Shape& shape, const std::vector<double>& ref,
                          double tol, const std::string& what = "") {
  ASSERT_TRUE(t.defined()) << what;
  ASSERT_EQ(t.shape(), shape) << what;
  std::vector<double> got = t.to_vector<double>();
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], ref[i], tol * (1 + std::fabs(ref[i]))) << what << " at flat index " << i;
}

inline void expect_scalar(const Tensor& t, double ref, double tol, const std::string& what = "") {
  ASSERT_EQ(t.dim(), 0) << what;
  EXPECT_NEAR(t.item<double>(), ref, tol * (1 + std::fabs(ref))) << what;
}

// Copies host values into a parameter (without recording gradients).
inline void set_values(Tensor& t, const std::vector<double>& v) {
  autograd::NoGradGuard ng;
  Tensor d = autograd::detach(t);
  d.copy_(tensor_from(v, t.shape(), TensorOptions(DType::F64)));
}

#define KILN_EXPECT_GRADCHECK(fn, inputs)                       \
  do {                                                          \
    auto _r = ::kiln::autograd::gradcheck((fn), (inputs));      \
    EXPECT_TRUE(_r.ok) << _r.message;                           \
  } while (0)

}  // namespace kiln::nn::test
