// index_lerp (kiln/ops/indexing.h) against float64 host math: along the first, a middle and
// the last dim (the row-blend and the per-element paths of the CPU kernel), at sizes that
// spread over threads, with weights on both sides of 0.5 and at the ends (lerp's two
// formulas; weight 1 gives index1's value exactly), repeated and equal indices, float32 /
// float64 / bfloat16, non-contiguous inputs; errors for bad indices and mismatched inputs;
// float64 gradients against finite differences (gradcheck), for x and for the weight.
#include "kiln/autograd/autograd.h"
#include "kiln/autograd/gradcheck.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

// Host index_lerp of row-major values of shape along dim.
std::vector<double> reference(const std::vector<double>& x, const Shape& shape, int64_t dim,
                              const std::vector<int64_t>& i0, const std::vector<int64_t>& i1,
                              const std::vector<double>& w) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t size = shape[size_t(dim)], n = int64_t(i0.size());
  std::vector<double> r(size_t(outer * n * inner));
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < inner; ++k) {
        const double a = x[size_t((b * size + i0[size_t(j)]) * inner + k)];
        const double c = x[size_t((b * size + i1[size_t(j)]) * inner + k)];
        r[size_t((b * n + j) * inner + k)] = a + w[size_t(j)] * (c - a);
      }
  return r;
}

struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<double> w;
};

// n blended positions over a dim of `size`: the last one weight 1 (exactly index1's value),
// some equal indices, weights on both sides of 0.5.
Taps taps(int64_t size, int64_t n, uint32_t seed) {
  Taps t;
  const std::vector<double> r = random_values(size_t(3 * n), 0, 1, seed);
  for (int64_t j = 0; j < n; ++j) {
    t.i0.push_back(std::min<int64_t>(size - 1, int64_t(r[size_t(3 * j)] * double(size))));
    t.i1.push_back(j % 5 == 0 ? t.i0.back()
                              : std::min<int64_t>(size - 1, int64_t(r[size_t(3 * j + 1)] *
                                                                     double(size))));
    t.w.push_back(j == n - 1 ? 1.0 : j == 0 ? 0.0 : r[size_t(3 * j + 2)]);
  }
  return t;
}

Tensor ints(const std::vector<int64_t>& v) {
  return tensor_from<int64_t>(v, {int64_t(v.size())}, TensorOptions(DType::I64, kCpu));
}

TEST(IndexLerp, EveryDimAgainstFloat64) {
  const Shape shape = {3, 37, 29, 41};  // 131,979 elements: threaded
  const std::vector<double> xv = random_values(size_t(numel_of(shape)), -4, 4, 1);
  for (DType t : {DType::F32, DType::F64, DType::BF16}) {
    const std::vector<double> xr = rounded(xv, t);
    const Tensor x = make(xr, shape, t, kCpu);
    for (int64_t dim : {0, 1, 3}) {
      const Taps tp = taps(shape[size_t(dim)], 2 * shape[size_t(dim)] + 3, uint32_t(10 + dim));
      const std::vector<double> wr = rounded(tp.w, t);
      Shape out_shape = shape;
      out_shape[size_t(dim)] = int64_t(tp.i0.size());
      const Tensor y = index_lerp(x, dim, ints(tp.i0), ints(tp.i1), make(wr, {int64_t(wr.size())},
                                                                        t, kCpu));
      const std::string what = std::string(dtype_name(t)) + " dim " + std::to_string(dim);
      expect_close(y, out_shape, reference(xr, shape, dim, tp.i0, tp.i1, wr), what);
      // Weight 1 reproduces index1's values exactly (the formula's second branch).
      const Tensor last = y.select(dim, out_shape[size_t(dim)] - 1);
      const Tensor want = x.select(dim, tp.i1.back());
      EXPECT_EQ(last.to_vector<double>(), want.to_vector<double>()) << what;
    }
  }
}

TEST(IndexLerp, NonContiguousInputAndNegativeDim) {
  const std::vector<double> xv = random_values(6 * 7, -1, 1, 2);
  const Tensor x = make(xv, {6, 7}, DType::F32, kCpu).t();  // [7, 6], transposed
  std::vector<double> xt(42);
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < 6; ++j) xt[size_t(i * 6 + j)] = double(float(xv[size_t(j * 7 + i)]));
  const Taps tp = taps(6, 9, 3);
  const std::vector<double> wr = rounded(tp.w, DType::F32);
  expect_close(index_lerp(x, -1, ints(tp.i0), ints(tp.i1), make(wr, {9}, DType::F32, kCpu)),
               {7, 9}, reference(xt, {7, 6}, 1, tp.i0, tp.i1, wr), "transposed, dim -1");
}

