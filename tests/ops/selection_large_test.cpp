// sort and topk on tensors large enough to be split over threads, with many ties (the kernels
// break ties by index so that std::sort and std::partial_sort reproduce a stable sort), along
// the last and a leading dim; the 2-norm along a dim (the vector reduction path); pow with the
// exponents that take branch-free loops. References: std::stable_sort and float64 math here.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "ops/test_util.h"

namespace kiln::test {
namespace {

// x[r, c] = ((r * 131 + c * 17) mod 23) - 11, with NaN at a few places: ties everywhere.
Tensor tied(int64_t rows, int64_t cols, DType dt) {
  std::vector<double> v(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      v[size_t(r * cols + c)] = (r * 131 + c * 17) % 23 - 11 + ((r + c) % 97 == 5 ? NAN : 0.0);
  return tensor_from(v, {rows, cols}).to(dt);
}

// The first k (value, index) pairs of row r of v ([rows, cols]) by a stable sort; NaN largest.
std::vector<std::pair<double, int64_t>> stable_row(const std::vector<double>& v, int64_t cols,
                                                   int64_t r, bool descending, int64_t k) {
  std::vector<int64_t> order(static_cast<size_t>(cols));
  std::iota(order.begin(), order.end(), int64_t(0));
  auto key = [&](int64_t c) { return v[size_t(r * cols + c)]; };
  auto less = [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return descending ? less(key(b), key(a)) : less(key(a), key(b));
  });
  std::vector<std::pair<double, int64_t>> out;
  for (int64_t j = 0; j < k; ++j) out.push_back({key(order[size_t(j)]), order[size_t(j)]});
  return out;
}

void expect_rows(const Tensor& vals, const Tensor& idx, const std::vector<double>& v, int64_t cols,
                 bool descending, int64_t k) {
  const std::vector<double> gv = vals.to_vector<double>();
  const std::vector<double> gi = idx.to_vector<double>();
  const int64_t rows = vals.size(0);
  for (int64_t r = 0; r < rows; ++r) {
    const auto want = stable_row(v, cols, r, descending, k);
    for (int64_t j = 0; j < k; ++j) {
      const double got = gv[size_t(r * k + j)];
      ASSERT_TRUE(got == want[size_t(j)].first ||
                  (std::isnan(got) && std::isnan(want[size_t(j)].first)))
          << "row " << r << " rank " << j;
      ASSERT_EQ(int64_t(gi[size_t(r * k + j)]), want[size_t(j)].second)
          << "row " << r << " rank " << j;
    }
  }
}

TEST(SelectionLarge, SortAndTopkMatchAStableSort) {
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t rows = 200, cols = 300;
    Tensor x = tied(rows, cols, dt);
    const std::vector<double> v = x.to_vector<double>();
    for (bool desc : {false, true}) {
      auto [sv, si] = sort(x, 1, desc);
      expect_rows(sv, si, v, cols, desc, cols);
      for (int64_t k : {1, 5, 37, 299}) {  // partial_sort below n / 8, full sort above
        auto [tv, ti] = topk(x, k, 1, desc);
        expect_rows(tv, ti, v, cols, desc, k);
      }
      // Along dim 0 of the transpose: the same slices, strided.
      auto [cv, ci] = topk(x.t(), 7, 0, desc);
      expect_rows(cv.t().contiguous(), ci.t().contiguous(), v, cols, desc, 7);
    }
  }
}

TEST(SelectionLarge, NormTwoAndPowConstantExponents) {
  const int64_t rows = 130, cols = 700;
  std::vector<double> v(size_t(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(double(i) * 0.37) * 3.0;
  Tensor x = tensor_from(v, {rows, cols}).to(DType::F32);
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<double> n1 = norm(x, 2, {1}).to_vector<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += xv[size_t(r * cols + c)] * xv[size_t(r * cols + c)];
    ASSERT_NEAR(n1[size_t(r)], std::sqrt(s), std::sqrt(s) * 2e-7) << r;
  }
  const std::vector<double> n0 = norm(x, 2, {0}).to_vector<double>();  // strided: generic path
  for (int64_t c = 0; c < cols; ++c) {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) s += xv[size_t(r * cols + c)] * xv[size_t(r * cols + c)];
    ASSERT_NEAR(n0[size_t(c)], std::sqrt(s), std::sqrt(s) * 2e-7) << c;
  }
  // bfloat16 2-norm and variance along the rows (widened a block at a time).
  Tensor xb = x.to(DType::BF16);
  const std::vector<double> bv = xb.to_vector<double>();
  const std::vector<double> nb = norm(xb, 2, {1}).to_vector<double>();
  const std::vector<double> vb = var(xb, {1}).to_vector<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, mean = 0, m2 = 0;
    for (int64_t c = 0; c < cols; ++c) mean += bv[size_t(r * cols + c)] / double(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const double t = bv[size_t(r * cols + c)];
      s += t * t;
      m2 += (t - mean) * (t - mean);
    }
    ASSERT_NEAR(nb[size_t(r)], std::sqrt(s), std::sqrt(s) * 8e-3) << r;  // one bf16 rounding
    ASSERT_NEAR(vb[size_t(r)], m2 / double(cols - 1), m2 / double(cols - 1) * 8e-3) << r;
  }
  for (double e : {2.0, 3.0, 1.0, -1.0, 0.5, 2.5}) {
    const std::vector<double> got = pow(x, e).to_vector<double>();
    for (size_t i = 0; i < xv.size(); ++i) {
      const double want = std::pow(xv[i], e);
      if (std::isnan(want) || std::isinf(want)) {  // 0 ** -1 = inf, (-x) ** 0.5 = NaN
        ASSERT_TRUE(std::isnan(want) ? std::isnan(got[i]) : got[i] == want) << e << " " << xv[i];
        continue;
      }
      ASSERT_NEAR(got[i], want, std::fabs(want) * 4e-7 + 1e-30) << e << " " << xv[i];
    }
  }
}

