// index_select, gather, scatter / scatter_add / scatter_reduce, masked_fill, masked_select
// and nonzero against host references computed with loops on std::vectors, in every dtype,
// on non-contiguous, 0-d and empty inputs, with out-of-range and shape errors, on every
// device.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ops/index_test_util.h"

namespace kiln {
namespace {

using test::bools;
using test::expect_error;
using test::expect_ints;
using test::expect_values;
using test::exact_values;
using test::ints;
using test::Layout;
using test::make;
using test::make_layout;
using test::OnEachDevice;
using test::ravel;
using test::unravel;

class IndexingTest : public OnEachDevice {};

// ---- references ----

std::vector<double> ref_index_select(const std::vector<double>& x, const Shape& xs, int64_t d,
                                     const std::vector<int64_t>& idx, Shape* out_shape) {
  Shape os = xs;
  os[size_t(d)] = int64_t(idx.size());
  std::vector<double> out(size_t(numel_of(os)));
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    auto c = unravel(i, os);
    c[size_t(d)] = idx[size_t(c[size_t(d)])];
    out[size_t(i)] = x[size_t(ravel(c, xs))];
  }
  *out_shape = os;
  return out;
}

std::vector<double> ref_gather(const std::vector<double>& x, const Shape& xs, int64_t d,
                               const std::vector<int64_t>& idx, const Shape& is) {
  std::vector<double> out(idx.size());
  for (int64_t i = 0; i < int64_t(idx.size()); ++i) {
    auto c = unravel(i, is);
    c[size_t(d)] = idx[size_t(i)];
    out[size_t(i)] = x[size_t(ravel(c, xs))];
  }
  return out;
}

// reduce: "" (plain scatter: last write), "sum", "prod", "mean", "amax", "amin".
std::vector<double> ref_scatter(const std::vector<double>& x, const Shape& xs, int64_t d,
                                const std::vector<int64_t>& idx, const Shape& is,
                                const std::vector<double>& src, const Shape& ss,
                                const std::string& reduce, bool include_self, bool integral) {
  std::vector<std::vector<double>> contrib(x.size());
  for (int64_t i = 0; i < int64_t(idx.size()); ++i) {
    auto c = unravel(i, is);
    double v = src[size_t(ravel(c, ss))];
    c[size_t(d)] = idx[size_t(i)];
    contrib[size_t(ravel(c, xs))].push_back(v);
  }
  std::vector<double> out = x;
  for (size_t t = 0; t < x.size(); ++t) {
    if (contrib[t].empty()) continue;
    if (reduce.empty()) {
      out[t] = contrib[t].back();
      continue;
    }
    std::vector<double> vs = contrib[t];
    if (include_self) vs.insert(vs.begin(), x[t]);
    double r = vs[0];
    for (size_t k = 1; k < vs.size(); ++k) {
      double v = vs[k];
      if (reduce == "sum" || reduce == "mean") r += v;
      else if (reduce == "prod") r *= v;
      else if (std::isnan(r) || std::isnan(v)) r = std::numeric_limits<double>::quiet_NaN();
      else if (reduce == "amax") r = std::max(r, v);
      else r = std::min(r, v);
    }
    if (reduce == "mean") r = integral ? std::floor(r / double(vs.size())) : r / double(vs.size());
    out[t] = r;
  }
  return out;
}

std::vector<int64_t> random_indices(size_t n, int64_t size, uint32_t seed) {
  auto v = test::random_values(n, 0, double(size), seed, true);
  return std::vector<int64_t>(v.begin(), v.end());
}

// ---- index_select ----

TEST_P(IndexingTest, IndexSelectEveryDtypeBothDims) {
  Shape xs{4, 5};
  for (DType t : test::all_dtypes()) {
    auto xv = exact_values(20, t, 1);
    Tensor x = make(xv, xs, t, device());
    for (int64_t d : {0, 1}) {
      std::vector<int64_t> idx = {3, 0, 3, 1};
      Shape os;
      auto e = ref_index_select(xv, xs, d, idx, &os);
      Tensor y = index_select(x, d, ints(idx, device()));
      EXPECT_EQ(y.dtype(), t);
      expect_values(y, os, e, std::string(dtype_name(t)) + " dim " + std::to_string(d));
    }
  }
}

TEST_P(IndexingTest, IndexSelectNonContiguousInputAndIndex) {
  Shape xs{3, 4, 6};
  auto xv = exact_values(72, DType::F32, 2);
  for (Layout l : {Layout::Transposed, Layout::Strided}) {
    Tensor x = make_layout(xv, xs, DType::F32, device(), l);
    // Every other element of [2, 9, 0, 9, 5, 9] -> [2, 0, 5].
    Tensor idx = ints({2, 9, 0, 9, 5, 9}, device()).slice(0, 0, std::nullopt, 2);
    ASSERT_FALSE(idx.is_contiguous());
    Shape os;
    auto e = ref_index_select(xv, xs, 2, {2, 0, 5}, &os);
    expect_values(index_select(x, -1, idx), os, e);
    e = ref_index_select(xv, xs, 1, {2, 0, 3}, &os);
    expect_values(index_select(x, 1, ints({2, 0, 3}, device(), DType::I32)), os, e, "int32");
  }
}

TEST_P(IndexingTest, IndexSelectZeroDimAndEmpty) {
  Tensor s = make({7.5}, {}, DType::F64, device());
  expect_values(index_select(s, 0, ints({0}, device())), {}, {7.5});
  Tensor x = make({1, 2, 3, 4, 5}, {5}, DType::I16, device());
  expect_values(index_select(x, 0, ints({3}, {}, device())), {1}, {4});
  expect_values(index_select(x, 0, ints({}, device())), {0}, {});
  Tensor e = make({}, {0, 3}, DType::F32, device());
  expect_values(index_select(e, 1, ints({2, 2}, device())), {0, 2}, {});
}

TEST_P(IndexingTest, IndexSelectOutOfRange) {
  Tensor x = make(exact_values(12, DType::F32, 3), {4, 3}, DType::F32, device());
  expect_error<IndexError>([&] { index_select(x, 0, ints({0, 4}, device())).cpu(); },
                           {"index 4 is out of bounds for dimension 0 with size 4"}, "too large");
  expect_error<IndexError>([&] { index_select(x, 1, ints({-1}, device())).cpu(); },
                           {"index -1 is out of bounds for dimension 1 with size 3"}, "negative");
  expect_error<IndexError>([&] { index_select(x, 2, ints({0}, device())); }, {"2"}, "bad dim");
}

TEST_P(IndexingTest, IndexSelectBadIndex) {
  Tensor x = make(exact_values(12, DType::F32, 3), {4, 3}, DType::F32, device());
  expect_error<Error>([&] { index_select(x, 0, make({0, 1}, {2}, DType::F32, device())); },
                          {"int64 or int32", "float32"});
  expect_error<IndexError>([&] { index_select(x, 0, ints({0, 1}, {1, 2}, device())); },
                           {"vector", "[1, 2]"});
}

// ---- gather ----

TEST_P(IndexingTest, GatherEveryDtype) {
  Shape xs{4, 5}, is{2, 3};
  for (DType t : test::all_dtypes()) {
    auto xv = exact_values(20, t, 4);
    Tensor x = make(xv, xs, t, device());
    auto i0 = random_indices(6, 4, 5), i1 = random_indices(6, 5, 6);
    expect_values(gather(x, 0, ints(i0, is, device())), is, ref_gather(xv, xs, 0, i0, is),
                  std::string(dtype_name(t)));
    expect_values(gather(x, 1, ints(i1, is, device(), DType::I32)), is,
                  ref_gather(xv, xs, 1, i1, is), std::string(dtype_name(t)) + " dim 1");
  }
}

TEST_P(IndexingTest, GatherNonContiguousAndNegativeDim) {
  Shape xs{3, 4, 5}, is{3, 2, 5};
  auto xv = exact_values(60, DType::F64, 7);
  auto iv = random_indices(30, 4, 8);
  for (Layout l : {Layout::Transposed, Layout::Strided}) {
    Tensor x = make_layout(xv, xs, DType::BF16, device(), l);
    Tensor idx = ints(iv, {3, 5, 2}, device()).transpose(1, 2);  // logical [3, 2, 5]
    std::vector<int64_t> logical(30);
    for (int64_t i = 0; i < 30; ++i) {
      auto c = unravel(i, is);
      logical[size_t(i)] = iv[size_t(ravel({c[0], c[2], c[1]}, {3, 5, 2}))];
    }
    expect_values(gather(x, -2, idx), is,
                  ref_gather(test::rounded(xv, DType::BF16), xs, 1, logical, is));
  }
}

TEST_P(IndexingTest, GatherZeroDimAndEmpty) {
  Tensor s = make({3}, {}, DType::I32, device());
  expect_values(gather(s, 0, ints({0}, {}, device())), {}, {3});
  Tensor x = make({1, 2, 3, 4}, {2, 2}, DType::F32, device());
  expect_values(gather(x, 1, ints({}, {2, 0}, device())), {2, 0}, {});
}

TEST_P(IndexingTest, GatherOutOfRange) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::F32, device());
  expect_error<Error>([&] { gather(x, 1, ints({0, 3}, {1, 2}, device())).cpu(); },
                           {"index 3 is out of bounds for dimension 1 with size 3"}, "too large");
  expect_error<Error>([&] { gather(x, 0, ints({-1}, {1, 1}, device())).cpu(); },
                           {"index -1 is out of bounds for dimension 0 with size 2"}, "negative");
}

