// The fused group normalization ops (native_group_norm, native_group_norm_backward) against
// float64 host references: float32, bfloat16, float64 and float16, with and without the weight
// and bias, channels whose runs are shorter than a vector, have tails, or span several of the
// backward's float32 lane runs (4096 values), one channel per group and one group per sample,
// inputs large enough for the threaded path, and values far from zero (the backward sums
// g * (x - mean), not g * x). The op test binary re-runs at each ISA level (CTest): the vector
// functions and the scalar loops. First and second derivatives through autograd (the fused op
// and the formulas in ops), and errors that name what was expected and what was given.
#include <tuple>

#include "kiln/ops/normalization.h"
#include "nn/nn_test_util.h"
#include "ops/reduction_ref.h"

namespace kiln::nn {
namespace {

using namespace test;
namespace F = functional;

struct GroupShape {
  int64_t n, c, p, groups;
};

struct Ref {
  std::vector<double> y, mean, rstd, dx, dw, db;
};

// Forward from x; backward from the given statistics (the op's own, as its derivative uses).
Ref forward_ref(const GroupShape& s, const std::vector<double>& x, const std::vector<double>& w,
                const std::vector<double>& b, double eps) {
  const int64_t d = s.c / s.groups, m = d * s.p;
  Ref r{std::vector<double>(x.size()), {}, {}, {}, {}, {}};
  for (int64_t t = 0; t < s.n * s.groups; ++t) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < m; ++i) mean += x[size_t(t * m + i)];
    mean /= double(m);
    for (int64_t i = 0; i < m; ++i) var += std::pow(x[size_t(t * m + i)] - mean, 2);
    const double rstd = 1 / std::sqrt(var / double(m) + eps);
    r.mean.push_back(mean);
    r.rstd.push_back(rstd);
    for (int64_t i = 0; i < m; ++i) {
      const size_t c = size_t(t % s.groups * d + i / s.p);
      r.y[size_t(t * m + i)] = (x[size_t(t * m + i)] - mean) * rstd * (w.empty() ? 1 : w[c]) +
                               (b.empty() ? 0 : b[c]);
    }
  }
  return r;
}

void backward_ref(const GroupShape& s, const std::vector<double>& x, const std::vector<double>& g,
                  const std::vector<double>& w, const std::vector<double>& mean,
                  const std::vector<double>& rstd, Ref& r) {
  const int64_t d = s.c / s.groups, m = d * s.p;
  r.dx.assign(x.size(), 0);
  r.dw.assign(size_t(s.c), 0);
  r.db.assign(size_t(s.c), 0);
  for (int64_t t = 0; t < s.n * s.groups; ++t) {
    const double mu = mean[size_t(t)], rs = rstd[size_t(t)];
    auto channel = [&](int64_t i) { return size_t(t % s.groups * d + i / s.p); };
    double a = 0, bb = 0;
    for (int64_t i = 0; i < m; ++i) {
      const size_t at = size_t(t * m + i);
      const double xh = (x[at] - mu) * rs, gw = g[at] * (w.empty() ? 1 : w[channel(i)]);
      a += gw;
      bb += gw * xh;
      r.dw[channel(i)] += g[at] * xh;
      r.db[channel(i)] += g[at];
    }
    for (int64_t i = 0; i < m; ++i) {
      const size_t at = size_t(t * m + i);
      const double xh = (x[at] - mu) * rs, gw = g[at] * (w.empty() ? 1 : w[channel(i)]);
      r.dx[at] = rs * (gw - a / double(m) - xh * bb / double(m));
    }
  }
}

double tol_of(DType t) {
  switch (t) {
    case DType::F64: return 1e-12;
    case DType::F32: return 2e-5;
    case DType::F16: return 3e-3;
    default: return 1.2e-2;
  }
}