// cumsum / cumprod of contiguous tensors along every dim (lines, four side by side with a
// remainder of three, and blocks of columns wider and narrower than the 256-column block),
// threaded sizes, float32 and int64 (wrapping), against running sums / products in float64 /
// int64 here.
TEST(SelectionLarge, CumsumAndCumprodAlongEveryDim) {
  const Shape shape = {3, 41, 300};
  const int64_t n = 3 * 41 * 300;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double((i * 37) % 11) - 5.0;
  for (DType dt : {DType::F32, DType::I64}) {
    Tensor x = tensor_from(v, shape).to(dt);
    for (int64_t dim = 0; dim < 3; ++dim) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " dim " + std::to_string(dim));
      int64_t inner = 1;
      for (int64_t k = dim + 1; k < 3; ++k) inner *= shape[size_t(k)];
      const int64_t L = shape[size_t(dim)];
      const std::vector<double> s = cumsum(x, dim).to_vector<double>();
      // int64 products wrap; they are compared while below 1e15.
      const double scale = dt == DType::F32 ? 4.0 : 1.0;
      const std::vector<double> p =
          cumprod(dt == DType::F32 ? x / scale : x, dim).to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t j = (i / inner) % L, start = i - j * inner;
        double want_s = 0, want_p = 1;
        for (int64_t t = 0; t <= j; ++t) {
          want_s += v[size_t(start + t * inner)];
          want_p *= v[size_t(start + t * inner)] / scale;
        }
        ASSERT_NEAR(s[size_t(i)], want_s, 1e-9) << i;
        if (dt == DType::F32) {
          ASSERT_NEAR(p[size_t(i)], want_p, std::fabs(want_p) * 1e-6 + 1e-30) << i;
        } else if (std::fabs(want_p) < 1e15) {
          ASSERT_EQ(p[size_t(i)], want_p) << i;
        }
      }
    }
  }
}