// Dense rows along the last dim (x [R, 7], index [R, 5], the same leading dims) take one flat
// loop that checks each index row just before using it (from AVX2 up, 4- and 8-byte values:
// four indices per vector step, then a tail of one): serial and threaded row counts, and one
// bad value (too large, or negative) in the first, a middle or the last row.
TEST_P(IndexingTest, GatherDenseRowsCheckEveryRow) {
  for (DType t : {DType::F32, DType::F64}) {
    for (int64_t rows : {int64_t(3), int64_t(3000), int64_t(30000)}) {
      const Shape xs{rows, 7}, is{rows, 5};
      auto xv = exact_values(size_t(rows * 7), t, 71);
      Tensor x = make(xv, xs, t, device());
      auto iv = random_indices(size_t(rows * 5), 7, 72);
      expect_values(gather(x, 1, ints(iv, is, device())), is, ref_gather(xv, xs, 1, iv, is),
                    "rows " + std::to_string(rows));
      for (int64_t at : {int64_t(0), rows * 5 / 2 + 1, rows * 5 - 1}) {
        for (int64_t bad : {int64_t(7), int64_t(-2)}) {
          auto wrong = iv;
          wrong[size_t(at)] = bad;
          expect_error<Error>(  // RuntimeError in Python, as PyTorch's gather
              [&] { gather(x, 1, ints(wrong, is, device())).cpu(); },
              {"index " + std::to_string(bad) + " is out of bounds for dimension 1 with size 7"},
              "rows " + std::to_string(rows) + " at " + std::to_string(at));
        }
      }
    }
  }
}

