// Products of a few rows (2 to 15; bfloat16 to 32 where its tile widens) with a row-major
// weight, x @ W.T (decoding several sequences at once): few_rows_product.h's dot tiles of up to
// 6 rows x 4 weight rows, reached through mm / addmm / linear and fused_linear. Every row
// count against the tile's edges, weight-row counts around multiples of 4, K around the vector
// widths (8, 16, 32 values) with tails, row views of wider matrices (row stride > K) and
// addmm's alpha / beta, in float32 and bfloat16, against float64 sums of the values actually
// multiplied. One row (LLM decoding's matrix-vector product) takes its own paths: float32
// dot4, bfloat16 one_row_times_weight_bf16 (the activation widened once; from K = 2048 four
// weight rows at a time) at the AVX2 and AVX-512 levels; it gets the same sweep.
// The suite's name puts it in CTest's rerun at every ISA level.
#include "kiln/ops/linalg.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

// A [rows, cols] matrix whose rows are `stride` values apart (a view of a wider matrix when
// stride > cols) and its values in float64.
struct Matrix {
  Tensor t;
  std::vector<double> v;  // [rows, cols], row-major
};

Matrix matrix(int64_t rows, int64_t cols, int64_t stride, DType dtype, uint32_t seed) {
  const std::vector<double> wide =
      rounded(random_values(size_t(rows * stride), -1, 1, seed), dtype);
  Tensor full = make(wide, {rows, stride}, dtype, kCpu);
  Matrix m{narrow(full, 1, 0, cols), {}};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < cols; ++k) m.v.push_back(wide[size_t(i * stride + k)]);
  return m;
}

// alpha * x @ w.T + beta * bias (bias broadcast over the rows; empty: none) in float64.
std::vector<double> reference(const Matrix& x, const Matrix& w, int64_t M, int64_t N, int64_t K,
                              const std::vector<double>& bias = {}, double alpha = 1,
                              double beta = 1) {
  std::vector<double> c(size_t(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += x.v[size_t(i * K + k)] * w.v[size_t(j * K + k)];
      c[size_t(i * N + j)] = alpha * s + (bias.empty() ? 0.0 : beta * bias[size_t(j)]);
    }
  return c;
}

Tol tolerance(DType dtype, int64_t K) {
  if (dtype == DType::BF16) return tol_for(DType::BF16);
  return {2e-6, 1e-6 * (4.0 + 2.0 * std::sqrt(double(K)))};
}

std::string describe(DType dtype, int64_t M, int64_t N, int64_t K, const char* op) {
  return std::string(op) + " " + std::string(dtype_name(dtype)) + " M=" + std::to_string(M) +
         " N=" + std::to_string(N) + " K=" + std::to_string(K);
}

// Every row count of the tiles' range (bfloat16 up to 32 rows where the tile widens: the
// AVX2 and AVX-512 reruns) and a few beyond it (the blocked kernels or oneDNN).
TEST(LinalgFewRows, EveryRowCountAgainstTileEdges) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t M = 2; M < 36; M += M < 16 || (M >= 24 && M < 34) ? 1 : 4)
      for (int64_t N : {1, 3, 4, 7, 9}) {
        const int64_t K = 45;  // a vector tail at every width
        const Matrix x = matrix(M, K, K, dtype, uint32_t(M * 31 + N));
        const Matrix w = matrix(N, K, K, dtype, uint32_t(M * 31 + N + 7));
        expect_close(mm(x.t, w.t.t()), {M, N}, reference(x, w, M, N, K),
                     tolerance(dtype, K), describe(dtype, M, N, K, "mm"));
      }
}

TEST(LinalgFewRows, DepthsAroundVectorWidthsAndRowViews) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t K : {1, 7, 8, 15, 16, 31, 32, 33, 64, 100, 257, 1031})
      for (int64_t M : {3, 6}) {
        const int64_t N = 10;
        // Rows of x and W are views into wider matrices, so their stride is not K.
        const Matrix x = matrix(M, K, K + 5, dtype, uint32_t(K * 7 + M));
        const Matrix w = matrix(N, K, K + 3, dtype, uint32_t(K * 7 + M + 1));
        expect_close(mm(x.t, w.t.t()), {M, N}, reference(x, w, M, N, K),
                     tolerance(dtype, K), describe(dtype, M, N, K, "mm of views"));
        expect_close(linear(x.t, w.t), {M, N}, reference(x, w, M, N, K),
                     tolerance(dtype, K), describe(dtype, M, N, K, "linear of views"));
      }
}

