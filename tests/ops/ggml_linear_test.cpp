// kiln::quant::ggml_linear against a float64 reference written here: activations quantised
// by ggml's rule (d = max|x| / 127 kept as float16, round half away from zero), exact integer
// block products, scaled and summed in double. Weights are random bytes over the whole int8
// range (-128 included, which a sign-trick kernel would get wrong) with finite float16
// scales. CTest re-runs this suite at every ISA level (KILN_CPU_ISA), so the VNNI, AVX2 and
// plain-loop block products are all checked.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/core/half.h"
#include "kiln/kiln.h"
#include "kiln/quant/ggml_linear.h"

namespace kiln::test {
namespace {

using quant::GGMLType;

std::vector<uint8_t> random_weight(GGMLType type, int64_t N, int64_t K, std::mt19937& rng) {
  const int64_t block = type == GGMLType::Q8_0 ? 34 : 18;
  std::vector<uint8_t> w(size_t(N * K / 32 * block));
  for (auto& v : w) v = uint8_t(rng());
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (size_t b = 0; b < w.size(); b += size_t(block)) {
    const uint16_t h = Half::from_float(scale(rng));
    std::memcpy(&w[b], &h, 2);
  }
  return w;
}

// Value j of block b of row n as an integer (the scale aside).
int weight_value(GGMLType type, const uint8_t* blk, int j) {
  if (type == GGMLType::Q8_0) return int8_t(blk[2 + j]);
  const uint8_t byte = blk[2 + (j % 16)];
  return (j < 16 ? (byte & 0xF) : (byte >> 4)) - 8;
}

double f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Half::to_float(h);
}

std::vector<double> reference(GGMLType type, const std::vector<float>& x, const std::vector<uint8_t>& w,
                              int64_t M, int64_t N, int64_t K) {
  const int64_t block = type == GGMLType::Q8_0 ? 34 : 18, nb = K / 32;
  std::vector<double> y(size_t(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* v = &x[size_t(m * K + b * 32)];
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
      const float d = amax / 127.0f;
      const float id = d != 0 ? 1.0f / d : 0.0f;
      int q[32];
      for (int j = 0; j < 32; ++j) q[j] = int(std::round(v[j] * id));
      const double dx = float(Half(d));
      for (int64_t n = 0; n < N; ++n) {
        const uint8_t* blk = &w[size_t((n * nb + b) * block)];
        long s = 0;
        for (int j = 0; j < 32; ++j) s += long(q[j]) * weight_value(type, blk, j);
        y[size_t(m * N + n)] += double(s) * dx * f16(blk);
      }
    }
  }
  return y;
}

void check(GGMLType type, int64_t M, int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> x(size_t(M * K));
  for (auto& v : x) v = normal(rng);
  if (K >= 64) std::fill(x.begin(), x.begin() + 32, 0.0f);  // a zero block (scale 0)
  std::vector<uint8_t> w = random_weight(type, N, K, rng);
  const int64_t row_bytes = int64_t(w.size()) / N;
  Tensor xt = from_blob_copy(x.data(), {M, K}, DType::F32, Device(DeviceType::CPU, 0));
  Tensor wt = from_blob_copy(w.data(), {N, row_bytes}, DType::U8, Device(DeviceType::CPU, 0));
  Tensor y = quant::ggml_linear(xt, wt, type, K);
  ASSERT_EQ(y.shape(), (Shape{M, N}));
  const std::vector<double> want = reference(type, x, w, M, N, K);
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (int64_t i = 0; i < M * N; ++i)
    ASSERT_NEAR(y.data_ptr<float>()[i], want[size_t(i)], 1e-5 * (scale + 1) * std::sqrt(double(K) / 32))
        << "M=" << M << " N=" << N << " K=" << K << " at " << i;
}

TEST(GGMLLinear, Q8_0FewRowsIsExactBlockProduct) {
  for (int64_t M : {1, 2, 3, 4, 5, 9, 15})
    for (int64_t K : {32, 96, 4096}) check(GGMLType::Q8_0, M, 19, K, uint32_t(M * 100 + K));
}

TEST(GGMLLinear, Q4_0FewRowsIsExactBlockProduct) {
  for (int64_t M : {1, 2, 3, 4, 5, 9, 15})
    for (int64_t K : {32, 96, 4096}) check(GGMLType::Q4_0, M, 19, K, uint32_t(M * 100 + K + 7));
}

// From 16 rows on (prefill) the weight is dequantised to bfloat16 and multiplied with the
// activations rounded to bfloat16 (float32 sums, the result rounded to bfloat16): the
// reference rounds the operands the same way.
TEST(GGMLLinear, ManyRowsEqualBfloat16DequantizedProduct) {
  for (GGMLType type : {GGMLType::Q8_0, GGMLType::Q4_0}) {
    std::mt19937 rng(5);
    const int64_t M = 20, N = 33, K = 256;
    std::vector<uint8_t> w = random_weight(type, N, K, rng);
    const int64_t row_bytes = int64_t(w.size()) / N;
    Tensor wt = from_blob_copy(w.data(), {N, row_bytes}, DType::U8, Device(DeviceType::CPU, 0));
    Tensor x = randn({M, K});
    std::vector<float> wf(size_t(N * K));
    for (int64_t n = 0; n < N; ++n)
      quant::dequantize_ggml_row(type, &w[size_t(n * row_bytes)], &wf[size_t(n * K)], K);
    Tensor y = quant::ggml_linear(x, wt, type, K);
    const auto bf16 = [](float v) { return double(float(BFloat16(v))); };
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = bf16(x.data_ptr<float>()[m * K + k]) * bf16(wf[size_t(n * K + k)]);
          s += p;
          mag += std::fabs(p);
        }
        ASSERT_NEAR(y.data_ptr<float>()[m * N + n], s, 1e-5 * mag + std::fabs(s) / 256 + 1e-6) << m << "," << n;
      }
  }
}