TEST_P(IndexingTest, GatherShapeErrors) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::F32, device());
  expect_error<ShapeError>([&] { gather(x, 0, ints({0}, {1, 1, 1}, device())); },
                           {"same number of dimensions", "expected 2, got 3"});
  expect_error<ShapeError>([&] { gather(x, 0, ints({0, 0, 0, 0}, {1, 4}, device())); },
                           {"[1, 4]", "[2, 3]", "dimension 1"});
  expect_error<Error>([&] { gather(x, 0, bools({true}, {1, 1}, device())); }, {"bool"});
}

// ---- scatter ----

TEST_P(IndexingTest, ScatterSrcEveryDtype) {
  Shape xs{4, 3}, is{2, 3}, ss{3, 3};
  // Distinct targets per column, so the result does not depend on write order.
  std::vector<int64_t> iv = {3, 0, 1, 1, 2, 0};
  for (DType t : test::all_dtypes()) {
    auto xv = exact_values(12, t, 9), sv = exact_values(9, t, 10);
    bool integral = !is_floating(t);
    Tensor x = make(xv, xs, t, device());
    Tensor y = scatter(x, 0, ints(iv, is, device()), make(sv, ss, t, device()));
    expect_values(y, xs, ref_scatter(xv, xs, 0, iv, is, sv, ss, "", false, integral),
                  std::string(dtype_name(t)));
    expect_values(x, xs, xv, "input unchanged");
  }
}

TEST_P(IndexingTest, ScatterValueAndNonContiguous) {
  Shape xs{3, 4};
  auto xv = exact_values(12, DType::I64, 11);
  Tensor x = make_layout(xv, xs, DType::I64, device(), Layout::Transposed);
  std::vector<int64_t> iv = {2, 0, 3, 1, 1, 2};  // [3, 2] along dim 1, distinct per row
  Tensor idx = ints(iv, {3, 2}, device());
  std::vector<double> fill(6, -5);
  expect_values(scatter(x, 1, idx, Scalar(-5)), xs,
                ref_scatter(xv, xs, 1, iv, {3, 2}, fill, {3, 2}, "", false, true));
  auto sv = exact_values(24, DType::I64, 12);
  Tensor src = make_layout(sv, {3, 8}, DType::I64, device(), Layout::Strided);
  expect_values(scatter(x, 1, idx, src), xs,
                ref_scatter(xv, xs, 1, iv, {3, 2}, sv, {3, 8}, "", false, true));
  Tensor b = make({0, 0, 0}, {3}, DType::Bool, device());
  expect_values(scatter(b, 0, ints({2}, device()), Scalar(true)), {3}, {0, 0, 1});
  Tensor f = make({1, 2, 3}, {3}, DType::F16, device());
  expect_values(scatter(f, 0, ints({0, 2}, device()), Scalar(0.5)), {3}, {0.5, 2, 0.5});
}

TEST_P(IndexingTest, ScatterZeroDimAndEmptyIndex) {
  Tensor s = make({1}, {}, DType::F32, device());
  expect_values(scatter(s, 0, ints({0}, {}, device()), make({9}, {}, DType::F32, device())), {},
                {9});
  Tensor x = make({1, 2, 3}, {3}, DType::F32, device());
  expect_values(scatter(x, 0, ints({}, device()), Scalar(7)), {3}, {1, 2, 3});
}

TEST_P(IndexingTest, ScatterOutOfRangeWritesNothing) {
  Tensor x = make({1, 2, 3}, {3}, DType::F32, device());
  Tensor src = make({7, 8}, {2}, DType::F32, device());
  expect_error<Error>([&] { scatter(x, 0, ints({0, 3}, device()), src).cpu(); },
                           {"index 3 is out of bounds for dimension 0 with size 3"}, "too large");
  expect_error<Error>([&] { scatter(x, 0, ints({-1, 0}, device()), Scalar(1)).cpu(); },
                           {"index -1 is out of bounds for dimension 0 with size 3"}, "negative");
  expect_error<Error>([&] { scatter_add(x, 0, ints({0, 5}, device()), src).cpu(); },
                           {"index 5 is out of bounds"}, "scatter_add");
  expect_error<Error>(
      [&] { scatter_reduce(x, 0, ints({-2, 0}, device()), src, "amax").cpu(); },
      {"index -2 is out of bounds"}, "scatter_reduce");
  expect_values(x, {3}, {1, 2, 3}, "input unchanged");
}

