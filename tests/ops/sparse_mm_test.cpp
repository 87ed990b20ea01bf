// sparse_csr_mm against a float64 dense product of the same matrix, with empty rows, one very
// dense row (the threads' pieces are balanced by stored entries), every float dtype, and the
// index checks.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/ops/sparse.h"

namespace kiln {
namespace {

struct Csr {
  std::vector<int64_t> crow, col;
  std::vector<double> values;
};

// R x K with about `density` of the entries stored (row 1 full, row 0 empty).
Csr random_csr(int64_t R, int64_t K, double density, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0), v(-1.0, 1.0);
  Csr m;
  m.crow.push_back(0);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const bool keep = r == 0 ? false : r == 1 ? true : u(rng) < density;
      if (keep) {
        m.col.push_back(k);
        m.values.push_back(v(rng));
      }
    }
    m.crow.push_back(int64_t(m.col.size()));
  }
  return m;
}

TEST(SparseCsrMm, MatchesADenseFloat64Product) {
  std::mt19937 rng(3);
  for (DType dt : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    for (auto [R, K, N] : {std::tuple<int64_t, int64_t, int64_t>{5, 7, 3},
                           {300, 200, 64}, {1000, 50, 17}}) {
      Csr m = random_csr(R, K, 0.05, rng);
      std::vector<double> dense_values(size_t(K * N));
      std::uniform_real_distribution<double> v(-1.0, 1.0);
      for (double& x : dense_values) x = v(rng);
      Tensor dense = tensor_from(dense_values, {K, N}).to(dt);
      Tensor values = tensor_from(m.values, {int64_t(m.values.size())}).to(dt);
      Tensor out = sparse_csr_mm(tensor_from(m.crow, {R + 1}),
                                 tensor_from(m.col, {int64_t(m.col.size())}), values, dense);
      ASSERT_EQ(out.shape(), (Shape{R, N}));
      ASSERT_EQ(out.dtype(), dt);
      // reference: the stored values and dense entries as rounded to dt, summed in float64
      std::vector<double> vq = values.to_vector<double>(), dq = dense.to_vector<double>();
      std::vector<double> got = out.to_vector<double>();
      const double tol = dt == DType::F64 ? 1e-12 : dt == DType::F32 ? 1e-5 : 2e-2;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t n = 0; n < N; ++n) {
          double want = 0;
          for (int64_t e = m.crow[size_t(r)]; e < m.crow[size_t(r + 1)]; ++e)
            want += vq[size_t(e)] * dq[size_t(m.col[size_t(e)] * N + n)];
          ASSERT_NEAR(got[size_t(r * N + n)], want, tol * (1 + std::abs(want)))
              << dtype_name(dt) << " row " << r << " col " << n;
        }
    }
  }
}

TEST(SparseCsrMm, RejectsBadIndicesAndShapes) {
  Tensor dense = ones({3, 2});
  Tensor values = ones({2});
  auto i64 = [](std::vector<int64_t> v) { return tensor_from(v, {int64_t(v.size())}); };
  EXPECT_THROW(sparse_csr_mm(i64({0, 1, 2}), i64({0, 3}), values, dense), IndexError);
  EXPECT_THROW(sparse_csr_mm(i64({0, 1, 2}), i64({0, -1}), values, dense), IndexError);
  EXPECT_THROW(sparse_csr_mm(i64({0, 2, 1}), i64({0, 1}), values, dense), IndexError);
  EXPECT_THROW(sparse_csr_mm(i64({1, 1, 2}), i64({0, 1}), values, dense), IndexError);
  EXPECT_THROW(sparse_csr_mm(i64({0, 1, 3}), i64({0, 1}), values, dense), IndexError);
  EXPECT_THROW(sparse_csr_mm(i64({0, 1, 2}), i64({0, 1}), ones({3}), dense), ShapeError);
  EXPECT_THROW(sparse_csr_mm(i64({0, 1, 2}), i64({0, 1}), values, ones({3, 2}, DType::F64)),
               TypeError);
  Tensor ok = sparse_csr_mm(i64({0, 1, 2}), i64({2, 0}), values, dense);
  EXPECT_EQ(ok.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace kiln
