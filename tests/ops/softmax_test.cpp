// softmax and log_softmax against float64 host references: every float dtype and layout,
// every dim, extreme values (stability), infinities, NaN, 0-d and empty inputs, the dtype
// argument, and errors.
#include <limits>

#include "ops/reduction_ref.h"

namespace kiln::test {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

class Softmax : public OnEachDevice {};

// Reference along dim of a row-major [shape] array.
std::vector<double> ref_softmax(const std::vector<double>& vals, const Shape& shape, int64_t dim,
                                bool log) {
  int64_t d = dim < 0 ? dim + int64_t(shape.size()) : dim;
  int64_t inner = 1;
  for (size_t i = size_t(d) + 1; i < shape.size(); ++i) inner *= shape[i];
  int64_t len = shape.empty() ? 1 : shape[size_t(d)];
  std::vector<double> out(vals.size());
  // Each line starts at an element whose position along dim is 0.
  for (size_t first = 0; first < vals.size(); ++first) {
    if ((int64_t(first) / inner) % len != 0) continue;
    double m = -kInf;
    for (int64_t j = 0; j < len; ++j) m = std::max(m, vals[first + size_t(j * inner)]);
    double s = 0;
    for (int64_t j = 0; j < len; ++j) s += std::exp(vals[first + size_t(j * inner)] - m);
    for (int64_t j = 0; j < len; ++j) {
      size_t i = first + size_t(j * inner);
      out[i] = log ? vals[i] - m - std::log(s) : std::exp(vals[i] - m) / s;
    }
  }
  return out;
}

TEST_P(Softmax, EveryFloatDtypeLayoutAndDim) {
  uint32_t seed = 1;
  for (DType t : float_dtypes()) {
    for (InLayout l : in_layouts()) {
      std::vector<double> vals = values_for(t, 60, seed++, -5, 5);
      Tensor x = make_input(vals, {3, 4, 5}, t, device(), l);
      for (int64_t dim : {0, 1, 2, -1, -2}) {
        for (bool log : {false, true}) {
          Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
          EXPECT_EQ(y.dtype(), t);
          EXPECT_EQ(y.device(), device());
          expect_close(y, {3, 4, 5}, ref_softmax(vals, {3, 4, 5}, dim, log),
                       std::string(dtype_name(t)) + " " + layout_name(l) + " dim " +
                           std::to_string(dim) + (log ? " log_softmax" : " softmax"));
        }
      }
    }
  }
}

TEST_P(Softmax, RowsSumToOne) {
  std::vector<double> v = random_values(7 * 33, -20, 20, 3);
  Tensor x = make(v, {7, 33}, DType::F32, device());
  expect_close(sum(softmax(x, 1), {1}), {7}, std::vector<double>(7, 1.0), Tol{1e-6, 0});
  expect_close(sum(exp(log_softmax(x, -1)), {-1}), {7}, std::vector<double>(7, 1.0),
               Tol{1e-5, 0});
}

TEST_P(Softmax, IsStableForLargeMagnitudes) {
  std::vector<double> v = {1000, 1001, 1002, -1000, -1001, -1002};
  for (DType t : {DType::F32, DType::F64}) {
    Tensor x = make(v, {2, 3}, t, device());
    expect_close(softmax(x, 1), {2, 3}, ref_softmax(v, {2, 3}, 1, false));
    expect_close(log_softmax(x, 1), {2, 3}, ref_softmax(v, {2, 3}, 1, true));
  }
  // float16 inputs whose exp overflows float16 itself.
  Tensor h = make({60000, 60000}, {2}, DType::F16, device());
  expect_close(softmax(h, 0), {2}, {0.5, 0.5});
}

TEST_P(Softmax, InfinitiesAndNaN) {
  Tensor x = make({-kInf, 0, -kInf, 1}, {4}, DType::F32, device());
  double e = std::exp(1.0);
  expect_close(softmax(x, 0), {4}, {0, 1 / (1 + e), 0, e / (1 + e)});
  expect_close(log_softmax(x, 0), {4}, {-kInf, -std::log(1 + e), -kInf, 1 - std::log(1 + e)});
  Tensor all_neg = make({-kInf, -kInf}, {2}, DType::F32, device());
  expect_close(softmax(all_neg, 0), {2}, {kNaN, kNaN});
  Tensor nan = make({1, kNaN, 2, 3, 4, 5}, {2, 3}, DType::F64, device());
  std::vector<double> row2 = ref_softmax({3, 4, 5}, {3}, 0, false);
  expect_close(softmax(nan, 1), {2, 3}, {kNaN, kNaN, kNaN, row2[0], row2[1], row2[2]});
}

// Rows long enough for the vector kernel (128: whole vectors only; 131: with a tail): a NaN
// in the first, a middle or the last vector, +inf, a row of -inf only, -inf entries among
// finite ones; float32 and bfloat16, softmax and log_softmax.
TEST_P(Softmax, LongRowsWithNaNAndInfinities) {
  for (int64_t len : {128, 131}) {
    for (int64_t nan_at : {int64_t(0), int64_t(37), len - 1}) {
      const int64_t rows = 6;
      std::vector<double> v = random_values(size_t(rows * len), -4, 4, uint32_t(len + nan_at));
      v[size_t(nan_at)] = kNaN;                                        // row 0
      v[size_t(len + (nan_at + 5) % len)] = kInf;                      // row 1
      for (int64_t j = 0; j < len; ++j) v[size_t(2 * len + j)] = -kInf;  // row 2
      for (int64_t j = 0; j < len; j += 3) v[size_t(3 * len + j)] = -kInf;  // row 3
      for (DType t : {DType::F32, DType::BF16}) {
        Tensor x = make(v, {rows, len}, t, device());
        const std::vector<double> xv = values(x);  // the values as rounded to t
        for (bool log : {false, true}) {
          const std::string what = std::string(dtype_name(t)) +
                                   (log ? " log_softmax" : " softmax") + ", rows of " +
                                   std::to_string(len) + ", NaN at " +
                                   std::to_string(nan_at);
          expect_close(log ? log_softmax(x, 1) : softmax(x, 1), {rows, len},
                       ref_softmax(xv, {rows, len}, 1, log), what);
        }
      }
    }
  }
}

// Many rows of at most 32 values (the CPU takes them a vector's width of rows at a time,
// transposed; the last rows of the input, and rows whose vector loads would pass its end, by
// the scalar fill): every length, row counts that leave partial groups, specials in the rows
// of the first group and of the last.
TEST_P(Softmax, ManyShortRowsWithSpecials) {
  for (int64_t len = 1; len <= 34; ++len) {
    for (int64_t rows : {int64_t(16), int64_t(203)}) {
      std::vector<double> v =
          random_values(size_t(rows * len), -6, 6, uint32_t(1000 + len * 7 + rows));
      auto at = [&](int64_t r, int64_t j) -> double& { return v[size_t(r * len + j % len)]; };
      for (int64_t r : {int64_t(0), rows - 9, rows - 5}) {  // the last ends on the last row
        at(r, len / 2) = kNaN;
        at(r + 1, len - 1) = kInf;
        for (int64_t j = 0; j < len; ++j) at(r + 2, j) = -kInf;
        for (int64_t j = 0; j < len; j += 3) at(r + 3, j) = -kInf;
        for (int64_t j = 0; j < len; ++j) at(r + 4, j) = j % 2 ? 1e30 : -1e30;
      }
      for (DType t : {DType::F32, DType::BF16}) {
        Tensor x = make(v, {rows, len}, t, device());
        const std::vector<double> xv = values(x);
        for (bool log : {false, true}) {
          const std::string what = std::string(dtype_name(t)) +
                                   (log ? " log_softmax" : " softmax") + " of [" +
                                   std::to_string(rows) + ", " + std::to_string(len) + "]";
          expect_close(log ? log_softmax(x, 1) : softmax(x, -1), {rows, len},
                       ref_softmax(xv, {rows, len}, 1, log), what);
        }
      }
    }
  }
}

TEST_P(Softmax, DtypeArgument) {
  Tensor i = make({1, 2, 3}, {3}, DType::I64, device());
  Tensor y = softmax(i, 0, DType::F32);
  EXPECT_EQ(y.dtype(), DType::F32);
  expect_close(y, {3}, ref_softmax({1, 2, 3}, {3}, 0, false));
  Tensor h = make({0.5, -0.25}, {2}, DType::F16, device());
  Tensor l = log_softmax(h, 0, DType::F64);
  EXPECT_EQ(l.dtype(), DType::F64);
  expect_close(l, {2}, ref_softmax({0.5, -0.25}, {2}, 0, true));
}

TEST_P(Softmax, ZeroDimAndEmpty) {
  Tensor s = full({}, 3.5, TensorOptions(DType::F32, device()));
  expect_close(softmax(s, 0), {}, {1});
  expect_close(log_softmax(s, -1), {}, {0});
  Tensor e = empty({0, 3}, TensorOptions(DType::F32, device()));
  EXPECT_EQ(softmax(e, 1).shape(), Shape({0, 3}));
  EXPECT_EQ(log_softmax(e, 0).shape(), Shape({0, 3}));
  Tensor e2 = empty({3, 0}, TensorOptions(DType::F64, device()));
  EXPECT_EQ(softmax(e2, 1).shape(), Shape({3, 0}));
}

TEST_P(Softmax, Errors) {
  Tensor i = make({1, 2}, {2}, DType::I32, device());
  expect_error<NotImplementedError>([&] { softmax(i, 0); }, {"softmax", "Int", "floating"});
  expect_error<NotImplementedError>([&] { log_softmax(i, 0); }, {"log_softmax", "Int"});
  Tensor b = make({1, 0}, {2}, DType::Bool, device());
  expect_error<NotImplementedError>([&] { softmax(b, 0); }, {"Bool"});
  Tensor x = zeros({2, 3}, TensorOptions(DType::F32, device()));
  expect_error<IndexError>([&] { softmax(x, 2); }, {"[-2, 1]", "got 2"});
  expect_error<IndexError>([&] { log_softmax(x, -3); }, {"got -3"});
  Tensor s = zeros({}, TensorOptions(DType::F32, device()));
  expect_error<IndexError>([&] { softmax(s, 1); }, {"[-1, 0]", "got 1"});
}

TEST_P(Softmax, LongRowsAreAccurate) {
  std::vector<double> v = rounded(random_values(3 * 5000, -3, 3, 9), DType::F32);
  Tensor x = make(v, {3, 5000}, DType::F32, device());
  expect_close(log_softmax(x, 1), {3, 5000}, ref_softmax(v, {3, 5000}, 1, true));
  Tensor xt = make(v, {3, 5000}, DType::F32, device()).t();  // softmax over a strided dim
  std::vector<double> vt(v.size());
  for (size_t r = 0; r < 3; ++r)
    for (size_t c = 0; c < 5000; ++c) vt[c * 3 + r] = v[r * 5000 + c];
  expect_close(softmax(xt, 0), {5000, 3}, ref_softmax(vt, {5000, 3}, 0, false));
}

// bfloat16 rows of attention-score lengths and longer ones (vector tails, threaded sizes),
// converted in registers: close to the float64 softmax, and bit for bit the float32 row's
// result on the widened values rounded once (NaN results: any NaN), with special rows (all
// -inf, a NaN, +inf, huge and tiny values) among them.
TEST_P(Softmax, Bfloat16RowsEqualTheFloat32RowsRoundedOnce) {
  const double inf = std::numeric_limits<double>::infinity();
  for (Shape shape : {Shape{3, 37, 100}, Shape{2, 12, 128, 128}, Shape{5, 300}, Shape{70, 1031},
                      Shape{9, 1}, Shape{4, 16}, Shape{4, 17}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<double> v = rounded(random_values(size_t(n), -6, 6, uint32_t(n)), DType::BF16);
    Tensor x = make(v, shape, DType::BF16, device());
    for (bool log : {false, true}) {
      Tensor y = log ? log_softmax(x, -1) : softmax(x, -1);
      EXPECT_EQ(y.dtype(), DType::BF16);
      expect_close(y, shape, ref_softmax(v, shape, -1, log),
                   shape_str(shape) + (log ? " log_softmax" : " softmax"));
    }
    // Special values in the first rows (where the rows are long enough to hold them).
    const int64_t len = shape.back();
    if (len >= 4 && n / len >= 4) {
      for (int64_t j = 0; j < len; ++j) v[size_t(j)] = -inf;            // all -inf
      v[size_t(len + 2)] = std::nan("");                               // a NaN
      v[size_t(2 * len + 1)] = inf;                                    // +inf
      v[size_t(3 * len)] = 3e38, v[size_t(3 * len + 3)] = -3e38;        // huge
    }
    x = make(v, shape, DType::BF16, device());
    for (bool log : {false, true}) {
      const std::string what = shape_str(shape) + (log ? " log_softmax" : " softmax");
      const std::vector<double> got =
          (log ? log_softmax(x, -1) : softmax(x, -1)).to_vector<double>();
      const Tensor xf = x.to(DType::F32);
      const std::vector<double> want =
          (log ? log_softmax(xf, -1) : softmax(xf, -1)).to(DType::BF16).to_vector<double>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << what << " at " << i;
          continue;
        }
        ASSERT_EQ(got[i], want[i]) << what << " at " << i;
        ASSERT_EQ(std::signbit(got[i]), std::signbit(want[i])) << what << " at " << i;
      }
    }
  }
}

