#pragma once
// The OpenCL C statement an xpu elementwise op computes on floating inputs ("r = a + b;" for
// add with alpha 1; a, b the inputs, R the result type): what a fused pointwise program
// (xpu_pointwise_program.cpp) repeats step by step so that its results equal the ops'.
#include <string>

namespace kiln::xpu {

// Empty where the op has no such statement (clamp takes scalars: its statement is built per
// call).
std::string float_elementwise_body(const std::string& op);

}  // namespace kiln::xpu
