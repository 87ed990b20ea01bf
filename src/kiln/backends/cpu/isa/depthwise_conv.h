#pragma once
// Depthwise 2-d convolution (groups == input channels == output channels), float32, NCHW
// contiguous: each output plane from its own input plane and kh x kw taps, compiled per ISA
// level (decision 0071). The im2col + GEMM path ran one tiny product per channel (PP-LCNet's
// 5 x 5 depthwise layers 8-19x ONNX Runtime's time with oneDNN off).
#include <cstdint>

namespace kiln::cpu {

struct DepthwiseGeometry {
  int64_t N, C, H, W, OH, OW;  // batch, channels, input and output plane
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

// y[n, c] = bias[c] (0 when bias is null) + sum over taps of w[c, ky, kx] * x[n, c, ...];
// taps falling in the padding are skipped. Threaded over planes.
using DepthwiseConv2d = void (*)(const float* x, const float* w, const float* bias, float* y,
                                 const DepthwiseGeometry& g);

// The same for channels-last x and y ([N, H, W, C] in memory) with the weight given per tap,
// w_taps [kh * kw, C]: each output pixel's channels a few vectors at a time, the taps that
// fall inside the input accumulated in registers.
using DepthwiseConv2dNhwc = void (*)(const float* x, const float* w_taps, const float* bias,
                                     float* y, const DepthwiseGeometry& g);

struct DepthwiseKernels {
  DepthwiseConv2d nchw;
  DepthwiseConv2dNhwc nhwc;
};
DepthwiseKernels depthwise_conv2d_baseline();
DepthwiseKernels depthwise_conv2d_avx2();
DepthwiseKernels depthwise_conv2d_avx512();
const DepthwiseKernels& depthwise_conv2d();  // the current ISA level's

}  // namespace kiln::cpu
