// Reductions over many short runs (sum / amax / prod(-1) of [R, n] with n up to four lane
// vectors): the CPU reduces them four rows at a time with the rows transposed in registers.
// Every result must be the one the single-run code gives: each row equal, bit for bit, to
// the same row reduced alone; float32 sums and products of fewer than 32 values are the
// float64 sum / product of the values in order rounded once; maxima / minima of fewer than 32
// values are the first value equal to the extremum (-0 / +0 ties keep the earlier one); NaN
// wherever a row holds one; for contiguous and strided rows and any row count.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kiln/runtime/threads.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

uint64_t bits_of(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

struct RowRef {
  double sum = 0;  // float64, in order from +0.0
  double abs_sum = 0;
  double prod = 1;  // float64, in order from 1.0
  double max = 0, min = 0;
  bool nan = false;
};

RowRef row_reference(const std::vector<double>& v, int64_t row, int64_t n) {
  RowRef r;
  r.max = r.min = v[size_t(row * n)];
  for (int64_t j = 0; j < n; ++j) {
    const double x = v[size_t(row * n + j)];
    r.sum += x;
    r.abs_sum += std::fabs(x);
    r.prod *= x;
    r.nan = r.nan || std::isnan(x);
    if (x > r.max) r.max = x;  // strict: a tie keeps the earlier value (-0 before +0)
    if (x < r.min) r.min = x;
  }
  return r;
}

// Rows of n values with specials in a few of them: NaN, +-inf, both infinities (a NaN sum),
// and rows of zeros whose signs decide which zero a maximum or minimum keeps.
std::vector<double> short_rows(int64_t rows, int64_t n, DType t, uint32_t seed) {
  std::vector<double> v = rounded(random_values(size_t(rows * n), -2.0, 3.0, seed), t);
  auto at = [&](int64_t r, int64_t j) -> double& { return v[size_t(r * n + (j % n))]; };
  at(5, n - 1) = NAN;
  at(9, 0) = INFINITY;
  at(14, n / 2) = -INFINITY;
  at(22, 1) = INFINITY;
  at(22, n - 1) = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    at(30, j) = j % 2 ? 0.0 : -0.0;  // -0 first
    at(31, j) = j % 2 ? -0.0 : 0.0;  // +0 first
  }
  at(40, 0) = NAN;
  // Orders matter: zeros of random signs after a -1 (the first zero is the maximum), and
  // 2^60 and -2^60 among small values: the float64 sum in order keeps only the values after
  // both (2^60 absorbs the ones before it), so any reordering across them shows.
  std::mt19937 rng(seed);
  for (int64_t r = 41; r < 61; ++r)
    for (int64_t j = 0; j < n; ++j) at(r, j) = j == 0 ? -1.0 : (rng() % 2 ? 0.0 : -0.0);
  for (int64_t r = 61; r < 101 && n > 1; ++r) {
    const int64_t p = int64_t(rng() % uint32_t(n)), q = (p + 1 + rng() % uint32_t(n - 1)) % n;
    at(r, p) = std::ldexp(1.0, 60);
    at(r, q) = -std::ldexp(1.0, 60);
  }
  return v;
}