// Softmax over a leading dim of a contiguous input (the tiled path: L lines by blocks of
// adjacent columns): widths that are not a multiple of the block, long lines, threaded
// sizes, float32 and bfloat16, and a column of all -inf (NaN, as PyTorch) beside a column
// holding NaN.
TEST_P(Softmax, LeadingDimsInTiles) {
  for (DType t : {DType::F32, DType::BF16}) {
    for (Shape shape : {Shape{300, 70}, Shape{2, 2100, 37}, Shape{5, 9, 4, 300}, Shape{4096, 3}}) {
      for (int64_t dim : {0, 1}) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        std::vector<double> v = rounded(random_values(size_t(n), -8, 8, uint32_t(n + dim)), t);
        int64_t inner = 1;
        for (size_t k = size_t(dim) + 1; k < shape.size(); ++k) inner *= shape[k];
        const int64_t L = shape[size_t(dim)], first = inner > 1 ? 1 : L;  // a whole line
        for (int64_t j = 0; j < L; ++j) v[size_t(first + j * inner)] = -kInf;
        v[size_t(2)] = kNaN;
        Tensor x = make(v, shape, t, device());
        for (bool log : {false, true}) {
          Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
          std::vector<double> want = ref_softmax(v, shape, dim, log);
          // The reference's all -inf column: exp(-inf - -inf) is NaN in PyTorch's formula.
          for (int64_t j = 0; j < L; ++j) want[size_t(first + j * inner)] = kNaN;
          expect_close(y, shape, want,
                       shape_str(shape) + " dim " + std::to_string(dim) + " " +
                           std::string(dtype_name(t)) + (log ? " log_softmax" : " softmax"));
        }
      }
    }
  }
}

