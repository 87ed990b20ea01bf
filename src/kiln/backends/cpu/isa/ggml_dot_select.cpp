// The plain-loop variant of the ggml block dot products and the choice between variants.
#include <cstring>

#include "ggml_dot.h"
#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/core/half.h"
#include "kiln/quant/ggml_types.h"

namespace kiln::cpu {

namespace {

float scale_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Half::to_float(h);
}

void q8_0_baseline(const uint8_t* w, int64_t nblocks, const int8_t* qx, const float* dx,
                   const float* /*xsum*/, int64_t x_stride, int rows, float* out) {
  for (int r = 0; r < rows; ++r) {
    float acc = 0;
    for (int64_t b = 0; b < nblocks; ++b) {
      const uint8_t* blk = w + b * 34;
      const int8_t* wq = reinterpret_cast<const int8_t*>(blk + 2);
      const int8_t* xq = qx + r * x_stride + b * 32;
      int32_t s = 0;
      for (int j = 0; j < 32; ++j) s += int32_t(wq[j]) * int32_t(xq[j]);
      acc += float(s) * (scale_at(blk) * dx[r * nblocks + b]);
    }
    out[r] = acc;
  }
}

void q4_0_baseline(const uint8_t* w, int64_t nblocks, const int8_t* qx, const float* dx,
                   const float* xsum, int64_t x_stride, int rows, float* out) {
  for (int r = 0; r < rows; ++r) {
    float acc = 0;
    for (int64_t b = 0; b < nblocks; ++b) {
      const uint8_t* blk = w + b * 18;
      const uint8_t* qs = blk + 2;
      const int8_t* xq = qx + r * x_stride + b * 32;
      int32_t s = 0;  // sum of nibble * x; the offset of 8 is taken off through xsum
      for (int j = 0; j < 16; ++j)
        s += int32_t(qs[j] & 0xF) * int32_t(xq[j]) + int32_t(qs[j] >> 4) * int32_t(xq[j + 16]);
      const float d = scale_at(blk);
      acc += float(s) * (d * dx[r * nblocks + b]) - 8.0f * d * xsum[r * nblocks + b];
    }
    out[r] = acc;
  }
}

// K-quants: each super-block is dequantised by the reference and dotted with the activations
// as floats (the scales make the integer form no exacter than this).
template <quant::GGMLType kType, int kBlockBytes>
void k_quant_baseline(const uint8_t* w, int64_t nblocks, const int8_t* qx, const float* dx,
                      const float* /*xsum*/, int64_t x_stride, int rows, float* out) {
  float values[256];
  for (int r = 0; r < rows; ++r) out[r] = 0;
  for (int64_t b = 0; b < nblocks; ++b) {
    quant::dequantize_ggml_row(kType, w + b * kBlockBytes, values, 256);
    for (int r = 0; r < rows; ++r) {
      float acc = 0;
      for (int j = 0; j < 8; ++j) {
        const int8_t* xq = qx + r * x_stride + b * 256 + j * 32;
        float s = 0;
        for (int i = 0; i < 32; ++i) s += values[j * 32 + i] * float(xq[i]);
        acc += s * dx[r * nblocks * 8 + b * 8 + j];
      }
      out[r] += acc;
    }
  }
}

template <int kBlockBytes>
void dequant_bf16_baseline(const uint8_t* w, int64_t nblocks, uint16_t* out) {
  constexpr auto type = kBlockBytes == 34 ? quant::GGMLType::Q8_0 : quant::GGMLType::Q4_0;
  float values[32];
  for (int64_t b = 0; b < nblocks; ++b) {
    quant::dequantize_ggml_row(type, w + b * kBlockBytes, values, 32);
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = BFloat16::from_float(values[j]);
  }
}

}  // namespace

GGMLDotKernels ggml_dot_kernels_baseline() {
  GGMLDotKernels k;
  k.q8_0 = &q8_0_baseline;
  k.q4_0 = &q4_0_baseline;
  k.q4_k = &k_quant_baseline<quant::GGMLType::Q4_K, 144>;
  k.q5_k = &k_quant_baseline<quant::GGMLType::Q5_K, 176>;
  k.q6_k = &k_quant_baseline<quant::GGMLType::Q6_K, 210>;
  k.q8_0_bf16 = &dequant_bf16_baseline<34>;
  k.q4_0_bf16 = &dequant_bf16_baseline<18>;
  k.isa = "baseline";
  return k;
}

const GGMLDotKernels& ggml_dot_kernels() {
  static const GGMLDotKernels k = [] {
    if (isa_level() >= IsaLevel::Avx512Vnni && cpu_features().avx512_vnni)
      return ggml_dot_kernels_avx512vnni();
    if (isa_level() >= IsaLevel::Avx2) return ggml_dot_kernels_avx2();
    return ggml_dot_kernels_baseline();
  }();
  return k;
}

}  // namespace kiln::cpu
