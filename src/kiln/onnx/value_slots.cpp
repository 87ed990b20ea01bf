// Value slots: the executor's scope holds a graph's values in a vector indexed by slots given
// here once per model (and each node's op-table entry is looked up here once), instead of a
// map from names (string compares and a node allocation per value on every run: about a
// third of Silero VAD's run time went to them).
// Names an enclosing graph defines keep no slot in a subgraph and are found by name.
#include "kiln/onnx/model_state.h"
#include "kiln/onnx/op_table.h"

namespace kiln::onnx {

namespace {

void assign(const pb::GraphProto& g, GraphPlan& plan, const std::map<std::string, Tensor>& inits) {
  auto define = [&](const std::string& name) {
    if (!name.empty() && !plan.slot_of.count(name)) {
      const int slot = int(plan.slot_of.size());
      plan.slot_of.emplace(name, slot);
    }
  };
  for (const auto& in : g.input()) define(in.name());
  for (const auto& [name, t] : inits) define(name);
  for (const auto& node : g.node())
    for (const auto& o : node.output()) define(o);
  auto slot = [&](const std::string& name) {
    auto it = plan.slot_of.find(name);
    return it == plan.slot_of.end() ? GraphPlan::kNoSlot : it->second;
  };
  plan.functions.assign(size_t(g.node_size()), nullptr);
  for (int i = 0; i < g.node_size(); ++i) {
    const pb::NodeProto& node = g.node(i);
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    plan.functions[size_t(i)] =
        op_table().find(default_domain ? node.op_type() : node.domain() + ":" + node.op_type());
  }
  plan.input_slots.assign(size_t(g.node_size()), {});
  plan.output_slots.assign(size_t(g.node_size()), {});
  for (int i = 0; i < g.node_size(); ++i) {
    for (const auto& in : g.node(i).input()) plan.input_slots[size_t(i)].push_back(slot(in));
    for (const auto& o : g.node(i).output())
      plan.output_slots[size_t(i)].push_back(o.empty() ? GraphPlan::kNoSlot : slot(o));
  }
  plan.drop_slots.assign(plan.drops.size(), {});
  for (size_t pos = 0; pos < plan.drops.size(); ++pos)
    for (const auto& name : plan.drops[pos])
      if (const int s = slot(name); s != GraphPlan::kNoSlot) plan.drop_slots[pos].push_back(s);
  for (const auto& [index, chain] : plan.fused) {
    plan.chain_root_slots[index] = slot(chain.root);
    plan.chain_output_slots[index] = slot(chain.output);
  }
}

void assign_subgraphs(const pb::GraphProto& g, Model::State& state) {
  for (const auto& node : g.node())
    for_each_subgraph(node, [&](const pb::GraphProto& sub) {
      GraphPlan& plan = state.subgraphs.at(&sub);
      assign(sub, plan, plan.initializers);
      assign_subgraphs(sub, state);
    });
}

}  // namespace

void assign_value_slots(Model::State& state) {
  assign(state.proto->graph(), state.main, state.initializers);
  assign_subgraphs(state.proto->graph(), state);
}

}  // namespace kiln::onnx
