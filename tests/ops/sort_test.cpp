// sort, argsort, topk and unique against host references (a stable insertion sort with NaN
// as the largest value), in every dtype, with ties, NaN and infinities, non-contiguous, 0-d
// and empty inputs, on every device.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "ops/index_test_util.h"

namespace kiln {
namespace {

using test::expect_error;
using test::expect_ints;
using test::expect_values;
using test::exact_values;
using test::Layout;
using test::make;
using test::make_layout;
using test::OnEachDevice;
using test::ravel;
using test::unravel;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

class SortTest : public OnEachDevice {};

// True when a goes strictly before b: ascending with NaN last, or descending with NaN first.
bool before(double a, double b, bool descending) {
  if (descending) return (std::isnan(a) && !std::isnan(b)) || a > b;
  return (!std::isnan(a) && std::isnan(b)) || a < b;
}

// Stable sort of every slice along d (insertion sort); values and source indices.
void ref_sort(const std::vector<double>& x, const Shape& s, int64_t d, bool descending,
              std::vector<double>* vals, std::vector<int64_t>* idx) {
  vals->assign(x.size(), 0);
  idx->assign(x.size(), 0);
  Shape outer = s;
  int64_t n = s.empty() ? 1 : s[size_t(d)];
  if (!s.empty()) outer[size_t(d)] = 1;
  for (int64_t o = 0; o < numel_of(outer); ++o) {
    auto base = unravel(o, outer);
    auto at = [&](int64_t j) {
      auto c = base;
      if (!s.empty()) c[size_t(d)] = j;
      return ravel(c, s);
    };
    std::vector<int64_t> order;
    for (int64_t j = 0; j < n; ++j) {
      order.push_back(j);
      for (size_t k = order.size() - 1;
           k > 0 && before(x[size_t(at(order[k]))], x[size_t(at(order[k - 1]))], descending); --k)
        std::swap(order[k], order[k - 1]);
    }
    for (int64_t j = 0; j < n; ++j) {
      (*vals)[size_t(at(j))] = x[size_t(at(order[size_t(j)]))];
      (*idx)[size_t(at(j))] = order[size_t(j)];
    }
  }
}

void check_sort(const Tensor& t, const std::vector<double>& xv, int64_t d, bool descending,
                const std::string& what) {
  std::vector<double> ev;
  std::vector<int64_t> ei;
  int64_t wd = t.dim() == 0 ? 0 : (d < 0 ? d + t.dim() : d);
  ref_sort(xv, t.shape(), wd, descending, &ev, &ei);
  auto [v, i] = sort(t, d, descending, /*stable=*/true);
  EXPECT_EQ(v.dtype(), t.dtype()) << what;
  expect_values(v, t.shape(), ev, what + " values");
  expect_ints(i, t.shape(), ei, what + " indices");
}

// Small integers give many ties, so the stable order is exercised.
std::vector<double> tie_values(size_t n, DType t, uint32_t seed) {
  if (t == DType::Bool) return test::random_values(n, 0, 2, seed, true);
  auto v = test::random_values(n, 0, 6, seed, true);
  if (is_floating(t))
    for (auto& e : v) e = e / 2 - 1;  // -1, -0.5, ..., 1.5
  return v;
}

TEST_P(SortTest, SortEveryDtypeWithTies) {
  for (DType t : test::all_dtypes()) {
    auto xv = tie_values(21, t, 1);
    Tensor x = make(xv, {3, 7}, t, device());
    for (bool desc : {false, true}) {
      std::string w = std::string(dtype_name(t)) + (desc ? " desc" : " asc");
      check_sort(x, xv, -1, desc, w);
      check_sort(x, xv, 0, desc, w + " dim 0");
    }
  }
}

TEST_P(SortTest, SortRandomFloatsNonContiguous) {
  auto xv = exact_values(60, DType::F32, 2);
  for (Layout l : {Layout::Transposed, Layout::Strided})
    for (int64_t d : {0, 1, 2}) {
      Tensor x = make_layout(xv, {3, 4, 5}, DType::F32, device(), l);
      check_sort(x, xv, d, false, "asc dim " + std::to_string(d));
      check_sort(x, xv, d, true, "desc dim " + std::to_string(d));
    }
}

TEST_P(SortTest, SortNaNIsLargestAndInfinities) {
  std::vector<double> xv = {3, kNaN, -kInf, 0, kInf, kNaN, -2, 3, -0.0};
  for (DType t : test::float_dtypes()) {
    Tensor x = make(xv, {9}, t, device());
    check_sort(x, xv, 0, false, std::string(dtype_name(t)) + " asc");
    check_sort(x, xv, 0, true, std::string(dtype_name(t)) + " desc");
  }
  auto [v, i] = sort(make(xv, {9}, DType::F64, device()));
  expect_values(v, {9}, {-kInf, -2, 0, -0.0, 3, 3, kInf, kNaN, kNaN}, "explicit ascending");
}

TEST_P(SortTest, SortHalfTypesRandom) {
  for (DType t : {DType::F16, DType::BF16}) {
    auto xv = exact_values(40, t, 3);
    check_sort(make(xv, {5, 8}, t, device()), xv, 1, false, std::string(dtype_name(t)));
    check_sort(make(xv, {5, 8}, t, device()), xv, 0, true, std::string(dtype_name(t)) + " desc");
  }
}

TEST_P(SortTest, SortZeroDimEmptyAndErrors) {
  auto [v, i] = sort(make({4}, {}, DType::F32, device()));
  expect_values(v, {}, {4});
  expect_ints(i, {}, {0});
  auto [ve, ie] = sort(make({}, {3, 0}, DType::F32, device()), 1);
  expect_values(ve, {3, 0}, {});
  expect_ints(ie, {3, 0}, {});
  auto [v0, i0] = sort(make({}, {0, 4}, DType::I32, device()), 1);
  EXPECT_EQ(v0.shape(), (Shape{0, 4}));
  expect_error<IndexError>([&] { sort(make({1, 2}, {2}, DType::F32, device()), 1); }, {"1"});
}

TEST_P(SortTest, Argsort) {
  auto xv = tie_values(24, DType::I64, 4);
  Tensor x = make_layout(xv, {2, 3, 4}, DType::I64, device(), Layout::Transposed);
  for (bool desc : {false, true})
    for (int64_t d : {1, -1}) {
      std::vector<double> ev;
      std::vector<int64_t> ei;
      ref_sort(xv, {2, 3, 4}, d < 0 ? 2 : d, desc, &ev, &ei);
      expect_ints(argsort(x, d, desc, true), {2, 3, 4}, ei,
                  std::string(desc ? "desc" : "asc") + " dim " + std::to_string(d));
    }
}

// ---- topk ----

TEST_P(SortTest, TopkLargestAndSmallest) {
  // Distinct values, so the selected indices are unique.
  std::vector<double> xv(30);
  for (size_t i = 0; i < 30; ++i) xv[i] = double((i * 7) % 30) - 10;
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64, DType::BF16, DType::I16}) {
    Tensor x = make(xv, {5, 6}, t, device());
    for (int64_t d : {0, 1})
      for (bool largest : {true, false})
        for (int64_t k : {int64_t(0), int64_t(1), int64_t(3), x.size(d)}) {
          std::vector<double> sv;
          std::vector<int64_t> si;
          ref_sort(xv, {5, 6}, d, largest, &sv, &si);
          Shape s = {5, 6};
          s[size_t(d)] = k;
          std::vector<double> ev;
          std::vector<int64_t> ei;
          for (int64_t e = 0; e < numel_of(s); ++e) {
            size_t src = size_t(ravel(unravel(e, s), {5, 6}));
            ev.push_back(sv[src]);
            ei.push_back(si[src]);
          }
          auto [v, i] = topk(x, k, d, largest);
          std::string w = std::string(dtype_name(t)) + " d=" + std::to_string(d) +
                          (largest ? " largest" : " smallest") + " k=" + std::to_string(k);
          expect_values(v, s, ev, w);
          expect_ints(i, s, ei, w);
        }
  }
}

