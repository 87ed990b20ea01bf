#pragma once
// What a loaded model holds: the parsed ModelProto (shared between copies on other devices),
// the checked node order, the declared inputs/outputs and the initializers.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/onnx/model.h"
#include "kiln/onnx/proto.h"

namespace kiln::onnx {

struct Model::State {
  std::string name;  // the path, for messages
  std::shared_ptr<const pb::ModelProto> proto;
  int64_t opset = 0;
  std::vector<ValueInfo> inputs;   // fed by the caller
  std::vector<ValueInfo> outputs;
  std::map<std::string, Tensor> initializers;
  std::vector<int> order;  // node indices of the main graph in a valid execution order
  Device device{DeviceType::CPU, 0};
};

// Checks the graph's dataflow (every input produced once before use, no cycles) and returns
// an execution order. outer: names visible from an enclosing graph.
std::vector<int> topological_order(const pb::GraphProto& graph,
                                   const std::vector<std::string>& available);

// "node 'name' (OpType)" or "node #i (OpType)" for messages.
std::string describe_node(const pb::NodeProto& node, int index);

ValueInfo value_info_from_proto(const pb::ValueInfoProto& v);

}  // namespace kiln::onnx
