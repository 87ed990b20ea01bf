// Shape-derived values kept between runs (decision 0069). Exported networks compute reshape
// targets, pads, slice bounds and branch conditions from tensor shapes at run time: Shape or
// Size, then Gather, Unsqueeze, Concat, Slice, Cast, Equal, ... on a few int64 values. In
// Silero VAD about 40 of the 100 nodes a frame runs are such arithmetic, each a full op
// dispatch, and every frame has the same shapes. Here each graph's nodes computed from
// Shape / Size outputs (also an enclosing graph's) and constants alone (pure operators, no
// subgraphs) are marked; at run time a marked node whose source shapes (the input shapes of
// the Shape / Size nodes run before it, in its graph and the graphs around it) equal those of
// its kept entry takes the kept values instead of running. ONNX operators never write into
// their inputs; the model's outputs that share memory with kept values (or initializers, or
// folded constants) are returned as copies (run.cpp), so a caller cannot change them.
#include <set>

#include "kiln/onnx/model_state.h"
#include "kiln/tensor/tensor_impl.h"

namespace kiln::onnx {

namespace {

bool default_domain(const pb::NodeProto& n) {
  return n.domain().empty() || n.domain() == "ai.onnx";
}

bool shape_source(const pb::NodeProto& n) {
  return default_domain(n) && (n.op_type() == "Shape" || n.op_type() == "Size") &&
         n.input_size() == 1 && n.output_size() == 1;
}

// derived / outer_sources: the enclosing graphs' shape-derived names and the sources that run
// before this graph does (their shapes begin every key here); constants: the constant names
// visible from them. Returns whether this graph or one inside it keeps values.
bool plan_graph(Model::State& s, const pb::GraphProto& g, GraphPlan& plan,
                std::set<std::string> constants, std::set<std::string> derived,
                int outer_sources, const std::map<std::string, Tensor>& inits) {
  std::set<std::string> inputs;
  for (const auto& in : g.input()) {  // a subgraph input hides an outer value of its name
    inputs.insert(in.name());
    constants.erase(in.name());
    derived.erase(in.name());
  }
  for (const auto& [name, t] : inits)
    if (!inputs.count(name)) constants.insert(name);
  const size_t n = size_t(g.node_size());
  std::vector<char> source(n, 0), cached(n, 0);
  std::vector<int> before(n, 0);
  int sources = outer_sources;
  bool own = false, inner = false;
  for (int index : plan.order) {
    const pb::NodeProto& node = g.node(index);
    for_each_subgraph(node, [&](const pb::GraphProto& sub) {
      GraphPlan& sub_plan = s.subgraphs.at(&sub);
      inner |= plan_graph(s, sub, sub_plan, constants, derived, sources, sub_plan.initializers);
    });
    for (const auto& o : node.output()) {
      constants.erase(o);
      derived.erase(o);
    }
    if (plan.folded.count(index)) {
      for (const auto& o : node.output()) constants.insert(o);
      continue;
    }
    if (plan.absorbed.count(index) || plan.fused.count(index)) continue;
    if (shape_source(node)) {
      source[size_t(index)] = 1;
      ++sources;
      derived.insert(node.output(0));
      continue;
    }
    if (!pure_function_node(node)) continue;
    bool reads_shapes = false, only_shapes_and_constants = true;
    for (const auto& in : node.input()) {
      if (in.empty()) continue;
      if (derived.count(in)) reads_shapes = true;
      else if (!constants.count(in)) only_shapes_and_constants = false;
    }
    if (!reads_shapes || !only_shapes_and_constants) continue;
    cached[size_t(index)] = 1;
    before[size_t(index)] = sources;
    own = true;
    for (const auto& o : node.output()) derived.insert(o);
  }
  plan.shape_tracking = own || inner;
  if (plan.shape_tracking) plan.shape_source = std::move(source);
  if (!own) return plan.shape_tracking;
  plan.shape_cached = std::move(cached);
  plan.sources_before = std::move(before);
  plan.shape_cache = std::make_shared<ShapeCache>();
  return true;
}

}  // namespace

namespace {

const void* storage_of(const Tensor& t) { return t.impl()->storage().get(); }

void hold(std::unordered_set<const void*>& held, const Value& v) {
  if (v.tensor.defined()) held.insert(storage_of(v.tensor));
  if (v.sequence)
    for (const Tensor& t : *v.sequence)
      if (t.defined()) held.insert(storage_of(t));
}

bool kept_in(const GraphPlan& plan, const void* storage) {
  if (!plan.shape_cache) return false;
  std::lock_guard<std::mutex> lock(plan.shape_cache->mutex);
  for (const auto& [index, entry] : plan.shape_cache->entries)
    for (const Value& v : entry.values)
      if (v.tensor.defined() && storage_of(v.tensor) == storage) return true;
  return false;
}

}  // namespace

void collect_held_storage(Model::State& state) {
  state.held_storage.clear();
  for (const auto& [name, t] : state.initializers) hold(state.held_storage, Value(t));
  auto plan_values = [&](const GraphPlan& plan) {
    for (const auto& [name, t] : plan.initializers) hold(state.held_storage, Value(t));
    for (const auto& [index, values] : plan.folded)
      for (const Value& v : values) hold(state.held_storage, v);
  };
  plan_values(state.main);
  for (const auto& [g, plan] : state.subgraphs) plan_values(plan);
}

bool model_holds_storage(const Model::State& state, const Tensor& t) {
  const void* storage = storage_of(t);
  if (state.held_storage.count(storage)) return true;
  if (kept_in(state.main, storage)) return true;
  for (const auto& [g, plan] : state.subgraphs)
    if (kept_in(plan, storage)) return true;
  return false;
}

void plan_shape_caches(Model::State& state) {
  plan_graph(state, state.proto->graph(), state.main, {}, {}, 0, state.initializers);
}

}  // namespace kiln::onnx
