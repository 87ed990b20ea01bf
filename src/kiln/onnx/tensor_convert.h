#pragma once
// TensorProto -> kiln::Tensor with every size checked against the data before anything is
// allocated (shared by initializers, Constant nodes and the test-data reader).
#include <string>

#include "kiln/tensor/tensor.h"
#include "kiln/onnx/proto.h"

namespace kiln::onnx {

// base_dir: the folder external data is read from (empty: external data is an error).
// what: names the tensor in messages ("initializer 'w'").
Tensor tensor_from_proto(const pb::TensorProto& proto, const std::string& base_dir,
                         const std::string& what);

}  // namespace kiln::onnx