// exp(x - max) far below float32's normal range (subnormal results, then 0), beside NaN-free
// ordinary values, in rows long enough for every vector path: each value within float32's
// smallest normal of the float64 reference (the ISA levels may give the subnormal or 0), and
// never NaN or infinite.
TEST_P(Softmax, ExponentsBelowTheNormalRange) {
  const std::vector<double> far = {0, -1, -50, -86, -87.5, -88, -90, -100, -103.5, -103.97,
                                   -104, -104.5, -150, -1e4, -1e30, -kInf};
  for (int64_t len : {int64_t(16), int64_t(40), int64_t(257)}) {
    std::vector<double> v(size_t(3 * len));
    for (size_t i = 0; i < v.size(); ++i) v[i] = far[i % far.size()] + (i / len == 1 ? 30.0 : 0.0);
    Tensor x = make(v, {3, len}, DType::F32, device());
    for (bool log : {false, true}) {
      Tensor y = log ? log_softmax(x, -1) : softmax(x, -1);
      std::vector<double> got = values(y), want = ref_softmax(values(x), {3, len}, -1, log);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_FALSE(std::isnan(got[i])) << len << " " << i;
        if (log && std::isinf(want[i])) {
          EXPECT_EQ(got[i], want[i]) << len << " " << i;
          continue;
        }
        ASSERT_TRUE(std::isfinite(got[i])) << len << " " << i;
        const double tol = log ? 1e-5 * std::max(1.0, std::abs(want[i]))
                               : 1e-6 * want[i] + 1.2e-38;
        EXPECT_NEAR(got[i], want[i], tol) << (log ? "log_softmax " : "softmax ") << len << " at "
                                          << i << " of " << v[i];
      }
    }
  }
}

