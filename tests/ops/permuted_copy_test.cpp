// Same-dtype copies between layouts (transposes, permutes, channels-last conversions,
// broadcast and sliced sources) take the blocked path of permuted_copy.cpp, with vector tile
// transposes for 2- and 4-byte values from the AVX2 level up (CTest reruns this suite at every
// ISA level). Every destination element is checked bit for bit against the source element at
// the same index, located through the strides in this file; sizes straddle the 16-value tiles.
#include <cstring>
#include <random>

#include "kiln/tensor/empty.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

// A tensor whose elements are all distinct bit patterns (a ramp), in dtype dt.
Tensor ramp(const Shape& shape, DType dt) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Tensor t = arange(n, TensorOptions(DType::I64));
  if (dt == DType::Bool) return remainder(t, 2).to(DType::Bool).reshape(shape);
  if (dt == DType::BF16 || dt == DType::I8 || dt == DType::U8)  // few exact values: wrap
    t = remainder(t, dt == DType::BF16 ? 251 : 127);
  return t.to(dt).reshape(shape);
}

// dst[i] == src[i] bitwise for every multi-index i.
void expect_same_elements(const Tensor& src, const Tensor& dst) {
  ASSERT_EQ(src.shape(), dst.shape());
  ASSERT_EQ(src.dtype(), dst.dtype());
  const size_t es = src.element_size();
  const auto* s = static_cast<const unsigned char*>(src.raw_data());
  const auto* d = static_cast<const unsigned char*>(dst.raw_data());
  std::vector<int64_t> idx(size_t(src.dim()), 0);
  for (int64_t n = 0; n < src.numel(); ++n) {
    int64_t so = 0, dof = 0;
    for (int64_t k = 0; k < src.dim(); ++k) {
      so += idx[size_t(k)] * src.stride(k);
      dof += idx[size_t(k)] * dst.stride(k);
    }
    ASSERT_EQ(std::memcmp(s + so * int64_t(es), d + dof * int64_t(es), es), 0)
        << "element " << n << " of shape " << src.shape().size() << "-d, dtype "
        << dtype_name(src.dtype());
    for (int64_t k = src.dim() - 1; k >= 0; --k) {
      if (++idx[size_t(k)] < src.size(k)) break;
      idx[size_t(k)] = 0;
    }
  }
}

const DType kDTypes[] = {DType::F32, DType::BF16, DType::F64, DType::I8, DType::U8,
                         DType::I32, DType::I64,  DType::Bool, DType::F16};

TEST(PermutedCopy, TransposesOfEverySizeAroundTheTiles) {
  for (DType dt : kDTypes)
    for (int64_t r : {1, 15, 16, 17, 40, 64, 100})
      for (int64_t c : {15, 16, 33, 64, 129}) {
        if (r * c < 4096 && !(r == 64 && c == 64)) continue;  // below the blocked path's size
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(r) + "x" +
                     std::to_string(c));
        Tensor x = ramp({r, c}, dt);
        expect_same_elements(x.t(), x.t().contiguous());
      }
}

TEST(PermutedCopy, LargeTransposeWithPowerOfTwoStrides) {
  for (DType dt : {DType::F32, DType::BF16, DType::U8, DType::F64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = ramp({512, 1024}, dt);
    expect_same_elements(x.t(), x.t().contiguous());
    Tensor b = ramp({3, 256, 64}, dt);  // batched: a transposed pair under an outer dimension
    expect_same_elements(b.transpose(1, 2), b.transpose(1, 2).contiguous());
  }
}

TEST(PermutedCopy, AttentionPermutesAndChannelsLast) {
  for (DType dt : kDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor q = ramp({2, 37, 6, 24}, dt);  // [B, T, H, D] -> [B, H, T, D]: runs of D
    expect_same_elements(q.permute({0, 2, 1, 3}), q.permute({0, 2, 1, 3}).contiguous());
    Tensor k = ramp({2, 6, 37, 24}, dt);  // K^T: [B, H, D, T]
    expect_same_elements(k.transpose(2, 3), k.transpose(2, 3).contiguous());
    Tensor img = ramp({3, 19, 9, 13}, dt);
    Tensor cl = img.contiguous(MemoryFormat::ChannelsLast);
    expect_same_elements(img, cl);
    expect_same_elements(cl, cl.contiguous());
    Tensor p = ramp({5, 7, 11, 13}, dt);  // a full reversal of the dimension order
    expect_same_elements(p.permute({3, 2, 1, 0}), p.permute({3, 2, 1, 0}).contiguous());
  }
}

// Runs of exactly one or two cache lines take a fixed-size move per run; runs of a source of
// 8 MiB and more are prefetched several runs ahead (to the end of each thread's share). Each
// element is checked wherever it lands.
TEST(PermutedCopy, RunsOfOneOrTwoLinesAndLargePrefetchedSources) {
  for (DType dt : {DType::F32, DType::BF16, DType::F64, DType::U8}) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t es = int64_t(Tensor(ramp({1}, dt)).element_size());
    for (int64_t bytes : {64, 128}) {
      Tensor q = ramp({3, 29, 5, bytes / es}, dt);  // [B, T, H, D] -> [B, H, T, D]
      expect_same_elements(q.permute({0, 2, 1, 3}), q.permute({0, 2, 1, 3}).contiguous());
    }
  }
  // float32 runs of 56 values (224 bytes), 12.8 MiB: the prefetched path.
  Tensor img = ramp({16, 64, 56, 56}, DType::F32);
  expect_same_elements(img.permute({0, 2, 1, 3}), img.permute({0, 2, 1, 3}).contiguous());
  // bfloat16 runs of 200 values, 25 MiB, a run count no thread's share divides evenly.
  Tensor heads = ramp({7, 3001, 1, 200}, DType::BF16).expand({7, 3001, 3, 200});
  Tensor src = heads.contiguous();
  expect_same_elements(src.permute({0, 2, 1, 3}), src.permute({0, 2, 1, 3}).contiguous());
}