// k of many (k * 8 < n, k <= 64: the single-scan selection) along either dim, with many
// ties, NaNs, infinities and signed zeros: values and indices equal the stable sort's first
// k (ties in index order), for the largest and the smallest, on rows spread over threads.
TEST_P(SortTest, TopkFewOfManyMatchesTheStableSort) {
  const int64_t rows = 40, n = 700;
  std::vector<double> xv =
      test::random_values(size_t(rows * n), -20, 20, 31, /*integers=*/true);
  for (size_t i = 3; i < xv.size(); i += 97) xv[i] = kNaN;
  for (size_t i = 5; i < xv.size(); i += 89) xv[i] = kInf;
  for (size_t i = 7; i < xv.size(); i += 83) xv[i] = -kInf;
  for (size_t i = 11; i < xv.size(); i += 41) xv[i] = (i / 41) % 2 ? 0.0 : -0.0;
  // Rows sorted ascending and descending: every element enters the selection.
  for (int64_t j = 0; j < n; ++j) {
    xv[size_t(n + j)] = double(j % 200);
    xv[size_t(2 * n + j)] = double((n - j) % 200);
  }
  for (DType t : {DType::F32, DType::BF16, DType::I32}) {
    std::vector<double> tv = xv;
    if (t == DType::I32)
      for (double& v : tv) v = std::isfinite(v) ? v : 7;
    for (int64_t d : {1, 0}) {
      const Shape s = d == 1 ? Shape{rows, n} : Shape{n, rows};
      std::vector<double> sv_in(tv.size());  // the values laid out at shape s
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j)
          sv_in[size_t(d == 1 ? r * n + j : j * rows + r)] = tv[size_t(r * n + j)];
      const Tensor x = make(sv_in, s, t, device());
      for (bool largest : {true, false}) {
        std::vector<double> sv;
        std::vector<int64_t> si;
        ref_sort(sv_in, s, d, largest, &sv, &si);
        for (int64_t k : {int64_t(1), int64_t(5), int64_t(64)}) {
          Shape ks = s;
          ks[size_t(d)] = k;
          std::vector<double> ev;
          std::vector<int64_t> ei;
          for (int64_t e = 0; e < numel_of(ks); ++e) {
            const size_t src = size_t(ravel(unravel(e, ks), s));
            ev.push_back(sv[src]);
            ei.push_back(si[src]);
          }
          auto [v, i] = topk(x, k, d, largest);
          const std::string w = std::string(dtype_name(t)) + " d=" + std::to_string(d) +
                                (largest ? " largest" : " smallest") + " k=" + std::to_string(k);
          expect_values(v, ks, ev, w);
          expect_ints(i, ks, ei, w);
        }
      }
    }
  }
}

