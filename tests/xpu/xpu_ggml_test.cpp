// ggml_linear on xpu (src/kiln/backends/xpu/xpu_ggml_kernels.cpp) for every block type with a
// kernel, against a float64 product of the activations with the weights dequantised by kiln's
// reference dequantiser (src/kiln/quant/ggml_dequantize.cpp, itself checked against gguf-py),
// and against the CPU kernel (which quantises the activations to 8 bits, so only to within
// that rounding). Weights are random bytes (every bit pattern of the values and packed
// scales) with finite random float16 block scales. M covers the matrix-vector kernel (1, 3, 8)
// and the dequantise + GEMM path (9, 33); odd N leaves a partial group of output features.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/core/half.h"
#include "kiln/kiln.h"
#include "kiln/quant/ggml_linear.h"

namespace kiln {
namespace {

using quant::GGMLType;

const int kAllDeviceTypes = setenv("KILN_XPU_DEVICE_TYPES", "all", /*overwrite=*/0);

Device xpu() { return Device(DeviceType::XPU, 0); }
Device host() { return Device(DeviceType::CPU, 0); }

// Byte offsets of the float16 scales in one block of the type.
std::vector<size_t> scale_offsets(GGMLType type) {
  switch (type) {
    case GGMLType::Q4_K:
    case GGMLType::Q5_K: return {0, 2};  // d, dmin
    case GGMLType::Q6_K: return {208};
    default: return {0};
  }
}

std::vector<uint8_t> random_blocks(GGMLType type, int64_t N, int64_t K, std::mt19937& rng) {
  const quant::GGMLTypeInfo& ti = quant::ggml_type_info(type);
  std::vector<uint8_t> w(size_t(N * K / ti.block_elems * ti.block_bytes));
  for (auto& v : w) v = uint8_t(rng());
  // Scales about 1 / (largest packed value) so that the weights are O(0.1) for every type.
  const float range = type == GGMLType::Q8_0 ? 0.002f : type == GGMLType::Q4_0 ? 0.02f : 0.004f;
  std::uniform_real_distribution<float> scale(-range, range);
  for (size_t b = 0; b < w.size(); b += size_t(ti.block_bytes))
    for (size_t off : scale_offsets(type)) {
      const uint16_t h = Half::from_float(scale(rng));
      std::memcpy(&w[b + off], &h, 2);
    }
  return w;
}

struct Case {
  Tensor x;         // float32 [..., K] on the CPU
  Tensor w;         // uint8 [N, row_bytes] on the CPU
  std::vector<double> want, mag;  // float64 x @ dequantize(W)^T and sum |x_k w_k|, [M, N]
};

Case make_case(GGMLType type, const Shape& x_shape, int64_t N, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t K = x_shape.back();
  int64_t M = 1;
  for (size_t d = 0; d + 1 < x_shape.size(); ++d) M *= x_shape[d];
  std::vector<float> x(size_t(M * K));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : x) v = normal(rng);
  std::vector<uint8_t> w = random_blocks(type, N, K, rng);
  const int64_t row_bytes = quant::ggml_row_bytes(type, K);
  Case c;
  c.x = from_blob_copy(x.data(), x_shape, DType::F32, host());
  c.w = from_blob_copy(w.data(), {N, row_bytes}, DType::U8, host());
  c.want.assign(size_t(M * N), 0.0);
  c.mag.assign(size_t(M * N), 0.0);
  std::vector<float> wf(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    quant::dequantize_ggml_row(type, &w[size_t(n * row_bytes)], wf.data(), K);
    for (int64_t m = 0; m < M; ++m) {
      double s = 0, a = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(x[size_t(m * K + k)]) * double(wf[size_t(k)]);
        s += p;
        a += std::fabs(p);
      }
      c.want[size_t(m * N + n)] = s;
      c.mag[size_t(m * N + n)] = a;
    }
  }
  return c;
}

// float32 sums of K products: within a few units of float32 rounding of sum |x_k w_k|.
void expect_matches(const Tensor& y, const Case& c, double rel, const std::string& what) {
  ASSERT_EQ(y.dtype(), DType::F32) << what;
  std::vector<double> got = y.to(host()).to_vector<double>();
  ASSERT_EQ(got.size(), c.want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], c.want[i], rel * c.mag[i] + 1e-6) << what << " at " << i;
}

const GGMLType kTypes[] = {GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K};

