// Views: geometry against hand-computed expectations, shared storage and version counter,
// and element values against a host reference of the same indexing.
#include "kiln/tensor/empty.h"
#include "ops/test_util.h"

namespace kiln {
namespace {

using test::OnEachDevice;

class Views : public OnEachDevice {};

Tensor iota(Shape shape, Device d, DType t = DType::F32) {
  return arange(numel_of(shape), TensorOptions(t, d)).view(shape);
}

TEST_P(Views, ViewReshapeShareStorageAndVersion) {
  Tensor a = iota({2, 3, 4}, device());
  Tensor v = a.view({6, 4});
  EXPECT_TRUE(v.shares_storage_with(a));
  EXPECT_TRUE(v.is_view());
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  EXPECT_EQ(a.view({-1}).shape(), (Shape{24}));
  EXPECT_EQ(a.view({4, -1}).shape(), (Shape{4, 6}));
  uint64_t before = a.version();
  v.fill_(1.0);
  EXPECT_GT(a.version(), before);
  EXPECT_EQ(a.version(), v.version());
  EXPECT_EQ(a.sum().item<double>(), 24.0);
  EXPECT_THROW(a.view({5, 5}), ShapeError);
  EXPECT_THROW(a.view({-1, -1}), ShapeError);
}

TEST_P(Views, ViewOfNonContiguousFailsButReshapeCopies) {
  Tensor a = iota({3, 4}, device());
  Tensor t = a.t();
  EXPECT_FALSE(t.is_contiguous());
  try {
    t.view({12});
    FAIL() << "view of a transposed tensor must fail";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("reshape"), std::string::npos);
  }
  Tensor r = t.reshape({12});
  EXPECT_FALSE(r.shares_storage_with(a));
  test::expect_close(r, {12}, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  // A view that keeps merged dims contiguous works on a non-contiguous tensor.
  Tensor b = iota({4, 6}, device()).slice(1, 0, 6, 2);  // [4,3] stride [6,2]
  Tensor bv = b.view({2, 2, 3});
  EXPECT_TRUE(bv.shares_storage_with(b));
  EXPECT_EQ(bv.strides(), (Strides{12, 6, 2}));
}

TEST_P(Views, PermuteTransposeT) {
  Tensor a = iota({2, 3, 4}, device());
  Tensor p = a.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Strides{1, 12, 4}));
  std::vector<double> want;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) want.push_back(i * 12 + j * 4 + k);
  test::expect_close(p, {4, 2, 3}, want);
  EXPECT_EQ(a.transpose(0, -1).shape(), (Shape{4, 3, 2}));
  EXPECT_THROW(a.permute({0, 1}), ShapeError);
  EXPECT_THROW(a.permute({0, 0, 1}), ValueError);
  EXPECT_THROW(a.t(), ShapeError);
  EXPECT_EQ(iota({5}, device()).t().shape(), (Shape{5}));
}

TEST_P(Views, ExpandBroadcastsWithZeroStride) {
  Tensor a = iota({3, 1}, device());
  Tensor e = a.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (Strides{0, 1, 0}));
  std::vector<double> want;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) want.push_back(i);
  test::expect_close(e, {2, 3, 4}, want);
  EXPECT_EQ(a.expand({-1, 5}).shape(), (Shape{3, 5}));
  EXPECT_THROW(a.expand({2, 4}), ShapeError);
  EXPECT_THROW(a.expand({4}), ShapeError);
}

TEST_P(Views, SliceNarrowSelectWithSteps) {
  Tensor a = iota({10}, device());
  test::expect_close(a.slice(0, 1, 8, 3), {3}, {1, 4, 7});
  test::expect_close(a.slice(0, -3), {3}, {7, 8, 9});
  test::expect_close(a.slice(0, 8, 100), {2}, {8, 9});
  test::expect_close(a.slice(0, 5, 2), {0}, {});
  test::expect_close(a.narrow(0, 2, 3), {3}, {2, 3, 4});
  EXPECT_THROW(a.narrow(0, 8, 3), Error);
  EXPECT_THROW(a.slice(0, 0, 5, 0), ValueError);
  Tensor m = iota({3, 4}, device());
  test::expect_close(m.select(1, -1), {3}, {3, 7, 11});
  test::expect_close(m[2], {4}, {8, 9, 10, 11});
  EXPECT_EQ(m[1][2].item<double>(), 6.0);
  try {
    m.select(0, 3);
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("out of bounds"), std::string::npos);
  }
  EXPECT_THROW(zeros({}).select(0, 0), IndexError);
}

