// bfloat16 unary ops through the vector table's bfloat16 entries (AVX2 and up: each vector
// widened, computed and rounded in registers; decision 0039) must give, bit for bit, the
// float32 op on the widened input rounded once to nearest even (a NaN result: some NaN; which
// sign and payload survive depends on the compiler's operand order, which differed between
// the float32 and bfloat16 instantiations in the sanitizer build), for every bfloat16 bit
// pattern: NaNs with payloads, infinities, signed zeros, denormals and the values either side
// of every rounding boundary. The rounding here is
// written out independently of kiln's converters. CTest reruns "*Unary*" at every ISA level
// (the baseline level runs the scalar kernels, which must agree too).
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kiln/nn/functional.h"
#include "kiln/tensor/streaming_store.h"
#include "ops/bf16_bits.h"
#include "ops/test_util.h"

namespace kiln::test {
namespace {

// Each bfloat16 result against the float32 op's result on the same (widened) values.
void expect_rounded_float_op(const std::string& name, const Tensor& x_bf16, const Tensor& got,
                             const Tensor& want_f32) {
  const std::vector<uint16_t> g = bf16_bits_of(got), in = bf16_bits_of(x_bf16);
  const Tensor w = want_f32.contiguous();
  ASSERT_EQ(int64_t(g.size()), w.numel()) << name;
  const float* wp = w.data_ptr<float>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(wp[i])) {  // which NaN (sign, payload) the compiled code keeps may differ
      ASSERT_TRUE((g[i] & 0x7fffu) > 0x7f80u)
          << name << ": input bits 0x" << std::hex << in[i] << " gave 0x" << g[i];
      continue;
    }
    ASSERT_EQ(g[i], round_to_bf16_bits(wp[i]))
        << name << ": input bits 0x" << std::hex << in[i] << ", float32 result " << wp[i];
  }
}

using UnaryOp = std::function<Tensor(const Tensor&)>;

const std::vector<std::pair<std::string, UnaryOp>>& table_ops() {
  static const std::vector<std::pair<std::string, UnaryOp>> ops = {
      {"exp", [](const Tensor& t) { return exp(t); }},
      {"exp2", [](const Tensor& t) { return exp2(t); }},
      {"expm1", [](const Tensor& t) { return expm1(t); }},
      {"log", [](const Tensor& t) { return log(t); }},
      {"log2", [](const Tensor& t) { return log2(t); }},
      {"log1p", [](const Tensor& t) { return log1p(t); }},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); }},
      {"reciprocal", [](const Tensor& t) { return reciprocal(t); }},
      {"sin", [](const Tensor& t) { return sin(t); }},
      {"cos", [](const Tensor& t) { return cos(t); }},
      {"tan", [](const Tensor& t) { return tan(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"silu", [](const Tensor& t) { return silu(t); }},
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"erf", [](const Tensor& t) { return erf(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"gelu tanh", [](const Tensor& t) { return gelu(t, "tanh"); }},
      {"floor", [](const Tensor& t) { return floor(t); }},
      {"ceil", [](const Tensor& t) { return ceil(t); }},
      {"round", [](const Tensor& t) { return round(t); }},
      {"trunc", [](const Tensor& t) { return trunc(t); }},
      {"sign", [](const Tensor& t) { return sign(t); }},
      {"softplus", [](const Tensor& t) { return softplus(t, Scalar(2.0), Scalar(3.0)); }},
      {"leaky_relu", [](const Tensor& t) { return nn::functional::leaky_relu(t, 0.3); }},
      {"clamp", [](const Tensor& t) { return clamp(t, Scalar(-3.3), Scalar(7.1)); }},
      {"clamp max", [](const Tensor& t) { return clamp(t, std::nullopt, Scalar(0.2)); }}};
  return ops;
}

// All 65536 patterns (16 chunks of 4096: split over the threads), then 4099 of them (one
// chunk and a vector tail of 3) and 13 (a tail only).
TEST(UnaryBfloat16Registers, EveryBitPatternEqualsTheFloat32OpRoundedOnce) {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint16_t(i * 40503u);  // all, shuffled
  const Tensor all = from_blob_copy(bits.data(), {65536}, DType::BF16, Device(DeviceType::CPU, 0));
  for (int64_t n : {int64_t(65536), int64_t(4099), int64_t(13)}) {
    const Tensor x = all.slice(0, 65536 - n, 65536).contiguous();
    const Tensor xf = x.to(DType::F32);
    for (const auto& [name, op] : table_ops()) {
      SCOPED_TRACE(name + " n=" + std::to_string(n));
      expect_rounded_float_op(name, x, op(x), op(xf));
    }
  }
}

// In place (the vector reads each value before writing its slot), and a 2-D input whose
// transpose takes the element loop: both must agree with the float32 op too.
TEST(UnaryBfloat16Registers, InPlaceAndTransposedAgree) {
  std::vector<uint16_t> bits(64 * 97);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint16_t(0x3c00u + i * 7u);  // |x| ~ 0.01..
  const Tensor x = from_blob_copy(bits.data(), {64, 97}, DType::BF16, Device(DeviceType::CPU, 0));
  const Tensor xf = x.to(DType::F32);
  Tensor y = x.clone();
  exp_(y);
  expect_rounded_float_op("exp_", x, y, exp(xf));
  Tensor z = x.clone();
  sigmoid_(z);
  expect_rounded_float_op("sigmoid_", x, z, sigmoid(xf));
  for (const auto& [name, op] : table_ops()) {
    SCOPED_TRACE(name + " transposed");
    expect_rounded_float_op(name, x.t(), op(x.t()), op(xf.t()));
  }
}

// Outputs from kStreamingStoreBytes up leave through non-temporal stores, block by block.
TEST(UnaryBfloat16Registers, StreamedOutputs) {
  const int64_t n = detail::kStreamingStoreBytes / 2 + 1000 + 3;
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint16_t(i * 40503u);
  const Tensor x = from_blob_copy(bits.data(), {n}, DType::BF16, Device(DeviceType::CPU, 0));
  const Tensor xf = x.to(DType::F32);
  expect_rounded_float_op("sigmoid", x, sigmoid(x), sigmoid(xf));
  expect_rounded_float_op("sqrt", x, sqrt(x), sqrt(xf));
}

}  // namespace
}  // namespace kiln::test