// The K-quants' dot kernels (Q4_K, Q5_K, Q6_K) against the dequantised weights times the
// activations as the kernels quantise them, in double.
TEST(GGMLLinear, KQuantsFewRowsMatchDequantizedBlocks) {
  for (GGMLType type : {GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K}) {
    const int64_t block = quant::ggml_type_info(type).block_bytes;
    for (int64_t M : {1, 2, 3, 5}) {
      std::mt19937 rng(uint32_t(M) * 31 + uint32_t(block));
      const int64_t N = 9, K = 512;
      std::vector<uint8_t> w(size_t(N * K / 256 * block));
      for (auto& v : w) v = uint8_t(rng());
      std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
      for (size_t b = 0; b < w.size(); b += size_t(block)) {  // finite float16 scales
        for (size_t off : type == GGMLType::Q6_K ? std::vector<size_t>{208} : std::vector<size_t>{0, 2}) {
          const uint16_t h = Half::from_float(scale(rng));
          std::memcpy(&w[b + off], &h, 2);
        }
      }
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> x(size_t(M * K));
      for (auto& v : x) v = normal(rng);
      const int64_t row_bytes = int64_t(w.size()) / N;
      Tensor wt = from_blob_copy(w.data(), {N, row_bytes}, DType::U8, Device(DeviceType::CPU, 0));
      Tensor y = quant::ggml_linear(from_blob_copy(x.data(), {M, K}, DType::F32, Device(DeviceType::CPU, 0)),
                                    wt, type, K);
      std::vector<float> wf(static_cast<size_t>(K));
      for (int64_t n = 0; n < N; ++n) {
        quant::dequantize_ggml_row(type, &w[size_t(n * row_bytes)], wf.data(), K);
        for (int64_t m = 0; m < M; ++m) {
          double s = 0, mag = 0;
          for (int64_t b = 0; b < K / 32; ++b) {
            const float* v = &x[size_t(m * K + b * 32)];
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
            const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
            const double dx = float(Half(d));
            for (int j = 0; j < 32; ++j) {
              const double t = double(wf[size_t(b * 32 + j)]) * dx * std::round(v[j] * id);
              s += t;
              mag += std::fabs(t);
            }
          }
          ASSERT_NEAR(y.data_ptr<float>()[m * N + n], s, 1e-5 * mag + 1e-7)
              << quant::ggml_type_info(type).name << " M=" << M << " n=" << n << " m=" << m;
        }
      }
    }
  }
}

TEST(GGMLLinear, RejectsBadArguments) {
  Tensor w = zeros({4, 34}, DType::U8);
  EXPECT_THROW(quant::ggml_linear(randn({2, 64}), w, GGMLType::Q8_0, 64), ShapeError);
  EXPECT_THROW(quant::ggml_linear(randn({2, 32}), w, GGMLType::Q8_0, 48), ValueError);
  EXPECT_THROW(quant::ggml_linear(randn({2, 32}), w, GGMLType::F32, 32), TypeError);
  EXPECT_THROW(quant::ggml_linear(zeros({2, 32}, DType::I32), w, GGMLType::Q8_0, 32), TypeError);
  EXPECT_THROW(quant::ggml_linear(randn({2, 32}), w, GGMLType::Q8_0, 32, randn({3})), ShapeError);
}

}  // namespace
}  // namespace kiln::test
