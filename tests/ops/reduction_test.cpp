// Reductions (sum, mean, prod, amax/amin, max/min, argmax/argmin, all/any) against float64
// references computed on host vectors, in every dtype they accept, every input layout,
// 0-d and empty inputs, several dims (negative too) with and without keepdim; plus errors.
#include <limits>

#include "ops/reduction_ref.h"

namespace kiln::test {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

class Reduction : public OnEachDevice {};

struct DimCase {
  std::vector<int64_t> dims;
  bool keepdim;
};
const std::vector<DimCase>& dim_cases() {
  static const std::vector<DimCase> v = {{{}, false}, {{}, true},     {{1}, false},
                                         {{-1}, true}, {{0, 2}, false}, {{2, 0}, true},
                                         {{0}, false}, {{-3, -2, -1}, false}};
  return v;
}

std::string describe(DType t, InLayout l, const DimCase& c) {
  std::string s = std::string(dtype_name(t)) + " " + layout_name(l) + " dims=[";
  for (int64_t d : c.dims) s += std::to_string(d) + ",";
  return s + "] keepdim=" + (c.keepdim ? "1" : "0");
}

// Runs op over every dtype x layout x dim case on a [3, 4, 5] input and compares with ref.
template <typename Op, typename Ref>
void sweep(Device dev, const std::vector<DType>& dtypes, Op op, Ref ref,
           DType (*result_dtype)(DType), uint32_t seed) {
  const Shape shape = {3, 4, 5};
  for (DType t : dtypes) {
    for (InLayout l : in_layouts()) {
      std::vector<double> vals = values_for(t, 60, seed++);
      Tensor x = make_input(vals, shape, t, dev, l);
      for (const auto& c : dim_cases()) {
        Tensor y = op(x, c.dims, c.keepdim);
        EXPECT_EQ(y.dtype(), result_dtype(t)) << describe(t, l, c);
        EXPECT_EQ(y.device(), dev);
        RefGroups g = ref_groups(vals, shape, c.dims, c.keepdim);
        expect_close(y, g.out_shape, map_groups(g, ref), describe(t, l, c));
      }
    }
  }
}

DType int64_for_ints(DType t) { return is_integral(t, true) ? DType::I64 : t; }
DType same_dtype(DType t) { return t; }
DType bool_dtype(DType) { return DType::Bool; }

TEST_P(Reduction, SumEveryDtypeLayoutAndDims) {
  sweep(device(), all_dtypes(),
        [](const Tensor& x, const Dims& d, bool k) { return sum(x, d, k); }, ref_sum,
        int64_for_ints, 1);
}

TEST_P(Reduction, SumWithoutDimsAndMethod) {
  std::vector<double> v = values_for(DType::F32, 12, 7);
  Tensor x = make(v, {3, 4}, DType::F32, device());
  expect_close(sum(x), {}, {ref_sum(v)});
  expect_close(x.sum(), {}, {ref_sum(v)});
  expect_close(x.sum({0}, true), {1, 4},
               map_groups(ref_groups(v, {3, 4}, {0}, true), ref_sum));
}

TEST_P(Reduction, SumDtypeArgument) {
  std::vector<double> v = {200, 100, 7, 1};
  Tensor u = make(v, {4}, DType::U8, device());
  Tensor wrapped = sum(u, DType::U8);  // accumulates as uint8 would: mod 256
  EXPECT_EQ(wrapped.dtype(), DType::U8);
  expect_close(wrapped, {}, {double((200 + 100 + 7 + 1) % 256)});
  Tensor wide = sum(u);
  EXPECT_EQ(wide.dtype(), DType::I64);
  expect_close(wide, {}, {308});
  Tensor i = make({1, 2, 3}, {3}, DType::I32, device());
  Tensor d = sum(i, Dims{0}, false, DType::F64);
  EXPECT_EQ(d.dtype(), DType::F64);
  expect_close(d, {}, {6});
  Tensor h = make({0.5, 0.25}, {2}, DType::F16, device());
  EXPECT_EQ(sum(h, DType::F32).dtype(), DType::F32);
}

TEST_P(Reduction, SumEmptyAndZeroDim) {
  Tensor e = zeros({0, 3}, TensorOptions(DType::F32, device()));
  expect_close(sum(e), {}, {0});
  expect_close(sum(e, {0}), {3}, {0, 0, 0});
  expect_close(sum(e, {1}), {0}, {});
  expect_close(sum(e, {1}, true), {0, 1}, {});
  Tensor s = full({}, 2.5, TensorOptions(DType::F64, device()));
  expect_close(sum(s, {0}), {}, {2.5});
  expect_close(sum(s, {-1}, true), {}, {2.5});
  expect_close(sum(s), {}, {2.5});
}

TEST_P(Reduction, SumFloat32IsAccurateOnLargeInputs) {
  // A float accumulator drifts by ~1e-3 relative here; kiln accumulates in double.
  const int64_t n = 1 << 21;
  Tensor x = full({n}, 0.1, TensorOptions(DType::F32, device()));
  double expected = double(n) * double(float(0.1));
  expect_close(sum(x), {}, {expected}, Tol{1e-7, 0});
  expect_close(mean(x), {}, {double(float(0.1))}, Tol{1e-7, 0});
}

TEST_P(Reduction, SumFloat16AccumulatesInWideType) {
  // A float16 accumulator stops at 2048 when adding ones.
  Tensor x = ones({10000}, TensorOptions(DType::F16, device()));
  expect_close(sum(x), {}, {10000}, Tol{0, 0});
  Tensor b = ones({4000}, TensorOptions(DType::BF16, device()));
  expect_close(sum(b), {}, {4000}, Tol{0, 0});
}

TEST_P(Reduction, SumFloat64IsCompensated) {
  Tensor x = make({1e16, 1.0, -1e16, 1.0}, {4}, DType::F64, device());
  expect_close(sum(x), {}, {2.0}, Tol{0, 0});
}

TEST_P(Reduction, SumPropagatesInfAndNaN) {
  Tensor x = make({1, kInf, 2, kNaN, kInf, -kInf}, {3, 2}, DType::F32, device());
  expect_close(sum(x, {1}), {3}, {kInf, kNaN, kNaN});
}

TEST_P(Reduction, MeanEveryFloatDtypeLayoutAndDims) {
  sweep(device(), float_dtypes(),
        [](const Tensor& x, const Dims& d, bool k) { return mean(x, d, k); },
        [](const std::vector<double>& g) { return ref_sum(g) / double(g.size()); }, same_dtype,
        100);
}

TEST_P(Reduction, MeanOfIntegersIsRuntimeError) {
  Tensor x = make({1, 2}, {2}, DType::I64, device());
  expect_error<Error>([&] { mean(x); }, {"mean(): could not infer output dtype",
                                             "floating point", "Got: Long"});
  Tensor b = make({1, 0}, {2}, DType::Bool, device());
  expect_error<Error>([&] { mean(b, {0}); }, {"Got: Bool"});
}

TEST_P(Reduction, MeanOfEmptyIsNaN) {
  Tensor e = empty({0, 2}, TensorOptions(DType::F32, device()));
  expect_close(mean(e), {}, {kNaN});
  expect_close(mean(e, {0}), {2}, {kNaN, kNaN});
}

TEST_P(Reduction, ProdEveryDtypeAndLayout) {
  std::vector<DType> dtypes = all_dtypes();
  for (DType t : dtypes) {
    for (InLayout l : in_layouts()) {
      std::vector<double> vals = values_for(t, 60, 300, -2, 2);
      Tensor x = make_input(vals, {3, 4, 5}, t, device(), l);
      for (int64_t dim : {0, 1, 2, -1}) {
        for (bool keep : {false, true}) {
          Tensor y = prod(x, dim, keep);
          EXPECT_EQ(y.dtype(), int64_for_ints(t));
          RefGroups g = ref_groups(vals, {3, 4, 5}, {dim}, keep);
          expect_close(y, g.out_shape, map_groups(g, [](const std::vector<double>& v) {
                         double p = 1;
                         for (double e : v) p *= e;
                         return p;
                       }), describe(t, l, {{dim}, keep}));
        }
      }
      if (is_floating(t)) continue;  // the float product of 60 values is tested above
      double p = 1;
      for (double e : vals) p *= e;
      if (std::fabs(p) < 1e15) expect_close(prod(x), {}, {p});
    }
  }
}

TEST_P(Reduction, ProdEmptyIsOneAndDtypeArgument) {
  Tensor e = empty({2, 0}, TensorOptions(DType::I32, device()));
  Tensor p = prod(e, 1);
  EXPECT_EQ(p.dtype(), DType::I64);
  expect_close(p, {2}, {1, 1});
  expect_close(prod(e), {}, {1});
  Tensor f = make({1.5, 2, -2}, {3}, DType::F32, device());
  Tensor d = prod(f, DType::F64);
  EXPECT_EQ(d.dtype(), DType::F64);
  expect_close(d, {}, {-6});
}

double ref_max(const std::vector<double>& g) {
  double m = -kInf;
  for (double v : g) {
    if (std::isnan(v)) return v;
    m = std::max(m, v);
  }
  return m;
}
double ref_min(const std::vector<double>& g) {
  double m = kInf;
  for (double v : g) {
    if (std::isnan(v)) return v;
    m = std::min(m, v);
  }
  return m;
}

TEST_P(Reduction, AmaxAminEveryDtypeLayoutAndDims) {
  sweep(device(), all_dtypes(),
        [](const Tensor& x, const Dims& d, bool k) { return amax(x, d, k); }, ref_max, same_dtype,
        400);
  sweep(device(), all_dtypes(),
        [](const Tensor& x, const Dims& d, bool k) { return amin(x, d, k); }, ref_min, same_dtype,
        500);
}

// (value, first index) of the extremum of g; NaN wins at its first occurrence.
std::pair<double, double> ref_arg(const std::vector<double>& g, bool is_max) {
  double best = g[0];
  size_t bi = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(best)) break;
    if (std::isnan(g[i]) || (is_max ? g[i] > best : g[i] < best)) {
      best = g[i];
      bi = i;
    }
  }
  return {best, double(bi)};
}

