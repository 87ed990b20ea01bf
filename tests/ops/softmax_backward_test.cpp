// The fused backward ops of softmax and log_softmax (softmax_backward_data,
// log_softmax_backward_data) against float64 host references: every float dtype, input
// layouts (made contiguous by the op), every dim, rows long enough for the vector loops and
// their tails, threaded sizes, and errors naming what was expected and what was given. The op
// test binary re-runs at each ISA level (CTest), so the vector rows and the scalar lines are
// both checked.
#include "kiln/ops/softmax_backward.h"
#include "ops/reduction_ref.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

// softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g), along dim of row-major
// [shape] arrays.
std::vector<double> ref_backward(const std::vector<double>& g, const std::vector<double>& y,
                                 const Shape& shape, int64_t dim, bool log) {
  const int64_t d = dim < 0 ? dim + int64_t(shape.size()) : dim;
  int64_t inner = 1;
  for (size_t i = size_t(d) + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t len = shape.empty() ? 1 : shape[size_t(d)];
  std::vector<double> out(g.size());
  for (size_t first = 0; first < g.size(); ++first) {
    if ((int64_t(first) / inner) % len != 0) continue;
    double s = 0;
    for (int64_t j = 0; j < len; ++j) {
      const size_t i = first + size_t(j * inner);
      s += log ? g[i] : g[i] * y[i];
    }
    for (int64_t j = 0; j < len; ++j) {
      const size_t i = first + size_t(j * inner);
      out[i] = log ? g[i] - std::exp(y[i]) * s : y[i] * (g[i] - s);
    }
  }
  return out;
}

// Tolerance: the result's rounding plus a row sum's (of magnitude up to sqrt(len) for
// log_softmax's plain sum of g) in the dtype's precision.
Tol backward_tol(DType t, int64_t len) {
  Tol tol = tol_for(t);
  tol.atol *= std::sqrt(double(std::max<int64_t>(len, 1)));
  return tol;
}

TEST(SoftmaxBackward, EveryFloatDtypeLayoutAndDim) {
  uint32_t seed = 3;
  const Shape shape{3, 4, 37};
  for (DType t : float_dtypes()) {
    for (InLayout l : in_layouts()) {
      // y as softmax / log_softmax would give it: values in (0, 1) / below 0.
      std::vector<double> gv = values_for(t, 3 * 4 * 37, seed++, -2, 2);
      std::vector<double> pv = values_for(t, 3 * 4 * 37, seed++, 0.01, 0.99);
      std::vector<double> lv = values_for(t, 3 * 4 * 37, seed++, -6, -0.01);
      Tensor g = make_input(gv, shape, t, kCpu, l);
      Tensor p = make_input(pv, shape, t, kCpu, l);
      Tensor lp = make_input(lv, shape, t, kCpu, l);
      for (int64_t dim : {0, 1, 2, -1}) {
        const std::string what = std::string(dtype_name(t)) + " " + layout_name(l) + " dim " +
                                 std::to_string(dim);
        const int64_t len = shape[size_t(dim < 0 ? dim + 3 : dim)];
        Tensor a = softmax_backward_data(g, p, dim);
        EXPECT_EQ(a.dtype(), t);
        expect_close(a, shape, ref_backward(gv, pv, shape, dim, false), backward_tol(t, len),
                     what + " softmax");
        expect_close(log_softmax_backward_data(g, lp, dim), shape,
                     ref_backward(gv, lv, shape, dim, true), backward_tol(t, len),
                     what + " log_softmax");
      }
    }
  }
}

TEST(SoftmaxBackward, LongAndManyRowsOverThreads) {
  for (int64_t len : {1, 15, 16, 17, 33, 256, 5003}) {
    const int64_t rows = len >= 256 ? 40 : 2000;
    const Shape shape{rows, len};
    for (DType t : {DType::F32, DType::BF16}) {
      std::vector<double> gv = values_for(t, size_t(rows * len), uint32_t(len), -1, 1);
      std::vector<double> pv = values_for(t, size_t(rows * len), uint32_t(len + 1), 0, 0.5);
      std::vector<double> lv = values_for(t, size_t(rows * len), uint32_t(len + 2), -9, 0);
      Tensor g = make(gv, shape, t, kCpu);
      const std::string what = std::string(dtype_name(t)) + " len " + std::to_string(len);
      expect_close(softmax_backward_data(g, make(pv, shape, t, kCpu), 1), shape,
                   ref_backward(gv, pv, shape, 1, false), backward_tol(t, len), what);
      expect_close(log_softmax_backward_data(g, make(lv, shape, t, kCpu), -1), shape,
                   ref_backward(gv, lv, shape, 1, true), backward_tol(t, len), what + " log");
    }
  }
}

TEST(SoftmaxBackward, ZeroDimAndEmpty) {
  Tensor s = full({}, 0.5, TensorOptions(DType::F32));
  expect_close(softmax_backward_data(s, s, 0), {}, {0.5 * (0.5 - 0.25)});
  Tensor e = zeros({0, 3});
  EXPECT_EQ(softmax_backward_data(e, e, 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(log_softmax_backward_data(e, e, 0).shape(), (Shape{0, 3}));
}

TEST(SoftmaxBackward, Errors) {
  Tensor x = zeros({2, 3});
  expect_error<ValueError>([&] { softmax_backward_data(x, zeros({3, 2}), 1); },
                           {"_softmax_backward_data", "one shape and dtype", "[2, 3]", "[3, 2]"});
  expect_error<ValueError>([&] { log_softmax_backward_data(x, x.to(DType::F64), 1); },
                           {"_log_softmax_backward_data", "float32", "float64"});
  Tensor i = zeros({2, 3}, TensorOptions(DType::I32));
  expect_error<NotImplementedError>([&] { softmax_backward_data(i, i, 1); },
                                    {"floating point gradient", "int32"});
  expect_error<IndexError>([&] { softmax_backward_data(x, x, 2); }, {"got 2"});
}

}  // namespace
}  // namespace kiln::test
