// float32 unary ops on outputs large enough for streaming stores (24 MiB and up), where the
// vector functions write with their own non-temporal stores (VecMathF32::streamed) or through
// a streamed buffer, as KILN_STREAMED_STORES or the CPU's vendor chooses (decision 0150;
// CTest runs this under both). Either way each value must be bit for bit what the same op
// gives on a piece of the input small enough to stay in the cache (ordinary stores), every
// element written once, the unaligned head and the tail included, and nothing written
// outside the output. (The inputs, 4 x randn, stay inside AVX2 exp's table range: there a
// vector with any lane outside [-87.3, 88.6] takes the other formula for all its lanes, so
// values near that edge could round differently when the vectors are grouped differently.)
#include <cmath>
#include <cstring>
#include <functional>

#include "kiln/tensor/streaming_store.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

const Device kCpu(DeviceType::CPU, 0);

std::vector<uint32_t> bits_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint32_t> b(size_t(c.numel()));
  std::memcpy(b.data(), c.raw_data(), b.size() * 4);
  return b;
}

bool is_nan_bits(uint32_t b) { return (b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffffu); }

TEST(UnaryStreamed, EveryVectorFunctionMatchesItsCachedForm) {
  using Out = std::function<void(const Tensor&, Tensor&)>;
  const std::vector<std::pair<const char*, Out>> ops = {
      {"neg", [](const Tensor& x, Tensor& o) { neg_out(x, o); }},
      {"abs", [](const Tensor& x, Tensor& o) { abs_out(x, o); }},
      {"exp", [](const Tensor& x, Tensor& o) { exp_out(x, o); }},
      {"exp2", [](const Tensor& x, Tensor& o) { exp2_out(x, o); }},
      {"expm1", [](const Tensor& x, Tensor& o) { expm1_out(x, o); }},
      {"log", [](const Tensor& x, Tensor& o) { log_out(x, o); }},
      {"log2", [](const Tensor& x, Tensor& o) { log2_out(x, o); }},
      {"log1p", [](const Tensor& x, Tensor& o) { log1p_out(x, o); }},
      {"sqrt", [](const Tensor& x, Tensor& o) { sqrt_out(x, o); }},
      {"rsqrt", [](const Tensor& x, Tensor& o) { rsqrt_out(x, o); }},
      {"reciprocal", [](const Tensor& x, Tensor& o) { reciprocal_out(x, o); }},
      {"sin", [](const Tensor& x, Tensor& o) { sin_out(x, o); }},
      {"cos", [](const Tensor& x, Tensor& o) { cos_out(x, o); }},
      {"tan", [](const Tensor& x, Tensor& o) { tan_out(x, o); }},
      {"tanh", [](const Tensor& x, Tensor& o) { tanh_out(x, o); }},
      {"sigmoid", [](const Tensor& x, Tensor& o) { sigmoid_out(x, o); }},
      {"silu", [](const Tensor& x, Tensor& o) { silu_out(x, o); }},
      {"relu", [](const Tensor& x, Tensor& o) { relu_out(x, o); }},
      {"erf", [](const Tensor& x, Tensor& o) { erf_out(x, o); }},
      {"floor", [](const Tensor& x, Tensor& o) { floor_out(x, o); }},
      {"ceil", [](const Tensor& x, Tensor& o) { ceil_out(x, o); }},
      {"round", [](const Tensor& x, Tensor& o) { round_out(x, o); }},
      {"trunc", [](const Tensor& x, Tensor& o) { trunc_out(x, o); }},
      {"sign", [](const Tensor& x, Tensor& o) { sign_out(x, o); }},
      {"gelu", [](const Tensor& x, Tensor& o) { o.copy_(gelu(x)); }},
      {"gelu tanh", [](const Tensor& x, Tensor& o) { o.copy_(gelu(x, "tanh")); }},
  };
  const int64_t n = detail::kStreamingStoreBytes / 4 + 4099;  // odd on purpose
  constexpr int64_t kPiece = int64_t(1) << 20;                // 4 MiB: ordinary stores
  constexpr float kSentinel = -12345.0f;
  const Tensor x = mul(randn({n}, TensorOptions(DType::F32, kCpu)), Scalar(4.0));
  for (int64_t offset : {int64_t(0), int64_t(3)}) {
    Tensor buffer = full({n + offset + 5}, kSentinel, TensorOptions(DType::F32, kCpu));
    Tensor out = buffer.slice(0, offset, offset + n);  // offset 3: a misaligned output
    for (const auto& [name, op] : ops) {
      SCOPED_TRACE(std::string(name) + ", output offset " + std::to_string(offset));
      buffer.fill_(kSentinel);
      op(x, out);
      const std::vector<uint32_t> got = bits_of(out);
      int bad = 0;
      for (int64_t b = 0; b < n && bad < 3; b += kPiece) {
        const int64_t e = std::min(n, b + kPiece);
        Tensor piece_out = empty({e - b}, TensorOptions(DType::F32, kCpu));
        op(x.slice(0, b, e), piece_out);
        const std::vector<uint32_t> want = bits_of(piece_out);
        for (int64_t i = b; i < e && bad < 3; ++i) {
          const uint32_t g = got[size_t(i)], w = want[size_t(i - b)];
          if (g == w || (is_nan_bits(g) && is_nan_bits(w))) continue;
          float gf, wf;
          std::memcpy(&gf, &g, 4);
          std::memcpy(&wf, &w, 4);
          ADD_FAILURE() << "at " << i << ": " << gf << ", in the cache " << wf;
          ++bad;
        }
      }
      const std::vector<double> all = values(buffer);
      for (int64_t i = 0; i < offset; ++i) EXPECT_EQ(all[size_t(i)], kSentinel) << "before " << i;
      for (int64_t i = offset + n; i < int64_t(all.size()); ++i)
        EXPECT_EQ(all[size_t(i)], kSentinel) << "after " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::test