TEST_P(IndexingTest, ScatterShapeAndTypeErrors) {
  Tensor x = make({1, 2, 3, 4}, {2, 2}, DType::F32, device());
  expect_error<Error>(
      [&] { scatter(x, 0, ints({0}, {1, 1}, device()), make({1}, {1, 1}, DType::F64, device())); },
      {"float32", "float64"});
  expect_error<ShapeError>(
      [&] { scatter(x, 0, ints({0, 0}, {1, 2}, device()), make({1}, {1, 1}, DType::F32, device())); },
      {"[1, 2]", "src", "[1, 1]"});
  expect_error<ShapeError>([&] { scatter(x, 0, ints({0, 1}, {2}, device()), Scalar(1)); },
                           {"same number of dimensions"});
  expect_error<Error>([&] { scatter(x, 0, make({0}, {1, 1}, DType::F32, device()), Scalar(1)); },
                          {"int64 or int32"});
}

TEST_P(IndexingTest, ScatterAddAccumulatesDuplicates) {
  Shape xs{3, 4}, is{5, 4};
  auto iv = random_indices(20, 3, 13);
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32,
                  DType::I8, DType::U8}) {
    auto xv = exact_values(12, t, 14), sv = exact_values(20, t, 15);
    if (t == DType::U8 || t == DType::I8)
      for (auto* v : {&xv, &sv})
        for (auto& e : *v) e = std::fmod(std::fabs(e), 10);
    Tensor y = scatter_add(make(xv, xs, t, device()), 0, ints(iv, is, device()),
                           make(sv, is, t, device()));
    auto e = ref_scatter(xv, xs, 0, iv, is, sv, is, "sum", true, !is_floating(t));
    expect_close(y, xs, e, test::tol_for(t), std::string(dtype_name(t)));
  }
}

// Sizes that split gather's and scatter_add's index rows over the threads (int64 indices:
// the typed row paths), along the last dim and along dim 0, from a transposed x, with
// duplicate targets; int32 indices take the element loop and must agree.
TEST_P(IndexingTest, GatherAndScatterAddAtThreadedSizes) {
  const Shape xs{300, 257}, is{300, 200};
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::I64}) {
    SCOPED_TRACE(dtype_name(t));
    auto xv = exact_values(size_t(300 * 257), t, 61);
    Tensor x = make(xv, xs, t, device());
    Tensor xt = x.t().contiguous().t();  // same values, column-major
    for (int64_t d : {int64_t(1), int64_t(0)}) {
      auto iv = random_indices(size_t(300 * 200), xs[size_t(d)], uint32_t(62 + d));
      const auto want = ref_gather(xv, xs, d, iv, is);
      expect_values(gather(x, d, ints(iv, is, device())), is, want, "gather");
      expect_values(gather(xt, d, ints(iv, is, device())), is, want, "gather, transposed x");
      expect_values(gather(x, d, ints(iv, is, device(), DType::I32)), is, want, "int32");
    }
    // float32 adds round in float32, about 200 terms per element along dim 0 (bfloat16 sums
    // in double and rounds once).
    const test::Tol tol = t == DType::F32 ? test::Tol{1e-5, 1e-4} : test::tol_for(t);
    auto sv = exact_values(size_t(300 * 200), t, 63);
    for (int64_t d : {int64_t(1), int64_t(0)}) {
      auto iv = random_indices(size_t(300 * 200), xs[size_t(d)], uint32_t(64 + d));
      Tensor y = scatter_add(x, d, ints(iv, is, device()), make(sv, is, t, device()));
      auto e = ref_scatter(xv, xs, d, iv, is, sv, is, "sum", true, !is_floating(t));
      expect_close(y, xs, e, tol, "scatter_add dim " + std::to_string(d));
    }
  }
}

// nonzero, masked_select and x[mask] at sizes split over the threads (two passes over pieces
// of the elements): every coordinate and selected element in row-major order, zeros of either
// sign skipped and NaN kept by nonzero, against host loops; a mask that is all false.
TEST_P(IndexingTest, NonzeroAndMaskedSelectionsAtThreadedSizes) {
  const Shape s{300, 257};
  const int64_t n = 300 * 257;
  std::vector<bool> m(static_cast<size_t>(n));
  std::vector<double> mv(static_cast<size_t>(n));
  const auto r = random_indices(size_t(n), 3, 71);
  for (int64_t i = 0; i < n; ++i) {
    m[size_t(i)] = r[size_t(i)] == 0;
    mv[size_t(i)] = r[size_t(i)] == 0 ? 0.0 : r[size_t(i)] == 1 ? -0.0 : 1.5;
  }
  mv[17] = NAN;
  for (DType t : {DType::F32, DType::BF16, DType::I64, DType::U8, DType::Bool}) {
    SCOPED_TRACE(dtype_name(t));
    auto xv = exact_values(size_t(n), t, 72);
    Tensor x = make(xv, s, t, device());
    Tensor mask = bools(m, s, device());
    std::vector<double> want;
    for (int64_t i = 0; i < n; ++i)
      if (m[size_t(i)]) want.push_back(xv[size_t(i)]);
    const Shape ws{int64_t(want.size())};
    expect_values(masked_select(x, mask), ws, want, "masked_select");
    expect_values(index(x, {mask}), ws, want, "x[mask]");
    expect_values(masked_select(x, zeros_like(mask)), {0}, {}, "all false");
  }
  Tensor v = make(mv, s, DType::F32, device());
  std::vector<double> coords;
  for (int64_t i = 0; i < n; ++i)
    if (mv[size_t(i)] != 0 || std::isnan(mv[size_t(i)])) {
      coords.push_back(double(i / 257));
      coords.push_back(double(i % 257));
    }
  expect_values(nonzero(v), {int64_t(coords.size() / 2), 2}, coords, "nonzero");
  expect_values(nonzero(mul(v, 0.0).fill_(0.0)), {0, 2}, {}, "no nonzero");
}

