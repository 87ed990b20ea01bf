// The fused backward ops of layer_norm and rms_norm (native_layer_norm_backward,
// native_rms_norm_backward) against float64 host references computed from the same inputs and
// the forward's own statistics: float32, bfloat16 and float64, one and two normalised dims,
// with and without a weight, rows short and long enough for the vector loops and their tails,
// and enough rows that each thread sums several blocks of the weight's and bias's gradients.
// The op test binary re-runs at each ISA level (CTest): the vector rows and the scalar loop.
// Errors name what was expected and what was given.
#include "kiln/ops/normalization.h"
#include "nn/nn_test_util.h"
#include "ops/reduction_ref.h"

namespace kiln::nn {
namespace {

using namespace test;

struct NormRef {
  std::vector<double> dx, dw, db;
};

// x, g: rows x n row-major; mean (empty: rms_norm), rstd: per row; w: n values or empty.
NormRef norm_backward_ref(const std::vector<double>& x, const std::vector<double>& g,
                         const std::vector<double>& w, const std::vector<double>& mean,
                         const std::vector<double>& rstd, size_t n) {
  const size_t rows = x.size() / n;
  NormRef r{std::vector<double>(x.size()), std::vector<double>(n), std::vector<double>(n)};
  for (size_t i = 0; i < rows; ++i) {
    const double m = mean.empty() ? 0.0 : mean[i], rs = rstd[i];
    double a = 0, b = 0;
    for (size_t j = 0; j < n; ++j) {
      const double xh = (x[i * n + j] - m) * rs, gw = g[i * n + j] * (w.empty() ? 1.0 : w[j]);
      a += gw;
      b += gw * xh;
      r.dw[j] += g[i * n + j] * xh;
      r.db[j] += g[i * n + j];
    }
    const double ca = mean.empty() ? 0.0 : a / double(n), cb = b / double(n);
    for (size_t j = 0; j < n; ++j) {
      const double xh = (x[i * n + j] - m) * rs, gw = g[i * n + j] * (w.empty() ? 1.0 : w[j]);
      r.dx[i * n + j] = rs * (gw - ca - xh * cb);
    }
  }
  return r;
}

double tol_of(DType t) { return t == DType::F64 ? 1e-12 : t == DType::F32 ? 2e-5 : 1.2e-2; }

TEST(NormBackward, MatchesTheReferenceForEveryDtypeShapeAndWeight) {
  struct Case {
    Shape shape;
    int64_t k;
  };
  const std::vector<Case> cases = {{{3, 7}, 1},    {{40, 33}, 1}, {{5, 6, 7}, 2},
                                   {{600, 96}, 1}, {{2, 16}, 1},  {{9, 300}, 1}};
  uint32_t seed = 20;
  for (const Case& c : cases) {
    for (DType t : {DType::F32, DType::BF16, DType::F64}) {
      for (bool layer : {true, false}) {
        for (bool weighted : {true, false}) {
          const size_t numel = size_t(numel_of(c.shape));
          size_t n = 1;
          for (int64_t i = int64_t(c.shape.size()) - c.k; i < int64_t(c.shape.size()); ++i)
            n *= size_t(c.shape[size_t(i)]);
          const Shape ws(c.shape.end() - c.k, c.shape.end());
          Tensor x = f64(rand_vals(numel, seed++, -2, 3), c.shape).to(t);
          Tensor g = f64(rand_vals(numel, seed++), c.shape).to(t);
          Tensor w = weighted ? f64(rand_vals(n, seed++, 0.5, 1.5), ws).to(t) : Tensor();
          std::vector<double> wv = weighted ? w.to_vector<double>() : std::vector<double>();
          const std::string what = std::string(dtype_name(t)) + (layer ? " layer" : " rms") +
                                   (weighted ? " weighted " : " ") + shape_str(c.shape);
          NormRef ref;
          Tensor dx, dw, db;
          if (layer) {
            auto [y, mean, rstd] = native_layer_norm(x, c.k, w, Tensor(), 1e-5);
            ref = norm_backward_ref(x.to_vector<double>(), g.to_vector<double>(), wv,
                                    mean.to_vector<double>(), rstd.to_vector<double>(), n);
            std::tie(dx, dw, db) = native_layer_norm_backward(g, x, mean, rstd, w, c.k);
          } else {
            auto [y, rstd] = native_rms_norm(x, c.k, w, 1e-5);
            ref = norm_backward_ref(x.to_vector<double>(), g.to_vector<double>(), wv, {},
                                    rstd.to_vector<double>(), n);
            std::tie(dx, dw) = native_rms_norm_backward(g, x, rstd, w, c.k);
          }
          EXPECT_EQ(dx.dtype(), t) << what;
          expect_values(dx, c.shape, ref.dx, tol_of(t), what + " dx");
          expect_values(dw, ws, ref.dw, tol_of(t), what + " dweight");
          if (layer) expect_values(db, ws, ref.db, tol_of(t), what + " dbias");
        }
      }
    }
  }
}

TEST(NormBackward, RejectsBadArguments) {
  using kiln::test::expect_error;
  Tensor x = ones({4, 6});
  auto [y, mean, rstd] = native_layer_norm(x, 1, Tensor(), Tensor(), 1e-5);
  expect_error<ShapeError>(
      [&] { native_layer_norm_backward(ones({4, 5}), x, mean, rstd, Tensor(), 1); },
      {"native_layer_norm_backward", "grad_y of the input's shape", "[4, 6]", "got [4, 5]"});
  expect_error<ShapeError>(
      [&] { native_layer_norm_backward(x, x, ones({4}), rstd, Tensor(), 1); },
      {"statistics of shape [4, 1] float32, got [4] float32"});
  expect_error<ShapeError>([&] { native_rms_norm_backward(x, x, rstd.to(DType::F64), Tensor(), 1); },
                           {"native_rms_norm_backward", "got [4, 1] float64"});
  expect_error<ShapeError>([&] { native_layer_norm_backward(x, x, mean, rstd, ones({5}), 1); },
                           {"affine parameter of shape [6], got [5]"});
  expect_error<ValueError>([&] { native_rms_norm_backward(x, x, rstd, Tensor(), 3); },
                           {"normalized_ndim must be in [1, 2], got 3"});
}

}  // namespace
}  // namespace kiln::nn