// Finite rows whose smallest value lies just within, at and beyond 87.3 below their largest
// (the vector rows skip exp's clamp and zeroing only within it, decision 0151), float32 and
// bfloat16, rows short enough for the tail alone and long ones: against float64 math, results
// below float32's normal range within its smallest normal.
TEST_P(Softmax, RowsSpanningExpsRange) {
  const std::vector<double> spans = {87.0, 87.29, 87.31, 88.0, 100.0, 150.0, 1e4};
  for (int64_t len : {int64_t(7), int64_t(40), int64_t(1024)}) {
    const int64_t rows = int64_t(spans.size());
    std::vector<double> v = random_values(size_t(rows * len), -3, 3, uint32_t(len));
    for (int64_t r = 0; r < rows; ++r) {
      v[size_t(r * len + (r * 5) % len)] = 3.5;  // the largest
      v[size_t(r * len + (r * 11 + 3) % len)] = 3.5 - spans[size_t(r)];
    }
    for (DType dt : {DType::F32, DType::BF16}) {
      const std::vector<double> vr = rounded(v, dt);
      Tensor x = make(vr, {rows, len}, dt, device());
      for (bool log : {false, true}) {
        const std::vector<double> got = values((log ? log_softmax(x, -1) : softmax(x, -1))
                                                   .to(DType::F32));
        const std::vector<double> want = ref_softmax(vr, {rows, len}, -1, log);
        const double rel = dt == DType::F32 ? 1e-6 : 8e-3;
        for (size_t i = 0; i < got.size(); ++i) {
          const double tol = log ? rel * std::max(1.0, std::abs(want[i]))
                                 : rel * want[i] + 1.2e-38;
          ASSERT_NEAR(got[i], want[i], tol) << (log ? "log_softmax " : "softmax ") << len
                                            << " row " << i / size_t(len) << " of " << vr[i];
        }
      }
    }
  }
}

}  // namespace

KILN_INSTANTIATE_ON_EACH_DEVICE(Softmax);

}  // namespace kiln::test