TEST_P(IndexingTest, ScatterReduceEveryModeAndIncludeSelf) {
  Shape xs{4, 3}, is{6, 3}, ss{7, 3};
  auto iv = random_indices(18, 4, 16);
  for (DType t : {DType::F64, DType::F32, DType::I64, DType::I32}) {
    auto xv = exact_values(12, t, 17), sv = exact_values(21, t, 18);
    for (auto& v : sv) v = std::fmod(v, 4);  // keep products small
    Tensor x = make(xv, xs, t, device()), src = make(sv, ss, t, device());
    for (const char* r : {"sum", "prod", "mean", "amax", "amin"})
      for (bool self : {true, false}) {
        Tensor y = scatter_reduce(x, 0, ints(iv, is, device()), src, r, self);
        auto e = ref_scatter(xv, xs, 0, iv, is, sv, ss, r, self, !is_floating(t));
        expect_close(y, xs, e, test::tol_for(t),
                     std::string(dtype_name(t)) + " " + r + (self ? " include_self" : ""));
      }
  }
}

TEST_P(IndexingTest, ScatterReduceHalfTypesAndDim1) {
  Shape xs{3, 5}, is{3, 4};
  auto iv = random_indices(12, 5, 19);
  for (DType t : {DType::F16, DType::BF16}) {
    auto xv = exact_values(15, t, 20), sv = exact_values(12, t, 21);
    Tensor y = scatter_reduce(make(xv, xs, t, device()), 1, ints(iv, is, device()),
                              make(sv, is, t, device()), "mean", false);
    expect_close(y, xs, ref_scatter(xv, xs, 1, iv, is, sv, is, "mean", false, false),
                 test::tol_for(t), std::string(dtype_name(t)));
  }
}

TEST_P(IndexingTest, ScatterReduceMeanOfIntegersFloors) {
  Tensor x = make({0, 0, 5}, {3}, DType::I64, device());
  Tensor src = make({-3, -4, 7, 2}, {4}, DType::I64, device());
  // Slot 0: (0 - 3 - 4) / 3 = -7/3 -> -3; slot 2: (5 + 7 + 2) / 3 = 14/3 -> 4.
  expect_values(scatter_reduce(x, 0, ints({0, 0, 2, 2}, device()), src, "mean"), {3}, {-3, 0, 4});
  // Without self: slot 0: -7/2 -> -4; slot 2: 9/2 -> 4.
  expect_values(scatter_reduce(x, 0, ints({0, 0, 2, 2}, device()), src, "mean", false), {3},
                {-4, 0, 4});
}

TEST_P(IndexingTest, ScatterReduceNaNPropagatesInAmaxAmin) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = make({0, 0}, {2}, DType::F32, device());
  Tensor src = make({1, nan, 3, 2}, {4}, DType::F32, device());
  Tensor idx = ints({0, 0, 1, 1}, device());
  expect_values(scatter_reduce(x, 0, idx, src, "amax"), {2}, {nan, 3});
  expect_values(scatter_reduce(x, 0, idx, src, "amin", false), {2}, {nan, 2});
}

TEST_P(IndexingTest, ScatterReduceBadArguments) {
  Tensor x = make({0, 0}, {2}, DType::F32, device());
  Tensor src = make({1}, {1}, DType::F32, device());
  expect_error<ValueError>([&] { scatter_reduce(x, 0, ints({0}, device()), src, "max"); },
                           {"sum, prod, mean, amax or amin", "got max"});
  Tensor b = make({0, 1}, {2}, DType::Bool, device());
  expect_error<Error>(
      [&] { scatter_reduce(b, 0, ints({0}, device()), make({1}, {1}, DType::Bool, device()), "mean"); },
      {"mean", "bool"});
}

// ---- masked_fill / masked_select / nonzero ----

std::vector<bool> random_mask(size_t n, uint32_t seed) {
  auto v = test::random_values(n, 0, 2, seed, true);
  std::vector<bool> m(n);
  for (size_t i = 0; i < n; ++i) m[i] = v[i] != 0;
  return m;
}

TEST_P(IndexingTest, MaskedFillEveryDtype) {
  Shape s{3, 4};
  auto m = random_mask(12, 22);
  for (DType t : test::all_dtypes()) {
    auto xv = exact_values(12, t, 23);
    double fill = t == DType::Bool ? 1 : t == DType::U8 ? 200 : is_floating(t) ? -2.5 : -7;
    Scalar value = t == DType::Bool ? Scalar(true) : is_floating(t) ? Scalar(fill) : Scalar(int64_t(fill));
    std::vector<double> e(12);
    for (size_t i = 0; i < 12; ++i) e[i] = m[i] ? fill : xv[i];
    expect_values(masked_fill(make(xv, s, t, device()), bools(m, s, device()), value), s, e,
                  std::string(dtype_name(t)));
  }
}