TEST(IndexLerp, BadInputsAreErrors) {
  const Tensor x = make(random_values(12, -1, 1, 4), {3, 4}, DType::F32, kCpu);
  const Tensor w = make({0.25, 0.75}, {2}, DType::F32, kCpu);
  EXPECT_THROW(index_lerp(x, 1, ints({0, 4}), ints({1, 2}), w), IndexError);
  EXPECT_THROW(index_lerp(x, 1, ints({0, -1}), ints({1, 2}), w), IndexError);
  EXPECT_THROW(index_lerp(x, 1, ints({0, 1, 2}), ints({1, 2}), w), ShapeError);
  EXPECT_THROW(index_lerp(x, 1, ints({0, 1}), ints({1, 2}), w.to(DType::F64)), TypeError);
  EXPECT_THROW(index_lerp(x, 2, ints({0, 1}), ints({1, 2}), w), Error);
  EXPECT_THROW(index_lerp(x.to(DType::I64), 1, ints({0, 1}), ints({1, 2}), w), TypeError);
  EXPECT_THROW(index_lerp(x, 1, ints({0, 1}).to(DType::I32), ints({1, 2}), w), IndexError);
}

TEST(IndexLerp, GradientsMatchFiniteDifferences) {
  Generator g(5);
  Tensor x = rand({4, 5, 3}, TensorOptions(DType::F64), &g).contiguous();
  Tensor w = rand({6}, TensorOptions(DType::F64), &g).contiguous();
  autograd::set_requires_grad(x);
  autograd::set_requires_grad(w);
  const Tensor i0 = ints({0, 1, 1, 4, 2, 0}), i1 = ints({1, 2, 1, 3, 4, 0});  // repeats
  for (int64_t dim : {1, 2}) {
    const Tensor j0 = dim == 2 ? ints({0, 1, 1, 2, 2, 0}) : i0;
    const Tensor j1 = dim == 2 ? ints({1, 2, 1, 0, 2, 0}) : i1;
    auto r = autograd::gradcheck(
        [&](const std::vector<Tensor>& in) { return index_lerp(in[0], dim, j0, j1, in[1]); },
        {x, w});
    EXPECT_TRUE(r.ok) << "dim " << dim << ": " << r.message;
  }
}

// index_lerp_backward (autograd's first derivative on the CPU) against the float64 host sum:
// along the first, a middle and the last dim, positions gathered from repeated and equal
// indices; float32 / float64 accumulated in place, bfloat16 / float16 in float32 rounded once.
TEST(IndexLerp, BackwardAgainstFloat64) {
  const Shape shape{6, 40, 33};
  for (int64_t dim : {0, 1, 2}) {
    const int64_t size = shape[size_t(dim)], n = 2 * size + 3;
    const Taps t = taps(size, n, uint32_t(11 + dim));
    Shape gs = shape;
    gs[size_t(dim)] = n;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= shape[size_t(d)];
    for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
    const std::vector<double> gv = random_values(size_t(outer * n * inner), -1, 1, 7);
    for (DType dt : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " dim " + std::to_string(dim));
      const Tensor g = make(gv, gs, dt, kCpu);
      const Tensor wt = make(t.w, {n}, dt, kCpu);
      const std::vector<double> gq = g.to_vector<double>(), wq = wt.to_vector<double>();
      std::vector<double> want(size_t(outer * size * inner), 0.0), mag(want.size(), 0.0);
      for (int64_t b = 0; b < outer; ++b)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t k = 0; k < inner; ++k) {
            const double v = gq[size_t((b * n + j) * inner + k)], w = wq[size_t(j)];
            const size_t a0 = size_t((b * size + t.i0[size_t(j)]) * inner + k);
            const size_t a1 = size_t((b * size + t.i1[size_t(j)]) * inner + k);
            want[a0] += v * (1 - w);
            want[a1] += v * w;
            mag[a0] += std::fabs(v);
            mag[a1] += std::fabs(v);
          }
      const Tensor got = index_lerp_backward(g, dim, size, ints(t.i0), ints(t.i1), wt);
      ASSERT_EQ(got.shape(), shape);
      ASSERT_EQ(got.dtype(), dt);
      const std::vector<double> r = got.to_vector<double>();
      const double eps = dt == DType::F64 ? 1e-15 : dt == DType::F32 ? 1e-6
                         : dt == DType::BF16 ? 1.0 / 128 : 1.0 / 1024;
      for (size_t i = 0; i < r.size(); ++i)
        ASSERT_NEAR(r[i], want[i], eps * (std::fabs(want[i]) + 1e-6 * mag[i]) + 1e-6 * mag[i])
            << "at " << i;
    }
  }
  const Tensor g = make(std::vector<double>(6, 1.0), {2, 3}, DType::F32, kCpu);
  const Tensor w = make({0.5, 0.5, 0.5}, {3}, DType::F32, kCpu);
  EXPECT_THROW(index_lerp_backward(g, 1, 2, ints({0, 2, 1}), ints({1, 1, 1}), w), IndexError);
  EXPECT_THROW(index_lerp_backward(g, 1, 4, ints({0, 1}), ints({1, 1}), w), ShapeError);
  EXPECT_THROW(index_lerp_backward(g, 1, 4, ints({0, 1, 2}), ints({1, 1, 1}),
                                   w.to(DType::F64)), ShapeError);
}

}  // namespace
}  // namespace kiln::test
