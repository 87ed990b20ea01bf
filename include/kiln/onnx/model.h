#pragma once
// kiln::onnx: ONNX models as kiln programs. load() reads a ModelProto (initializers,
// Constant nodes, external data files, opsets 1 to 17), checks the graph (every value has
// one producer, no cycles) and orders its nodes; Model::run executes them eagerly with kiln
// ops on the device the model lives on. Protobuf stays inside the library: nothing here
// names it.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/runtime/device.h"
#include "kiln/tensor/tensor.h"

namespace kiln::onnx {

// One dimension of a declared graph input or output: a fixed size, or dynamic (with the
// symbolic name the model gives it, if any).
struct Dim {
  std::optional<int64_t> value;  // nullopt: dynamic
  std::string param;             // symbolic name ("batch"), may be empty
};

// A declared graph input or output. Non-tensor values (sequences, maps, optionals) and
// tensors of element types kiln lacks are described but cannot be fed or produced.
struct ValueInfo {
  std::string name;
  std::string kind = "tensor";      // "tensor", "sequence", "map", "optional", "unknown"
  int32_t onnx_elem_type = 0;       // TensorProto.DataType; 0 when unknown
  std::optional<DType> dtype;       // nullopt when kiln has no such element type
  std::optional<std::vector<Dim>> shape;  // nullopt: rank unknown
};

// A value flowing through a graph: a tensor, or (ONNX's sequence type) a list of tensors,
// or an empty optional. (An optional that holds something is just that tensor or sequence.)
struct Value {
  Tensor tensor;                                // a tensor value
  std::optional<std::vector<Tensor>> sequence;  // set for a sequence value (may be empty)
  bool none = false;                            // an empty optional

  Value() = default;
  Value(Tensor t) : tensor(std::move(t)) {}  // NOLINT: a tensor is a value
  static Value make_sequence(std::vector<Tensor> items) {
    Value v;
    v.sequence = std::move(items);
    return v;
  }
  static Value make_none() {
    Value v;
    v.none = true;
    return v;
  }
  bool is_sequence() const { return sequence.has_value(); }
  bool defined() const { return tensor.defined() || sequence.has_value() || none; }
};

class Model {
 public:
  Model() = default;

  // Graph inputs that the caller feeds (inputs that are also initializers are left out:
  // they have defaults), and the graph outputs, in declaration order.
  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;
  // Initializers by name, on the model's device.
  const std::map<std::string, Tensor>& initializers() const;
  int64_t opset_version() const;  // of the default (ai.onnx) domain
  int64_t ir_version() const;
  const std::string& producer_name() const;
  const std::string& graph_name() const;
  size_t num_nodes() const;
  // Distinct operator types used, subgraphs included ("Conv", or "domain:Op" outside the
  // default domain), sorted.
  std::vector<std::string> op_types() const;
  Device device() const;

  // The same model with its initializers on device.
  Model to(Device device) const;

  // Runs the graph. Every input of inputs() must be given (an input that is also an
  // initializer may be given to override it), on the model's device, with the declared
  // dtype, rank and fixed dims. Returns every graph output by name. Errors name the node,
  // its operator and the problem.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs) const;
  // The same for graphs whose inputs or outputs may be sequences or optionals.
  std::map<std::string, Value> run_values(const std::map<std::string, Value>& inputs) const;

  // Writes the initializers to a safetensors file (kiln::save).
  void save_weights(const std::string& path) const;

  struct State;

 private:
  explicit Model(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  const State& state() const;
  std::shared_ptr<const State> state_;
  friend Model load_from_bytes(const void*, size_t, const std::string&, const std::string&);
};

// Reads the model at path; external data files are resolved relative to its folder and must
// stay inside it. ValueError for malformed files, NotImplementedError for valid models kiln
// cannot run (opset outside 1..17, element types kiln lacks).
Model load(const std::string& path);
// The same from a serialized ModelProto in memory. base_dir: the folder external data is
// read from (empty: external data is an error). name: used in messages.
Model load_from_bytes(const void* data, size_t size, const std::string& base_dir = "",
                      const std::string& name = "<memory>");

// The opset versions of the default domain that kiln runs.
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 17;

}  // namespace kiln::onnx
