// Copies across dtypes and devices, conversions, factories and item().
#include <cmath>

#include "ops/test_util.h"

namespace kiln {
namespace {

using test::OnEachDevice;
class CopyFactory : public OnEachDevice {};

TEST_P(CopyFactory, FactoriesMatchReference) {
  Device d = device();
  test::expect_close(zeros({2, 3}, TensorOptions(DType::I32, d)), {2, 3}, std::vector<double>(6, 0));
  test::expect_close(ones({4}, TensorOptions(DType::BF16, d)), {4}, std::vector<double>(4, 1));
  Tensor f = full({2}, 2.5, TensorOptions(d));
  EXPECT_EQ(f.dtype(), DType::F32);
  test::expect_close(f, {2}, {2.5, 2.5});
  EXPECT_EQ(full({1}, 3, TensorOptions(d)).dtype(), DType::I64);
  EXPECT_EQ(full({1}, true, TensorOptions(d)).dtype(), DType::Bool);
  test::expect_close(arange(5, TensorOptions(d)), {5}, {0, 1, 2, 3, 4});
  EXPECT_EQ(arange(5, TensorOptions(d)).dtype(), DType::I64);
  test::expect_close(arange(1, 2, 0.25, TensorOptions(d)), {4}, {1, 1.25, 1.5, 1.75});
  test::expect_close(arange(10, 0, -3, TensorOptions(d)), {4}, {10, 7, 4, 1});
  EXPECT_THROW(arange(0, 5, 0), Error);
  EXPECT_THROW(arange(5, 0, 1), Error);
  test::expect_close(linspace(0, 1, 5, TensorOptions(d)), {5}, {0, 0.25, 0.5, 0.75, 1});
  test::expect_close(linspace(-1, 1, 1, TensorOptions(d)), {1}, {-1});
  test::expect_close(linspace(0, 1, 0, TensorOptions(d)), {0}, {});
  EXPECT_THROW(linspace(0, 1, -1), Error);
  test::expect_close(eye(2, 3, TensorOptions(DType::I64, d)), {2, 3}, {1, 0, 0, 0, 1, 0});
  test::expect_close(eye(0, std::nullopt, TensorOptions(d)), {0, 0}, {});
  Tensor e = empty({3, 0}, TensorOptions(d));
  EXPECT_EQ(e.numel(), 0);
  Tensor like = ones_like(e, DType::I8);
  EXPECT_EQ(like.dtype(), DType::I8);
  EXPECT_EQ(like.device(), d);
  test::expect_close(full_like(ones({2}, TensorOptions(d)), 7), {2}, {7, 7});
  test::expect_close(zeros_like(ones({2}, TensorOptions(d))), {2}, {0, 0});
}

TEST_P(CopyFactory, CopyConvertsEveryDtypePair) {
  std::vector<double> vals = {0, 1, -2, 3.5, 100, -0.75, 255, 7};
  for (DType from : test::all_dtypes()) {
    for (DType to : test::all_dtypes()) {
      Tensor src = test::make(vals, {8}, from, device());
      Tensor dst = empty({8}, TensorOptions(to, device()));
      dst.copy_(src);
      // Reference: value as stored in `from`, then converted to `to` with C rules.
      std::vector<double> want;
      for (double v : test::values(src)) {
        double w;
        if (to == DType::Bool) w = v != 0;
        else if (is_floating(to)) w = test::round_to(v, to);
        else {
          int64_t iv = int64_t(std::trunc(v));
          switch (to) {
            case DType::U8: w = double(uint8_t(iv)); break;
            case DType::I8: w = double(int8_t(iv)); break;
            case DType::I16: w = double(int16_t(iv)); break;
            case DType::I32: w = double(int32_t(iv)); break;
            default: w = double(iv);
          }
        }
        want.push_back(w);
      }
      test::expect_close(dst, {8}, want, test::Tol{0, 0},
                         std::string(dtype_name(from)) + "->" + std::string(dtype_name(to)));
    }
  }
}

TEST_P(CopyFactory, CopyBroadcastsIntoNonContiguousDestinations) {
  Tensor dst = zeros({3, 4}, TensorOptions(device())).t();  // [4,3] non-contiguous
  Tensor src = arange(3, TensorOptions(DType::I64, device()));
  dst.copy_(src);
  test::expect_close(dst, {4, 3}, {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2});
  EXPECT_THROW(dst.copy_(arange(4, TensorOptions(device()))), ShapeError);
  // Overlapping copy within one storage reads the source before writing.
  Tensor a = arange(6, TensorOptions(DType::F32, device()));
  Tensor head = a.slice(0, 0, 5), tail = a.slice(0, 1, 6);
  tail.copy_(head);
  test::expect_close(a, {6}, {0, 0, 1, 2, 3, 4});
}

TEST_P(CopyFactory, CopiesAcrossDevicesAndBack) {
  Device cpu(DeviceType::CPU, 0);
  std::vector<double> vals = test::random_values(60, -5, 5, 7);
  Tensor host = test::make(vals, {3, 4, 5}, DType::F64, cpu);
  Tensor dev = host.to(device());
  EXPECT_EQ(dev.device(), device());
  if (!device().is_cpu()) EXPECT_FALSE(dev.shares_storage_with(host));
  Tensor back = dev.permute({2, 0, 1}).to(cpu, DType::F32);
  EXPECT_EQ(back.device(), cpu);
  EXPECT_EQ(back.dtype(), DType::F32);
  std::vector<double> want;
  for (int k = 0; k < 5; ++k)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) want.push_back(double(float(vals[size_t(i * 20 + j * 5 + k)])));
  test::expect_close(back, {5, 3, 4}, want, test::Tol{0, 0});
  // Writing a host tensor into a strided device view.
  Tensor target = zeros({4, 4}, TensorOptions(DType::F32, device()));
  Tensor col = target.select(1, 1);
  col.copy_(test::make({1, 2, 3, 4}, {4}, DType::I32, cpu));
  test::expect_close(target.select(1, 1), {4}, {1, 2, 3, 4});
  test::expect_close(target.sum(), {}, {10});
}

TEST_P(CopyFactory, CloneContiguousAndItem) {
  Tensor a = arange(12, TensorOptions(DType::F32, device())).view({3, 4}).t();
  Tensor c = a.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.shares_storage_with(a));
  EXPECT_TRUE(c.contiguous().is_same(c));
  Tensor cl = a.clone();
  cl.fill_(0);
  EXPECT_EQ(a[1][2].item<double>(), 9.0);
  EXPECT_EQ(full({}, 3, TensorOptions(device())).item().to_int(), 3);
  EXPECT_TRUE(full({1, 1}, true, TensorOptions(device())).item().to_bool());
  try {
    a.item();
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("12 elements"), std::string::npos);
  }
}

