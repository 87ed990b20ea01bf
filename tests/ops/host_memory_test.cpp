// Host memory for CPU tensors (decision 0046): blocks from 2 MiB up start on a 2 MiB
// boundary (so that whole huge pages can back them), smaller ones on a cache line, and both
// hold their full size. Whether the kernel grants huge pages depends on the machine's THP
// mode, so only the layout is checked here; `kiln info` prints the mode.
#include <cstdint>
#include <cstring>

#include "kiln/backends/cpu/host_memory.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

bool aligned_to(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

TEST(HostMemory, LargeBlocksStartOnHugePagesSmallOnesOnCacheLines) {
  const size_t huge = cpu::host_huge_pages_enabled() ? cpu::kHugePageBytes : 64;
  for (size_t n : {size_t(0), size_t(1), size_t(1000), cpu::kHugePageBytes - 1,
                   cpu::kHugePageBytes, cpu::kHugePageBytes * 3 + 12345}) {
    SCOPED_TRACE(n);
    void* p = cpu::host_allocate(n);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned_to(p, n >= cpu::kHugePageBytes ? huge : 64));
    if (n) {  // every byte is usable
      std::memset(p, 0xab, n);
      EXPECT_EQ(static_cast<unsigned char*>(p)[n - 1], 0xab);
    }
    cpu::host_free(p);
  }
}

TEST(HostMemory, LargeTensorsGetHugePageAlignedStorage) {
  Tensor big = arange(int64_t(1) << 20, TensorOptions(DType::F32));  // 4 MiB
  if (cpu::host_huge_pages_enabled())
    EXPECT_TRUE(aligned_to(big.raw_data(), cpu::kHugePageBytes));
  const float* v = static_cast<const float*>(big.raw_data());
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[(1 << 20) - 1], float((1 << 20) - 1));
}

}  // namespace
}  // namespace kiln::test