TEST_P(Reduction, MaxMinWithDimGiveValuesAndFirstIndices) {
  for (DType t : all_dtypes()) {
    for (InLayout l : in_layouts()) {
      // Few distinct values: many ties, so "first index" matters.
      std::vector<double> vals = values_for(is_floating(t) ? DType::I32 : t, 60, 600, -1, 1);
      Tensor x = make_input(vals, {3, 4, 5}, t, device(), l);
      for (int64_t dim : {0, 1, 2, -2}) {
        for (bool keep : {false, true}) {
          for (bool is_max : {true, false}) {
            auto [v, i] = is_max ? max(x, dim, keep) : min(x, dim, keep);
            std::string what = describe(t, l, {{dim}, keep}) + (is_max ? " max" : " min");
            EXPECT_EQ(v.dtype(), t);
            EXPECT_EQ(i.dtype(), DType::I64);
            RefGroups g = ref_groups(vals, {3, 4, 5}, {dim}, keep);
            expect_close(v, g.out_shape, map_groups(g, [&](const auto& grp) {
                           return ref_arg(grp, is_max).first;
                         }), what);
            expect_close(i, g.out_shape, map_groups(g, [&](const auto& grp) {
                           return ref_arg(grp, is_max).second;
                         }), what);
          }
        }
      }
    }
  }
}

