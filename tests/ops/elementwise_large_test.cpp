// Elementwise ops on tensors large enough to be spread over threads (at least 2^16
// elements), in the layouts that take each path of the CPU iterator: many runs with
// broadcast operands along the run (x + bias[C, 1, 1]: the typed loop with a fixed index),
// broadcast across runs (x + row[W]), one long contiguous run cut into pieces, transposed
// operands (byte-stride loop), a ternary op with two broadcast inputs, and an integer
// division by zero raised from inside the threaded loop. References are float64 host math.
#include <cmath>

#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

// Host value of x (row-major [n, c, h, w]) broadcast from a [c, 1, 1] bias.
std::vector<double> ref_bias(const std::vector<double>& x, const std::vector<double>& bias,
                             int64_t n, int64_t c, int64_t hw, double (*f)(double, double)) {
  std::vector<double> r(x.size());
  for (int64_t i = 0; i < n * c * hw; ++i) r[size_t(i)] = f(x[size_t(i)], bias[size_t((i / hw) % c)]);
  return r;
}

double add_f(double a, double b) { return a + b; }
double mul_f(double a, double b) { return a * b; }
double div_f(double a, double b) { return a / b; }

TEST(ElementwiseLarge, BiasBroadcastAlongRunsEveryFloatDtype) {
  const int64_t n = 2, c = 24, hw = 57 * 31;  // 84,816 elements; each run has one bias value
  std::vector<double> xv = random_values(size_t(n * c * hw), -3, 3, 1);
  std::vector<double> bv = random_values(size_t(c), 0.5, 2, 2);
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    std::vector<double> xr = xv, br = bv;
    for (double& v : xr) v = round_to(v, t);
    for (double& v : br) v = round_to(v, t);
    Tensor x = make(xr, {n, c, 57, 31}, t, kCpu);
    Tensor b = make(br, {c, 1, 1}, t, kCpu);
    const std::string what(dtype_name(t));
    expect_close(add(x, b), {n, c, 57, 31}, ref_bias(xr, br, n, c, hw, add_f), what + " add");
    expect_close(mul(b, x), {n, c, 57, 31}, ref_bias(xr, br, n, c, hw, mul_f), what + " mul");
    expect_close(div(x, b), {n, c, 57, 31}, ref_bias(xr, br, n, c, hw, div_f), what + " div");
  }
}

TEST(ElementwiseLarge, RowBroadcastAcrossRunsAndTransposedOperands) {
  const int64_t rows = 700, cols = 130;  // 91,000 elements in 700 runs
  std::vector<double> xv = random_values(size_t(rows * cols), -1, 1, 3);
  std::vector<double> rv = random_values(size_t(cols), -1, 1, 4);
  Tensor x = make(xv, {rows, cols}, DType::F32, kCpu);
  Tensor r = make(rv, {cols}, DType::F32, kCpu);
  std::vector<double> expect(xv.size());
  for (int64_t i = 0; i < rows * cols; ++i)
    expect[size_t(i)] = double(float(xv[size_t(i)])) - double(float(rv[size_t(i % cols)]));
  expect_close(sub(x, r), {rows, cols}, expect, "row broadcast");
  // x.t() read through strides, written to a contiguous output: every run has byte strides.
  Tensor xt = x.t();
  std::vector<double> expect_t(xv.size());
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < rows; ++j)
      expect_t[size_t(i * rows + j)] = 2.0 * double(float(xv[size_t(j * cols + i)]));
  expect_close(mul(xt, Scalar(2.0)), {cols, rows}, expect_t, "transposed");
  // Integers take the byte-stride loop when broadcast.
  Tensor xi = make(random_values(size_t(rows * cols), -50, 50, 5, true), {rows, cols}, DType::I32, kCpu);
  Tensor ri = make(random_values(size_t(cols), -50, 50, 6, true), {cols}, DType::I32, kCpu);
  std::vector<double> xiv = xi.to_vector<double>(), riv = ri.to_vector<double>(), expect_i;
  for (int64_t i = 0; i < rows * cols; ++i) expect_i.push_back(xiv[size_t(i)] + riv[size_t(i % cols)]);
  expect_close(add(xi, ri), {rows, cols}, expect_i, "int32 row broadcast");
}