TEST(GroupNorm, FusedOpsMatchFloat64ForEveryDtypeShapeAndAffine) {
  const std::vector<GroupShape> shapes = {
      {2, 6, 35, 3},  {3, 8, 4100, 2}, {1, 4, 33, 4},  {4, 6, 1, 1},
      {2, 16, 27, 4}, {8, 32, 130, 8}, {2, 4, 64, 2}};
  uint32_t seed = 40;
  for (const GroupShape& s : shapes) {
    const Shape shape{s.n, s.c, s.p};
    const size_t numel = size_t(numel_of(shape));
    for (DType t : {DType::F32, DType::BF16, DType::F64, DType::F16}) {
      for (int affine = 0; affine < 3; ++affine) {  // none, weight only, weight and bias
        // Values far from zero for float32 / float64: sum(g * x) - mean * sum(g) would lose
        // the digits that the reference keeps.
        const double lo = t == DType::F32 || t == DType::F64 ? 98 : -2, hi = lo + 5;
        Tensor x = f64(rand_vals(numel, seed++, lo, hi), shape).to(t);
        Tensor g = f64(rand_vals(numel, seed++), shape).to(t);
        Tensor w = affine > 0 ? f64(rand_vals(size_t(s.c), seed++, 0.5, 1.5), {s.c}).to(t)
                              : Tensor();
        Tensor b = affine > 1 ? f64(rand_vals(size_t(s.c), seed++), {s.c}).to(t) : Tensor();
        const std::vector<double> wv = w.defined() ? w.to_vector<double>() : std::vector<double>();
        const std::vector<double> bv = b.defined() ? b.to_vector<double>() : std::vector<double>();
        const std::vector<double> xv = x.to_vector<double>(), gv = g.to_vector<double>();
        const std::string what = std::string(dtype_name(t)) + " " + shape_str(shape) + " G=" +
                                 std::to_string(s.groups) + " affine=" + std::to_string(affine);
        Ref ref = forward_ref(s, xv, wv, bv, 1e-5);
        auto [y, mean, rstd] = native_group_norm(x, w, b, s.groups, 1e-5);
        const DType stat = t == DType::F64 ? DType::F64 : DType::F32;
        EXPECT_EQ(y.dtype(), t) << what;
        EXPECT_EQ(mean.dtype(), stat) << what;
        expect_values(y, shape, ref.y, tol_of(t), what + " y");
        // Relative to the statistic (float32 keeps 7 digits of a mean near 100).
        expect_values(mean, {s.n, s.groups}, ref.mean, t == DType::F64 ? 1e-13 : 1e-6,
                      what + " mean");
        expect_values(rstd, {s.n, s.groups}, ref.rstd, t == DType::F64 ? 1e-11 : 1e-4,
                      what + " rstd");
        backward_ref(s, xv, gv, wv, mean.to_vector<double>(), rstd.to_vector<double>(), ref);
        auto [dx, dw, db] = native_group_norm_backward(g, x, mean, rstd, w, s.groups);
        EXPECT_EQ(dx.dtype(), t) << what;
        expect_values(dx, shape, ref.dx, tol_of(t), what + " dx");
        expect_values(dw, {s.c}, ref.dw, tol_of(t), what + " dweight");
        expect_values(db, {s.c}, ref.db, tol_of(t), what + " dbias");
      }
    }
  }
}

TEST(GroupNorm, NonContiguousInputsAndFourDims) {
  // A transposed input and gradient (the op layer copies them dense) over [N, C, H, W].
  Tensor x = f64(rand_vals(2 * 6 * 5 * 4, 7, -2, 2), {2, 6, 5, 4}).transpose(2, 3);
  Tensor g = f64(rand_vals(2 * 6 * 5 * 4, 8), {2, 6, 5, 4}).transpose(2, 3);
  Tensor w = f64(rand_vals(6, 9, 0.5, 1.5), {6});
  const GroupShape s{2, 6, 20, 3};
  const std::vector<double> xv = x.contiguous().to_vector<double>();
  Ref ref = forward_ref(s, xv, w.to_vector<double>(), {}, 1e-5);
  auto [y, mean, rstd] = native_group_norm(x.to(DType::F32), w.to(DType::F32), Tensor(), 3, 1e-5);
  expect_values(y, {2, 6, 4, 5}, ref.y, 2e-5, "y");
  backward_ref(s, xv, g.contiguous().to_vector<double>(), w.to_vector<double>(),
               mean.to_vector<double>(), rstd.to_vector<double>(), ref);
  auto [dx, dw, db] = native_group_norm_backward(g.to(DType::F32), x.to(DType::F32), mean, rstd,
                                                 w.to(DType::F32), 3);
  expect_values(dx, {2, 6, 4, 5}, ref.dx, 2e-5, "dx");
  expect_values(dw, {6}, ref.dw, 2e-5, "dweight");
}