// Above the threading size, with a random mask (the bit-select path: a mask per element's
// word, no branch), every dtype, the mask also broadcast from one column.
TEST_P(IndexingTest, MaskedFillLargeRandomMask) {
  const Shape s{4096, 9};
  const size_t n = 4096 * 9;
  auto m = random_mask(n, 31);
  std::vector<bool> col(4096);
  for (size_t i = 0; i < col.size(); ++i) col[i] = m[i * 9];
  for (DType t : test::all_dtypes()) {
    auto xv = exact_values(n, t, 32);
    double fill = t == DType::Bool ? 1 : t == DType::U8 ? 200 : is_floating(t) ? -2.5 : -7;
    Scalar value = t == DType::Bool ? Scalar(true)
                   : is_floating(t) ? Scalar(fill) : Scalar(int64_t(fill));
    std::vector<double> e(n), ec(n);
    for (size_t i = 0; i < n; ++i) {
      e[i] = m[i] ? fill : xv[i];
      ec[i] = col[i / 9] ? fill : xv[i];
    }
    const Tensor x = make(xv, s, t, device());
    expect_values(masked_fill(x, bools(m, s, device()), value), s, e, std::string(dtype_name(t)));
    expect_values(masked_fill(x, bools(col, {4096, 1}, device()), value), s, ec,
                  std::string(dtype_name(t)) + " column mask");
  }
}

TEST_P(IndexingTest, MaskedFillBroadcasting) {
  auto xv = exact_values(12, DType::F32, 24);
  Tensor x = make_layout(xv, {3, 4}, DType::F32, device(), Layout::Transposed);
  // A row mask broadcast over the rows.
  std::vector<bool> row = {true, false, false, true};
  std::vector<double> e(12);
  for (size_t i = 0; i < 12; ++i) e[i] = row[i % 4] ? 9 : xv[i];
  expect_values(masked_fill(x, bools(row, {4}, device()), Scalar(9)), {3, 4}, e, "row mask");
  // A [3, 1] mask against x [4]: the result takes the broadcast shape [3, 4].
  Tensor v = make({1, 2, 3, 4}, {4}, DType::F32, device());
  expect_values(masked_fill(v, bools({true, false, true}, {3, 1}, device()), Scalar(0)), {3, 4},
                {0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0}, "self broadcast");
  // Float value into an integer tensor truncates, as PyTorch.
  expect_values(masked_fill(make({1, 2}, {2}, DType::I32, device()), bools({true, false}, {2}, device()),
                            Scalar(3.7)),
                {2}, {3, 2}, "float into int");
}

TEST_P(IndexingTest, MaskedFillInPlace) {
  auto xv = exact_values(12, DType::I64, 25);
  Tensor x = make_layout(xv, {3, 4}, DType::I64, device(), Layout::Transposed);
  auto m = random_mask(12, 26);
  Tensor& r = masked_fill_(x, bools(m, {3, 4}, device()), Scalar(100));
  EXPECT_TRUE(r.is_same(x));
  std::vector<double> e(12);
  for (size_t i = 0; i < 12; ++i) e[i] = m[i] ? 100 : xv[i];
  expect_values(x, {3, 4}, e);
  expect_error<ShapeError>(
      [&] { masked_fill_(x, bools({true, false, true}, {3, 1, 1}, device()), Scalar(0)); },
      {"[3, 4]", "[3, 1, 1]"});
  expect_error<Error>([&] { masked_fill(x, ints({1}, device()), Scalar(0)); },
                          {"boolean masks", "int64"});
}

TEST_P(IndexingTest, MaskedFillZeroDimAndEmpty) {
  Tensor s = make({4}, {}, DType::F64, device());
  expect_values(masked_fill(s, bools({true}, {}, device()), Scalar(1.5)), {}, {1.5});
  Tensor e = make({}, {0, 3}, DType::F32, device());
  expect_values(masked_fill(e, bools({true, true, false}, {3}, device()), Scalar(1)), {0, 3}, {});
}

TEST_P(IndexingTest, MaskedSelectEveryDtypeAndBroadcast) {
  Shape s{2, 5};
  auto m = random_mask(10, 27);
  for (DType t : test::all_dtypes()) {
    auto xv = exact_values(10, t, 28);
    std::vector<double> e;
    for (size_t i = 0; i < 10; ++i)
      if (m[i]) e.push_back(xv[i]);
    expect_values(masked_select(make(xv, s, t, device()), bools(m, s, device())),
                  {int64_t(e.size())}, e, std::string(dtype_name(t)));
  }
  // x [3, 1] and mask [4]: broadcast to [3, 4].
  Tensor x = make({1, 2, 3}, {3, 1}, DType::F32, device());
  expect_values(masked_select(x, bools({true, false, false, true}, {4}, device())), {6},
                {1, 1, 2, 2, 3, 3});
}

TEST_P(IndexingTest, MaskedSelectNonContiguousAndEmpty) {
  auto xv = exact_values(20, DType::F32, 29);
  Tensor x = make_layout(xv, {4, 5}, DType::F32, device(), Layout::Strided);
  auto m = random_mask(20, 30);
  Tensor mask = bools(m, {5, 4}, device()).transpose(0, 1);  // logical [4, 5]
  std::vector<double> e;
  for (int64_t i = 0; i < 20; ++i) {
    auto c = unravel(i, {4, 5});
    if (m[size_t(c[1] * 4 + c[0])]) e.push_back(xv[size_t(i)]);
  }
  expect_values(masked_select(x, mask), {int64_t(e.size())}, e);
  expect_values(masked_select(x, bools(std::vector<bool>(5, false), {5}, device())), {0}, {});
  expect_values(masked_select(make({}, {0}, DType::F32, device()), bools({}, {0}, device())), {0},
                {});
}

