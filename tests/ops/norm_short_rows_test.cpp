// layer_norm / rms_norm over many rows shorter than 64 values (the CPU takes their statistics
// four rows at a time, transposed in registers) against float64 references: every length
// around the vector widths, row counts that leave a partial group of four, with and without
// weight and bias, the returned mean and rstd, constant rows (variance 0), rows far from zero
// (the statistics must stay in double: 1e4 + small deviations) and a NaN row. The suite name
// matches CTest's *Reduction* reruns at every ISA level.
#include <cmath>

#include "kiln/ops/normalization.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

std::vector<double> host_values(const Tensor& t) { return t.contiguous().to_vector<double>(); }

void check_layer_norm(int64_t rows, int64_t n, bool affine, bool rms) {
  const Device cpu(DeviceType::CPU, 0);
  std::vector<double> v = random_values(size_t(rows * n), -2.0, 3.0, uint32_t(7 * n + rows));
  for (int64_t j = 0; j < n; ++j) {
    v[size_t(1 * n + j)] = 0.75;                           // constant row
    v[size_t(2 * n + j)] = 1e4 + std::sin(double(j + 1));  // far from zero
  }
  v[size_t(5 * n + n / 2)] = NAN;
  const Tensor x = make(v, {rows, n}, DType::F32, cpu);
  const std::vector<double> xv = host_values(x);  // as stored in float32
  const std::vector<double> wv = random_values(size_t(n), 0.5, 1.5, 3),
                            bv = random_values(size_t(n), -1.0, 1.0, 4);
  const Tensor w = affine ? make(wv, {n}, DType::F32, cpu) : Tensor();
  const Tensor b = affine && !rms ? make(bv, {n}, DType::F32, cpu) : Tensor();
  const double eps = 1e-5;
  std::vector<double> out, mean, rstd;
  if (rms) {
    auto [o, r] = native_rms_norm(x, 1, w, eps);
    out = host_values(o), rstd = host_values(r);
  } else {
    auto [o, m, r] = native_layer_norm(x, 1, w, b, eps);
    out = host_values(o), mean = host_values(m), rstd = host_values(r);
  }
  const std::string what = std::string(rms ? "rms_norm" : "layer_norm") + " [" +
                           std::to_string(rows) + ", " + std::to_string(n) + "]" +
                           (affine ? " affine" : "");
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    bool nan = false;
    for (int64_t j = 0; j < n; ++j) {
      mu += xv[size_t(r * n + j)];
      nan = nan || std::isnan(xv[size_t(r * n + j)]);
    }
    mu = rms ? 0.0 : mu / double(n);
    for (int64_t j = 0; j < n; ++j) var += std::pow(xv[size_t(r * n + j)] - mu, 2);
    var /= double(n);
    const double rs = 1 / std::sqrt(var + eps);
    if (nan) {
      EXPECT_TRUE(std::isnan(rstd[size_t(r)])) << what << " row " << r;
      for (int64_t j = 0; j < n; ++j)
        EXPECT_TRUE(std::isnan(out[size_t(r * n + j)])) << what << " row " << r;
      continue;
    }
    if (!rms) EXPECT_NEAR(mean[size_t(r)], mu, 1e-6 * std::fabs(mu) + 1e-6) << what << " " << r;
    // From 64 values on the squared deviations are taken from the mean rounded to float32
    // (decision 0027): about (float32 epsilon * mean / std)^2 relative.
    const double drift = n < 64 ? 0.0 : 10 * std::pow(6e-8 * std::fabs(mu) * rs, 2);
    EXPECT_NEAR(rstd[size_t(r)], rs, (1e-6 + drift) * rs) << what << " row " << r;
    for (int64_t j = 0; j < n; ++j) {
      double want = (xv[size_t(r * n + j)] - mu) * rs;
      if (affine) want = want * wv[size_t(j)] + (rms ? 0.0 : bv[size_t(j)]);
      // float32 (x - mean) * rstd: the mean's rounding, relative to the row's spread.
      const double tol = 1e-5 * (1 + std::fabs(want)) + 2e-7 * std::fabs(mu) * rs;
      EXPECT_NEAR(out[size_t(r * n + j)], want, tol) << what << " row " << r << " col " << j;
    }
  }
}

TEST(ReductionNormShortRows, LayerNormAndRmsNormEveryShortLength) {
  for (int64_t n : {1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65})
    for (int64_t rows : {int64_t(8), int64_t(203), int64_t(5003)})
      for (bool affine : {false, true})
        for (bool rms : {false, true}) check_layer_norm(rows, n, affine, rms);
}

}  // namespace
}  // namespace kiln::test
