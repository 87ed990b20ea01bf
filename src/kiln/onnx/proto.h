#pragma once
// The ONNX protobuf classes, reachable inside kiln::onnx as pb:: (the generated namespace
// ::onnx would otherwise be shadowed by kiln::onnx). Only src/kiln/onnx includes this.
#include <onnx/onnx_pb.h>

#include <string>

namespace kiln::onnx {

namespace pb = ::onnx;

// A string from a file, shortened and quoted for an error message (hostile files may hold
// megabytes of junk in a name).
std::string quoted(const std::string& s, size_t max_chars = 200);
std::string printable(const std::string& s, size_t max_chars = 200);  // the same, unquoted

}  // namespace kiln::onnx
