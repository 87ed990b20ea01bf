#pragma once
// What an ONNX operator implementation sees: the node (attributes), the opset version in
// force, its input tensors (undefined where an optional input is omitted) and the device.
// Errors raised here name the problem; the executor prefixes the node and operator.
// Sequence values and subgraphs (control flow) are reached through the same context.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/onnx/model.h"
#include "kiln/onnx/proto.h"
#include "kiln/runtime/device.h"
#include "kiln/tensor/tensor.h"

namespace kiln::onnx {

// Runs a subgraph (a GRAPH attribute of the node) in the scope of the node: names the
// subgraph does not define resolve to the enclosing graphs' values. inputs bind the
// subgraph's declared inputs in order; returns its outputs in order.
class GraphRunner {
 public:
  virtual ~GraphRunner() = default;
  virtual std::vector<Value> run(const pb::GraphProto& graph, std::vector<Value> inputs) const = 0;
};

class OpContext {
 public:
  OpContext(const pb::NodeProto& node, int64_t opset, std::vector<Value> inputs, Device device,
            const GraphRunner* runner = nullptr);

  const pb::NodeProto& node() const { return node_; }
  int64_t opset() const { return opset_; }
  Device device() const { return device_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return size_t(node_.output_size()); }
  // Whether output i is wanted (present and not "").
  bool wants_output(size_t i) const { return i < num_outputs() && !node_.output(int(i)).empty(); }

  bool has_input(size_t i) const { return i < values_.size() && values_[i].defined(); }
  const Tensor& input(size_t i) const;  // required tensor: ValueError when missing
  // The tensor inputs (undefined where omitted; TypeError if any is a sequence).
  const std::vector<Tensor>& inputs() const;
  // Input i as a value (tensor or sequence) / as a sequence (TypeError for a tensor).
  const Value& value_input(size_t i) const;
  const std::vector<Tensor>& sequence_input(size_t i) const;
  // Outputs that are not plain tensors (sequences, or values passed through by control
  // flow): they replace output i of what the operator returns.
  void set_value_output(size_t i, Value v) { value_outputs_[i] = std::move(v); }
  std::map<size_t, Value>& value_outputs() { return value_outputs_; }

  // A GRAPH attribute, and running it (see GraphRunner).
  const pb::GraphProto& attr_graph(const std::string& name) const;
  std::vector<Value> run_graph(const pb::GraphProto& graph, std::vector<Value> inputs) const;
  // A 1-d (or 0-d) integer input read to the host, e.g. axes, shape, pads.
  std::vector<int64_t> input_ints(size_t i) const;
  // A scalar input (0-d or one element) read to the host.
  double input_scalar(size_t i) const;

  bool has_attr(const std::string& name) const { return find_attr(name) != nullptr; }
  int64_t attr_int(const std::string& name, std::optional<int64_t> dflt = std::nullopt) const;
  float attr_float(const std::string& name, std::optional<float> dflt = std::nullopt) const;
  std::string attr_string(const std::string& name, std::optional<std::string> dflt = std::nullopt) const;
  std::vector<int64_t> attr_ints(const std::string& name,
                                 std::optional<std::vector<int64_t>> dflt = std::nullopt) const;
  std::vector<float> attr_floats(const std::string& name,
                                 std::optional<std::vector<float>> dflt = std::nullopt) const;
  Tensor attr_tensor(const std::string& name) const;  // on the device
  const pb::AttributeProto* find_attr(const std::string& name) const;

  // A CPU tensor moved to the op's device.
  Tensor on_device(const Tensor& t) const;

 private:
  const pb::AttributeProto& required_attr(const std::string& name, int type) const;
  const pb::NodeProto& node_;
  int64_t opset_;
  std::vector<Value> values_;
  std::vector<Tensor> inputs_;  // the tensor parts of values_
  bool any_sequence_ = false;
  Device device_;
  const GraphRunner* runner_;
  std::map<size_t, Value> value_outputs_;
};

// An operator implementation: the node's outputs, in order (trailing optional outputs may be
// left out or undefined).
using OpFunction = std::vector<Tensor> (*)(OpContext&);

// Normalises a possibly negative axis for a tensor of rank ndim (IndexError when outside).
int64_t normalize_axis(int64_t axis, int64_t ndim, const char* what = "axis");

}  // namespace kiln::onnx
