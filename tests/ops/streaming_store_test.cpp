// Outputs large enough for streaming stores (kiln/tensor/streaming_store.h: 24 MiB and up),
// where kernels compute 512-byte blocks into a buffer and stream them out: every element must
// be written exactly once, including the unaligned head and the tail, and the bytes just
// outside the output (sentinels around a slice of a larger buffer) must stay untouched.
// Covers the unit-stride elementwise loop, the broadcast (masked) loop, the vectorised unary
// path (float32 and bfloat16), contiguous copies with source and destination at different
// offsets within a cache line, uint8 and float64 outputs, in-place ops (no streaming), and
// the row kernels at the same sizes (softmax, log_softmax, layer_norm, rms_norm).
#include <cmath>
#include <limits>

#include "kiln/nn/functional.h"
#include "kiln/tensor/streaming_store.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);
constexpr double kSentinel = -12345.0;

// n elements above the streaming threshold for elements of `bytes` bytes, odd on purpose.
int64_t big_count(int64_t bytes) { return detail::kStreamingStoreBytes / bytes + 4099; }

// A buffer of n + offset + 3 elements filled with the sentinel; the output is the slice
// [offset, offset + n), so its first element is misaligned by `offset` elements.
Tensor sentinel_buffer(int64_t n, int64_t offset, DType t) {
  return full({n + offset + 3}, kSentinel, TensorOptions(t, kCpu));
}

void expect_sentinels(const Tensor& buffer, int64_t n, int64_t offset, const std::string& what) {
  auto v = values(buffer);
  const double sentinel = round_to(kSentinel, buffer.dtype());
  for (int64_t i = 0; i < offset; ++i) EXPECT_EQ(v[size_t(i)], sentinel) << what << " before, " << i;
  for (int64_t i = offset + n; i < int64_t(v.size()); ++i)
    EXPECT_EQ(v[size_t(i)], sentinel) << what << " after, " << i;
}

// Compares exactly (the ops below are exact in the dtype or compared to a rounded reference).
void expect_equal_values(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  auto got = values(t);
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i)
    if (got[i] != want[i]) {
      ADD_FAILURE() << what << " at " << i << ": got " << got[i] << ", want " << want[i];
      ++bad;
    }
}

