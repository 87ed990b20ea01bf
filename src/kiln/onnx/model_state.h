#pragma once
// What a loaded model holds: the parsed ModelProto (shared between copies on other devices),
// the checked node order, the declared inputs/outputs and the initializers.
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "kiln/onnx/model.h"
#include "kiln/onnx/op_context.h"
#include "kiln/onnx/proto.h"
#include "kiln/ops/pointwise_program.h"

namespace kiln::onnx {

// A group of elementwise nodes run as one PointwiseProgram over one input (the root) at the
// place of its last node (pointwise_fusion.cpp).
struct FusedChain {
  std::string root, output;
  PointwiseProgram program;
  int64_t scalar_rank = 0;  // the highest rank of the nodes' one-element constants
  std::vector<int> nodes;   // the nodes it stands for, in order (the last one runs it)
};

// Outputs of shape-derived nodes, kept from one run to the next (shape_cache.cpp): per node
// index, the source shapes they were computed from and the values.
struct ShapeCache {
  struct Entry {
    std::vector<Shape> key;
    std::vector<Value> values;
  };
  std::mutex mutex;  // runs of one model may overlap on several threads
  std::map<int, Entry> entries;
};

// How one graph (the main graph or a subgraph) runs: its node order, its own initializers
// (subgraphs only; the main graph's are State::initializers), and for each value the position
// of the last node that reads it (directly, or from inside one of its subgraphs), after
// which it is dropped.
struct GraphPlan {
  std::vector<int> order;
  std::map<std::string, Tensor> initializers;
  std::map<std::string, size_t> last_use;
  std::vector<std::vector<std::string>> drops;  // per position: values last read there
  std::set<std::string> outputs;
  // Outputs of nodes evaluated once at load time (by node index): Constant nodes and nodes
  // whose inputs are all constants (constant_folding.cpp).
  std::map<int, std::vector<Value>> folded;
  // Fused chains by the index of their last node; the other nodes of each are skipped.
  std::map<int, FusedChain> fused;
  std::set<int> absorbed;

  // Slots (value_slots.cpp): every name this graph defines (its inputs, initializers and node
  // outputs) gets an index into the running scope's values, so that a run looks values up by
  // index instead of by string. Per node index: the slot of each input and output (kNoSlot:
  // an omitted optional input or output, or a name an enclosing graph defines, found by
  // name); per position: the slots dropped after it.
  static constexpr int kNoSlot = -1;
  std::map<std::string, int> slot_of;
  std::vector<std::vector<int>> input_slots, output_slots;
  std::vector<std::vector<int>> drop_slots;
  std::map<int, int> chain_root_slots, chain_output_slots;  // by the chain's last node
  // Per node index: its op-table entry (null: not supported; raised when the node runs).
  std::vector<OpFunction> functions;

