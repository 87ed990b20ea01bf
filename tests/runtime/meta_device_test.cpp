// The meta device: tensors with shapes, dtypes and strides but no memory. Ops run their meta
// functions only; reading values out is an error; writing host values in does nothing.
#include <gtest/gtest.h>

#include "kiln/autograd/autograd.h"
#include "kiln/core/error.h"
#include "kiln/nn/linear.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/allocator.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/event.h"
#include "kiln/runtime/stream.h"

namespace kiln_test {
namespace {

using namespace kiln;

const Device kMeta(DeviceType::Meta, 0);

TEST(MetaDevice, IsRegisteredWithOneDevice) {
  EXPECT_EQ(device_type_name(DeviceType::Meta), "meta");
  EXPECT_EQ(Device::parse("meta"), Device(DeviceType::Meta));
  EXPECT_TRUE(is_available(DeviceType::Meta));
  Backend& b = get_backend(DeviceType::Meta);
  EXPECT_EQ(b.device_count(), 1);
  EXPECT_EQ(b.properties(0).name, "meta");
  EXPECT_THROW(b.properties(1), DeviceError);
  EXPECT_EQ(b.raw_allocate(0, 64), nullptr);  // meta storages never ask for memory
}

TEST(MetaDevice, FactoriesRecordGeometryWithoutMemory) {
  // 2^40 floats (4 TiB): only possible because nothing is allocated.
  Tensor t = empty({1 << 20, 1 << 20}, TensorOptions(DType::F32, kMeta));
  EXPECT_EQ(t.device(), kMeta);
  EXPECT_EQ(t.shape(), (Shape{1 << 20, 1 << 20}));
  EXPECT_EQ(t.nbytes(), size_t(4) << 40);
  EXPECT_EQ(t.raw_data(), nullptr);
  Tensor z = zeros({2, 3}, TensorOptions(DType::BF16, kMeta));
  EXPECT_EQ(z.dtype(), DType::BF16);
  EXPECT_EQ(z.strides(), (Strides{3, 1}));
  Tensor r = randn({4, 5}, TensorOptions(kMeta));
  EXPECT_EQ(r.shape(), (Shape{4, 5}));
}

TEST(MetaDevice, OpsComputeShapesAndDtypesOnly) {
  Tensor a = empty({8, 16}, TensorOptions(DType::F32, kMeta));
  Tensor b = empty({16, 4}, TensorOptions(DType::F32, kMeta));
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.device(), kMeta);
  EXPECT_EQ(c.shape(), (Shape{8, 4}));
  Tensor s = sum(add(c, c), Dims{0});
  EXPECT_EQ(s.shape(), (Shape{4}));
  Tensor i = empty({3}, TensorOptions(DType::I32, kMeta));
  EXPECT_EQ(add(i, empty({3}, TensorOptions(DType::F64, kMeta))).dtype(), DType::F64);
  // Views share the (empty) storage and keep their geometry.
  Tensor v = a.transpose(0, 1);
  EXPECT_EQ(v.shape(), (Shape{16, 8}));
  EXPECT_EQ(v.strides(), (Strides{1, 16}));
  // Shape errors are still errors.
  EXPECT_THROW(matmul(a, a), Error);
}

TEST(MetaDevice, DataDependentShapesAreRefused) {
  Tensor a = empty({5}, TensorOptions(DType::F32, kMeta));
  try {
    nonzero(a);
    FAIL() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("meta device"), std::string::npos) << e.what();
  }
}

TEST(MetaDevice, ReadingValuesIsAnErrorWritingIsANoOp) {
  Tensor m = empty({2, 2}, TensorOptions(DType::F32, kMeta));
  EXPECT_THROW(m.item(), Error);
  try {
    m.to(Device(DeviceType::CPU, 0));
    FAIL() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("Cannot copy out of meta tensor"), std::string::npos);
  }
  Tensor host = ones({2, 2});
  Tensor moved = host.to(kMeta);  // host -> meta: only the geometry moves
  EXPECT_EQ(moved.device(), kMeta);
  EXPECT_EQ(moved.shape(), host.shape());
  copy_(m, host);  // accepted, nothing to write
  EXPECT_THROW(copy_(host, m), NotImplementedError);
  EXPECT_EQ(host.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));  // host untouched
  // Mixing meta and real tensors in one op is the usual device error...
  EXPECT_THROW(add(m, host), DeviceError);
  // ...except CPU index tensors, as PyTorch's meta kernels (embedding ids from a plain arange)
  Tensor table = empty({10, 4}, TensorOptions(DType::F32, kMeta));
  Tensor ids = arange(3, TensorOptions(DType::I64));
  Tensor rows = index_select(table, 0, ids);
  EXPECT_EQ(rows.device(), kMeta);
  EXPECT_EQ(rows.shape(), (Shape{3, 4}));
  EXPECT_EQ(ids.device(), Device(DeviceType::CPU, 0));  // the caller's tensor stays on the CPU
}

TEST(MetaDevice, StreamsAndEventsAreAlwaysIdle) {
  Stream s = current_stream(kMeta);
  EXPECT_TRUE(s.query());
  s.synchronize();
  Event start(DeviceType::Meta, true), end(DeviceType::Meta, true);
  start.record(s);
  end.record(s);
  EXPECT_TRUE(end.query());
  EXPECT_EQ(start.elapsed_time(end), 0.0);
}

TEST(MetaDevice, AutogradRecordsShapesOfGradients) {
  Tensor w = empty({4, 3}, TensorOptions(DType::F32, kMeta));
  autograd::set_requires_grad(w, true);
  Tensor x = empty({2, 3}, TensorOptions(DType::F32, kMeta));
  Tensor loss = sum(matmul(x, w.t()));
  backward(loss);
  Tensor g = autograd::grad(w);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.device(), kMeta);
  EXPECT_EQ(g.shape(), w.shape());
}

TEST(MetaDevice, ModulesBuildAndRunOnMeta) {
  nn::Linear lin(1 << 16, 1 << 16, true, TensorOptions(kMeta));  // 16 GiB of weights
  EXPECT_EQ(lin.weight.device(), kMeta);
  Tensor y = lin.forward(empty({3, 1 << 16}, TensorOptions(kMeta)));
  EXPECT_EQ(y.shape(), (Shape{3, 1 << 16}));
}

}  // namespace
}  // namespace kiln_test
