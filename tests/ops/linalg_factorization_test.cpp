// The factorisations (decision 0076) against float64 arithmetic written here: each factor
// multiplied back to A, orthogonality and triangularity, closed-form determinants; failures
// as LinAlgError; gradients (first and second order) against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/gradcheck.h"
#include "kiln/kiln.h"
#include "kiln/ops/linalg_decompositions.h"

namespace kiln {
namespace {

using Mat = std::vector<std::vector<double>>;

Tensor random_matrix(const Shape& shape, uint64_t seed, DType dtype = DType::F64) {
  Generator g(seed);
  return randn(shape, TensorOptions(dtype), &g);
}

// Matrix b of a [batch..., r, c] tensor as nested vectors (float64).
Mat matrix(const Tensor& t, int64_t b = 0) {
  const int64_t r = t.size(-2), c = t.size(-1);
  const std::vector<double> v = t.contiguous().to_vector<double>();
  Mat m(static_cast<size_t>(r), std::vector<double>(static_cast<size_t>(c)));
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) m[size_t(i)][size_t(j)] = v[size_t(b * r * c + i * c + j)];
  return m;
}
Mat product(const Mat& a, const Mat& b) {
  Mat c(a.size(), std::vector<double>(b.empty() ? 0 : b[0].size(), 0.0));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < b.size(); ++k)
      for (size_t j = 0; j < b[0].size(); ++j) c[i][j] += a[i][k] * b[k][j];
  return c;
}
Mat transposed(const Mat& a) {
  Mat t(a.empty() ? 0 : a[0].size(), std::vector<double>(a.size()));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[0].size(); ++j) t[j][i] = a[i][j];
  return t;
}
double max_diff(const Mat& a, const Mat& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j) d = std::max(d, std::fabs(a[i][j] - b[i][j]));
  return d;
}
Mat identity(size_t n) {
  Mat m(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i) m[i][i] = 1;
  return m;
}
// A well-conditioned symmetric positive-definite batch: M M^T + n I.
Tensor spd(int64_t batch, int64_t n, uint64_t seed, DType dtype = DType::F64) {
  Tensor m = random_matrix({batch, n, n}, seed);
  Tensor a = matmul(m, transpose(m, -2, -1)) + eye(n, std::nullopt, TensorOptions(DType::F64)) * double(n);
  return a.to(dtype);
}

TEST(Factorization, CholeskyMultipliesBack) {
  for (DType dt : {DType::F64, DType::F32}) {
    const Tensor A = spd(3, 7, 1, dt);
    const double tol = dt == DType::F64 ? 1e-12 : 1e-4;
    const Tensor L = linalg_cholesky(A), U = linalg_cholesky(A, true);
    for (int64_t b = 0; b < 3; ++b) {
      const Mat l = matrix(L, b), u = matrix(U, b);
      for (size_t i = 0; i < 7; ++i)
        for (size_t j = i + 1; j < 7; ++j) EXPECT_EQ(l[i][j], 0.0);
      EXPECT_LT(max_diff(product(l, transposed(l)), matrix(A, b)), tol * 10);
      EXPECT_LT(max_diff(u, transposed(l)), tol);
    }
  }
}

TEST(Factorization, CholeskyReadsOnlyOneTriangle) {
  Tensor A = spd(1, 5, 2);
  Tensor above = triu(random_matrix({1, 5, 5}, 3), 1) * 100.0;
  Tensor below = tril(random_matrix({1, 5, 5}, 3), -1) * 100.0;
  EXPECT_LT(max_diff(matrix(linalg_cholesky(A + above)), matrix(linalg_cholesky(A))), 1e-14);
  EXPECT_LT(max_diff(matrix(linalg_cholesky(A + below, true)), matrix(linalg_cholesky(A, true))),
            1e-14);
}