  // Shape-derived values (shape_cache.cpp, decision 0069). shape_tracking: this graph or one
  // inside it keeps values, so its runs record the input shapes of its sources (per node
  // index, shape_source: a Shape / Size node that runs) after those of the enclosing graphs.
  // shape_cached: per node index, computed from sources and constants alone;
  // sources_before: the sources (enclosing graphs' included) that run before it, whose
  // shapes key its entry in shape_cache (null when no node here is cached).
  bool shape_tracking = false;
  std::vector<char> shape_source, shape_cached;
  std::vector<int> sources_before;
  std::shared_ptr<ShapeCache> shape_cache;
};

struct Model::State {
  std::string name;  // the path, for messages
  std::shared_ptr<const pb::ModelProto> proto;
  int64_t opset = 0;
  std::vector<ValueInfo> inputs;   // fed by the caller
  std::vector<ValueInfo> outputs;
  std::map<std::string, Tensor> initializers;
  GraphPlan main;  // order and last uses of the main graph
  // Every subgraph (GRAPH attributes at any depth), keyed by its place in *proto.
  std::map<const pb::GraphProto*, GraphPlan> subgraphs;
  // The storage of the initializers and folded values (collect_held_storage): outputs that
  // share it are returned as copies.
  std::unordered_set<const void*> held_storage;
  Device device{DeviceType::CPU, 0};
};

// Plans the main graph and every subgraph of state.proto (state.initializers converted
// already): checks that every name a subgraph uses is defined in it or an enclosing graph,
// and orders each graph with the values its subgraphs read from outside as extra inputs of
// the owning node. base_dir: for subgraph initializers held as external data.
void plan_graphs(Model::State& state, const std::vector<std::string>& main_available,
                 const std::string& base_dir);

// Checks the graph's dataflow (every input produced once before use, no cycles) and returns
// an execution order. outer: names visible from an enclosing graph.
// extra_inputs (optional, one list per node): names a node reads besides its inputs (the
// outer values its subgraphs use).
std::vector<int> topological_order(const pb::GraphProto& graph,
                                   const std::vector<std::string>& available,
                                   const std::vector<std::vector<std::string>>* extra_inputs = nullptr);

// Evaluates Constant nodes and every node whose inputs are all constants (Constant outputs,
// initializers the caller cannot override, folded outputs, also from enclosing graphs) into
// GraphPlan::folded. A malformed Constant is an error; any other node that fails is simply
// left to run (and report) at run time.
void fold_constants(Model::State& state);

// Rewrites the main graph and its subgraphs so that each inference BatchNormalization, each
// Add of a per-channel constant and each following activation (Relu, Clip, HardSigmoid,
// HardSwish) whose input comes only from a Conv with constant float32 weights is folded into
// that Conv (new initializers in `initializers`, the folded node removed). Runs before
// planning (conv_folding.cpp).
void fold_into_convs(pb::GraphProto& graph, std::map<std::string, Tensor>& initializers,
                     int64_t opset);

// Whether node's outputs are a function of its inputs alone (no random draws, no subgraphs):
// the nodes constant folding may evaluate once.
bool pure_function_node(const pb::NodeProto& node);

// Marks, in every graph, the nodes computed from tensor shapes (Shape / Size outputs) and
// constants alone, whose values are kept between runs and reused while the shapes repeat
// (after fold_constants and fuse_pointwise_chains; shape_cache.cpp).
void plan_shape_caches(Model::State& state);

// Fills state.held_storage from the initializers and every plan's initializers and folded
// values (at load, and again when Model::to moves them).
void collect_held_storage(Model::State& state);
// Whether t shares memory with the model's own values: held_storage, or a kept shape value.
bool model_holds_storage(const Model::State& state, const Tensor& t);

// Gives every graph's values slots (GraphPlan::slot_of and the per-node slot lists), after
// planning, folding and fusion have settled the plans.
void assign_value_slots(Model::State& state);

// Groups the main graph's chains of elementwise nodes with constant operands (Add, Sub, Mul,
// Div, Clip, Relu, HardSigmoid, HardSwish, inference BatchNormalization) that read one value
// and hand on one into GraphPlan::fused (after fold_constants).
void fuse_pointwise_chains(Model::State& state);

// Whether a fused chain can run as its program on root (a float32 tensor with the channels
// the program expects); otherwise the executor runs the chain's nodes one by one.
bool fused_chain_applies(const FusedChain& chain, const Value& root);
// The chain's output from root (fused_chain_applies must hold).
Tensor run_fused_chain(const FusedChain& chain, const Value& root);

// Calls f(subgraph) for each GRAPH attribute of node (If branches, Loop and Scan bodies).
template <typename F>
void for_each_subgraph(const pb::NodeProto& node, F&& f) {
  for (const auto& a : node.attribute()) {
    if (a.has_g()) f(a.g());
    for (const auto& sub : a.graphs()) f(sub);
  }
}

// "node 'name' (OpType)" or "node #i (OpType)" for messages.
std::string describe_node(const pb::NodeProto& node, int index);

ValueInfo value_info_from_proto(const pb::ValueInfoProto& v);

}  // namespace kiln::onnx
