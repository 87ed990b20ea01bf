// Reductions of large float32/bfloat16 tensors: the sizes and layouts that take the CPU's
// vectorised, threaded path (contiguous runs split into chunks across threads; kept
// innermost dims accumulated row by row in column blocks with tails), against float64
// references computed on host vectors. Also a non-contiguous input (generic path) and NaN
// placed in the middle of a long run (max/min must propagate it from any chunk, and from any
// of the runs a thread reads side by side).
#include <cmath>
#include <limits>
#include <tuple>

#include "kiln/ops/normalization.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

struct RefResult {
  std::vector<double> sum, max, min, var;
};

// Reduces a row-major [outer, red, inner] host array over the middle dim.
RefResult reference(const std::vector<double>& v, int64_t outer, int64_t red, int64_t inner,
                    double correction) {
  RefResult r;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double s = 0, mx = -INFINITY, mn = INFINITY;
      bool nan = false;
      for (int64_t k = 0; k < red; ++k) {
        double x = v[size_t((o * red + k) * inner + i)];
        s += x;
        nan = nan || std::isnan(x);
        mx = std::max(mx, x);
        mn = std::min(mn, x);
      }
      double mean = s / double(red), ss = 0;
      for (int64_t k = 0; k < red; ++k) {
        double d = v[size_t((o * red + k) * inner + i)] - mean;
        ss += d * d;
      }
      r.sum.push_back(s);
      r.max.push_back(nan ? NAN : mx);
      r.min.push_back(nan ? NAN : mn);
      r.var.push_back(ss / std::max(0.0, double(red) - correction));
    }
  return r;
}

void expect_near_all(const Tensor& t, const std::vector<double>& ref, double rtol, double atol,
                     const std::string& what) {
  std::vector<double> got = t.contiguous().to_vector<double>();
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(ref[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
      continue;
    }
    if (got[i] == ref[i]) continue;  // infinities included
    EXPECT_NEAR(got[i], ref[i], atol + rtol * std::fabs(ref[i])) << what << " at " << i;
  }
}

struct Case {
  int64_t outer, red, inner;
};

// Reduces [outer, red, inner] over dim 1 (and the whole tensor when outer == inner == 1).
void check_case(const Case& c, DType dtype, bool with_nan) {
  const int64_t n = c.outer * c.red * c.inner;
  std::vector<double> vals = random_values(size_t(n), -2.0, 3.0, uint32_t(n + c.red));
  if (with_nan) vals[size_t(n / 2 + 7)] = NAN;
  for (double& v : vals) v = round_to(v, dtype);
  Tensor x = make(vals, {c.outer, c.red, c.inner}, dtype, Device(DeviceType::CPU, 0));
  const std::string what = std::string(dtype_name(dtype)) + " [" + std::to_string(c.outer) +
                           "," + std::to_string(c.red) + "," + std::to_string(c.inner) + "]" +
                           (with_nan ? " nan" : "");
  RefResult r = reference(vals, c.outer, c.red, c.inner, 1.0);
  // float32 sums accumulate in double and round once; bfloat16 results round to 8 bits.
  const double rtol = dtype == DType::F32 ? 1e-6 : 8e-3;
  const double atol = dtype == DType::F32 ? 1e-4 : 0.05 * std::sqrt(double(c.red));
  expect_near_all(sum(x, {1}, false), r.sum, rtol, atol, what + " sum");
  std::vector<double> mean = r.sum;
  for (double& m : mean) m /= double(c.red);
  expect_near_all(kiln::mean(x, {1}, false), mean, rtol, atol / double(c.red) + 1e-6,
                  what + " mean");
  expect_near_all(amax(x, {1}, false), r.max, 0, 0, what + " amax");
  expect_near_all(amin(x, {1}, true).squeeze(1), r.min, 0, 0, what + " amin");
  if (!with_nan) {
    expect_near_all(var(x, {1}, 1.0, false), r.var, dtype == DType::F32 ? 1e-5 : 1e-2, 1e-6,
                    what + " var");
    // The 2-norm: squares summed from 0 (bfloat16 widened in registers).
    std::vector<double> norms(size_t(c.outer * c.inner), 0.0);
    for (int64_t o = 0; o < c.outer; ++o)
      for (int64_t k = 0; k < c.red; ++k)
        for (int64_t i = 0; i < c.inner; ++i) {
          const double v = vals[size_t((o * c.red + k) * c.inner + i)];
          norms[size_t(o * c.inner + i)] += v * v;
        }
    for (double& v : norms) v = std::sqrt(v);
    expect_near_all(norm(x, 2, {1}), norms, dtype == DType::F32 ? 1e-5 : 8e-3, 1e-6,
                    what + " norm");
  }
}