TEST(ElementwiseLarge, LongContiguousRunAndTernaryWithTwoBroadcastInputs) {
  const int64_t len = 300001;  // one run, cut into pieces across threads
  std::vector<double> av = random_values(size_t(len), -2, 2, 7), bv = random_values(size_t(len), -2, 2, 8);
  Tensor a = make(av, {len}, DType::F32, kCpu), b = make(bv, {len}, DType::F32, kCpu);
  std::vector<double> expect(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) expect[size_t(i)] = double(float(av[size_t(i)])) * double(float(bv[size_t(i)]));
  expect_close(mul(a, b), {len}, expect, "long run");
  // where(cond[n, 1], x[n, m], y[1, m]): condition and y broadcast along different dims.
  const int64_t rows = 400, cols = 200;
  std::vector<double> cv = random_values(size_t(rows), 0, 2, 9, true);
  std::vector<double> xv = random_values(size_t(rows * cols), -1, 1, 10), yv = random_values(size_t(cols), -1, 1, 11);
  Tensor cond = make(cv, {rows, 1}, DType::Bool, kCpu);
  Tensor x = make(xv, {rows, cols}, DType::F32, kCpu), y = make(yv, {1, cols}, DType::F32, kCpu);
  std::vector<double> ew(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      ew[size_t(i * cols + j)] = cv[size_t(i)] != 0 ? double(float(xv[size_t(i * cols + j)]))
                                                    : double(float(yv[size_t(j)]));
  expect_close(where(cond, x, y), {rows, cols}, ew, "where");
}

TEST(ElementwiseLarge, IntegerDivisionByZeroInsideThreadsIsAnError) {
  Tensor a = full({500, 300}, 7, TensorOptions(DType::I64, kCpu));
  std::vector<double> dv(300, 3.0);
  dv[277] = 0;
  Tensor d = make(dv, {300}, DType::I64, kCpu);
  EXPECT_THROW(div(a, d, "trunc"), Error);
  Tensor ok = div(a, make(std::vector<double>(300, 3.0), {300}, DType::I64, kCpu), "trunc");
  EXPECT_EQ(ok.to_vector<double>()[149999], 2.0);
}

// lerp of float32 / bfloat16 arrays with one weight (an EMA step) runs a plain loop (threaded
// from 65536 elements; bfloat16 widened in blocks of 256): PyTorch's two-sided formula for
// weights below and above 0.5 (so a weight of 1 gives the end exactly) with its one rounding
// (fma), against that formula evaluated here and, for bfloat16, rounded once more.
TEST(ElementwiseLarge, LerpWithOneWeightUsesTheTwoSidedFormula) {
  for (int64_t n : {int64_t(37), int64_t(4099), int64_t(100003)}) {
    const std::vector<double> av = random_values(size_t(n), -50, 50, 51),
                              bv = random_values(size_t(n), -50, 50, 52);
    for (DType dt : {DType::F32, DType::BF16}) {
      const Tensor ta = make(av, {n}, dt, Device(DeviceType::CPU, 0));
      const Tensor tb = make(bv, {n}, dt, Device(DeviceType::CPU, 0));
      const std::vector<float> a = ta.to(DType::F32).to_vector<float>(),
                               b = tb.to(DType::F32).to_vector<float>();
      for (double wd : {0.3, 0.7, 1.0, -0.25, 0.5}) {
        const float w = float(wd);  // a number weight stays float32 for bfloat16 (torch)
        std::vector<float> want(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          const float x = a[size_t(i)], y = b[size_t(i)];
          const float r =
              std::fabs(w) < 0.5f ? std::fma(w, y - x, x) : std::fma(w - 1.0f, y - x, y);
          want[size_t(i)] = dt == DType::F32 ? r : float(BFloat16(r));
        }
        EXPECT_EQ(lerp(ta, tb, wd).to(DType::F32).to_vector<float>(), want)
            << dtype_name(dt) << " n " << n << " weight " << wd;
      }
    }
  }
}

// where selects through a bit mask on the element's word: every element size, a random
// condition (no pattern for a branch predictor to learn), broadcast operands, and values whose
// bits must survive the move (NaN, -0, the integer extremes), against the host selection.
TEST(ElementwiseLarge, WhereSelectsEveryElementSizeExactly) {
  const int64_t rows = 300, cols = 257;
  std::vector<double> av = random_values(size_t(rows * cols), -100, 100, 41);
  std::vector<double> bv = random_values(size_t(cols), -100, 100, 42);
  std::vector<double> cv = random_values(size_t(rows * cols), 0, 1, 43);
  av[5] = -0.0;
  av[6] = 127;
  bv[3] = -128;
  std::vector<bool> cond_host;
  for (double c : cv) cond_host.push_back(c < 0.5);
  Tensor cond = lt(make(cv, {rows, cols}, DType::F64, kCpu), Scalar(0.5));
  for (DType dt : {DType::Bool, DType::I8, DType::U8, DType::I16, DType::BF16, DType::F16,
                   DType::I32, DType::F32, DType::I64, DType::F64}) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<double> a = av, b = bv;
    if (dt == DType::U8) {
      for (double& x : a) x = std::fabs(x);
      for (double& x : b) x = std::fabs(x);
    }
    if (is_floating(dt)) a[7] = NAN;
    Tensor ta = make(a, {rows, cols}, dt, kCpu), tb = make(b, {1, cols}, dt, kCpu);
    const std::vector<double> ga = ta.to_vector<double>(), gb = tb.to_vector<double>();
    const std::vector<double> got = where(cond, ta, tb).to_vector<double>();
    for (int64_t i = 0; i < rows * cols; ++i) {
      const double want = cond_host[size_t(i)] ? ga[size_t(i)] : gb[size_t(i % cols)];
      const double g = got[size_t(i)];
      ASSERT_TRUE((std::isnan(want) && std::isnan(g)) ||
                  (g == want && std::signbit(g) == std::signbit(want)))
          << "at " << i << ": got " << g << ", want " << want;
    }
  }
}

}  // namespace
}  // namespace kiln::test