TEST_P(SortTest, TopkNaNNonContiguousAndTies) {
  Tensor x = make({1, kNaN, 5, -kInf, 2}, {5}, DType::F32, device());
  auto [v, i] = topk(x, 2);
  expect_values(v, {2}, {kNaN, 5}, "NaN is the largest");
  expect_ints(i, {2}, {1, 2});
  auto [vs, is] = topk(x, 2, 0, false);
  expect_values(vs, {2}, {-kInf, 1}, "smallest");
  expect_ints(is, {2}, {3, 0});
  auto xv = exact_values(24, DType::F64, 5);
  Tensor xt = make_layout(xv, {4, 6}, DType::F64, device(), Layout::Transposed);
  auto [v2, i2] = topk(xt, 2, 0);
  std::vector<double> sv;
  std::vector<int64_t> si;
  ref_sort(xv, {4, 6}, 0, true, &sv, &si);
  expect_values(v2, {2, 6}, std::vector<double>(sv.begin(), sv.begin() + 12), "transposed");
  // With ties the indices may be any of the tied ones, but must point at the values.
  std::vector<double> tv = {2, 1, 2, 2, 0};
  auto [vt, it] = topk(make(tv, {5}, DType::I32, device()), 2);
  expect_values(vt, {2}, {2, 2}, "ties");
  for (int64_t j : it.to_vector<int64_t>()) EXPECT_EQ(tv[size_t(j)], 2);
}

