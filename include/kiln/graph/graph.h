#pragma once
// Graph mode's IR (decision 0081): the ops a function ran, captured at the dispatcher as
// boxed calls over numbered values. A value is a function input, a captured tensor (a
// parameter, a literal), or a node's result. Running a graph dispatches its nodes in order,
// so every interceptor (autograd included) sees them as it would the eager calls.
#include <optional>
#include <string>
#include <vector>

#include "kiln/dispatch/op_call.h"
#include "kiln/dispatch/registry.h"

namespace kiln::graph {

using ValueId = int64_t;
inline constexpr ValueId kNoValue = -1;  // an absent optional tensor

// Op: a dispatched call. Alias: a view made without the dispatcher (detach() of a graph
// value): the same geometry over the base value's storage, detached. Fresh: a tensor the
// function made without the dispatcher (kiln.tensor(data), the empty tensor of a factory that
// a fill then writes): each run starts from a new copy of its contents at capture, so no two
// calls share it.
enum class NodeKind { Op, Alias, Fresh };

struct Node {
  NodeKind kind = NodeKind::Op;
  const OpDef* op = nullptr;  // Op nodes only
  std::vector<ValueId> inputs;
  std::vector<AttrValue> attrs;
  std::vector<ValueId> outs;  // preallocated outputs: in-place and out= forms write these
  std::optional<Device> device;  // factories
  std::vector<ValueId> results;
  // Random ops carry the generator's (seed, offset) as their last two attributes, reserved
  // by the op's wrapper before dispatch: a replay reserves the same number of blocks from the
  // device's default generator again, so each run draws new numbers as eager calls do.
  int64_t random_blocks = -1;
  Device generator_device;
  // Alias: the view's shape, strides and storage offset relative to the base (inputs[0]).
  Shape shape;
  Strides strides;
  int64_t relative_offset = 0;
  Tensor snapshot;  // Fresh: the contents at capture
};

// What capture saw of a value (the guards fix the inputs', so these hold on every run).
struct ValueInfo {
  Shape shape;
  DType dtype = DType::F32;
  Device device;
  bool literal = false;  // a wrapped number (a Python / C++ scalar): immutable
  bool dense = false;    // contiguous or channels-last (the guards fix the inputs' layouts)
};

struct Graph {
  int64_t num_values = 0;
  std::vector<ValueId> inputs;
  // Captured tensors, by reference: a parameter updated in place is seen by the next run.
  // Literals (wrapped numbers) are immutable and may be read at compile time.
  std::vector<std::pair<ValueId, Tensor>> constants;
  std::vector<Node> nodes;
  std::vector<ValueId> outputs;
  std::vector<ValueInfo> info;  // per value

  // One node per line: "%3 = add(%1, %2, alpha=1)".
  std::string to_string() const;
  // Whether any node writes into a preallocated output (in-place or out=).
  bool mutates() const;
};

// Runs the nodes on `inputs` (matching graph.inputs) and returns the outputs.
std::vector<Tensor> run(const Graph& graph, const std::vector<Tensor>& inputs);

}  // namespace kiln::graph
