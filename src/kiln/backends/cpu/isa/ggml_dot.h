#pragma once
// Dot products of one weight row stored in ggml blocks (Q8_0 or Q4_0: a float16 scale and 32
// values per block) with up to kGGMLDotRows activation rows quantised to 8 bits per 32-value
// block, as llama.cpp computes its quantised matrix-vector products: per block an exact
// integer dot product, scaled by (weight scale) * (activation scale) and summed in float.
//
// Activations: qx[r * x_stride + k] int8, dx[r * nblocks + b] the float scale of block b of
// row r, xsum[r * nblocks + b] = dx * (sum of that block's int8 values) (used by Q4_0, whose
// values carry an offset of 8). out[r] receives the dot product of row r (overwritten).
//
// Variants: avx512_vnni (vpdpbusd on 256-bit halves; a signed operand is shifted to unsigned
// by +128 and the shift's contribution subtracted exactly), avx2 (both operands widened to
// int16, exact vpmaddwd pairs), baseline (plain loops). All give the same integer block sums;
// only the float summation order differs.
#include <cstdint>

namespace kiln::cpu {

constexpr int kGGMLDotRows = 4;

using GGMLDotFn = void (*)(const uint8_t* w, int64_t nblocks, const int8_t* qx, const float* dx,
                           const float* xsum, int64_t x_stride, int rows, float* out);

// Dequantises one row of nblocks blocks to bfloat16 bits (round to nearest even), for the
// products with many activation rows, which run as a bfloat16 GEMM.
using GGMLDequantBf16Fn = void (*)(const uint8_t* w, int64_t nblocks, uint16_t* out);

// The K-quants (256-value super-blocks made of 32- or 16-value sub-blocks with their own
// scales): `nblocks` counts super-blocks; dx / xsum still hold one entry per 32 activation
// values (8 per super-block).
struct GGMLDotKernels {
  GGMLDotFn q8_0 = nullptr;
  GGMLDotFn q4_0 = nullptr;
  GGMLDotFn q4_k = nullptr;
  GGMLDotFn q5_k = nullptr;
  GGMLDotFn q6_k = nullptr;
  GGMLDequantBf16Fn q8_0_bf16 = nullptr;
  GGMLDequantBf16Fn q4_0_bf16 = nullptr;
  GGMLDequantBf16Fn q4_k_bf16 = nullptr;  // nblocks: super-blocks of 256 values
  GGMLDequantBf16Fn q5_k_bf16 = nullptr;
  GGMLDequantBf16Fn q6_k_bf16 = nullptr;
  const char* isa = "baseline";
};

GGMLDotKernels ggml_dot_kernels_baseline();
GGMLDotKernels ggml_dot_kernels_avx2();
GGMLDotKernels ggml_dot_kernels_avx512vnni();

// The variant for the detected (and KILN_CPU_ISA-capped) level, chosen once.
const GGMLDotKernels& ggml_dot_kernels();

}  // namespace kiln::cpu
