// Shared host memory: share_memory moves a storage (and its views) into a memory file in
// place; a second mapping of that file (what another process makes) sees the same bytes.
#include <gtest/gtest.h>

#include <unistd.h>

#include "kiln/kiln.h"
#include "kiln/tensor/shared_storage.h"
#include "kiln/tensor/tensor_impl.h"

namespace kiln {
namespace {

TEST(SharedStorage, ShareMemoryKeepsValuesAndViews) {
  Tensor base = arange(12, TensorOptions(DType::F32)).view({3, 4});
  Tensor col = base.select(1, 2);
  const void* before = base.impl()->storage()->data();
  share_memory(base);
  EXPECT_TRUE(base.impl()->storage()->is_shared());
  EXPECT_NE(base.impl()->storage()->data(), before);
  EXPECT_GE(base.impl()->storage()->shared_fd(), 0);
  auto v = base.to_vector<float>();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(v[size_t(i)], float(i));
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{2, 6, 10}));
  int fd = base.impl()->storage()->shared_fd();
  share_memory(base);  // already shared: nothing changes
  EXPECT_EQ(base.impl()->storage()->shared_fd(), fd);
}

TEST(SharedStorage, A_SecondMappingSeesTheSameBytes) {
  Tensor t = zeros({2, 3});
  share_memory(t);
  const Storage& s = t.impl()->storage();
  // The transposed view, over a separate mapping of the same memory file.
  Tensor other = tensor_from_shared_memory(s->shared_fd(), s->nbytes(), 0, {3, 2}, {1, 3},
                                           DType::F32);
  EXPECT_NE(other.impl()->storage()->data(), s->data());
  t.fill_(2.5);
  EXPECT_EQ(other.to_vector<float>(), std::vector<float>(6, 2.5f));
  other.select(0, 1).fill_(-1.0);  // column 1 of t
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{2.5f, -1, 2.5f, 2.5f, -1, 2.5f}));
}

TEST(SharedStorage, BadGeometryAndDescriptorsAreErrors) {
  Tensor t = zeros({4});
  share_memory(t);
  int fd = t.impl()->storage()->shared_fd();
  EXPECT_THROW(tensor_from_shared_memory(fd, 16, 0, {5}, {1}, DType::F32), ValueError);
  EXPECT_THROW(tensor_from_shared_memory(fd, 16, 2, {3}, {1}, DType::F32), ValueError);
  EXPECT_THROW(tensor_from_shared_memory(fd, 16, -1, {1}, {1}, DType::F32), ValueError);
  // Geometry whose reach overflows int64 (it wrapped to a small, "valid" size before).
  EXPECT_THROW(tensor_from_shared_memory(fd, 16, 0, {3}, {int64_t(1) << 62}, DType::F32),
               ValueError);
  EXPECT_THROW(tensor_from_shared_memory(fd, 16, 0, {2}, {(int64_t(1) << 62) - 1}, DType::F32),
               ValueError);
  EXPECT_THROW(tensor_from_shared_memory(fd, 64, 0, {4}, {1}, DType::F32), Error);  // file too small
  int closed = dup(fd);
  close(closed);
  EXPECT_THROW(tensor_from_shared_memory(closed, 16, 0, {4}, {1}, DType::F32), Error);
  Tensor e = empty_shared({2, 0}, DType::F32);
  EXPECT_TRUE(e.impl()->storage()->is_shared());
  EXPECT_EQ(e.numel(), 0);
}

TEST(SharedStorage, TheFormerBlockStaysValidForItsUsers) {
  // A NumPy view or a kernel on another thread may still read the old block: it lives as
  // long as the storage (ASan would report a read of a freed block here).
  Tensor t = full({1000}, 7.0);
  const float* old_block = static_cast<const float*>(t.impl()->storage()->data());
  share_memory(t);
  EXPECT_NE(static_cast<const void*>(old_block), t.impl()->storage()->data());
  EXPECT_EQ(old_block[999], 7.0f);
}

TEST(SharedStorage, AReceivedStorageKeepsNoDescriptorAndIsCopiedToBeSentOn) {
  Tensor sent = full({4}, 1.5);
  share_memory(sent);
  const Storage& s = sent.impl()->storage();
  Tensor received = tensor_from_shared_memory(s->shared_fd(), s->nbytes(), 0, {4}, {1},
                                              DType::F32);
  EXPECT_TRUE(received.impl()->storage()->is_shared());
  EXPECT_EQ(received.impl()->storage()->shared_fd(), -1);
  share_memory(received);  // to send it on: a memory file of its own, same values
  EXPECT_GE(received.impl()->storage()->shared_fd(), 0);
  EXPECT_NE(received.impl()->storage()->shared_fd(), s->shared_fd());
  EXPECT_EQ(received.to_vector<float>(), std::vector<float>(4, 1.5f));
  sent.fill_(2.0);  // no longer the sender's pages
  EXPECT_EQ(received.to_vector<float>(), std::vector<float>(4, 1.5f));
}

}  // namespace
}  // namespace kiln