TEST(ElementwiseLargeStreaming, AddIntoMisalignedSlicesIsExact) {
  const int64_t n = big_count(4);
  auto av = random_values(size_t(n), -4, 4, 1), bv = random_values(size_t(n), -4, 4, 2);
  Tensor a = make(av, {n}, DType::F32, kCpu), b = make(bv, {n}, DType::F32, kCpu);
  auto ar = values(a), br = values(b);
  std::vector<double> want(ar.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = double(float(ar[i] + br[i]));
  for (int64_t offset : {0, 1, 5, 15}) {
    Tensor buffer = sentinel_buffer(n, offset, DType::F32);
    Tensor out = buffer.slice(0, offset, offset + n);
    add_out(a, b, out);
    const std::string what = "add, output offset " + std::to_string(offset);
    expect_equal_values(out, want, what);
    expect_sentinels(buffer, n, offset, what);
  }
}

TEST(ElementwiseLargeStreaming, BroadcastOperandAlongRuns) {
  const int64_t c = 8, hw = big_count(4) / c + 1;  // [c, hw] output, bias [c, 1]
  auto xv = random_values(size_t(c * hw), -4, 4, 3), bv = random_values(size_t(c), 1, 2, 4);
  Tensor x = make(xv, {c, hw}, DType::F32, kCpu), bias = make(bv, {c, 1}, DType::F32, kCpu);
  auto xr = values(x), br = values(bias);
  std::vector<double> want(xr.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = double(float(xr[i] * br[i / size_t(hw)]));
  expect_equal_values(mul(x, bias), want, "x * bias[c, 1]");
}

TEST(ElementwiseLargeStreaming, VectorisedUnaryFloatAndBfloat16) {
  for (DType t : {DType::F32, DType::BF16}) {
    const int64_t n = big_count(int64_t(element_size(t)));
    auto xv = rounded(random_values(size_t(n), -10, 10, 5), t);
    Tensor x = make(xv, {n}, t, kCpu);
    for (int64_t offset : {0, 3}) {
      Tensor buffer = sentinel_buffer(n, offset, t);
      Tensor out = buffer.slice(0, offset, offset + n);
      exp_out(x, out);
      std::vector<double> want(xv.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = std::exp(xv[i]);
      const std::string what = std::string(dtype_name(t)) + " exp, offset " + std::to_string(offset);
      expect_close(out, {n}, want, t == DType::F32 ? Tol{3e-7, 0} : tol_for(t), what);
      expect_sentinels(buffer, n, offset, what);
    }
  }
}

TEST(ElementwiseLargeStreaming, ContiguousCopiesAtEveryRelativeAlignment) {
  for (DType t : {DType::U8, DType::F32, DType::F64}) {
    const int64_t n = big_count(int64_t(element_size(t)));
    auto v = random_values(size_t(n + 8), 0, 100, 6, /*integers=*/true);
    Tensor src_buffer = make(v, {n + 8}, t, kCpu);
    for (auto [src_off, dst_off] : {std::pair<int64_t, int64_t>{0, 0}, {3, 1}, {1, 7}, {5, 5}}) {
      Tensor src = src_buffer.slice(0, src_off, src_off + n);
      Tensor buffer = sentinel_buffer(n, dst_off, t);
      Tensor dst = buffer.slice(0, dst_off, dst_off + n);
      dst.copy_(src);
      const std::string what = std::string(dtype_name(t)) + " copy_ from offset " +
                               std::to_string(src_off) + " to " + std::to_string(dst_off);
      expect_equal_values(dst, std::vector<double>(v.begin() + src_off, v.begin() + src_off + n), what);
      if (t != DType::U8) expect_sentinels(buffer, n, dst_off, what);  // -12345 wraps in uint8
    }
  }
}

TEST(ElementwiseLargeStreaming, InPlaceOpsStillCorrect) {
  const int64_t n = big_count(4);
  auto xv = random_values(size_t(n), -1, 1, 7);
  Tensor x = make(xv, {n}, DType::F32, kCpu);
  relu_(x);
  Tensor y = make(xv, {n}, DType::F32, kCpu);
  y.add_(y);
  auto xr = values(x), yr = values(y);
  for (size_t i = 0; i < xv.size(); i += 997) {
    const double f = double(float(xv[i]));
    ASSERT_EQ(xr[i], f > 0 ? f : 0.0) << i;
    ASSERT_EQ(yr[i], 2 * f) << i;
  }
}

// softmax, log_softmax, layer_norm and rms_norm on float32 outputs of 24 MiB and up (the norms
// write their rows with streaming stores, decision 0027; softmax rows of up to 1024 values too,
// decision 0063): every row against float64 math. Rows of 1024 (aligned), 1000 and 1031 (each
// row starts at a different offset within a cache line: the unaligned head and the overlapping
// tail; 1031 is beyond softmax's streamed rows), 33 (softmax streams it on either level, just
// past the short-row path), 17 (norms streamed on AVX2, too short on AVX-512) and 5003.
TEST(ElementwiseLargeStreaming, SoftmaxAndNormRows) {
  for (int64_t len : {int64_t(1024), int64_t(1000), int64_t(1031), int64_t(33), int64_t(17),
                      int64_t(5003)}) {
    const int64_t rows = detail::kStreamingStoreBytes / (4 * len) + 5;
    std::vector<double> xv = random_values(size_t(rows * len), -6, 6, uint32_t(51 + len));
    Tensor x = make(xv, {rows, len}, DType::F32, kCpu);
    std::vector<double> xf = values(x);
    std::vector<double> sm = values(softmax(x, -1)), lsm = values(log_softmax(x, -1));
    std::vector<double> ln = values(nn::functional::layer_norm(x, {len}));
    const TensorOptions f32(DType::F32, kCpu);
    Tensor w = full({len}, 1.5, f32), b = full({len}, 0.25, f32);
    std::vector<double> ln_affine = values(nn::functional::layer_norm(x, {len}, w, b));
    std::vector<double> ln_w = values(nn::functional::layer_norm(x, {len}, w));
    std::vector<double> ln_b = values(nn::functional::layer_norm(x, {len}, Tensor(), b));
    std::vector<double> rms = values(nn::functional::rms_norm(x, {len}, w, 1e-6));
    const std::string at_len = " len " + std::to_string(len) + " at ";
    for (int64_t r = 0; r < rows; ++r) {
      const double* row = xf.data() + r * len;
      double m = row[0], mean = 0, var = 0, sum = 0, sq = 0;
      for (int64_t j = 0; j < len; ++j) m = std::max(m, row[j]), mean += row[j];
      mean /= double(len);
      for (int64_t j = 0; j < len; ++j) {
        sum += std::exp(row[j] - m);
        var += (row[j] - mean) * (row[j] - mean);
        sq += row[j] * row[j];
      }
      const double rstd = 1.0 / std::sqrt(var / double(len) + 1e-5);
      const double rrms = 1.0 / std::sqrt(sq / double(len) + 1e-6);
      for (int64_t j = 0; j < len; ++j) {
        const size_t at = size_t(r * len + j);
        const double p = std::exp(row[j] - m) / sum, z = (row[j] - mean) * rstd;
        ASSERT_NEAR(sm[at], p, 1e-6 * p + 1e-12) << "softmax" << at_len << at;
        ASSERT_NEAR(lsm[at], row[j] - m - std::log(sum), 1e-5) << "log_softmax" << at_len << at;
        ASSERT_NEAR(ln[at], z, 1e-5) << "layer_norm" << at_len << at;
        ASSERT_NEAR(ln_affine[at], z * 1.5 + 0.25, 2e-5) << "affine" << at_len << at;
        ASSERT_NEAR(ln_w[at], z * 1.5, 2e-5) << "weight only" << at_len << at;
        ASSERT_NEAR(ln_b[at], z + 0.25, 2e-5) << "bias only" << at_len << at;
        ASSERT_NEAR(rms[at], row[j] * rrms * 1.5, 2e-5) << "rms_norm" << at_len << at;
      }
    }
  }
}

// The streamed rows (pipelined: each row's outputs written during the next row's exp pass)
// give bit for bit what the same rows give one at a time in the cache-sized path, at every
// row position a thread's range can start or end at, with NaN, +inf and all -inf rows among
// them.
TEST(ElementwiseLargeStreaming, StreamedSoftmaxRowsEqualRowByRow) {
  for (int64_t len : {int64_t(1024), int64_t(64), int64_t(48), int64_t(1000)}) {
    const int64_t rows = detail::kStreamingStoreBytes / (4 * len) + 7;
    std::vector<double> xv = random_values(size_t(rows * len), -20, 20, uint32_t(7 + len));
    const double inf = std::numeric_limits<double>::infinity();
    for (int64_t r : {int64_t(0), int64_t(3), rows / 2, rows - 1}) xv[size_t(r * len + 5)] = NAN;
    for (int64_t r : {int64_t(1), rows / 2 + 1}) xv[size_t(r * len + len - 1)] = inf;
    for (int64_t j = 0; j < len; ++j) xv[size_t(2 * len + j)] = -inf;
    Tensor x = make(xv, {rows, len}, DType::F32, kCpu);
    for (bool log : {false, true}) {
      std::vector<double> big = values(log ? log_softmax(x, -1) : softmax(x, -1));
      for (int64_t r0 : {int64_t(0), rows / 2 - 2, rows - 4}) {
        Tensor part = x.slice(0, r0, r0 + 4).contiguous();
        std::vector<double> small = values(log ? log_softmax(part, -1) : softmax(part, -1));
        for (int64_t k = 0; k < 4 * len; ++k) {
          const double a = big[size_t(r0 * len + k)], b = small[size_t(k)];
          ASSERT_TRUE(a == b || (std::isnan(a) && std::isnan(b)))
              << (log ? "log_softmax" : "softmax") << " len " << len << " row " << r0 + k / len
              << " col " << k % len << ": streamed " << a << ", row by row " << b;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
