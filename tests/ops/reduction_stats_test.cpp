// var, std, norm, logsumexp, cumsum and cumprod against float64 host references, in every
// accepted dtype and layout, with 0-d, empty and extreme inputs; plus their errors.
#include <limits>

#include "ops/reduction_ref.h"

namespace kiln::test {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

class ReductionStats : public OnEachDevice {};

double ref_var(const std::vector<double>& g, double correction) {
  double m = ref_sum(g) / double(g.size());
  double s = 0;
  for (double v : g) s += (v - m) * (v - m);
  return s / std::max(0.0, double(g.size()) - correction);
}

const std::vector<std::vector<int64_t>>& dim_sets() {
  static const std::vector<std::vector<int64_t>> v = {{}, {0}, {-1}, {0, 2}, {1, 2}};
  return v;
}

TEST_P(ReductionStats, VarStdEveryFloatDtypeLayoutDimsAndCorrection) {
  uint32_t seed = 1;
  for (DType t : float_dtypes()) {
    for (InLayout l : in_layouts()) {
      std::vector<double> vals = values_for(t, 60, seed++);
      Tensor x = make_input(vals, {3, 4, 5}, t, device(), l);
      for (const auto& dims : dim_sets()) {
        for (double corr : {1.0, 0.0, 2.5}) {
          for (bool keep : {false, true}) {
            RefGroups g = ref_groups(vals, {3, 4, 5}, dims, keep);
            std::string what = std::string(dtype_name(t)) + " " + layout_name(l);
            Tensor v = var(x, dims, corr, keep);
            EXPECT_EQ(v.dtype(), t);
            expect_close(v, g.out_shape, map_groups(g, [&](const auto& grp) {
                           return ref_var(grp, corr);
                         }), what + " var");
            expect_close(kiln::std(x, dims, corr, keep), g.out_shape,
                         map_groups(g, [&](const auto& grp) {
                           return std::sqrt(ref_var(grp, corr));
                         }), what + " std");
          }
        }
      }
    }
  }
}

TEST_P(ReductionStats, VarIsAccurateWithALargeMean) {
  // sum(x^2)/n - mean^2 loses every digit here; two passes do not.
  std::vector<double> v = random_values(1000, 0, 1, 5);
  for (auto& e : v) e += 1e8;
  Tensor x = make(v, {1000}, DType::F64, device());
  expect_close(var(x), {}, {ref_var(v, 1)}, Tol{1e-9, 0});
  std::vector<double> f = rounded(random_values(4096, 1000, 1001, 6), DType::F32);
  Tensor xf = make(f, {4096}, DType::F32, device());
  expect_close(var(xf), {}, {ref_var(f, 1)}, Tol{1e-5, 0});
}

TEST_P(ReductionStats, VarEdgeCases) {
  Tensor one = make({3}, {1}, DType::F32, device());
  expect_close(var(one), {}, {kNaN});  // n - 1 == 0
  expect_close(var(one, {}, 0), {}, {0});
  Tensor e = empty({0, 3}, TensorOptions(DType::F64, device()));
  expect_close(var(e, {0}), {3}, {kNaN, kNaN, kNaN});
  expect_close(kiln::std(e), {}, {kNaN});
  Tensor s = full({}, 2, TensorOptions(DType::F32, device()));
  expect_close(var(s, {0}, 0), {}, {0});
  Tensor two = make({1, 3}, {2}, DType::F32, device());
  expect_close(var(two, {}, 3), {}, {kInf});  // divisor max(0, n - correction) == 0
  Tensor inf = make({1, kInf}, {2}, DType::F32, device());
  expect_close(var(inf), {}, {kNaN});
}

TEST_P(ReductionStats, VarStdRejectIntegers) {
  Tensor x = make({1, 2, 3}, {3}, DType::I32, device());
  expect_error<Error>([&] { var(x); }, {"var()", "floating point", "Int"});
  expect_error<Error>([&] { kiln::std(x); }, {"std()", "Int"});
  Tensor f = zeros({2, 2}, TensorOptions(DType::F32, device()));
  expect_error<IndexError>([&] { var(f, {2}); }, {"[-2, 1]", "got 2"});
}

double ref_norm(const std::vector<double>& g, double p) {
  if (std::isinf(p)) {
    double best = p > 0 ? 0 : kInf;
    for (double v : g) best = p > 0 ? std::max(best, std::fabs(v)) : std::min(best, std::fabs(v));
    return best;
  }
  double s = 0;
  for (double v : g) s += p == 0 ? (v != 0) : std::pow(std::fabs(v), p);
  return p == 0 ? s : std::pow(s, 1 / p);
}

TEST_P(ReductionStats, NormEveryOrderDtypeLayoutAndDims) {
  uint32_t seed = 50;
  for (DType t : float_dtypes()) {
    for (InLayout l : in_layouts()) {
      std::vector<double> vals = values_for(t, 60, seed++);
      vals[7] = 0;  // p = 0 counts nonzeros
      Tensor x = make_input(vals, {3, 4, 5}, t, device(), l);
      for (double p : {2.0, 1.0, kInf, -kInf, 0.0, 3.0, 0.5, -1.0}) {
        for (const auto& dims : dim_sets()) {
          bool keep = dims.size() == 1;
          RefGroups g = ref_groups(vals, {3, 4, 5}, dims, keep);
          Tensor n = norm(x, p, dims, keep);
          EXPECT_EQ(n.dtype(), t);
          expect_close(n, g.out_shape, map_groups(g, [&](const auto& grp) {
                         return ref_norm(grp, p);
                       }), std::string(dtype_name(t)) + " " + layout_name(l) + " p=" +
                               std::to_string(p));
        }
      }
    }
  }
}

TEST_P(ReductionStats, NormDefaultsEmptyAndErrors) {
  Tensor x = make({3, 4}, {2}, DType::F32, device());
  expect_close(norm(x), {}, {5});
  Tensor e = empty({0}, TensorOptions(DType::F32, device()));
  expect_close(norm(e), {}, {0});
  expect_close(norm(e, 1), {}, {0});
  expect_error<ValueError>([&] { norm(e, kInf); },
                           {"cannot compute the inf norm on an empty tensor"});
  expect_error<ValueError>([&] { norm(e, -1); }, {"-1 norm", "identity"});
  Tensor i = make({3, 4}, {2}, DType::I64, device());
  expect_error<Error>([&] { norm(i); }, {"Expected a floating point", "Got Long"});
  Tensor nan = make({1, kNaN}, {2}, DType::F64, device());
  expect_close(norm(nan, kInf), {}, {kNaN});
}

double ref_lse(const std::vector<double>& g) {
  double m = -kInf;
  for (double v : g) m = std::max(m, v);
  if (std::isinf(m)) m = 0;
  double s = 0;
  for (double v : g) s += std::exp(v - m);
  return std::log(s) + m;
}

TEST_P(ReductionStats, LogsumexpEveryFloatDtypeLayoutAndDims) {
  uint32_t seed = 90;
  for (DType t : float_dtypes()) {
    for (InLayout l : in_layouts()) {
      std::vector<double> vals = values_for(t, 60, seed++, -10, 10);
      Tensor x = make_input(vals, {3, 4, 5}, t, device(), l);
      for (const auto& dims : dim_sets()) {
        for (bool keep : {false, true}) {
          RefGroups g = ref_groups(vals, {3, 4, 5}, dims, keep);
          expect_close(logsumexp(x, dims, keep), g.out_shape, map_groups(g, ref_lse),
                       std::string(dtype_name(t)) + " " + layout_name(l));
        }
      }
    }
  }
}

// Rows long enough for whole vectors plus a tail, enough of them to be split over the
// threads (float32 and bfloat16 take the vector row function): against float64, with rows
// holding NaN, +inf, only -inf, and a large offset.
TEST_P(ReductionStats, LogsumexpOfManyLongRows) {
  const int64_t rows = 300, cols = 517;
  std::vector<double> v = values_for(DType::F32, size_t(rows * cols), 95, -20, 20);
  for (int64_t j = 0; j < cols; ++j) {
    v[size_t(1 * cols + j)] = -kInf;
    v[size_t(3 * cols + j)] += 5000;
  }
  v[size_t(5 * cols + 400)] = kNaN;
  v[size_t(7 * cols + 3)] = kInf;
  v[size_t(9 * cols + 516)] = -kInf;
  for (DType t : {DType::F32, DType::BF16}) {
    std::vector<double> r = v;
    for (double& x : r) x = round_to(x, t);
    Tensor x = make(r, {rows, cols}, t, device());
    RefGroups g = ref_groups(r, {rows, cols}, {1}, false);
    const Tol tol = t == DType::F32 ? Tol{2e-6, 2e-6} : Tol{8e-3, 8e-3};
    expect_close(logsumexp(x, {1}), g.out_shape, map_groups(g, ref_lse), tol,
                 std::string(dtype_name(t)));
  }
}

TEST_P(ReductionStats, LogsumexpIsStableAndHandlesInfinities) {
  Tensor big = make({1000, 1000, -kInf, 1, 2, 3}, {2, 3}, DType::F32, device());
  expect_close(logsumexp(big, {1}), {2}, {1000 + std::log(2.0), ref_lse({1, 2, 3})});
  Tensor neg = make({-kInf, -kInf, -1000, -1000}, {2, 2}, DType::F64, device());
  expect_close(logsumexp(neg, {1}), {2}, {-kInf, -1000 + std::log(2.0)});
  Tensor pinf = make({kInf, 1, kNaN, 1}, {2, 2}, DType::F32, device());
  expect_close(logsumexp(pinf, {-1}), {2}, {kInf, kNaN});
  Tensor e = empty({2, 0}, TensorOptions(DType::F32, device()));
  expect_close(logsumexp(e, {1}), {2}, {-kInf, -kInf});
  Tensor i = make({1, 2}, {2}, DType::I32, device());
  Tensor li = logsumexp(i, {0});
  EXPECT_EQ(li.dtype(), default_float_dtype());
  expect_close(li, {}, {ref_lse({1, 2})});
}

std::vector<double> ref_scan(const std::vector<double>& vals, const Shape& shape, int64_t dim,
                             bool is_prod) {
  std::vector<double> out(vals.size());
  int64_t d = dim < 0 ? dim + int64_t(shape.size()) : dim;
  int64_t inner = 1;
  for (size_t i = size_t(d) + 1; i < shape.size(); ++i) inner *= shape[i];
  int64_t len = shape[size_t(d)];
  for (size_t i = 0; i < vals.size(); ++i) {
    int64_t pos = (int64_t(i) / inner) % len;
    double prev = pos == 0 ? (is_prod ? 1 : 0) : out[i - size_t(inner)];
    out[i] = is_prod ? prev * vals[i] : prev + vals[i];
  }
  return out;
}

TEST_P(ReductionStats, CumsumCumprodEveryDtypeLayoutAndDim) {
  uint32_t seed = 120;
  for (DType t : all_dtypes()) {
    for (InLayout l : in_layouts()) {
      std::vector<double> vals = values_for(t, 60, seed++, -2, 2);
      Tensor x = make_input(vals, {3, 4, 5}, t, device(), l);
      for (int64_t dim : {0, 1, 2, -1, -3}) {
        for (bool is_prod : {false, true}) {
          Tensor y = is_prod ? cumprod(x, dim) : cumsum(x, dim);
          EXPECT_EQ(y.dtype(), is_integral(t, true) ? DType::I64 : t);
          std::vector<double> ref = ref_scan(vals, {3, 4, 5}, dim, is_prod);
          // Low-precision floats: the reference rounds each step like the output does not.
          Tol tol = tol_for(y.dtype());
          if (t == DType::F16 || t == DType::BF16) tol = Tol{tol.rtol * 4, tol.atol * 8};
          expect_close(y, {3, 4, 5}, ref, tol,
                       std::string(dtype_name(t)) + " " + layout_name(l) + " dim " +
                           std::to_string(dim) + (is_prod ? " cumprod" : " cumsum"));
        }
      }
    }
  }
}

TEST_P(ReductionStats, CumsumDtypesZeroDimEmptyAndErrors) {
  Tensor u = make({200, 100, 10}, {3}, DType::U8, device());
  Tensor w = cumsum(u, 0, DType::U8);
  EXPECT_EQ(w.dtype(), DType::U8);
  expect_close(w, {3}, {200, 44, 54});
  Tensor d = cumsum(u, 0, DType::F64);
  EXPECT_EQ(d.dtype(), DType::F64);
  expect_close(d, {3}, {200, 300, 310});
  Tensor b = make({1, 0, 1}, {3}, DType::Bool, device());
  expect_close(cumsum(b, 0), {3}, {1, 1, 2});
  Tensor s = full({}, 3, TensorOptions(DType::F32, device()));
  expect_close(cumsum(s, 0), {}, {3});
  expect_close(cumprod(s, -1), {}, {3});
  Tensor e = empty({0, 4}, TensorOptions(DType::F32, device()));
  EXPECT_EQ(cumsum(e, 1).shape(), Shape({0, 4}));
  EXPECT_EQ(cumprod(e, 0).shape(), Shape({0, 4}));
  Tensor x = zeros({2, 3}, TensorOptions(DType::F32, device()));
  expect_error<IndexError>([&] { cumsum(x, 2); }, {"[-2, 1]", "got 2"});
  expect_error<IndexError>([&] { cumprod(x, -3); }, {"got -3"});
}

TEST_P(ReductionStats, CumsumFloat32AccumulatesAccurately) {
  const int64_t n = 1 << 20;
  Tensor x = full({n}, 0.1, TensorOptions(DType::F32, device()));
  Tensor c = cumsum(x, 0);
  double last = values(c.slice(0, n - 1, n))[0];
  EXPECT_NEAR(last, double(n) * double(float(0.1)), 1e-7 * double(n) * 0.1);
}

}  // namespace

KILN_INSTANTIATE_ON_EACH_DEVICE(ReductionStats);

}  // namespace kiln::test