TEST_P(Reduction, ArgmaxArgminWithAndWithoutDim) {
  for (DType t : {DType::F32, DType::BF16, DType::I32, DType::U8, DType::F64}) {
    for (InLayout l : in_layouts()) {
      std::vector<double> vals = values_for(t, 24, 700, -2, 2);
      Tensor x = make_input(vals, {2, 3, 4}, t, device(), l);
      for (bool is_max : {true, false}) {
        Tensor flat = is_max ? argmax(x) : argmin(x);
        expect_close(flat, {}, {ref_arg(vals, is_max).second}, layout_name(l));
        Tensor kept = is_max ? argmax(x, std::nullopt, true) : argmin(x, std::nullopt, true);
        expect_close(kept, {1, 1, 1}, {ref_arg(vals, is_max).second});
        for (int64_t dim : {0, -1, 1}) {
          Tensor y = is_max ? argmax(x, dim) : argmin(x, dim);
          RefGroups g = ref_groups(vals, {2, 3, 4}, {dim}, false);
          expect_close(y, g.out_shape, map_groups(g, [&](const auto& grp) {
                         return ref_arg(grp, is_max).second;
                       }));
        }
      }
    }
  }
}

TEST_P(Reduction, NaNPropagatesThroughMaxMinAndArg) {
  std::vector<double> v = {1, kNaN, 3, kNaN, -1, 5, 2, 2, 7};
  for (DType t : float_dtypes()) {
    Tensor x = make(v, {3, 3}, t, device());
    expect_close(max(x), {}, {kNaN});
    expect_close(min(x), {}, {kNaN});
    expect_close(amax(x, {1}), {3}, {kNaN, kNaN, 7});
    expect_close(amin(x, {0}), {3}, {kNaN, kNaN, 3});
    auto [mv, mi] = max(x, 1);
    expect_close(mv, {3}, {kNaN, kNaN, 7});
    expect_close(mi, {3}, {1, 0, 2});
    auto [nv, ni] = min(x, 0);
    expect_close(nv, {3}, {kNaN, kNaN, 3});
    expect_close(ni, {3}, {1, 0, 0});
    expect_close(argmax(x), {}, {1});
    expect_close(argmin(x), {}, {1});
  }
}