// preserve_format (decision 0128): a permuted layout is kept, a sliced one made dense in the
// same order; contiguous() stays row-major.
TEST_P(CopyFactory, CloneAndToKeepTheSourceLayout) {
  Tensor x = arange(24, TensorOptions(DType::F32, device())).view({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});  // strides (1, 12, 4)
  EXPECT_EQ(p.clone().strides(), p.strides());
  EXPECT_EQ(p.to(DType::F64).strides(), p.strides());
  EXPECT_TRUE(p.contiguous().is_contiguous());
  test::expect_close(p.clone().contiguous(), {4, 2, 3}, test::values(p.contiguous()));
  // Every other column of the permuted view: dense, ordered as (1, 12, 4) -> (1, 8, 2).
  Tensor s = p.slice(0, 0, 4, 2);
  EXPECT_EQ(s.clone().strides(), (Strides{1, 6, 2}));
  test::expect_close(s.clone(), {2, 2, 3}, test::values(s.contiguous()));
  // An expanded dim (stride 0) keeps its place: [3, 4] from [3, 1] is row-major.
  Tensor e = arange(3, TensorOptions(DType::F32, device())).view({3, 1}).expand({3, 4});
  EXPECT_TRUE(e.clone().is_contiguous());
  EXPECT_EQ(dense_strides_in_order_of({3, 4}, {0, 1}), (Strides{4, 1}));
  EXPECT_EQ(dense_strides_in_order_of({2, 3, 4}, {1, 8, 2}), (Strides{1, 8, 2}));
  EXPECT_EQ(dense_strides_in_order_of({5, 1, 4}, {1, 5, 20}), (Strides{1, 5, 5}));  // torch
  EXPECT_TRUE(is_non_overlapping_and_dense({4, 2, 3}, {1, 12, 4}));
  EXPECT_FALSE(is_non_overlapping_and_dense({2, 2, 3}, {1, 12, 4}));
  EXPECT_FALSE(is_non_overlapping_and_dense({3, 4}, {0, 1}));
  EXPECT_TRUE(is_non_overlapping_and_dense({3, 1, 4}, {4, 99, 1}));
}