TEST(PermutedCopy, BroadcastSlicedAndRandomViews) {
  for (DType dt : {DType::F32, DType::BF16, DType::I64, DType::U8}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor row = ramp({1, 300}, dt);
    expect_same_elements(row.expand({64, 300}), row.expand({64, 300}).contiguous());
    Tensor col = ramp({300, 1}, dt);  // stride 0 along the destination's inner run
    expect_same_elements(col.expand({300, 64}), col.expand({300, 64}).contiguous());
    Tensor x = ramp({96, 80}, dt);
    Tensor every_other = x.slice(1, 1, std::nullopt, 2);  // no unit-stride source dimension
    expect_same_elements(every_other, every_other.contiguous());
    Tensor sub = x.slice(0, 3, 90).slice(1, 5, 77).t();  // a transposed window
    expect_same_elements(sub, sub.contiguous());
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int64_t> perm = {0, 1, 2, 3};
    std::shuffle(perm.begin(), perm.end(), rng);
    Shape shape;
    for (int k = 0; k < 4; ++k) shape.push_back(int64_t(1 + rng() % 23));
    Tensor x = ramp(shape, trial % 2 ? DType::BF16 : DType::F32).permute(perm);
    SCOPED_TRACE(trial);
    expect_same_elements(x, x.contiguous());
  }
}

// Source and destination with one layout over a dense block (channels-last, any permutation)
// are copied and converted as flat arrays; a layout with gaps is not.
TEST(PermutedCopy, LikeLaidOutDenseTensorsAndGaps) {
  for (DType dt : {DType::F32, DType::BF16, DType::I64, DType::U8}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor cl = ramp({4, 37, 9, 13}, dt).contiguous(MemoryFormat::ChannelsLast);
    Tensor twin = cl.clone();
    EXPECT_EQ(twin.strides(), cl.strides());
    expect_same_elements(cl, twin);
    Tensor p = ramp({5, 70, 11, 3}, dt).permute({2, 0, 3, 1});
    Tensor dst = as_strided(zeros({p.numel()}, TensorOptions(dt)), p.shape(), p.strides());
    dst.copy_(p);
    expect_same_elements(p, dst);
  }
  // float32 -> bfloat16 and back between permuted layouts: the values of an element loop.
  Tensor p = randn({6, 40, 7, 5}).permute({3, 1, 0, 2});
  Tensor narrow = as_strided(zeros({p.numel()}, TensorOptions(DType::BF16)), p.shape(),
                             p.strides());
  narrow.copy_(p);
  expect_same_elements(p.contiguous().to(DType::BF16), narrow.contiguous());
  Tensor wide = as_strided(zeros({p.numel()}), p.shape(), p.strides());
  wide.copy_(narrow);
  expect_same_elements(narrow.contiguous().to(DType::F32), wide.contiguous());
  // Same strides with a gap after every row: the gaps keep their zeros.
  Tensor x = ramp({80, 10}, DType::F32).slice(1, 0, 6);
  Tensor base = zeros({80 * 10});
  Tensor gappy = as_strided(base, x.shape(), x.strides());
  gappy.copy_(x);
  expect_same_elements(x, gappy);
  const float* b = static_cast<const float*>(base.raw_data());
  for (int64_t r = 0; r < 80; ++r)
    for (int64_t c = 6; c < 10; ++c) ASSERT_EQ(b[r * 10 + c], 0.0f) << r << ", " << c;
}