TEST_P(SortTest, TopkZeroDimAndErrors) {
  auto [v, i] = topk(make({3}, {}, DType::F32, device()), 1);
  expect_values(v, {}, {3});
  expect_ints(i, {}, {0});
  Tensor x = make({1, 2, 3}, {3}, DType::F32, device());
  expect_error<Error>([&] { topk(x, 4); }, {"k out of range", "[0, 3]", "k = 4"});
  expect_error<Error>([&] { topk(x, -1); }, {"k = -1"});
  expect_error<IndexError>([&] { topk(x, 1, 1); }, {"1"});
}

// ---- unique ----

struct UniqueRef {
  std::vector<double> values;
  std::vector<int64_t> inverse, counts;
};
// Unique items (each a vector of keys) in sorted order; NaN keys never equal each other.
UniqueRef ref_unique_items(const std::vector<std::vector<double>>& items) {
  auto less = [](const std::vector<double>& a, const std::vector<double>& b) {
    for (size_t t = 0; t < a.size(); ++t) {
      if (before(a[t], b[t], false)) return true;
      if (before(b[t], a[t], false)) return false;
    }
    return false;
  };
  auto equal = [](const std::vector<double>& a, const std::vector<double>& b) {
    for (size_t t = 0; t < a.size(); ++t)
      if (!(a[t] == b[t])) return false;
    return true;
  };
  std::vector<size_t> order;
  for (size_t i = 0; i < items.size(); ++i) {
    order.push_back(i);
    for (size_t k = order.size() - 1; k > 0 && less(items[order[k]], items[order[k - 1]]); --k)
      std::swap(order[k], order[k - 1]);
  }
  UniqueRef r;
  r.inverse.assign(items.size(), -1);
  std::vector<size_t> reps;
  for (size_t i : order) {
    if (reps.empty() || !equal(items[reps.back()], items[i])) {
      reps.push_back(i);
      r.counts.push_back(0);
      r.values.insert(r.values.end(), items[i].begin(), items[i].end());
    }
    ++r.counts.back();
    r.inverse[i] = int64_t(reps.size()) - 1;
  }
  return r;
}

void check_unique_flat(const Tensor& x, const std::vector<double>& xv, const std::string& what) {
  std::vector<std::vector<double>> items;
  for (double v : xv) items.push_back({v});
  UniqueRef r = ref_unique_items(items);
  auto [v, inv, cnt] = unique(x, true, true, true);
  EXPECT_EQ(v.dtype(), x.dtype()) << what;
  expect_values(v, {int64_t(r.counts.size())}, r.values, what + " values");
  expect_ints(inv, x.shape(), r.inverse, what + " inverse");
  expect_ints(cnt, {int64_t(r.counts.size())}, r.counts, what + " counts");
}

TEST_P(SortTest, UniqueEveryDtype) {
  for (DType t : test::all_dtypes()) {
    auto xv = tie_values(24, t, 6);
    check_unique_flat(make(xv, {4, 6}, t, device()), xv, std::string(dtype_name(t)));
  }
}

TEST_P(SortTest, UniqueNaNsInfNonContiguous) {
  std::vector<double> xv = {kNaN, 1, kInf, 1, kNaN, -kInf, 0, -0.0};
  check_unique_flat(make(xv, {8}, DType::F32, device()), xv, "nan");
  auto rv = exact_values(30, DType::BF16, 7);
  for (auto& e : rv) e = std::round(e / 8);  // a few distinct values
  check_unique_flat(make_layout(rv, {5, 6}, DType::BF16, device(), Layout::Transposed), rv,
                    "transposed bf16");
}

