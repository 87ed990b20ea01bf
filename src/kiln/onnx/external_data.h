#pragma once
// External tensor data (TensorProto.data_location = EXTERNAL): a file next to the model,
// named by a relative path that must stay inside the model's folder, and a byte range that
// must lie inside that file.
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/onnx/proto.h"

namespace kiln::onnx {

// Reads exactly expected_bytes bytes for proto from its external file under base_dir.
std::vector<uint8_t> read_external_data(const pb::TensorProto& proto, const std::string& base_dir,
                                        uint64_t expected_bytes, const std::string& what);

}  // namespace kiln::onnx