void check_rows(const Tensor& x, const std::vector<double>& v, int64_t rows, int64_t n, DType t,
                const std::string& what) {
  const std::vector<double> s = sum(x, {1}, false).to_vector<double>();
  const std::vector<double> m = kiln::mean(x, {1}, false).to_vector<double>();
  const std::vector<double> hi = amax(x, {1}, false).to_vector<double>();
  const std::vector<double> lo = amin(x, {1}, false).to_vector<double>();
  const std::vector<double> p = prod(x, 1, false).to_vector<double>();
  const double tol = t == DType::F32 ? 0.0 : 1.0 / 128;
  for (int64_t r = 0; r < rows; ++r) {
    const std::string at = what + " row " + std::to_string(r);
    const RowRef ref = row_reference(v, r, n);
    for (const auto& [name, got, want] :
         {std::tuple{"sum", s[size_t(r)], ref.sum},
          std::tuple{"mean", m[size_t(r)], ref.sum / double(n)}}) {
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << name << " " << at;
      } else if (std::isinf(want)) {
        EXPECT_EQ(got, want) << name << " " << at;
      } else if (t == DType::F32 && n < 32) {
        EXPECT_EQ(got, double(float(want))) << name << " " << at;  // rounded once: exact
      } else {  // bfloat16, or two lane vectors: pairs added in float first
        const double scale = std::string(name) == "mean" ? 1.0 / double(n) : 1.0;
        EXPECT_NEAR(got, want, tol * std::fabs(want) + 1e-6 * ref.abs_sum * scale + 1e-6)
            << name << " " << at;
      }
    }
    const double got_prod = p[size_t(r)], want_prod = round_to(ref.prod, t);  // may overflow
    if (std::isnan(ref.prod)) {
      EXPECT_TRUE(std::isnan(got_prod)) << "prod " << at;
    } else if ((t == DType::F32 && n < 32) || std::isinf(want_prod)) {
      EXPECT_EQ(got_prod, want_prod) << "prod " << at;  // rounded once: exact
    } else {  // bfloat16, or lane products multiplied in a tree
      EXPECT_NEAR(got_prod, want_prod, (t == DType::F32 ? 1e-6 : tol) * std::fabs(want_prod))
          << "prod " << at;
    }
    if (ref.nan) {
      EXPECT_TRUE(std::isnan(hi[size_t(r)])) << "amax " << at;
      EXPECT_TRUE(std::isnan(lo[size_t(r)])) << "amin " << at;
    } else if (n < 32) {
      EXPECT_EQ(bits_of(hi[size_t(r)]), bits_of(ref.max)) << "amax " << at << ": " << ref.max;
      EXPECT_EQ(bits_of(lo[size_t(r)]), bits_of(ref.min)) << "amin " << at << ": " << ref.min;
    } else {  // two accumulators over alternate vectors: a tie of -0 and +0 may keep either
      EXPECT_EQ(hi[size_t(r)], ref.max) << "amax " << at;
      EXPECT_EQ(lo[size_t(r)], ref.min) << "amin " << at;
    }
  }
  // Each row alone takes the single-run code: the same bits (bfloat16 included).
  for (int64_t r : {int64_t(0), int64_t(3), int64_t(22), int64_t(30), int64_t(45), int64_t(50),
                    int64_t(70), rows - 1}) {
    const Tensor one = x.slice(0, r, r + 1);
    EXPECT_EQ(bits_of(sum(one, {1}, false).to_vector<double>()[0]), bits_of(s[size_t(r)]))
        << "sum alone " << what << " row " << r;
    EXPECT_EQ(bits_of(amax(one, {1}, false).to_vector<double>()[0]), bits_of(hi[size_t(r)]))
        << "amax alone " << what << " row " << r;
    EXPECT_EQ(bits_of(prod(one, 1, false).to_vector<double>()[0]), bits_of(p[size_t(r)]))
        << "prod alone " << what << " row " << r;
  }
}

TEST(ReductionShortRuns, EveryLengthUpToFourVectorsContiguousAndStrided) {
  const Device cpu(DeviceType::CPU, 0);
  for (DType t : {DType::F32, DType::BF16}) {
    for (int64_t n = 1; n <= 66; ++n) {
      const int64_t rows = 203;  // not a multiple of four: the last rows go one at a time
      const std::string what = std::string(dtype_name(t)) + " n=" + std::to_string(n);
      const std::vector<double> v = short_rows(rows, n, t, uint32_t(500 + n));
      check_rows(make(v, {rows, n}, t, cpu), v, rows, n, t, what + " contiguous");
      // The same rows inside wider ones: a row stride of n + 5.
      std::vector<double> wide(size_t(rows * (n + 5)), 99.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) wide[size_t(r * (n + 5) + 2 + j)] = v[size_t(r * n + j)];
      const Tensor strided = make(wide, {rows, n + 5}, t, cpu).slice(1, 2, 2 + n);
      check_rows(strided, v, rows, n, t, what + " strided");
    }
  }
}

TEST(ReductionShortRuns, ManyRowsSplitAcrossThreadsKeepTheBits) {
  const Device cpu(DeviceType::CPU, 0);
  for (DType t : {DType::F32, DType::BF16}) {
    for (int64_t n : {int64_t(3), int64_t(8), int64_t(16), int64_t(31), int64_t(32), int64_t(50)}) {
      const int64_t rows = 40001;
      const std::vector<double> v = short_rows(rows, n, t, uint32_t(900 + n));
      const Tensor x = make(v, {rows, n}, t, cpu);
      auto run = [&](int threads) {
        const int before = get_num_threads();
        set_num_threads(threads);
        std::vector<double> out = sum(x, {1}, false).to_vector<double>();
        const std::vector<double> hi = amax(x, {1}, false).to_vector<double>();
        out.insert(out.end(), hi.begin(), hi.end());
        set_num_threads(before);
        return out;
      };
      const std::vector<double> one = run(1), two = run(2);
      ASSERT_EQ(one.size(), two.size());
      for (size_t i = 0; i < one.size(); ++i)
        ASSERT_EQ(bits_of(one[i]), bits_of(two[i])) << dtype_name(t) << " n=" << n << " at " << i;
      check_rows(x, v, rows, n, t, std::string(dtype_name(t)) + " n=" + std::to_string(n));
    }
  }
}

}  // namespace
}  // namespace kiln::test
