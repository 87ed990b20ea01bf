#pragma once
// ONNX TensorProto <-> kiln::Tensor for serialized tensors (the .pb files of the ONNX
// backend test suite, or any single-tensor protobuf file).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/onnx/model.h"
#include "kiln/tensor/tensor.h"

namespace kiln::onnx {

// Parses a serialized TensorProto (all element types kiln has; raw_data or the typed
// fields). External data is resolved relative to base_dir (empty: not allowed).
// ValueError for malformed data, NotImplementedError for element types kiln lacks.
Tensor parse_tensor(const void* data, size_t size, const std::string& base_dir = "",
                    const std::string& name = "<memory>");
Tensor read_tensor_file(const std::string& path);
// A serialized SequenceProto of tensors (the suite's sequence-valued inputs and outputs).
std::vector<Tensor> parse_sequence(const void* data, size_t size, const std::string& name = "<memory>");
std::vector<Tensor> read_sequence_file(const std::string& path);
// A serialized OptionalProto holding nothing, a tensor or a sequence of tensors.
Value parse_optional(const void* data, size_t size, const std::string& name = "<memory>");
Value read_optional_file(const std::string& path);

// ONNX TensorProto.DataType numbers <-> kiln dtypes.
std::optional<DType> dtype_from_onnx(int32_t onnx_type);  // nullopt: kiln lacks it
int32_t onnx_type_from_dtype(DType dtype);
std::string onnx_type_name(int32_t onnx_type);  // "FLOAT", "UINT32", ...

}  // namespace kiln::onnx