TEST(GroupNorm, FirstAndSecondDerivatives) {
  Tensor x = leaf({2, 6, 5}, 50, -2, 2), w = leaf({6}, 51, 0.5, 1.5), b = leaf({6}, 52);
  auto fn = [](const V& in) { return F::group_norm(in[0], 3, in[1], in[2], 1e-5); };
  KILN_EXPECT_GRADCHECK(fn, (V{x, w, b}));
  auto second = autograd::gradgradcheck(fn, V{x, w, b});
  EXPECT_TRUE(second.ok) << second.message;
  auto plain = [](const V& in) { return F::group_norm(in[0], 2, Tensor(), Tensor(), 1e-5); };
  KILN_EXPECT_GRADCHECK(plain, (V{x}));
  // The statistics' own gradients: mean and rstd as outputs.
  auto stats = [](const V& in) {
    auto [y, mean, rstd] = native_group_norm(in[0], in[1], Tensor(), 3, 1e-5);
    return mean * 3.0 + rstd * rstd;
  };
  KILN_EXPECT_GRADCHECK(stats, (V{x, w}));
  auto both = [](const V& in) {
    auto [y, mean, rstd] = native_group_norm(in[0], in[1], in[2], 2, 1e-5);
    return sum(y * y, {1, 2}) + mean * rstd.reshape({2, 2, 1}).sum({2});
  };
  KILN_EXPECT_GRADCHECK(both, (V{x, w, b}));
  auto both_second = autograd::gradgradcheck(both, V{x, w, b});
  EXPECT_TRUE(both_second.ok) << both_second.message;
}

TEST(GroupNorm, RejectsBadArguments) {
  using kiln::test::expect_error;
  Tensor x = ones({4, 6, 3});
  expect_error<ValueError>([&] { native_group_norm(x, Tensor(), Tensor(), 4, 1e-5); },
                           {"native_group_norm", "channels (6)", "num_groups (4)"});
  expect_error<ValueError>([&] { native_group_norm(x, Tensor(), Tensor(), 0, 1e-5); },
                           {"num_groups (0)"});
  expect_error<ShapeError>([&] { native_group_norm(ones({6}), Tensor(), Tensor(), 2, 1e-5); },
                           {"[N, C, *]", "got shape [6]"});
  expect_error<ShapeError>([&] { native_group_norm(x, ones({3}), Tensor(), 2, 1e-5); },
                           {"a weight of shape [6], got [3]"});
  expect_error<Error>(
      [&] { native_group_norm(x, Tensor(), ones({6}, TensorOptions(DType::F64)), 2, 1e-5); },
      {"a bias of the input's dtype", "float32", "got float64"});
  expect_error<Error>([&] { native_group_norm(ones({2, 4}, TensorOptions(DType::I64)), Tensor(),
                                              Tensor(), 2, 1e-5); },
                      {"floating-point input", "int64"});
  auto [y, mean, rstd] = native_group_norm(x, Tensor(), Tensor(), 2, 1e-5);
  expect_error<ShapeError>(
      [&] { native_group_norm_backward(ones({4, 6}), x, mean, rstd, Tensor(), 2); },
      {"native_group_norm_backward", "grad_y of the input's shape", "[4, 6, 3]", "got [4, 6]"});
  expect_error<ShapeError>(
      [&] { native_group_norm_backward(x, x, ones({4, 3}), rstd, Tensor(), 2); },
      {"statistics of shape [4, 2] float32, got [4, 3] float32"});
  expect_error<ShapeError>(
      [&] { native_group_norm_backward(x, x, mean, rstd.to(DType::F64), Tensor(), 2); },
      {"got [4, 2] float64"});
}

}  // namespace
}  // namespace kiln::nn