std::vector<int64_t> ref_nonzero(const std::vector<double>& v, const Shape& s) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < int64_t(v.size()); ++i)
    if (v[size_t(i)] != 0) {  // NaN != 0 counts as nonzero
      auto c = unravel(i, s);
      out.insert(out.end(), c.begin(), c.end());
    }
  return out;
}

TEST_P(IndexingTest, NonzeroEveryDtype) {
  Shape s{3, 4};
  for (DType t : test::all_dtypes()) {
    auto xv = exact_values(12, t, 31);
    for (size_t i = 0; i < 12; i += 3) xv[i] = 0;
    auto e = ref_nonzero(xv, s);
    expect_ints(nonzero(make(xv, s, t, device())), {int64_t(e.size() / 2), 2}, e,
                std::string(dtype_name(t)));
  }
}

// Contiguous inputs are walked a last-dim row at a time: 4-d and 3-d at threaded sizes (pieces
// start inside rows), rows of one element, and a 1-d vector.
TEST_P(IndexingTest, NonzeroContiguousRowsOfEveryRank) {
  for (const Shape& s : {Shape{3, 5, 70, 67}, Shape{70001, 1, 1}, Shape{9, 1, 7}, Shape{70003}}) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    auto xv = exact_values(size_t(n), DType::F32, 33);
    const auto r = random_indices(size_t(n), 3, 34);
    for (int64_t i = 0; i < n; ++i)
      if (r[size_t(i)] == 0) xv[size_t(i)] = 0;
    auto e = ref_nonzero(xv, s);
    expect_ints(nonzero(make(xv, s, DType::F32, device())),
                {int64_t(e.size()) / int64_t(s.size()), int64_t(s.size())}, e,
                std::to_string(s.size()) + "-d of " + std::to_string(n));
  }
}

TEST_P(IndexingTest, NonzeroNaNNonContiguousZeroDimEmpty) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  expect_ints(nonzero(make({0, nan, 0, -0.0, 2}, {5}, DType::F32, device())), {2, 1}, {1, 4},
              "nan and -0");
  auto xv = exact_values(24, DType::I32, 32);
  for (size_t i = 0; i < 24; i += 2) xv[i] = 0;
  Tensor x = make_layout(xv, {2, 3, 4}, DType::I32, device(), Layout::Transposed);
  auto e = ref_nonzero(xv, {2, 3, 4});
  expect_ints(nonzero(x), {int64_t(e.size() / 3), 3}, e, "transposed 3-d");
  expect_ints(nonzero(make({5}, {}, DType::F64, device())), {1, 0}, {}, "0-d nonzero");
  expect_ints(nonzero(make({0}, {}, DType::F64, device())), {0, 0}, {}, "0-d zero");
  expect_ints(nonzero(make({}, {2, 0}, DType::F32, device())), {0, 2}, {}, "empty");
}


// ---- more combinations ----

TEST_P(IndexingTest, IndexSelectLargeRandom) {
  Shape xs{50, 40};
  auto xv = exact_values(2000, DType::F64, 40);
  Tensor x = make_layout(xv, xs, DType::F64, device(), Layout::Transposed);
  auto idx = random_indices(100, 40, 41);
  Shape os;
  auto e = ref_index_select(xv, xs, 1, idx, &os);
  expect_values(index_select(x, 1, ints(idx, device())), os, e);
}

// Whole inner blocks copied by (outer, entry) pairs over the threads (pieces that start in
// the middle of an outer block), with an int64 index used in place, a strided int64 index and
// an int32 one, which must agree.
TEST_P(IndexingTest, IndexSelectBlocksAtThreadedSizes) {
  const Shape xs{3, 50, 700};
  auto xv = exact_values(size_t(3 * 50 * 700), DType::F32, 42);
  Tensor x = make(xv, xs, DType::F32, device());
  auto idx = random_indices(41, 50, 43);
  Shape os;
  auto e = ref_index_select(xv, xs, 1, idx, &os);
  expect_values(index_select(x, 1, ints(idx, device())), os, e, "int64");
  expect_values(index_select(x, 1, ints(idx, device(), DType::I32)), os, e, "int32");
  std::vector<int64_t> spread(idx.size() * 2, 49);
  for (size_t i = 0; i < idx.size(); ++i) spread[2 * i] = idx[i];
  Tensor strided = ints(spread, device()).slice(0, 0, int64_t(spread.size()), 2);
  ASSERT_EQ(strided.stride(0), 2);
  expect_values(index_select(x, 1, strided), os, e, "strided int64");
}

TEST_P(IndexingTest, ScatterThenGatherRoundTrip3d) {
  // Each row of idx is a permutation, so scatter then gather with it gives src back.
  Shape s{2, 3, 5};
  std::vector<int64_t> iv;
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < 5; ++j) iv.push_back((j * 2 + r) % 5);
  auto sv = exact_values(30, DType::F32, 42);
  Tensor src = make_layout(sv, s, DType::F32, device(), Layout::Strided);
  Tensor idx = ints(iv, s, device());
  Tensor scattered = scatter(make(std::vector<double>(30, 0), s, DType::F32, device()), -1, idx, src);
  expect_values(gather(scattered, -1, idx), s, sv);
}