TEST(Factorization, NotPositiveDefiniteIsALinAlgError) {
  Tensor A = spd(2, 4, 4);
  Tensor bad = A.clone();
  // Batch element 1 loses definiteness at its second leading minor.
  bad = bad - eye(4, std::nullopt, TensorOptions(DType::F64)) * 0.0;
  std::vector<double> v = bad.contiguous().to_vector<double>();
  v[16 + 5] = -1000;  // [1][1][1]
  Tensor B = tensor_from(v, {2, 4, 4}, TensorOptions(DType::F64));
  try {
    linalg_cholesky(B);
    FAIL() << "expected LinAlgError";
  } catch (const LinAlgError& e) {
    EXPECT_NE(std::string(e.what()).find("(Batch element 1)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("order 2"), std::string::npos) << e.what();
  }
  auto [L, info] = linalg_cholesky_ex(B);
  EXPECT_EQ(info.to_vector<int32_t>(), (std::vector<int32_t>{0, 2}));
}

TEST(Factorization, SolveInverseAndBroadcastBatches) {
  const Tensor A = random_matrix({3, 1, 6, 6}, 5) + eye(6, std::nullopt, TensorOptions(DType::F64)) * 4.0;
  const Tensor B = random_matrix({2, 6, 4}, 6);
  const Tensor X = linalg_solve(A, B);
  ASSERT_EQ(X.shape(), (Shape{3, 2, 6, 4}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      const Mat a = matrix(select(select(A, 0, i), 0, 0)), b = matrix(select(B, 0, j));
      EXPECT_LT(max_diff(product(a, matrix(select(select(X, 0, i), 0, j))), b), 1e-12);
    }
  // X A = B^T is A^T X^T = B.
  const Tensor right = linalg_solve(A, transpose(B, -2, -1), /*left=*/false);
  const Tensor by_transpose = linalg_solve(transpose(A, -2, -1), B);
  EXPECT_LT(max_diff(matrix(transpose(right, -2, -1)), matrix(by_transpose)), 1e-12);
  const Tensor v = random_matrix({6, 1}, 7).reshape({6});
  const Tensor xv = linalg_solve(select(select(A, 0, 0), 0, 0), v);
  ASSERT_EQ(xv.shape(), (Shape{6}));
  const Tensor inv = linalg_inv(A);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_LT(max_diff(product(matrix(select(A, 0, i)), matrix(select(inv, 0, i))), identity(6)),
              1e-12);
}

TEST(Factorization, SingularSolveAndInverseAreLinAlgErrors) {
  Tensor S = tensor_from(std::vector<double>{1, 2, 2, 4}, {2, 2}, TensorOptions(DType::F64));
  EXPECT_THROW(linalg_solve(S, eye(2, std::nullopt, TensorOptions(DType::F64))), LinAlgError);
  EXPECT_THROW(linalg_inv(S), LinAlgError);
  auto [X, info] = linalg_inv_ex(S);
  EXPECT_GT(info.item<int32_t>(), 0);
  EXPECT_EQ(linalg_det(S).item<double>(), 0.0);
  auto [sign, logabs] = linalg_slogdet(S);
  EXPECT_EQ(sign.item<double>(), 0.0);
  EXPECT_TRUE(std::isinf(logabs.item<double>()) && logabs.item<double>() < 0);
}

TEST(Factorization, DeterminantOfThreeByThree) {
  const Tensor A = random_matrix({4, 3, 3}, 8);
  const std::vector<double> det = linalg_det(A).to_vector<double>();
  auto [sign, logabs] = linalg_slogdet(A);
  const std::vector<double> s = sign.to_vector<double>(), l = logabs.to_vector<double>();
  for (int64_t b = 0; b < 4; ++b) {
    const Mat m = matrix(A, b);
    const double want = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                        m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                        m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
    EXPECT_NEAR(det[size_t(b)], want, 1e-12 * (1 + std::fabs(want)));
    EXPECT_EQ(s[size_t(b)], want > 0 ? 1.0 : -1.0);
    EXPECT_NEAR(l[size_t(b)], std::log(std::fabs(want)), 1e-12);
  }
  EXPECT_EQ(linalg_det(zeros({0, 0}, TensorOptions(DType::F64))).item<double>(), 1.0);
}

TEST(Factorization, TriangularSolvesReadOneTriangle) {
  const Tensor A = random_matrix({2, 5, 5}, 9) + eye(5, std::nullopt, TensorOptions(DType::F64)) * 5.0;
  const Tensor B = random_matrix({2, 5, 3}, 10);
  for (bool upper : {true, false})
    for (bool unit : {true, false})
      for (bool left : {true, false}) {
        const Tensor rhs = left ? B : transpose(B, -2, -1);
        const Tensor X = linalg_solve_triangular(A, rhs, upper, left, unit);
        for (int64_t b = 0; b < 2; ++b) {
          Mat t = matrix(A, b);  // the triangle the solve may read, unit diagonal if asked
          for (size_t i = 0; i < 5; ++i)
            for (size_t j = 0; j < 5; ++j) {
              if (upper ? j < i : j > i) t[i][j] = 0;
              if (unit && i == j) t[i][j] = 1;
            }
          const Mat x = matrix(X, b);
          const Mat got = left ? product(t, x) : product(x, t);
          EXPECT_LT(max_diff(got, matrix(rhs, b)), 1e-12)
              << "upper " << upper << " unit " << unit << " left " << left;
        }
      }
}

TEST(Factorization, LuFactorAndSolve) {
  const Tensor A = random_matrix({2, 6, 6}, 11);
  auto [LU, piv] = linalg_lu_factor(A);
  const std::vector<int32_t> p = piv.to_vector<int32_t>();
  for (int64_t b = 0; b < 2; ++b) {
    const Mat lu = matrix(LU, b);
    Mat L = identity(6), U(6, std::vector<double>(6, 0.0));
    for (size_t i = 0; i < 6; ++i)
      for (size_t j = 0; j < 6; ++j) (j < i ? L[i][j] : U[i][j]) = lu[i][j];
    Mat pa = matrix(A, b);  // the row interchanges applied in order: P^T A = L U
    for (size_t i = 0; i < 6; ++i) std::swap(pa[i], pa[size_t(p[size_t(b * 6) + i] - 1)]);
    EXPECT_LT(max_diff(product(L, U), pa), 1e-12);
  }
  const Tensor B = random_matrix({2, 6, 2}, 12);
  EXPECT_LT(max_diff(matrix(linalg_lu_solve(LU, piv, B)), matrix(linalg_solve(A, B))), 1e-12);
  const Tensor At = transpose(A, -2, -1);
  EXPECT_LT(max_diff(matrix(linalg_lu_solve(LU, piv, B, true, true)), matrix(linalg_solve(At, B))),
            1e-12);
}

TEST(Factorization, QrIsOrthonormalTimesUpper) {
  for (Shape s : {Shape{7, 4}, Shape{4, 7}, Shape{5, 5}}) {
    const Tensor A = random_matrix(s, 13);
    for (const char* mode : {"reduced", "complete"}) {
      auto [Q, R] = linalg_qr(A, mode);
      const Mat q = matrix(Q), r = matrix(R);
      EXPECT_LT(max_diff(product(transposed(q), q), identity(q[0].size())), 1e-13) << mode;
      EXPECT_LT(max_diff(product(q, r), matrix(A)), 1e-13) << mode;
      for (size_t i = 0; i < r.size(); ++i)
        for (size_t j = 0; j < i && j < r[i].size(); ++j) EXPECT_EQ(r[i][j], 0.0);
    }
    auto [Qr, Rr] = linalg_qr(A, "r");
    EXPECT_EQ(Qr.numel(), 0);
  }
}

TEST(Factorization, EighDiagonalisesAscending) {
  const Tensor A = spd(2, 6, 14) - eye(6, std::nullopt, TensorOptions(DType::F64)) * 9.0;
  auto [w, Q] = linalg_eigh(A);
  const std::vector<double> values = w.to_vector<double>();
  for (int64_t b = 0; b < 2; ++b) {
    const Mat q = matrix(Q, b);
    Mat qw = q;
    for (size_t i = 0; i < 6; ++i)
      for (size_t j = 0; j < 6; ++j) qw[i][j] *= values[size_t(b * 6) + j];
    EXPECT_LT(max_diff(product(matrix(A, b), q), qw), 1e-11);
    EXPECT_LT(max_diff(product(transposed(q), q), identity(6)), 1e-13);
    for (size_t j = 1; j < 6; ++j) EXPECT_LE(values[size_t(b * 6) + j - 1], values[size_t(b * 6) + j]);
  }
}

TEST(Factorization, SvdMultipliesBack) {
  for (Shape s : {Shape{2, 7, 4}, Shape{2, 4, 7}, Shape{1, 5, 5}})
    for (bool full : {false, true}) {
      const Tensor A = random_matrix(s, 15);
      auto [U, S, Vh] = linalg_svd(A, full);
      const int64_t k = std::min(s[1], s[2]);
      for (int64_t b = 0; b < s[0]; ++b) {
        Mat u = matrix(U, b), vh = matrix(Vh, b);
        EXPECT_LT(max_diff(product(transposed(u), u), identity(u[0].size())), 1e-13);
        EXPECT_LT(max_diff(product(vh, transposed(vh)), identity(vh.size())), 1e-13);
        const std::vector<double> sv = S.to_vector<double>();
        Mat us(u.size(), std::vector<double>(size_t(k)));
        for (size_t i = 0; i < u.size(); ++i)
          for (size_t j = 0; j < size_t(k); ++j) us[i][j] = u[i][j] * sv[size_t(b * k) + j];
        vh.resize(size_t(k));
        EXPECT_LT(max_diff(product(us, vh), matrix(A, b)), 1e-13);
        for (size_t j = 1; j < size_t(k); ++j)
          EXPECT_GE(sv[size_t(b * k) + j - 1], sv[size_t(b * k) + j]);
      }
    }
  EXPECT_THROW(linalg_svd(full({3, 3}, NAN, TensorOptions(DType::F64))), LinAlgError);
}

TEST(Factorization, BadInputsSayWhatWasExpected) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { linalg_inv(zeros({3, 4}, TensorOptions(DType::F64))); })
                .find("square matrices, but they are 3 by 4"),
            std::string::npos);
  EXPECT_NE(message([] { linalg_det(zeros({3, 3}, TensorOptions(DType::I64))); })
                .find("Expected a floating point"),
            std::string::npos);
  EXPECT_THROW(linalg_det(zeros({3, 3}, TensorOptions(DType::BF16))), NotImplementedError);
  EXPECT_NE(message([] {
              linalg_solve(eye(3, std::nullopt, TensorOptions(DType::F64)),
                           zeros({4, 2}, TensorOptions(DType::F64)));
            }).find("Incompatible shapes of A and B"),
            std::string::npos);
  EXPECT_NE(message([] { linalg_qr(zeros({3, 3}), "bad"); }).find("unrecognized mode 'bad'"),
            std::string::npos);
  EXPECT_NE(message([] { linalg_eigh(zeros({3, 3}), "X"); }).find("'L' or 'U'"),
            std::string::npos);
}