TEST(ReductionLarge, ContiguousRunsSplitAcrossThreads) {
  for (DType t : {DType::F32, DType::BF16}) {
    check_case({1, 1 << 19, 1}, t, false);   // one long run: chunked
    check_case({1, 300007, 1}, t, true);     // odd length with NaN in a middle chunk
    check_case({5, 70001, 1}, t, false);     // fewer outputs than chunks per thread
    check_case({6, 9001, 1}, t, true);       // runs read three side by side, NaN in one
    check_case({3000, 37, 1}, t, false);     // many short runs
    check_case({4096, 8, 1}, t, true);       // runs shorter than a vector, NaN in one
    check_case({5000, 3, 1}, t, false);
    check_case({256, 784, 1}, t, true);      // short runs, fewer than one block per thread
  }
}

// Many short runs at equal spacing go through the strided-runs functions: the channels of a
// channels-last tensor (runs C apart) against the same reduction of the contiguous tensor
// (rows layout), and runs whose kept dims do not collapse to one stride (a narrowed view,
// per-run calls) against its contiguous copy (strided-runs calls): the same per-run code, so
// the same bits.
TEST(ReductionLarge, ShortRunsOfChannelsLastAndNarrowedInputs) {
  const Device cpu(DeviceType::CPU, 0);
  for (DType t : {DType::F32, DType::BF16}) {
    std::vector<double> vals = random_values(size_t(4 * 40 * 9 * 11), -2.0, 3.0, 31);
    vals[777] = NAN;
    Tensor x = make(vals, {4, 40, 9, 11}, t, cpu);
    Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
    const double tol = t == DType::F32 ? 1e-5 : 2e-2;
    expect_near_all(sum(cl, {1}, false), sum(x, {1}, false).to_vector<double>(), tol, tol,
                    "channels-last sum");
    expect_near_all(kiln::mean(cl, {1}, true), kiln::mean(x, {1}, true).to_vector<double>(), tol,
                    tol, "channels-last mean");
    expect_near_all(amax(cl, {1}, false), amax(x, {1}, false).to_vector<double>(), 0, 0,
                    "channels-last amax");
    expect_near_all(amin(cl, {1}, false), amin(x, {1}, false).to_vector<double>(), 0, 0,
                    "channels-last amin");
    Tensor wide = make(random_values(size_t(64 * 50 * 24), -2.0, 3.0, 32), {64, 50, 24}, t, cpu);
    Tensor narrowed = wide.slice(1, 3, 48);  // kept dims [64, 45]: strides 1200 and 24
    Tensor copy = narrowed.contiguous();
    for (const auto& [name, got, want] :
         {std::tuple{"sum", sum(narrowed, {2}, false), sum(copy, {2}, false)},
          std::tuple{"amax", amax(narrowed, {2}, false), amax(copy, {2}, false)}}) {
      const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
      ASSERT_EQ(g.size(), w.size());
      for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], w[i]) << name << " at " << i;
    }
  }
}