TEST_P(IndexingTest, ScatterReduceNonContiguous3dLastDim) {
  Shape xs{2, 3, 4}, is{2, 3, 6};
  auto xv = exact_values(24, DType::F64, 43), sv = exact_values(36, DType::F64, 44);
  auto iv = random_indices(36, 4, 45);
  Tensor x = make_layout(xv, xs, DType::F64, device(), Layout::Transposed);
  Tensor src = make_layout(sv, is, DType::F64, device(), Layout::Strided);
  for (const char* r : {"sum", "amin", "mean"}) {
    Tensor y = scatter_reduce(x, 2, ints(iv, is, device()), src, r, false);
    expect_close(y, xs, ref_scatter(xv, xs, 2, iv, is, sv, is, r, false, false),
                 test::tol_for(DType::F64), r);
  }
}

TEST_P(IndexingTest, ScatterAddOnBoolIsLogicalOr) {
  Tensor x = make({0, 1, 0, 0}, {4}, DType::Bool, device());
  Tensor src = make({1, 0, 0, 1, 0}, {5}, DType::Bool, device());
  expect_values(scatter_add(x, 0, ints({0, 1, 2, 0, 3}, device()), src), {4}, {1, 1, 0, 0});
  expect_values(scatter_reduce(x, 0, ints({1, 1, 2, 3, 3}, device()), src, "prod", false), {4},
                {0, 0, 0, 0});
}

TEST_P(IndexingTest, MaskedFillInPlaceWithOverlappingMask) {
  // The mask is x itself, or a shifted view of x: the result must use the mask's values
  // from before the fill.
  Tensor x = make({1, 0, 1, 1, 0}, {5}, DType::Bool, device());
  masked_fill_(x, x, Scalar(false));
  expect_values(x, {5}, {0, 0, 0, 0, 0}, "mask is self");
  Tensor y = make({1, 1, 1, 0, 1, 0}, {6}, DType::Bool, device());
  Tensor head = y.slice(0, 0, 5), tail = y.slice(0, 1, 6);
  masked_fill_(tail, head, Scalar(false));  // tail[i] = head[i] ? false : tail[i]
  expect_values(y, {6}, {1, 0, 0, 0, 1, 0}, "shifted view");
}

TEST_P(IndexingTest, MaskedSelectBoolAndHalf) {
  Tensor b = make({1, 0, 1, 1}, {2, 2}, DType::Bool, device());
  expect_values(masked_select(b, bools({true, true, false, true}, {2, 2}, device())), {3}, {1, 0, 1});
  Tensor h = make({0.5, -1.25, 3}, {3}, DType::F16, device());
  Tensor y = masked_select(h, bools({false, true, true}, {3}, device()));
  EXPECT_EQ(y.dtype(), DType::F16);
  expect_values(y, {2}, {-1.25, 3});
}

TEST_P(IndexingTest, NonzeroBoolTransposed) {
  std::vector<double> v = {1, 0, 0, 1, 1, 0};
  Tensor x = make_layout(v, {2, 3}, DType::Bool, device(), Layout::Transposed);
  expect_ints(nonzero(x), {3, 2}, {0, 0, 1, 0, 1, 1});
}

TEST_P(IndexingTest, ChainedOpsRunInStreamOrder) {
  // Several kernels queued back to back (asynchronous on the testing device) and read once.
  auto xv = exact_values(24, DType::F32, 46);
  Tensor x = make(xv, {4, 6}, DType::F32, device());
  Tensor a = index_select(x, 1, ints({5, 0, 2}, device()));          // [4, 3]
  Tensor b = gather(a, 0, ints({3, 2, 1, 0, 0, 0}, {2, 3}, device()));  // [2, 3]
  Tensor c = scatter_add(b, 1, ints({0, 0, 0}, {1, 3}, device()), b.slice(0, 0, 1));
  Tensor d = masked_fill(c, bools({false, true, false}, {3}, device()), Scalar(-1));
  auto at = [&](int64_t r, int64_t col) { return xv[size_t(r * 6 + col)]; };
  // a[i][j] = x[i][{5, 0, 2}[j]]; b[r][j] = a[idx[r][j]][j]; c[0][0] adds row 0 of b.
  double b00 = at(3, 5), b01 = at(2, 0), b02 = at(1, 2), b10 = at(0, 5), b12 = at(0, 2);
  expect_close(d, {2, 3}, {2 * b00 + b01 + b02, -1, b02, b10, -1, b12}, test::tol_for(DType::F32));
}

TEST_P(IndexingTest, DeviceMismatchIsAnError) {
  ASSERT_TRUE(is_available(DeviceType::Testing)) << "no second device type (the testing backend is part of every build)";
  Device other = GetParam() == DeviceType::CPU ? Device(DeviceType::Testing, 0)
                                               : Device(DeviceType::CPU, 0);
  Tensor x = make({1, 2, 3}, {3}, DType::F32, device());
  expect_error<DeviceError>([&] { index_select(x, 0, ints({0}, other)); }, {"same device"});
  expect_error<DeviceError>([&] { gather(x, 0, ints({0}, other)); }, {"same device"});
  expect_error<DeviceError>([&] { masked_fill(x, bools({true, false, true}, {3}, other), Scalar(0)); },
                            {"same device"});
}

}  // namespace

KILN_INSTANTIATE_ON_EACH_DEVICE(IndexingTest);

}  // namespace kiln