TEST_P(Views, SqueezeUnsqueezeFlattenUnflatten) {
  Tensor a = iota({1, 3, 1, 2}, device());
  EXPECT_EQ(a.squeeze().shape(), (Shape{3, 2}));
  EXPECT_EQ(a.squeeze(2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(a.squeeze(1).shape(), (Shape{1, 3, 1, 2}));
  EXPECT_EQ(a.unsqueeze(-1).shape(), (Shape{1, 3, 1, 2, 1}));
  EXPECT_EQ(a.unsqueeze(0).shape(), (Shape{1, 1, 3, 1, 2}));
  EXPECT_THROW(a.unsqueeze(6), IndexError);
  EXPECT_EQ(a.flatten().shape(), (Shape{6}));
  EXPECT_EQ(a.flatten(1, 2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(zeros({}).flatten().shape(), (Shape{1}));
  EXPECT_EQ(iota({6, 4}, device()).unflatten(0, {2, -1}).shape(), (Shape{2, 3, 4}));
  EXPECT_THROW(iota({6, 4}, device()).unflatten(0, {4, -1}), ShapeError);
  EXPECT_EQ(zeros({}).unsqueeze(0).shape(), (Shape{1}));
}

TEST_P(Views, AsStridedDiagonalUnfold) {
  Tensor a = iota({3, 3}, device());
  test::expect_close(a.as_strided({3}, {4}), {3}, {0, 4, 8});
  test::expect_close(a.as_strided({2, 2}, {1, 3}, 1), {2, 2}, {1, 4, 2, 5});
  EXPECT_THROW(a.as_strided({4}, {4}), ValueError);  // would read past the storage
  test::expect_close(a.diagonal(), {3}, {0, 4, 8});
  test::expect_close(a.diagonal(1), {2}, {1, 5});
  test::expect_close(a.diagonal(-2), {1}, {6});
  test::expect_close(a.diagonal(5), {0}, {});
  Tensor b = iota({2, 2, 3}, device());
  test::expect_close(b.diagonal(0, 1, 2), {2, 2}, {0, 4, 6, 10});
  Tensor u = iota({7}, device()).unfold(0, 3, 2);
  test::expect_close(u, {3, 3}, {0, 1, 2, 2, 3, 4, 4, 5, 6});
  EXPECT_THROW(iota({7}, device()).unfold(0, 8, 1), ValueError);
  Tensor u2 = iota({2, 5}, device()).unfold(1, 2, 3);
  test::expect_close(u2, {2, 2, 2}, {0, 1, 3, 4, 5, 6, 8, 9});
}

TEST_P(Views, WritesThroughViewsReachTheBase) {
  Tensor a = zeros({3, 4}, TensorOptions(DType::F32, device()));
  Tensor col = a.select(1, 2);
  col.fill_(5.0);
  Tensor row = a.slice(0, 0, 3, 2);
  row.add_(ones({4}, TensorOptions(DType::F32, device())));
  test::expect_close(a, {3, 4}, {1, 1, 6, 1, 0, 0, 5, 0, 1, 1, 6, 1});
}

KILN_INSTANTIATE_ON_EACH_DEVICE(Views);

TEST(TensorGeometry, SizeAndStrideOfA0dTensorAreIndexErrors) {
  Tensor s = scalar_tensor(3.0);
  for (int64_t d : {0, -1, 1}) {
    EXPECT_THROW(s.size(d), IndexError);
    EXPECT_THROW(s.stride(d), IndexError);
  }
  EXPECT_EQ(zeros({2, 5}).size(-1), 5);
}

TEST(TensorGeometry, ByteSizesThatOverflowAreErrors) {
  // 2^62 float32 elements: the count fits in int64, the bytes do not (the wrapped size
  // allocated 0 bytes, and writes then went anywhere).
  EXPECT_THROW(empty({int64_t(1) << 62}), Error);
  EXPECT_THROW(zeros({(int64_t(1) << 62) + 1}), Error);
  EXPECT_THROW(empty({int64_t(1) << 61}, TensorOptions(DType::F64)), Error);
  EXPECT_THROW(empty_strided_tensor({2, 2}, {int64_t(1) << 62, 1}, DType::F32, Device(DeviceType::CPU, 0)), Error);
  EXPECT_THROW(empty({int64_t(1) << 40, int64_t(1) << 40}), Error);  // the count overflows
}

}  // namespace
}  // namespace kiln
