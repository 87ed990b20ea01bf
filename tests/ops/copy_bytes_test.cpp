// detail::copy_bytes (kiln/tensor/copy_bytes.h, decision 0047): memcpy's contract at every
// distance between destination and source, with the distances just past the source (1-63
// bytes modulo 4 KiB, where glibc's `rep movsb` is slow on AMD Zen) taken by an SSE2 loop that
// aligns its stores. Each copy must write exactly its n bytes (guard bytes around the
// destination stay untouched), for sizes below, at and above the switch and for every
// alignment of the destination. The ops that shift rows by a few elements (roll, pad, cat
// along the last dim) are checked on rows long enough to take the vector loop.
#include <cstdint>
#include <cstring>
#include <vector>

#include "kiln/tensor/copy_bytes.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

constexpr size_t kGuard = 80;
constexpr unsigned char kGuardByte = 0xee;

// Copies n bytes from src_offset in a 4 KiB-aligned source buffer to a destination that lies
// `ahead` bytes past it modulo 4 KiB, then checks the copy and the guard bytes around it.
void check_copy(size_t n, size_t src_offset, size_t ahead, bool vectors_only) {
  SCOPED_TRACE(testing::Message() << "n " << n << ", source offset " << src_offset
                                  << ", destination ahead by " << ahead);
  std::vector<unsigned char> src_buf(n + src_offset + 8192), dst_buf(n + src_offset + 16384);
  auto* src = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(src_buf.data()) + 4095) / 4096 * 4096) + src_offset;
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>((i * 131 + 7) % 251);
  // The destination: the first address at least kGuard bytes into dst_buf whose distance
  // from src is `ahead` modulo 4 KiB.
  const uintptr_t lowest = reinterpret_cast<uintptr_t>(dst_buf.data()) + kGuard;
  const uintptr_t want = (reinterpret_cast<uintptr_t>(src) + ahead) % 4096;
  const uintptr_t dst_addr = lowest + (want + 4096 - lowest % 4096) % 4096;
  auto* dst = reinterpret_cast<unsigned char*>(dst_addr);
  ASSERT_LE(dst + n + kGuard, dst_buf.data() + dst_buf.size());
  std::memset(dst - kGuard, kGuardByte, n + 2 * kGuard);
  if (vectors_only) detail::copy_bytes_by_vectors(dst, src, n);
  else detail::copy_bytes(dst, src, n);
  for (size_t i = 0; i < kGuard; ++i) {
    ASSERT_EQ(dst[-1 - std::ptrdiff_t(i)], kGuardByte) << "byte before the copy written";
    ASSERT_EQ(dst[n + i], kGuardByte) << "byte after the copy written";
  }
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], src[i]) << "at byte " << i;
}

TEST(CopyBytes, EveryDistanceAndSizeCopiesExactlyItsBytes) {
  const std::vector<size_t> sizes = {0, 1, 15, 17, 63, 64, 65, 1023, 1024, 1025, 4000, 65537};
  for (size_t n : sizes)
    for (size_t src_offset : {size_t(0), size_t(5), size_t(48)})
      for (size_t ahead = 0; ahead < 72; ++ahead) check_copy(n, src_offset, ahead, false);
  for (size_t ahead : {size_t(2048), size_t(4090), size_t(4095)}) check_copy(4000, 3, ahead, false);
}

// An empty tensor's data pointer is null; memcpy(nullptr, nullptr, 0) is undefined behaviour
// (UBSan reports it), so copy_bytes must return before it for every caller.
TEST(CopyBytes, EmptyRangeWithNullPointersIsANoOp) {
  detail::copy_bytes(nullptr, nullptr, 0);
  unsigned char byte = 0x5a;
  detail::copy_bytes(&byte, nullptr, 0);
  detail::copy_bytes(nullptr, &byte, 0);
  EXPECT_EQ(byte, 0x5a);
}

TEST(CopyBytes, VectorLoopAtEveryDestinationAlignment) {
  for (size_t n : {size_t(0), size_t(3), size_t(16), size_t(79), size_t(1000), size_t(4097)})
    for (size_t ahead = 0; ahead < 40; ++ahead) check_copy(n, 7, ahead, true);
}

// Values 0, 1, 2, ... (exact in bfloat16 up to 256; float32 beyond) of the given shape.
Tensor counting(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i % 251);
  return make(v, shape, dtype, Device(DeviceType::CPU, 0));
}

TEST(CopyBytes, RowsShiftedByAFewElements) {
  for (DType dt : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const int64_t R = 6, W = 3001;  // rows of 6 or 12 KB, odd on purpose
    Tensor x = counting({R, W}, dt);
    const auto xv = values(x);
    for (int64_t shift : {1, 2, 3, 7, 33}) {
      const auto got = values(roll(x, {shift}, {1}));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < W; ++j)
          ASSERT_EQ(got[size_t(r * W + j)], xv[size_t(r * W + (j - shift + W) % W)])
              << "roll by " << shift << " at " << r << ", " << j;
    }
    const auto padded = values(pad(x, {1, 2}, "constant", -1.0));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < W + 3; ++j)
        ASSERT_EQ(padded[size_t(r * (W + 3) + j)],
                  j >= 1 && j <= W ? xv[size_t(r * W + j - 1)] : -1.0)
            << "pad at " << r << ", " << j;
    Tensor y = counting({R, 1000}, dt);
    const auto yv = values(y);
    const auto joined = values(cat({y, x}, 1));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < 1000 + W; ++j)
        ASSERT_EQ(joined[size_t(r * (1000 + W) + j)],
                  j < 1000 ? yv[size_t(r * 1000 + j)] : xv[size_t(r * W + j - 1000)])
            << "cat at " << r << ", " << j;
  }
}

}  // namespace
}  // namespace kiln::test