TEST_P(Reduction, MaxMinFullAndZeroDim) {
  std::vector<double> v = values_for(DType::I16, 30, 800, -50, 50);
  Tensor x = make_input(v, {5, 6}, DType::I16, device(), InLayout::Transposed);
  expect_close(max(x), {}, {ref_max(v)});
  expect_close(min(x), {}, {ref_min(v)});
  Tensor s = full({}, -4, TensorOptions(DType::F32, device()));
  expect_close(max(s), {}, {-4});
  auto [sv, si] = max(s, 0);
  expect_close(sv, {}, {-4});
  expect_close(si, {}, {0});
  auto [kv, ki] = min(s, -1, true);
  expect_close(kv, {}, {-4});
  expect_close(argmax(s), {}, {0});
  expect_close(argmin(s, 0), {}, {0});
  expect_close(amax(s, {0}, true), {}, {-4});
}

TEST_P(Reduction, ReductionsWithoutIdentityRejectEmpty) {
  Tensor e = empty({0}, TensorOptions(DType::F32, device()));
  expect_error<Error>([&] { max(e); },
                           {"max(): Expected reduction dim to be specified", "numel() == 0"});
  expect_error<Error>([&] { min(e); }, {"min()", "numel() == 0"});
  expect_error<IndexError>([&] { argmax(e); }, {"argmax()", "numel() == 0"});
  expect_error<IndexError>([&] { argmin(e); }, {"argmin()", "numel() == 0"});
  Tensor e2 = empty({2, 0}, TensorOptions(DType::I32, device()));
  expect_error<IndexError>([&] { max(e2, 1); },
                           {"max(): Expected reduction dim 1 to have non-zero size"});
  expect_error<IndexError>([&] { argmin(e2, -1); }, {"argmin()", "dim 1", "non-zero size"});
  expect_error<Error>([&] { amax(e2); }, {"amax()", "Expected reduction dim to be specified"});
  expect_error<IndexError>([&] { amin(e2, {1}, true); }, {"amin()"});
  // Reducing a non-empty dim of an empty tensor is fine.
  auto [v, i] = max(e2, 0);
  EXPECT_EQ(v.shape(), Shape({0}));
  EXPECT_EQ(i.shape(), Shape({0}));
  EXPECT_EQ(amax(e2, {0}).shape(), Shape({0}));
}

TEST_P(Reduction, BadDimsAreRejected) {
  Tensor x = zeros({2, 3, 4}, TensorOptions(DType::F32, device()));
  expect_error<IndexError>([&] { sum(x, {3}); }, {"expected to be in range of [-3, 2]", "got 3"});
  expect_error<IndexError>([&] { mean(x, {-4}); }, {"[-3, 2]", "got -4"});
  expect_error<IndexError>([&] { max(x, 5); }, {"got 5"});
  expect_error<IndexError>([&] { argmax(x, -9); }, {"got -9"});
  expect_error<IndexError>([&] { prod(x, 3); }, {"got 3"});
  expect_error<IndexError>([&] { all(x, 3); }, {"got 3"});
  expect_error<ValueError>([&] { sum(x, {1, -2}); }, {"dim 1 appears multiple times"});
  expect_error<ValueError>([&] { amax(x, {0, 0}); }, {"dim 0 appears multiple times"});
  Tensor s = zeros({}, TensorOptions(DType::F32, device()));
  expect_error<IndexError>([&] { sum(s, {1}); }, {"[-1, 0]", "got 1"});
}