TEST(LinalgFewRows, AddmmBiasAlphaBetaAndFusedLinear) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t M : {9, 29}) {  // 29: bfloat16's widening tiles, float32's blocked kernel
      const int64_t N = 130, K = 300;
      const Matrix x = matrix(M, K, K, dtype, 11);
      const Matrix w = matrix(N, K, K, dtype, 12);
      const std::vector<double> bias = rounded(random_values(size_t(N), -1, 1, 13), dtype);
      const Tensor b = make(bias, {N}, dtype, kCpu);
      const Tol tol = tolerance(dtype, K);
      expect_close(addmm(b, x.t, w.t.t(), 0.5, 2.0), {M, N},
                   reference(x, w, M, N, K, bias, 2.0, 0.5), tol,
                   describe(dtype, M, N, K, "addmm beta 0.5 alpha 2"));
      expect_close(linear(x.t, w.t, b), {M, N}, reference(x, w, M, N, K, bias), tol,
                   describe(dtype, M, N, K, "linear with bias"));
      // fused_linear with a residual: x @ W.T + bias + residual, one rounding.
      const std::vector<double> res = rounded(random_values(size_t(M * N), -2, 2, 14), dtype);
      std::vector<double> want = reference(x, w, M, N, K, bias);
      for (size_t i = 0; i < want.size(); ++i) want[i] += res[i];
      const Tensor r = make(res, {M, N}, dtype, kCpu);
      expect_close(fused_linear(x.t, w.t, b, LinearActivation::None, r), {M, N}, want, tol,
                   describe(dtype, M, N, K, "fused_linear with residual"));
    }
}

TEST(LinalgFewRows, OneRowWeightRowsAroundFourAndDepthsAroundVectorWidths) {
  for (DType dtype : {DType::F32, DType::BF16})
    // 2048 and more: four bfloat16 weight rows at a time (few_rows_product.cpp); around
    // 4096 + 128 the AVX-512 BF16 row loop's prefetch moves from the row to the next one.
    for (int64_t K : {1, 7, 8, 15, 16, 17, 31, 32, 33, 257, 1031, 2048, 2071, 4223, 4224, 4357})
      for (int64_t N : {1, 3, 4, 5, 7, 9, 130}) {
        const Matrix x = matrix(1, K, K + 5, dtype, uint32_t(K * 13 + N));
        const Matrix w = matrix(N, K, K + 3, dtype, uint32_t(K * 13 + N + 1));
        const Tol tol = tolerance(dtype, K);
        expect_close(mm(x.t, w.t.t()), {1, N}, reference(x, w, 1, N, K), tol,
                     describe(dtype, 1, N, K, "mm of views"));
        expect_close(linear(x.t, w.t), {1, N}, reference(x, w, 1, N, K), tol,
                     describe(dtype, 1, N, K, "linear of views"));
        const std::vector<double> bias = rounded(random_values(size_t(N), -1, 1, 5), dtype);
        const Tensor b = make(bias, {N}, dtype, kCpu);
        expect_close(addmm(b, x.t, w.t.t(), 0.5, 2.0), {1, N},
                     reference(x, w, 1, N, K, bias, 2.0, 0.5), tol,
                     describe(dtype, 1, N, K, "addmm beta 0.5 alpha 2"));
        expect_close(fused_linear(x.t, w.t, b, LinearActivation::None), {1, N},
                     reference(x, w, 1, N, K, bias), tol,
                     describe(dtype, 1, N, K, "fused_linear with bias"));
      }
}

// The weight streamed once must still see every element: a large weight whose last rows and
// columns hold the only non-zero values (a tile that skipped a tail would read zeros).
TEST(LinalgFewRows, LastRowsAndColumnsOfALargeWeight) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t M : {1, 5}) {
      const int64_t N = 1027, K = 515;
      std::vector<double> wv(size_t(N * K), 0.0), xv(size_t(M * K), 1.0);
      for (int64_t j = N - 3; j < N; ++j)
        for (int64_t k = 0; k < K; ++k) wv[size_t(j * K + k)] = k == K - 1 ? 2.0 : 0.0;
      for (int64_t i = 0; i < M; ++i) xv[size_t(i * K + K - 1)] = double(i + 1);
      std::vector<double> want(size_t(M * N), 0.0);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = N - 3; j < N; ++j) want[size_t(i * N + j)] = 2.0 * double(i + 1);
      expect_close(mm(make(xv, {M, K}, dtype, kCpu), make(wv, {N, K}, dtype, kCpu).t()), {M, N},
                   want, Tol{0, 0}, describe(dtype, M, N, K, "mm, only the tails non-zero"));
    }
}

}  // namespace
}  // namespace kiln::test
