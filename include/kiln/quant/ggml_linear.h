#pragma once
// A Linear layer over a weight kept in a GGUF file's block-quantised form (llama.cpp's
// Q8_0, Q4_0, ...): y[..., N] = x[..., K] @ W^T (+ bias), W [N, K] given as its raw blocks,
// uint8 [N, row_bytes] (kiln::io::GGUFFile::tensor of a quantised tensor).
//
// With fewer than 16 activation rows, for Q8_0, Q4_0, Q4_K, Q5_K and Q6_K, the product runs as
// llama.cpp's does: the activations are quantised to 8 bits per 32-value block (a float16
// scale each, round half away from zero), every block pair's integer dot product is exact,
// scaled by the scales and summed in float32. So the result is not x @ dequantize(W) but
// within the activations' quantisation error of it (about 0.4% of each block's largest
// value); the weights are read once, at about one byte per value or less, which is what
// makes decoding fast. From 16 rows (prefill) the weight is dequantised to bfloat16 and
// multiplied by the bfloat16 GEMM (result rounded to bfloat16). Other quantised types with
// few rows are dequantised to float32 per call (correct, slow: load those dequantised).
// Output float32; input float32, bfloat16 or float16 (widened first). No gradient.
//
// On xpu (weight and input on the device; Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) the activations stay
// float32: the result is x @ dequantize(W) up to float32 sums, read from the blocks for up to
// 8 rows, dequantised to float32 and multiplied by the xpu GEMM beyond (decision 0087).
#include <cstdint>

#include "kiln/quant/ggml_types.h"
#include "kiln/tensor/tensor.h"

namespace kiln::quant {

Tensor ggml_linear(const Tensor& input, const Tensor& weight_blocks, GGMLType type,
                   int64_t in_features, const Tensor& bias = Tensor());

// Whether ggml_linear has a quantised-domain kernel for the type (else it dequantises).
bool ggml_linear_has_kernel(GGMLType type);

// The ISA variant the kernels use ("avx512_vnni", "avx2", "baseline").
const char* ggml_linear_isa();

}  // namespace kiln::quant