TEST(ReductionLarge, KeptInnerDimAccumulatedByRows) {
  for (DType t : {DType::F32, DType::BF16}) {
    check_case({1, 5000, 37}, t, false);    // [R, C] over dim 0, one partial block
    check_case({2, 700, 2500}, t, true);    // three column blocks with a tail, NaN
    check_case({4, 3, 16}, t, false);       // one vector of columns
    check_case({1, 4096, 8}, t, true);      // fewer columns than a vector (sum(0) of [R, 8])
    check_case({2, 300, 5}, t, false);
    check_case({1, 3001, 2}, t, false);     // columns dividing 16, summed as one flat block
    check_case({1, 999, 4}, t, true);
    check_case({1, 777, 16}, t, false);
    check_case({1, 2048, 512}, t, true);    // one row of blocks, split so both threads work
  }
}

// The column blocks of the rows layout are narrowed to give every thread work; columns are
// summed independently, so one thread and two give the same bits.
TEST(ReductionLarge, RowsLayoutSplitKeepsTheBits) {
  const Device cpu(DeviceType::CPU, 0);
  for (DType t : {DType::F32, DType::BF16}) {
    Tensor x = make(random_values(size_t(2048 * 520), -2.0, 3.0, 33), {2048, 520}, t, cpu);
    const int saved = get_num_threads();
    set_num_threads(1);
    const std::vector<double> one = sum(x, {0}, false).to_vector<double>();
    set_num_threads(2);
    const std::vector<double> two = sum(x, {0}, false).to_vector<double>();
    set_num_threads(saved);
    ASSERT_EQ(one.size(), two.size());
    for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(one[i], two[i]) << dtype_name(t) << " " << i;
  }
}

TEST(ReductionLarge, FullReductionAndTransposedInputAgree) {
  std::vector<double> vals = random_values(size_t(600 * 700), -1.0, 1.0, 11);
  Tensor x = make(vals, {600, 700}, DType::F32, Device(DeviceType::CPU, 0));
  double s = 0;
  for (double v : vals) s += double(float(v));
  EXPECT_NEAR(sum(x).item<double>(), s, 1e-3);
  // The transpose reduces through strides (generic path) and must give the same sums.
  Tensor a = sum(x, {0}, false), b = sum(x.t().contiguous().t(), {0}, false);
  expect_near_all(b, a.to_vector<double>(), 1e-6, 1e-5, "transposed");
  Tensor c = sum(x.t(), {1}, false);
  expect_near_all(c, a.to_vector<double>(), 1e-6, 1e-5, "strided view");
}

// prod over many contiguous runs (threaded, the ISA's double-lane products): against the
// float64 product of the same values, with rows holding a zero, a NaN, inf and inf times zero.
TEST(ReductionLarge, ProductsOfManyRuns) {
  const Device cpu(DeviceType::CPU, 0);
  const int64_t rows = 300, cols = 517;
  std::vector<double> v = random_values(size_t(rows * cols), 0.9, 1.1, 41);
  v[size_t(1 * cols + 5)] = 0;
  v[size_t(2 * cols + 516)] = NAN;
  v[size_t(3 * cols + 7)] = INFINITY;
  v[size_t(4 * cols + 8)] = INFINITY;
  v[size_t(4 * cols + 9)] = 0;
  for (DType t : {DType::F32, DType::BF16}) {
    std::vector<double> r = v;
    for (double& x : r) x = round_to(x, t);
    Tensor x = make(r, {rows, cols}, t, cpu);
    std::vector<double> want;
    for (int64_t i = 0; i < rows; ++i) {
      double p = 1;
      for (int64_t j = 0; j < cols; ++j) p *= r[size_t(i * cols + j)];
      want.push_back(round_to(p, t));
    }
    expect_near_all(prod(x, 1, false), want, t == DType::F32 ? 1e-6 : 8e-3, 0,
                    std::string(dtype_name(t)) + " prod");
    // Two kept dims (the listed-offsets path), with keepdim (output strides of a kept 1), and
    // a view whose kept dims do not merge (every other row).
    Tensor x3 = x.reshape({20, 15, cols});
    expect_near_all(prod(x3, -1, false), want, t == DType::F32 ? 1e-6 : 8e-3, 0,
                    std::string(dtype_name(t)) + " prod of [20, 15, 517]");
    expect_near_all(prod(x3, -1, true), want, t == DType::F32 ? 1e-6 : 8e-3, 0,
                    std::string(dtype_name(t)) + " prod, keepdim");
    Tensor every_other = x3.slice(1, 0, 15, 2);  // [20, 8, 517]
    std::vector<double> want_eo;
    for (int64_t a = 0; a < 20; ++a)
      for (int64_t b = 0; b < 15; b += 2) want_eo.push_back(want[size_t(a * 15 + b)]);
    expect_near_all(prod(every_other, -1, false), want_eo, t == DType::F32 ? 1e-6 : 8e-3, 0,
                    std::string(dtype_name(t)) + " prod of a strided view");
  }
}