// First and second derivatives against finite differences (gauge-invariant functions of the
// eigen- and singular vectors: their signs are arbitrary).
TEST(Factorization, GradientsAgainstFiniteDifferences) {
  using autograd::gradcheck;
  using autograd::gradgradcheck;
  auto leaf = [](Tensor t) {
    t = t.contiguous();
    autograd::set_requires_grad(t);
    return t;
  };
  const Tensor A = leaf(random_matrix({2, 4, 4}, 16) + eye(4, std::nullopt, TensorOptions(DType::F64)) * 3.0);
  const Tensor B = leaf(random_matrix({2, 4, 3}, 17));
  const Tensor P = leaf(spd(2, 4, 18));
  const Tensor W = leaf(random_matrix({2, 5, 3}, 19));
  const Tensor Wide = leaf(random_matrix({2, 3, 5}, 20));
  using V = std::vector<Tensor>;
  struct Case {
    const char* name;
    autograd::TensorFn fn;
    V inputs;
  };
  const Case cases[] = {
      {"solve", [](const V& v) { return linalg_solve(v[0], v[1]); }, {A, B}},
      {"inv", [](const V& v) { return linalg_inv(v[0]); }, {A}},
      {"det", [](const V& v) { return linalg_det(v[0]); }, {A}},
      {"slogdet", [](const V& v) { return std::get<1>(linalg_slogdet(v[0])); }, {A}},
      {"solve_triangular", [](const V& v) { return linalg_solve_triangular(v[0], v[1], true); },
       {A, B}},
      {"cholesky", [](const V& v) {
         const Tensor s = (v[0] + transpose(v[0], -2, -1)) * 0.5;  // stay symmetric
         return linalg_cholesky(s);
       }, {P}},
      {"qr tall", [](const V& v) {
         auto [Q, R] = linalg_qr(v[0]);
         return cat({Q, transpose(R, -2, -1)}, -2);
       }, {W}},
      {"qr wide", [](const V& v) {
         auto [Q, R] = linalg_qr(v[0]);
         return cat({Q, R}, -1);
       }, {Wide}},
      {"eigh", [](const V& v) {
         const Tensor s = (v[0] + transpose(v[0], -2, -1)) * 0.5;
         auto [w, Q] = linalg_eigh(s);
         return cat({unsqueeze(w, -1), matmul(Q * unsqueeze(w, -2), transpose(Q, -2, -1))}, -1);
       }, {P}},
      {"svd", [](const V& v) {
         auto [U, S, Vh] = linalg_svd(v[0], false);
         return cat({matmul(U, transpose(U, -2, -1)) * 2.0, matmul(U * unsqueeze(S, -2), Vh)}, -1);
       }, {W}},
  };
  for (const Case& c : cases) {
    auto first = gradcheck(c.fn, c.inputs);
    EXPECT_TRUE(first.ok) << c.name << ": " << first.message;
    auto second = gradgradcheck(c.fn, c.inputs);
    EXPECT_TRUE(second.ok) << c.name << " (second order): " << second.message;
  }
}

}  // namespace
}  // namespace kiln