TEST_P(Reduction, AllAnyOnEveryDtype) {
  for (DType t : all_dtypes()) {
    for (InLayout l : in_layouts()) {
      std::vector<double> vals = values_for(t, 60, 900, 0, 1);  // many zeros
      Tensor x = make_input(vals, {3, 4, 5}, t, device(), l);
      auto all_ref = [](const std::vector<double>& g) {
        for (double v : g)
          if (v == 0) return 0.0;
        return 1.0;
      };
      auto any_ref = [](const std::vector<double>& g) {
        for (double v : g)
          if (v != 0) return 1.0;
        return 0.0;
      };
      Tensor a = all(x), o = any(x);
      EXPECT_EQ(a.dtype(), DType::Bool);
      EXPECT_EQ(o.dtype(), DType::Bool);
      expect_close(a, {}, {all_ref(vals)});
      expect_close(o, {}, {any_ref(vals)});
      for (int64_t dim : {0, 1, -1}) {
        for (bool keep : {false, true}) {
          RefGroups g = ref_groups(vals, {3, 4, 5}, {dim}, keep);
          expect_close(all(x, dim, keep), g.out_shape, map_groups(g, all_ref));
          expect_close(any(x, dim, keep), g.out_shape, map_groups(g, any_ref));
        }
      }
    }
  }
}

TEST_P(Reduction, AllAnyEdgeCases) {
  Tensor nan = make({kNaN, 1}, {2}, DType::F32, device());
  expect_close(all(nan), {}, {1});  // NaN is nonzero
  Tensor e = empty({0, 2}, TensorOptions(DType::I8, device()));
  expect_close(all(e), {}, {1});
  expect_close(any(e), {}, {0});
  expect_close(all(e, 0), {2}, {1, 1});
  expect_close(any(e, 1), {0}, {});
  Tensor s = full({}, 0, TensorOptions(DType::Bool, device()));
  expect_close(any(s, 0), {}, {0});
}

TEST_P(Reduction, PermutedAndSlicedInputs) {
  std::vector<double> base = values_for(DType::F64, 2 * 3 * 4 * 5, 1000);
  Tensor x = make(base, {2, 3, 4, 5}, DType::F64, device());
  Tensor p = x.permute({2, 0, 3, 1});  // [4, 2, 5, 3]
  std::vector<double> pv = values(p);
  for (const auto& dims : std::vector<Dims>{{1, 3}, {0}, {2, 1}, {}}) {
    RefGroups g = ref_groups(pv, {4, 2, 5, 3}, dims, false);
    expect_close(sum(p, dims), g.out_shape, map_groups(g, ref_sum));
    expect_close(amax(p, dims), g.out_shape, map_groups(g, ref_max));
  }
  Tensor sl = x.slice(1, 1, 3).slice(3, 0, 5, 2);  // [2, 2, 4, 3]
  std::vector<double> sv = values(sl);
  RefGroups g = ref_groups(sv, {2, 2, 4, 3}, {0, 3}, true);
  expect_close(sum(sl, {0, 3}, true), g.out_shape, map_groups(g, ref_sum));
}

// Kept dims that were expanded (stride 0) beside ordinary ones, reduced along the last dim:
// the fast paths walk the kept dims as one stride when they collapse, and a stride-0 dim
// inside them once passed as "nothing walked yet", so [1031, 3, 2] read 1031 * 3 runs at the
// outer stride and wrote outputs past the end of the result (heap corruption; found by
// tests/python/test_random_layouts.py). Many outputs (the threaded short-run path) and few.
TEST_P(Reduction, ExpandedKeptDims) {
  for (DType dt : {DType::F32, DType::BF16, DType::F64}) {
    for (int64_t n : {int64_t(1031), int64_t(3)}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n " + std::to_string(n));
      std::vector<double> base = rounded(values_for(DType::F64, size_t(n * 5 * 2), 1200), dt);
      Tensor x = make(base, {n, 5, 2}, dt, device());
      Tensor e = x.narrow(1, 0, 1).expand({n, 3, 2});  // strides (10, 0, 1)
      std::vector<double> ev = values(e);
      for (const auto& dims : std::vector<Dims>{{2}, {0}, {0, 2}}) {
        RefGroups g = ref_groups(ev, {n, 3, 2}, dims, false);
        expect_close(sum(e, dims), g.out_shape, map_groups(g, ref_sum));
        expect_close(amax(e, dims), g.out_shape, map_groups(g, ref_max));
        expect_close(amin(e, dims), g.out_shape, map_groups(g, ref_min));
      }
      RefGroups g = ref_groups(ev, {n, 3, 2}, {2}, false);
      expect_close(mean(e, {2}), g.out_shape, map_groups(g, [](const auto& grp) {
                     double s = 0;
                     for (double v : grp) s += v;
                     return s / double(grp.size());
                   }));
    }
  }
}

