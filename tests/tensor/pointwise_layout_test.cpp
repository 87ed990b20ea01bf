// Pointwise results laid out as their inputs (kiln/tensor/pointwise_layout.h, decision 0129):
// the stride order PyTorch's TensorIterator gives, and the values against a float64 sum.
#include <cmath>

#include "kiln/tensor/pointwise_layout.h"
#include "ops/test_util.h"

namespace kiln {
namespace {

TEST(DenseStridesOrderedBy, TheFirstOperandThatOrdersADimPairDecides) {
  // One operand: its order (a transpose, a permutation of 3 dims).
  EXPECT_EQ(dense_strides_ordered_by({3, 4}, {{1, 3}}), (Strides{1, 3}));
  EXPECT_EQ(dense_strides_ordered_by({2, 3, 4}, {{1, 8, 2}}), (Strides{1, 8, 2}));
  // A broadcast operand (stride 0) orders nothing: the next one decides.
  EXPECT_EQ(dense_strides_ordered_by({3, 4}, {{0, 1}, {1, 3}}), (Strides{1, 3}));
  // The first operand decides against a later row-major one, and the other way round.
  EXPECT_EQ(dense_strides_ordered_by({3, 4}, {{1, 3}, {4, 1}}), (Strides{1, 3}));
  EXPECT_EQ(dense_strides_ordered_by({3, 4}, {{4, 1}, {1, 3}}), (Strides{4, 1}));
  // Nothing orders the dims: row-major.
  EXPECT_EQ(dense_strides_ordered_by({3, 4}, {{0, 0}}), (Strides{4, 1}));
  // Channels-last [N, C, H, W] with a per-channel operand first.
  EXPECT_EQ(dense_strides_ordered_by({2, 3, 4, 5}, {{0, 1, 0, 0}, {60, 1, 15, 3}}),
            (Strides{60, 1, 15, 3}));
  // A non-dense operand (every other column of a transposed [8, 6]) orders as its strides.
  EXPECT_EQ(dense_strides_ordered_by({4, 6}, {{2, 8}}), (Strides{1, 4}));
}

using test::OnEachDevice;
class PointwiseLayout : public OnEachDevice {};

// x[i][j] = i * cols + j + 1 (row-major values, so transposes are easy to write down).
Tensor counting(int64_t rows, int64_t cols, Device d) {
  return (arange(rows * cols, TensorOptions(DType::F32, d)) + 1).reshape({rows, cols});
}

TEST_P(PointwiseLayout, TransposedInputsGiveTransposedResults) {
  const Device d = device();
  const Tensor x = counting(3, 4, d);  // x.t() is [4, 3] with strides (1, 4)
  const Tensor xt = x.t();
  std::vector<double> xt_values;
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t i = 0; i < 3; ++i) xt_values.push_back(double(i * 4 + j + 1));

  const Tensor e = exp(xt);
  EXPECT_EQ(e.strides(), (Strides{1, 4}));
  std::vector<double> want;
  for (double v : xt_values) want.push_back(std::exp(v));
  test::expect_close(e, {4, 3}, want);

  const Tensor s = add(xt, xt);  // same layout: the flat path
  EXPECT_EQ(s.strides(), (Strides{1, 4}));
  want.clear();
  for (double v : xt_values) want.push_back(2 * v);
  test::expect_close(s, {4, 3}, want);

  const Tensor y = counting(4, 3, d);  // row-major [4, 3]
  const Tensor first_transposed = mul(xt, y);
  const Tensor first_row_major = mul(y, xt);
  EXPECT_EQ(first_transposed.strides(), (Strides{1, 4}));
  EXPECT_EQ(first_row_major.strides(), (Strides{3, 1}));
  want.clear();
  for (size_t k = 0; k < xt_values.size(); ++k) want.push_back(xt_values[k] * double(k + 1));
  test::expect_close(first_transposed, {4, 3}, want);
  test::expect_close(first_row_major, {4, 3}, want);

  // A row vector broadcast along the rows: the transposed operand still decides.
  const Tensor row = arange(3, TensorOptions(DType::F32, d));
  const Tensor b = sub(row, xt);
  EXPECT_EQ(b.strides(), (Strides{1, 4}));
  want.clear();
  for (size_t k = 0; k < xt_values.size(); ++k) want.push_back(double(k % 3) - xt_values[k]);
  test::expect_close(b, {4, 3}, want);
}

TEST_P(PointwiseLayout, ContiguousInputsStayRowMajor) {
  const Device d = device();
  const Tensor x = counting(3, 4, d);
  EXPECT_TRUE(add(x, x).is_contiguous());
  EXPECT_TRUE(add(x, arange(4, TensorOptions(DType::F32, d))).is_contiguous());
  EXPECT_TRUE(neg(x.slice(1, 0, 2)).is_contiguous());  // a row-major slice: dense row-major
}
KILN_INSTANTIATE_ON_EACH_DEVICE(PointwiseLayout);

// A row-major result from a transposed operand takes the tiled traversal (strided_loop.h's
// for_each_run_range_tiled); sizes that are no multiple of its tiles, batches whose tiles end
// at a batch's edge, threaded and not, in place and not, float32 and bfloat16.
TEST(PointwiseLayoutTiled, TransposedOperandIntoRowMajorResult) {
  for (const Shape& s : {Shape{3, 70, 130}, Shape{1, 257, 300}, Shape{2, 5, 9}}) {
    const int64_t b = s[0], m = s[1], n = s[2];
    const Tensor src = arange(b * m * n, TensorOptions(DType::F32)).reshape({b, n, m});
    const Tensor xt = src.permute({0, 2, 1});  // [b, m, n], strides (n*m, 1, m)
    const Tensor y = full({b, m, n}, 0.5, TensorOptions(DType::F32));
    std::vector<double> want;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < n; ++c) want.push_back(double(i * n * m + c * m + r) + 0.5);
    const Tensor sum = add(y, xt);  // y first: a row-major result
    EXPECT_TRUE(sum.is_contiguous());
    test::expect_close(sum, s, want, test::Tol{0.0, 0.0});
    Tensor in_place = y.clone();
    in_place.add_(xt);
    test::expect_close(in_place, s, want, test::Tol{0.0, 0.0});
    // bfloat16: against the same sum of the rounded operands made contiguous first (one
    // rounding of an exact float32 sum either way).
    const Tensor ybf = y.to(DType::BF16), xbf = xt.to(DType::BF16);
    const Tensor bf = add(ybf, xbf);
    EXPECT_TRUE(bf.is_contiguous());
    const Tensor ref = add(ybf.to(DType::F32), xbf.contiguous().to(DType::F32)).to(DType::BF16);
    test::expect_close(bf.to(DType::F64), s, test::values(ref.to(DType::F64)), test::Tol{0.0, 0.0});
  }
}

}  // namespace
}  // namespace kiln