// bfloat16 lines along the last dim, four at a time through float32 chunks (a line longer
// than the 256-column chunk, a remainder line, threaded) or, under 16 values, converted one
// value at a time: each output is the float64 running value rounded to float32 and then to
// bfloat16, exactly.
TEST(SelectionLarge, CumsumAndCumprodOfBfloat16Lines) {
  for (const auto& [rows, L] : {std::pair<int64_t, int64_t>{61, 600}, {61, 9}, {45, 16}}) {
    SCOPED_TRACE("L = " + std::to_string(L));
    const int64_t n = rows * L;
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double((i * 37) % 11) - 5.0;
    Tensor x = tensor_from(v, {rows, L}).to(DType::BF16);
    for (bool is_prod : {false, true}) {
      SCOPED_TRACE(is_prod ? "cumprod" : "cumsum");
      const double scale = is_prod ? 4.0 : 1.0;  // powers of two: x / 4 is exact in bfloat16
      const std::vector<double> got =
          (is_prod ? cumprod(x / scale, 1) : cumsum(x, 1)).to_vector<double>();
      for (int64_t r = 0; r < rows; ++r) {
        double running = is_prod ? 1.0 : 0.0;
        for (int64_t j = 0; j < L; ++j) {
          const double e = v[size_t(r * L + j)] / scale;
          running = is_prod ? running * e : running + e;
          ASSERT_EQ(got[size_t(r * L + j)], round_to(running, DType::BF16)) << r << ", " << j;
        }
      }
    }
  }
}

// max / min with indices and argmax / argmin along a leading dim (the column-block path)
// and the last dim, with ties (the first extremum wins) and NaN (the first NaN wins), threaded
// sizes, keepdim, against a scan written here.
TEST(SelectionLarge, ExtremaWithIndicesAlongEveryDim) {
  const Shape shape = {3, 300, 70};
  const int64_t n = 3 * 300 * 70;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = double((i * 53) % 17) + ((i % 331) == 7 ? NAN : 0.0);
  for (DType dt : {DType::F32, DType::BF16, DType::I64}) {
    std::vector<double> vv = v;
    if (dt == DType::I64)
      for (double& e : vv) e = std::isnan(e) ? -3.0 : e;
    Tensor x = tensor_from(vv, shape).to(dt);
    for (int64_t dim = 0; dim < 3; ++dim) {
      for (bool is_max : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " dim " + std::to_string(dim) +
                     (is_max ? " max" : " min"));
        int64_t inner = 1;
        for (int64_t k = dim + 1; k < 3; ++k) inner *= shape[size_t(k)];
        const int64_t L = shape[size_t(dim)], outer = n / (L * inner);
        auto [vals, idx] = is_max ? max(x, dim, true) : min(x, dim, true);
        const Tensor arg = is_max ? argmax(x, dim) : argmin(x, dim);
        const std::vector<double> gv = vals.to_vector<double>(), gi = idx.to_vector<double>();
        const std::vector<double> ga = arg.to_vector<double>();
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t c = 0; c < inner; ++c) {
            double best = vv[size_t(o * L * inner + c)];
            int64_t bi = 0;
            for (int64_t j = 1; j < L && !std::isnan(best); ++j) {
              const double e = vv[size_t((o * L + j) * inner + c)];
              if (std::isnan(e) || (is_max ? e > best : e < best)) best = e, bi = j;
            }
            const size_t k = size_t(o * inner + c);
            ASSERT_EQ(int64_t(gi[k]), bi) << o << " " << c;
            ASSERT_EQ(int64_t(ga[k]), bi) << o << " " << c;
            ASSERT_TRUE(std::isnan(best) ? std::isnan(gv[k]) : gv[k] == best) << o << " " << c;
          }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