// float32 values whose squared deviations pass float32's range (|x| up to 3e20): std, the
// 2-norm and layer_norm hold their float64 values (the variance itself, 1e40, is infinite in
// float32 for var as for PyTorch). The vector path sums squares in float lanes and must fall
// back to double lanes there.
TEST(ReductionLarge, SquaredDeviationsBeyondFloat32) {
  // Row r of 1024 values in float64: the mean, the squared deviations and the squares.
  struct RowStats {
    double mean, ss, sq;
  };
  auto row_stats = [](const std::vector<double>& v, int64_t r) {
    RowStats st{0, 0, 0};
    for (int64_t j = 0; j < 1024; ++j) st.mean += v[size_t(r * 1024 + j)];
    st.mean /= 1024;
    for (int64_t j = 0; j < 1024; ++j) {
      const double x = v[size_t(r * 1024 + j)];
      st.ss += (x - st.mean) * (x - st.mean);
      st.sq += x * x;
    }
    return st;
  };
  const Device cpu(DeviceType::CPU, 0);
  std::vector<double> vals = random_values(4096, -3e20, 3e20, 21);
  Tensor x = make(vals, {4, 1024}, DType::F32, cpu);
  {
    // bfloat16 (float32's range): std and the 2-norm through the double-lane fallback too.
    const Tensor xb = x.to(DType::BF16);
    const std::vector<double> vb = values(xb);
    const std::vector<double> sdb = values(std(xb, {1})), nrmb = values(norm(xb, 2, {1}));
    for (int64_t r = 0; r < 4; ++r) {
      const auto [mean, ss, sq] = row_stats(vb, r);
      EXPECT_NEAR(sdb[size_t(r)], std::sqrt(ss / 1023), 8e-3 * std::sqrt(ss / 1023)) << r;
      EXPECT_NEAR(nrmb[size_t(r)], std::sqrt(sq), 8e-3 * std::sqrt(sq)) << r;
    }
  }
  const std::vector<double> xf = values(x);
  const std::vector<double> sd = values(std(x, {1})), nrm = values(norm(x, 2, {1}));
  const std::vector<double> ln =
      values(std::get<0>(native_layer_norm(x, 1, Tensor(), Tensor(), 1e-5)));
  for (int64_t r = 0; r < 4; ++r) {
    const auto [mean, ss, sq] = row_stats(xf, r);
    EXPECT_NEAR(sd[size_t(r)], std::sqrt(ss / 1023), 1e-5 * std::sqrt(ss / 1023)) << r;
    EXPECT_NEAR(nrm[size_t(r)], std::sqrt(sq), 1e-5 * std::sqrt(sq)) << r;
    const double rstd = 1 / std::sqrt(ss / 1024);
    for (int64_t j = 0; j < 1024; j += 97)
      EXPECT_NEAR(ln[size_t(r * 1024 + j)], (xf[size_t(r * 1024 + j)] - mean) * rstd, 1e-4)
          << r << ", " << j;
  }
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

template <typename F>
std::vector<double> with_threads(int threads, F f) {
  const int saved = get_num_threads();
  set_num_threads(threads);
  std::vector<double> v = f().contiguous().template to_vector<double>();
  set_num_threads(saved);
  return v;
}

void expect_same_bits(const std::vector<double>& a, const std::vector<double>& b,
                      const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_TRUE(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) << what << " at " << i;
}

// Kept dims adjacent in memory are merged into one row for the rows layout (the [28, 28]
// image of sum(1) over NCHW): the same bits as the reduction over the flattened image, with
// and without keepdim; a narrowed view whose kept dims do not merge gives its contiguous
// copy's bits. Short runs are split so every thread works: one thread and two agree.
TEST(ReductionLarge, MergedKeptDimsAndSplitShortRuns) {
  const Device cpu(DeviceType::CPU, 0);
  for (DType t : {DType::F32, DType::BF16}) {
    const std::string dt(dtype_name(t));
    std::vector<double> vals = random_values(size_t(8 * 32 * 28 * 28), -2.0, 3.0, 34);
    vals[5000] = NAN;
    Tensor x = make(vals, {8, 32, 28, 28}, t, cpu);
    Tensor flat = x.reshape({8, 32, 784});
    expect_same_bits(sum(x, {1}, false).to_vector<double>(),
                     sum(flat, {1}, false).to_vector<double>(), dt + " sum(1)");
    expect_same_bits(kiln::mean(x, {1}, true).contiguous().to_vector<double>(),
                     kiln::mean(flat, {1}, true).contiguous().to_vector<double>(),
                     dt + " mean(1, keepdim)");
    expect_same_bits(amax(x, {1}, false).to_vector<double>(),
                     amax(flat, {1}, false).to_vector<double>(), dt + " amax(1)");
    Tensor narrowed = x.slice(3, 2, 25);
    expect_same_bits(sum(narrowed, {1}, false).to_vector<double>(),
                     sum(narrowed.contiguous(), {1}, false).to_vector<double>(),
                     dt + " narrowed sum(1)");
    for (bool cl : {false, true}) {
      Tensor in = cl ? x.contiguous(MemoryFormat::ChannelsLast) : x;
      auto mean23 = [&] { return kiln::mean(in, {2, 3}, false); };
      auto sum1 = [&] { return sum(in, {1}, false); };
      expect_same_bits(with_threads(1, mean23), with_threads(2, mean23), dt + " mean(2, 3)");
      expect_same_bits(with_threads(1, sum1), with_threads(2, sum1), dt + " sum(1)");
    }
  }
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// The extremum of a run keeps two accumulators over alternate vectors: a NaN at any position
// of a run (either accumulator's vectors, the tail) makes amax / amin NaN, and without NaN
// the result is the run's true extremum, for runs read one at a time and side by side.
TEST(ReductionLarge, ExtremumSeesNaNAtEveryPosition) {
  const Device cpu(DeviceType::CPU, 0);
  for (DType t : {DType::F32, DType::BF16}) {
    for (int64_t n : {int64_t(64), int64_t(300), int64_t(5000)}) {
      std::vector<double> base = random_values(size_t(n), -2.0, 3.0, uint32_t(40 + n));
      for (double& v : base) v = round_to(v, t);
      const double hi = *std::max_element(base.begin(), base.end());
      const double lo = *std::min_element(base.begin(), base.end());
      // Rows: the clean run, then the run with a NaN at position p, for every p.
      std::vector<double> rows = base;
      for (int64_t p = 0; p < n; p += (n > 300 ? 37 : 1)) {
        std::vector<double> r = base;
        r[size_t(p)] = NAN;
        rows.insert(rows.end(), r.begin(), r.end());
      }
      const int64_t count = int64_t(rows.size()) / n;
      Tensor x = make(rows, {count, n}, t, cpu);
      const std::vector<double> mx = amax(x, {1}, false).to_vector<double>();
      const std::vector<double> mn = amin(x, {1}, false).to_vector<double>();
      ASSERT_EQ(mx[0], hi) << dtype_name(t) << " n=" << n;
      ASSERT_EQ(mn[0], lo) << dtype_name(t) << " n=" << n;
      for (int64_t r = 1; r < count; ++r) {
        ASSERT_TRUE(std::isnan(mx[size_t(r)])) << dtype_name(t) << " n=" << n << " row " << r;
        ASSERT_TRUE(std::isnan(mn[size_t(r)])) << dtype_name(t) << " n=" << n << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