TEST_P(Reduction, IntegerSumsAndProductsAreExactInInt64) {
  const int64_t big = int64_t(1) << 60;
  Tensor x = tensor_from(std::vector<int64_t>{big, 3, -big + 1}, TensorOptions(DType::I64, device()));
  EXPECT_EQ(sum(x).item<int64_t>(), 4);  // through double this would be 0 or off by one
  Tensor i32 = tensor_from(std::vector<int32_t>{INT32_MAX, INT32_MAX},
                           TensorOptions(DType::I32, device()));
  EXPECT_EQ(sum(i32).item<int64_t>(), int64_t(INT32_MAX) * 2);  // int64 result, no overflow
  Tensor p = tensor_from(std::vector<int64_t>{int64_t(1) << 32, int64_t(1) << 32, 5},
                         TensorOptions(DType::I64, device()));
  EXPECT_EQ(prod(p).item<int64_t>(), 0);  // wraps modulo 2^64, as PyTorch
  Tensor m = tensor_from(std::vector<int64_t>{big + 1, big + 2, big}, TensorOptions(DType::I64, device()));
  EXPECT_EQ(amax(m).item<int64_t>(), big + 2);
  EXPECT_EQ(argmin(m).item<int64_t>(), 2);
  EXPECT_EQ(cumsum(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{big, big + 3, 4}));
}

TEST_P(Reduction, LargerShapesAcrossOuterAndInnerDims) {
  const Shape shape = {16, 300, 7};
  std::vector<double> v = values_for(DType::F32, size_t(numel_of(shape)), 1100);
  Tensor x = make(v, shape, DType::F32, device());
  for (const auto& dims : std::vector<Dims>{{1}, {0, 2}, {0}, {2}, {}}) {
    RefGroups g = ref_groups(v, shape, dims, true);
    expect_close(sum(x, dims, true), g.out_shape, map_groups(g, ref_sum));
    expect_close(amin(x, dims, true), g.out_shape, map_groups(g, ref_min));
  }
  auto [val, idx] = max(x, 1);
  RefGroups g = ref_groups(v, shape, {1}, false);
  expect_close(val, g.out_shape, map_groups(g, ref_max));
  expect_close(idx, g.out_shape, map_groups(g, [](const auto& grp) {
                 return ref_arg(grp, true).second;
               }));
}

TEST_P(Reduction, KeepdimShapesOfEveryOp) {
  Tensor x = ones({2, 3, 4, 5}, TensorOptions(DType::F32, device()));
  EXPECT_EQ(sum(x, {1, 3}, true).shape(), Shape({2, 1, 4, 1}));
  EXPECT_EQ(sum(x, {1, 3}, false).shape(), Shape({2, 4}));
  EXPECT_EQ(mean(x, {-1}, true).shape(), Shape({2, 3, 4, 1}));
  EXPECT_EQ(prod(x, 2, true).shape(), Shape({2, 3, 1, 5}));
  EXPECT_EQ(amax(x, {0, 1, 2, 3}, true).shape(), Shape({1, 1, 1, 1}));
  EXPECT_EQ(amin(x, {}, false).shape(), Shape({}));
  EXPECT_EQ(std::get<0>(max(x, 0, true)).shape(), Shape({1, 3, 4, 5}));
  EXPECT_EQ(std::get<1>(min(x, -3)).shape(), Shape({2, 4, 5}));
  EXPECT_EQ(argmax(x, 3, true).shape(), Shape({2, 3, 4, 1}));
  EXPECT_EQ(argmin(x, std::nullopt, true).shape(), Shape({1, 1, 1, 1}));
  EXPECT_EQ(all(x, 1, true).shape(), Shape({2, 1, 4, 5}));
  EXPECT_EQ(any(x, 1).shape(), Shape({2, 4, 5}));
  EXPECT_EQ(var(x, {0, 2}, 1, true).shape(), Shape({1, 3, 1, 5}));
  EXPECT_EQ(norm(x, 2, {3}, true).shape(), Shape({2, 3, 4, 1}));
  EXPECT_EQ(logsumexp(x, {0}, false).shape(), Shape({3, 4, 5}));
}

}  // namespace

KILN_INSTANTIATE_ON_EACH_DEVICE(Reduction);

}  // namespace kiln::test