TEST(PermutedCopy, CopyIntoAViewAndOverlappingSource) {
  // A transposed source into a strided destination (the generic loop).
  Tensor x = ramp({64, 96}, DType::F32);
  Tensor wide = zeros({96, 128});
  Tensor window = wide.slice(1, 0, 64);
  window.copy_(x.t());
  expect_same_elements(x.t(), window);
  // A block transposed in place: the source is read as it was before the copy.
  Tensor y = ramp({128, 128}, DType::F32);
  const Tensor before = y.clone();
  Tensor block = y.slice(0, 0, 96).slice(1, 0, 96);
  block.copy_(block.t());
  expect_same_elements(before.slice(0, 0, 96).slice(1, 0, 96).t(), block);
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// Rows of 8, 16 or 32 bytes between skipped rows (x[::2] of a narrow matrix, a slice of the
// last dim of a 3-d tensor) are moved one fixed-size block per row: every element in place,
// below and above the threaded size, and row lengths between those sizes (element loop).
TEST(PermutedCopy, ShortRowsOfSlicedSources) {
  for (DType dt : kDTypes)
    for (int64_t w : {1, 2, 3, 4, 8, 16}) {
      for (int64_t rows : {int64_t(4100), int64_t(70001)}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " rows of " + std::to_string(w) + " x " +
                     std::to_string(rows));
        Tensor x = ramp({2 * rows, w}, dt);
        Tensor every_other = x.slice(0, 0, 2 * rows, 2);
        expect_same_elements(every_other, every_other.contiguous());
      }
      Tensor cube = ramp({37, 29, w + 3}, dt);
      Tensor sliced = cube.slice(2, 1, w + 1);  // 3-d outer walk, runs of w
      expect_same_elements(sliced, sliced.contiguous());
    }
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// Runs contiguous on both sides of every length class: under 8 bytes (element loop), 8-32
// (one or two overlapping fixed-size moves), 32 bytes to 1 KiB (the ISA's run mover, a row of
// runs per call, rows split where a thread's share ends), longer (memcpy per run). Heads
// permuted as attention does, with row counts no thread's share divides evenly, in one byte
// values (every length) and in float32 / bfloat16.
TEST(PermutedCopy, RunsOfEveryLengthClass) {
  for (int64_t bytes : {5, 9, 15, 17, 24, 31, 33, 48, 63, 65, 96, 112, 127, 129, 200, 255, 256,
                        257, 1000, 1023, 1024, 1025, 2000}) {
    SCOPED_TRACE("runs of " + std::to_string(bytes) + " bytes");
    Tensor q = ramp({3, 7001 / bytes + 3, 5, bytes}, DType::U8);
    expect_same_elements(q.permute({0, 2, 1, 3}), q.permute({0, 2, 1, 3}).contiguous());
    Tensor wide = ramp({2, 131, 3, bytes}, DType::U8);  // threaded: rows split across shares
    expect_same_elements(wide.permute({2, 0, 1, 3}), wide.permute({2, 0, 1, 3}).contiguous());
  }
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    for (int64_t d : {12, 20, 48, 56, 100}) {
      Tensor img = ramp({4, 33, 17, d}, dt);
      expect_same_elements(img.permute({0, 2, 1, 3}), img.permute({0, 2, 1, 3}).contiguous());
    }
  }
  // bfloat16 heads of 48 values (96 bytes), 9.4 MiB: the prefetched rows of 12 runs.
  Tensor heads = ramp({64, 12, 128, 48}, DType::BF16);
  expect_same_elements(heads.permute({0, 2, 1, 3}), heads.permute({0, 2, 1, 3}).contiguous());
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// A dtype conversion into a contiguous tensor from a permuted one (copy_ into a row-major
// tensor) runs the permuted copy into a block of the source dtype and then the dense converter
// (decision 0121). Each result is checked bit for bit against the source's values converted
// one by one from float64 (exact for every source dtype here, so the single rounding is the
// same).
TEST(PermutedCopy, ConversionsFromPermutedSources) {
  const std::pair<DType, DType> kPairs[] = {
      {DType::F32, DType::BF16}, {DType::F32, DType::F16}, {DType::BF16, DType::F32},
      {DType::F16, DType::BF16}, {DType::F32, DType::I64}, {DType::I32, DType::F32},
      {DType::F64, DType::F32}};
  for (const auto& [from, to] : kPairs) {
    SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
    // Values with fractions and large magnitudes, exactly representable in the source dtype.
    auto v = random_values(300 * 200, -300, 300, 17);
    Tensor base = make(rounded(v, from), {300, 200}, from, Device(DeviceType::CPU, 0));
    for (const Tensor& src : {base.t(), base.reshape({4, 75, 200}).permute({2, 0, 1}),
                              base.reshape({30, 10, 200}).transpose(0, 1)}) {
      Tensor got = empty_tensor(src.shape(), to, Device(DeviceType::CPU, 0));
      got.copy_(src);
      const Tensor want = make(values(src), src.shape(), to, Device(DeviceType::CPU, 0));
      expect_same_elements(want, got);
      // `to` keeps the permuted layout (preserve_format, decision 0128), same values.
      const Tensor kept = src.to(to);
      EXPECT_EQ(kept.strides(), src.strides());
      expect_same_elements(want, kept.contiguous());
    }
  }
}

}  // namespace
}  // namespace kiln::test