TEST_P(SortTest, UniqueAlongDim) {
  // Rows 0 and 2 equal, columns 1 and 3 equal.
  std::vector<double> xv = {1, 2, 0, 2, 3, 0, 5, 0, 1, 2, 0, 2};
  Shape s{3, 4};
  for (Layout l : {Layout::Contiguous, Layout::Transposed}) {
    Tensor x = make_layout(xv, s, DType::I64, device(), l);
    for (int64_t d : {0, 1}) {
      std::vector<std::vector<double>> items;
      for (int64_t i = 0; i < s[size_t(d)]; ++i) {
        std::vector<double> item;
        for (int64_t j = 0; j < s[size_t(1 - d)]; ++j)
          item.push_back(xv[size_t(d == 0 ? i * 4 + j : j * 4 + i)]);
        items.push_back(item);
      }
      UniqueRef r = ref_unique_items(items);
      int64_t u = int64_t(r.counts.size());
      Shape vs = s;
      vs[size_t(d)] = u;
      // r.values holds the unique items one after another: lay them out along d.
      std::vector<double> ev(size_t(numel_of(vs)));
      for (int64_t e = 0; e < numel_of(vs); ++e) {
        auto c = unravel(e, vs);
        ev[size_t(e)] = r.values[size_t(c[size_t(d)] * s[size_t(1 - d)] + c[size_t(1 - d)])];
      }
      auto [v, inv, cnt] = unique(x, true, true, true, d == 0 ? 0 : -1);
      std::string w = "dim " + std::to_string(d);
      expect_values(v, vs, ev, w + " values");
      expect_ints(inv, {s[size_t(d)]}, r.inverse, w + " inverse");
      expect_ints(cnt, {u}, r.counts, w + " counts");
    }
  }
  EXPECT_EQ(std::get<0>(unique(make(xv, s, DType::I64, device()), true, false, false, 0)).shape(),
            (Shape{2, 4}));
}

TEST_P(SortTest, UniqueEmptyZeroDimAndUnrequestedOutputs) {
  auto [v, inv, cnt] = unique(make({}, {0}, DType::F32, device()), true, true, true);
  expect_values(v, {0}, {});
  expect_ints(inv, {0}, {});
  expect_ints(cnt, {0}, {});
  auto [v0, inv0, cnt0] = unique(make({7}, {}, DType::I32, device()), true, true, true);
  expect_values(v0, {1}, {7});
  expect_ints(inv0, {}, {0});
  expect_ints(cnt0, {1}, {1});
  auto [v1, inv1, cnt1] = unique(make({3, 1, 3}, {3}, DType::I32, device()));
  expect_values(v1, {2}, {1, 3});
  EXPECT_EQ(inv1.numel(), 0);
  EXPECT_EQ(cnt1.numel(), 0);
  auto [vd, invd, cntd] = unique(make({}, {0, 3}, DType::F32, device()), true, true, true, 0);
  EXPECT_EQ(vd.shape(), (Shape{0, 3}));
  expect_ints(invd, {0}, {});
  expect_error<IndexError>([&] { unique(make({1, 2}, {2}, DType::F32, device()), true, false, false, 1); },
                           {"1"});
  expect_error<ShapeError>([&] { unique(make({1}, {}, DType::F32, device()), true, false, false, 0); },
                           {"0-dimensional"});
}


// ---- more combinations ----

TEST_P(SortTest, SortLargeRandomAgainstStdSort) {
  for (DType t : {DType::F64, DType::I32}) {
    auto xv = t == DType::I32 ? test::random_values(1000, -100, 100, 60, true)
                              : test::random_values(1000, -1e6, 1e6, 61);
    Tensor x = make(xv, {1000}, t, device());
    auto [v, i] = sort(x, 0, true);
    std::vector<double> e = xv;
    std::sort(e.begin(), e.end(), [](double a, double b) { return a > b; });
    expect_values(v, {1000}, e, std::string(dtype_name(t)));
    // The indices are a permutation that reproduces the values.
    auto iv = i.to_vector<int64_t>();
    std::vector<bool> seen(1000, false);
    for (size_t k = 0; k < 1000; ++k) {
      ASSERT_TRUE(iv[k] >= 0 && iv[k] < 1000 && !seen[size_t(iv[k])]);
      seen[size_t(iv[k])] = true;
      EXPECT_EQ(xv[size_t(iv[k])], e[k]);
    }
  }
}

