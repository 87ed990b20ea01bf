// ggml_linear on the CPU (include/kiln/quant/ggml_linear.h).
// Few activation rows (decoding): the activations are quantised to 8-bit blocks and each
// weight row is streamed once through the ISA's block dot product (isa/ggml_dot.h), up to
// four activation rows per pass over the row, threads splitting the output features.
// Many rows (prefill): the weight is dequantised to bfloat16 and multiplied by kiln's bfloat16
// GEMM, far faster there than one block per instruction (decision 0083). A type without a dot
// kernel and few rows: dequantised to float32 and multiplied.
#include <cmath>
#include <cstring>
#include <vector>

#include "isa/ggml_dot.h"
#include "kiln/core/half.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/linalg.h"
#include "kiln/quant/ggml_linear.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

namespace {

// From this many activation rows on, dequantise + GEMM beats the block dot products.
constexpr int64_t kDequantizeMinRows = 16;
// Output features per work item: 16 Q8_0 rows of 4096 values are 70 KB, so a work item's
// weights stay in L2 while every group of activation rows passes over them.
constexpr int64_t kFeaturesPerChunk = 16;

// The ISA level's kernels for one weight type (null members: none for that type).
struct TypeKernels {
  GGMLDotFn dot = nullptr;
  GGMLDequantBf16Fn dequant_bf16 = nullptr;
};

TypeKernels kernels_for(quant::GGMLType type) {
  const GGMLDotKernels& k = ggml_dot_kernels();
  switch (type) {
    case quant::GGMLType::Q8_0: return {k.q8_0, k.q8_0_bf16};
    case quant::GGMLType::Q4_0: return {k.q4_0, k.q4_0_bf16};
    case quant::GGMLType::Q4_K: return {k.q4_k, k.q4_k_bf16};
    case quant::GGMLType::Q5_K: return {k.q5_k, k.q5_k_bf16};
    case quant::GGMLType::Q6_K: return {k.q6_k, k.q6_k_bf16};
    default: return {};
  }
}

// Quantises rows of 32-value blocks as ggml's quantize_row_q8_0: d = max|x| / 127, values
// round(x / d) (half away from zero), d kept as float16 (the scale the products use).
void quantize_rows_q8(const float* x, int64_t M, int64_t K, int8_t* qx, float* dx, float* xsum) {
  const int64_t nb = K / 32;
  for (int64_t r = 0; r < M; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* v = x + r * K + b * 32;
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      int8_t* q = qx + r * K + b * 32;
      int32_t sum = 0;
      for (int j = 0; j < 32; ++j) {
        q[j] = int8_t(std::round(v[j] * id));
        sum += q[j];
      }
      const float d16 = float(Half(d));
      dx[r * nb + b] = d16;
      xsum[r * nb + b] = d16 * float(sum);
    }
  }
}

// The weight dequantised to `dtype` and multiplied by kiln's GEMM:
// - bfloat16 (many rows): bfloat16 weights and activations into the bfloat16 GEMM (float32
//   sums, rounded once to bfloat16), like a bfloat16 model's layer. The rounding of the
//   activations to bfloat16 is finer than llama.cpp's 8-bit blocks. (fused_linear with a
//   float32 result would avoid the last rounding, but packs its weight into a per-tensor
//   cache: with a new weight each call it measured 4x slower than this at 16 rows.)
// - float32 (few rows of a type without a dot kernel): exact up to float32 sums.
void dequantize_matmul(OpCall& call, quant::GGMLType type, int64_t K, DType dtype) {
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  const int64_t N = w.size(0);
  Tensor wd = empty({N, K}, dtype);
  const uint8_t* src = static_cast<const uint8_t*>(w.raw_data());
  const int64_t row_bytes = w.size(1);
  const GGMLDequantBf16Fn fast = dtype == DType::BF16 ? kernels_for(type).dequant_bf16 : nullptr;
  const int64_t blocks = K / quant::ggml_type_info(type).block_elems;
  parallel_region(N * K >= (int64_t(1) << 16), [&] {
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const uint8_t* row = src + n * row_bytes;
      if (fast) {
        fast(row, blocks, static_cast<uint16_t*>(wd.raw_data()) + n * K);
      } else if (dtype == DType::F32) {
        quant::dequantize_ggml_row(type, row, wd.data_ptr<float>() + n * K, K);
      } else {
        std::vector<float> values(static_cast<size_t>(K));
        quant::dequantize_ggml_row(type, row, values.data(), K);
        uint16_t* dst = static_cast<uint16_t*>(wd.raw_data()) + n * K;
        for (int64_t k = 0; k < K; ++k) dst[k] = BFloat16::from_float(values[size_t(k)]);
      }
    }
  });
  const Tensor y = matmul(x.reshape({x.numel() / K, K}).to(dtype), wd.t());
  call.outs[0].copy_(y.reshape(call.outs[0].shape()));
}

void ggml_linear_kernel(OpCall& call) {
  const auto type = quant::GGMLType(call.int_attr(0));
  const int64_t K = call.int_attr(1);
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  const int64_t M = K == 0 ? 0 : x.numel() / K, N = w.size(0);
  if (M == 0 || N == 0) return;
  const GGMLDotFn dot = kernels_for(type).dot;
  if (M >= kDequantizeMinRows) return dequantize_matmul(call, type, K, DType::BF16);
  if (dot == nullptr) return dequantize_matmul(call, type, K, DType::F32);

  const int64_t nb = K / 32;
  std::vector<int8_t> qx(size_t(M * K));
  std::vector<float> dx(size_t(M * nb)), xsum(size_t(M * nb));
  quantize_rows_q8(static_cast<const float*>(x.raw_data()), M, K, qx.data(), dx.data(), xsum.data());

  const uint8_t* wp = static_cast<const uint8_t*>(w.raw_data());
  const int64_t row_bytes = w.size(1);
  const int64_t weight_blocks = K / quant::ggml_type_info(type).block_elems;  // of the weight's type
  float* out = static_cast<float*>(call.outs[0].raw_data());
  const int64_t chunks = (N + kFeaturesPerChunk - 1) / kFeaturesPerChunk;
  parallel_region(M * N * K >= (int64_t(1) << 18), [&] {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t n_end = std::min(N, (c + 1) * kFeaturesPerChunk);
      for (int64_t r0 = 0; r0 < M; r0 += kGGMLDotRows) {
        const int rows = int(std::min<int64_t>(kGGMLDotRows, M - r0));
        for (int64_t n = c * kFeaturesPerChunk; n < n_end; ++n) {
          float res[kGGMLDotRows];
          dot(wp + n * row_bytes, weight_blocks, qx.data() + r0 * K, dx.data() + r0 * nb,
              xsum.data() + r0 * nb, K, rows, res);
          for (int i = 0; i < rows; ++i) out[(r0 + i) * N + n] = res[i];
        }
      }
    }
  });
}

}  // namespace

void register_ggml_linear_kernel() {
  register_kernel("ggml_linear", DeviceType::CPU, ggml_linear_kernel, dtype_bit(DType::F32));
}

}  // namespace kiln::cpu

namespace kiln::quant {
const char* ggml_linear_isa() { return cpu::ggml_dot_kernels().isa; }
}  // namespace kiln::quant
