#pragma once
// Convolution through oneDNN (Debian libdnnl-dev), used by the CPU convolution kernel for
// the shapes where it is faster than kiln's im2col + GEMM (see decision 0016). Built only when
// CMake finds oneDNN (KILN_HAVE_DNNL); otherwise onednn_convolution always returns false.
#include "kiln/dispatch/op_call.h"

namespace kiln::cpu {

// Runs the convolution op call (inputs x, w, bias?; attrs stride, padding, dilation,
// transposed, output_padding, groups) with oneDNN (transposed ones as its deconvolution) and
// returns true, or returns false when oneDNN is absent or does not take this call (dtype,
// layout, KILN_ONEDNN=0, no implementation).
bool onednn_convolution(OpCall& call);

// Runs the convolution_weight_grad op call (inputs x, grad_y, contiguous; attrs weight_shape,
// stride, padding, dilation, transposed, output_padding, groups) with oneDNN's backward-weights
// primitive (onednn_conv_weight_grad.cpp) and returns true, or returns false where oneDNN is
// absent or does not take it (transposed, dtype, KILN_ONEDNN=0, no implementation).
bool onednn_convolution_weight_grad(OpCall& call);

}  // namespace kiln::cpu