TEST_P(SortTest, UnstableArgsortIsAValidOrder) {
  auto xv = tie_values(40, DType::I8, 62);
  Tensor x = make(xv, {4, 10}, DType::I8, device());
  auto idx = argsort(x, 1, false, /*stable=*/false).to_vector<int64_t>();
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<bool> seen(10, false);
    for (int64_t j = 0; j < 10; ++j) {
      int64_t k = idx[size_t(r * 10 + j)];
      ASSERT_TRUE(k >= 0 && k < 10 && !seen[size_t(k)]);
      seen[size_t(k)] = true;
      if (j > 0) {
        EXPECT_LE(xv[size_t(r * 10 + idx[size_t(r * 10 + j - 1)])], xv[size_t(r * 10 + k)]);
      }
    }
  }
}

TEST_P(SortTest, SortBoolDescendingAndTopkSmallTypes) {
  std::vector<double> bv = {0, 1, 0, 1, 1};
  check_sort(make(bv, {5}, DType::Bool, device()), bv, 0, true, "bool desc");
  auto [v, i] = topk(make({3, 250, 7, 0}, {4}, DType::U8, device()), 2);
  expect_values(v, {2}, {250, 7}, "u8");
  expect_ints(i, {2}, {1, 2});
  auto [vb, ib] = topk(make({0, 1, 0}, {3}, DType::Bool, device()), 1);
  expect_values(vb, {1}, {1}, "bool");
  expect_ints(ib, {1}, {1});
}

TEST_P(SortTest, TopkUnsortedGivesTheSameSelection) {
  std::vector<double> xv(24);
  for (size_t i = 0; i < 24; ++i) xv[i] = double((i * 5) % 24);
  Tensor x = make(xv, {4, 6}, DType::F32, device());
  auto [v, i] = topk(x, 3, 1, true, /*sorted=*/false);
  auto vv = v.to_vector<double>();
  auto iv = i.to_vector<int64_t>();
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<double> row(xv.begin() + r * 6, xv.begin() + r * 6 + 6);
    std::sort(row.begin(), row.end(), std::greater<double>());
    std::vector<double> got(vv.begin() + r * 3, vv.begin() + r * 3 + 3);
    std::sort(got.begin(), got.end(), std::greater<double>());
    EXPECT_EQ(got, std::vector<double>(row.begin(), row.begin() + 3)) << "row " << r;
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(xv[size_t(r * 6 + iv[size_t(r * 3 + j)])], vv[size_t(r * 3 + j)]);
  }
}

TEST_P(SortTest, UniqueUnsortedFlagStillFindsEachValueOnce) {
  std::vector<double> xv = {4, 1, 4, 4, 2, 1};
  auto [v, inv, cnt] = unique(make(xv, {6}, DType::I64, device()), /*sorted=*/false, true, true);
  auto vv = v.to_vector<double>();
  auto iv = inv.to_vector<int64_t>();
  auto cv = cnt.to_vector<int64_t>();
  ASSERT_EQ(vv.size(), 3u);
  std::map<double, int64_t> counts;
  for (size_t k = 0; k < vv.size(); ++k) counts[vv[k]] = cv[k];
  EXPECT_EQ(counts, (std::map<double, int64_t>{{1, 2}, {2, 1}, {4, 3}}));
  for (size_t k = 0; k < xv.size(); ++k) EXPECT_EQ(vv[size_t(iv[k])], xv[k]);
}

TEST_P(SortTest, UniqueAlongLastDimOf3d) {
  // Slices along dim 2 (each of shape [2, 2]); slices 0 and 3 are equal.
  Shape s{2, 2, 4};
  std::vector<double> xv = {1, 5, 2, 1, 0, 0, 3, 0, 7, 1, 7, 7, 2, 2, 2, 2};
  auto [v, inv, cnt] = unique(make(xv, s, DType::F32, device()), true, true, true, 2);
  // Slices (k = 0..3): [1,0,7,2], [5,0,1,2], [2,3,7,2], [1,0,7,2]; sorted: k=0/3, 2, 1.
  expect_values(v, {2, 2, 3}, {1, 2, 5, 0, 3, 0, 7, 7, 1, 2, 2, 2});
  expect_ints(inv, {4}, {0, 2, 1, 0});
  expect_ints(cnt, {3}, {2, 1, 1});
}

}  // namespace

KILN_INSTANTIATE_ON_EACH_DEVICE(SortTest);

}  // namespace kiln