TEST_P(CopyFactory, TensorFromChecksCount) {
  EXPECT_THROW(tensor_from(std::vector<float>{1, 2, 3}, Shape{2, 2}), ShapeError);
  Tensor b = tensor_from(std::vector<bool>{true, false, true}, TensorOptions(device()));
  EXPECT_EQ(b.dtype(), DType::Bool);
  test::expect_close(b, {3}, {1, 0, 1});
}

KILN_INSTANTIATE_ON_EACH_DEVICE(CopyFactory);

// fill_ / full / zeros of contiguous tensors large enough for threaded pieces: zero values
// through memset, others by a string store (2-, 4- and 8-byte values) or by copying a block
// of the value (an odd count, so the last block is cut), every element size, -0.0 (not
// all-zero bytes) kept; a strided view takes the iterator.
TEST(CopyFactoryLarge, FillsEveryElementOfEverySize) {
  const int64_t n = 70001;
  for (DType dt : {DType::Bool, DType::I8, DType::I16, DType::BF16, DType::I32, DType::F32,
                   DType::I64, DType::F64}) {
    SCOPED_TRACE(dtype_name(dt));
    for (double v : {0.0, 1.0, -0.0, 3.0}) {
      Tensor t = full({n}, v, TensorOptions(dt));
      const std::vector<double> got = t.to(DType::F64).to_vector<double>();
      const double want = dt == DType::Bool ? double(v != 0) : v;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[size_t(i)], want) << "value " << v << " at " << i;
        if (is_floating(dt)) ASSERT_EQ(std::signbit(got[size_t(i)]), std::signbit(want)) << i;
      }
    }
  }
  Tensor z = full({300, 300}, 5.0, TensorOptions(DType::F32));
  z.slice(1, 0, 300, 2).fill_(Scalar(-1.0));  // every other column
  const std::vector<float> zv = z.to_vector<float>();
  for (int64_t i = 0; i < 300 * 300; ++i) ASSERT_EQ(zv[size_t(i)], i % 2 ? 5.0f : -1.0f) << i;
}

TEST(CopyAcrossDevices, DeviceMismatchIsAnError) {
  ASSERT_TRUE(is_available(DeviceType::Testing)) << "no testing backend (the testing backend is part of every build)";
  Tensor a = ones({2});
  Tensor b = ones({2}, TensorOptions(Device(DeviceType::Testing, 0)));
  try {
    add(a, b);
    FAIL();
  } catch (const DeviceError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cpu"), std::string::npos);
    EXPECT_NE(m.find("testing:0"), std::string::npos);
  }
  Tensor c = ones({2}, TensorOptions(Device(DeviceType::Testing, 1)));
  EXPECT_THROW(add(b, c), DeviceError);
  test::expect_close(c.to(Device(DeviceType::Testing, 0)) + b, {2}, {2, 2});
}

}  // namespace
}  // namespace kiln