TEST(XpuGGMLLinear, EveryTypeMatchesFloat64AndTheCpuKernel) {
  (void)kAllDeviceTypes;
  ASSERT_TRUE(is_available(DeviceType::XPU)) << "no OpenCL device: install pocl-opencl-icd";
  for (GGMLType type : kTypes) {
    const char* name = quant::ggml_type_info(type).name;
    const bool k_quant = quant::ggml_type_info(type).block_elems == 256;
    // Rows of fewer and more than 32 units of 32 values (the lanes of one output feature).
    const std::vector<int64_t> ks = k_quant ? std::vector<int64_t>{256, 1280} : std::vector<int64_t>{96, 1056};
    for (int64_t K : ks) {
      for (int64_t M : {1, 3, 8, 9, 33}) {
        const int64_t N = 37;
        const Case c = make_case(type, {M, K}, N, uint32_t(K * 100 + M) ^ uint32_t(type) << 20);
        const std::string what = std::string(name) + " M=" + std::to_string(M) + " K=" + std::to_string(K);
        const Tensor y = quant::ggml_linear(c.x.to(xpu()), c.w.to(xpu()), type, K);
        ASSERT_EQ(y.device().type, DeviceType::XPU) << what;
        ASSERT_EQ(y.shape(), (Shape{M, N})) << what;
        expect_matches(y, c, 1e-5, what);
        // The CPU kernel rounds the activations to 8 bits per block (or, from 16 rows, both
        // operands to bfloat16): the two agree to within that.
        const Tensor cpu = quant::ggml_linear(c.x, c.w, type, K);
        std::vector<double> a = y.to(host()).to_vector<double>(), b = cpu.to_vector<double>();
        for (size_t i = 0; i < a.size(); ++i)
          ASSERT_NEAR(a[i], b[i], 0.02 * c.mag[i] + 1e-6) << what << " (xpu vs cpu) at " << i;
      }
    }
  }
}

TEST(XpuGGMLLinear, BatchedInputAndBias) {
  const Case c = make_case(GGMLType::Q4_K, {3, 11, 512}, 19, 7);
  const Tensor bias = randn({19});
  const Tensor y = quant::ggml_linear(c.x.to(xpu()), c.w.to(xpu()), GGMLType::Q4_K, 512, bias.to(xpu()));
  ASSERT_EQ(y.shape(), (Shape{3, 11, 19}));
  const Tensor no_bias = sub(y, bias.to(xpu()));
  expect_matches(no_bias, c, 1e-5, "Q4_K [3, 11, 512] + bias");
  const Case d = make_case(GGMLType::Q6_K, {2, 1, 768}, 21, 8);  // [..., K] with M = 2
  expect_matches(quant::ggml_linear(d.x.to(xpu()), d.w.to(xpu()), GGMLType::Q6_K, 768), d, 1e-5,
                 "Q6_K [2, 1, 768]");
}

// Weights larger than the kernel's dequantisation scratch (2^24 values) are multiplied a
// range of output features at a time: 4099 rows of 4096 take two ranges.
TEST(XpuGGMLLinear, ManyRowsOverSeveralScratchRanges) {
  const int64_t K = 4096, N = 4099;
  const Case c = make_case(GGMLType::Q4_0, {9, K}, N, 11);
  expect_matches(quant::ggml_linear(c.x.to(xpu()), c.w.to(xpu()), GGMLType::Q4_0, K), c, 1e-5,
                 "Q4_0 M=9 N=4099 K=4096");
}

// A weight view starting at an odd byte (its float16 scales then unaligned).
TEST(XpuGGMLLinear, WeightAtAnOddOffset) {
  const int64_t K = 64, N = 5;
  const Case c = make_case(GGMLType::Q8_0, {2, K}, N, 13);
  const int64_t bytes = c.w.numel();
  Tensor flat = zeros({bytes + 1}, DType::U8);
  flat.narrow(0, 1, bytes).copy_(c.w.reshape({bytes}));
  const Tensor w = flat.to(xpu()).narrow(0, 1, bytes).reshape({N, c.w.size(1)});
  expect_matches(quant::ggml_linear(c.x.to(xpu()), w, GGMLType::Q8_0, K), c, 1e-5, "odd offset");
}

TEST(XpuGGMLLinear, RejectsWhatItCannotRun) {
  // A type without a block kernel: a clear error, not a wrong result.
  const int64_t K = 64;
  Tensor q4_1 = zeros({3, quant::ggml_row_bytes(GGMLType::Q4_1, K)}, DType::U8).to(xpu());
  EXPECT_THROW(quant::ggml_linear(randn({2, K}).to(xpu()), q4_1, GGMLType::Q4_1, K), NotImplementedError);
  // Input and weight on different devices.
  Tensor w = zeros({3, quant::ggml_row_bytes(GGMLType::Q8_0, K)}, DType::U8);
  EXPECT_THROW(quant::ggml_linear(randn({2, K}).to(xpu()), w, GGMLType::Q8_0, K), DeviceError);
  // Wrong row size.
  EXPECT_THROW(quant::ggml_linear(randn({2, K}).to(xpu()), w.to(xpu()), GGMLType::Q8_0, 96), ShapeError);
}

}  // namespace
}  // namespace kiln
