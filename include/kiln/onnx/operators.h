#pragma once
// The ONNX operators kiln runs ("Conv"; outside the default domain "domain:Type"). Claiming
// an operator here means every test of the ONNX backend suite that uses only claimed
// operators passes (the onnx_conformance test checks it).
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::onnx {

bool is_supported_operator(const std::string& op_type);
std::vector<std::string> supported_operators();  // sorted

}  // namespace kiln::onnx
