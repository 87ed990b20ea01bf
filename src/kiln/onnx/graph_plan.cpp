// Planning: the main graph and every subgraph (If branches, Loop and Scan bodies) get their
// node order and the last use of each value once, at load time. A subgraph may read values
// of the graphs around it; those reads count as inputs of the node that owns the subgraph,
// so the owner runs after their producers and the values live until it has run.
#include "kiln/onnx/model_state.h"
#include "kiln/onnx/tensor_convert.h"

namespace kiln::onnx {

namespace {

class Planner {
 public:
  Planner(Model::State& state, const std::string& base_dir) : state_(state), base_dir_(base_dir) {}

  // Plans g into out and returns the names g reads from enclosing graphs. outer: the names
  // the enclosing graphs define (empty for the main graph, whose inputs and initializers
  // come in `available`).
  std::set<std::string> plan(const pb::GraphProto& g, const std::set<std::string>& outer,
                             const std::vector<std::string>* main_available, GraphPlan& out) {
    const bool is_main = main_available != nullptr;
    std::set<std::string> local;
    for (const auto& in : g.input()) local.insert(in.name());
    for (const auto& init : g.initializer()) {
      local.insert(init.name());
      if (!is_main) {
        KILN_CHECK(!init.name().empty(), ValueError, "a subgraph initializer has no name");
        out.initializers.emplace(init.name(), tensor_from_proto(init, base_dir_, "initializer " + quoted(init.name())));
      }
    }
    KILN_CHECK(is_main || g.sparse_initializer_size() == 0, NotImplementedError,
               "sparse initializers are not supported");
    for (const auto& node : g.node()) {
      for (const auto& o : node.output()) {
        if (!o.empty()) local.insert(o);
      }
    }

    // Subgraphs first: what they read from outside becomes extra inputs of their node.
    std::set<std::string> visible = outer;
    visible.insert(local.begin(), local.end());
    std::vector<std::vector<std::string>> extra(size_t(g.node_size()));
    for (int i = 0; i < g.node_size(); ++i) {
      const pb::NodeProto& node = g.node(i);
      for (const auto& a : node.attribute()) {
        std::vector<const pb::GraphProto*> subs;
        if (a.has_g()) subs.push_back(&a.g());
        for (const auto& sub : a.graphs()) subs.push_back(&sub);
        for (const pb::GraphProto* sub : subs) {
          GraphPlan sub_plan;
          std::set<std::string> reads;
          try {
            reads = plan(*sub, visible, nullptr, sub_plan);
          } catch (const NotImplementedError& e) {
            KILN_THROW(NotImplementedError, describe_node(node, i), ", subgraph '", printable(a.name(), 100),
                       "': ", e.what());
          } catch (const ValueError& e) {
            KILN_THROW(ValueError, describe_node(node, i), ", subgraph '", printable(a.name(), 100), "': ",
                       e.what());
          }
          state_.subgraphs[sub] = std::move(sub_plan);
          extra[size_t(i)].insert(extra[size_t(i)].end(), reads.begin(), reads.end());
        }
      }
    }

    // Names read here (by nodes, their subgraphs, or as graph outputs) but defined outside.
    std::set<std::string> free;
    auto note = [&](const std::string& name) {
      if (!name.empty() && !local.count(name)) free.insert(name);
    };
    for (int i = 0; i < g.node_size(); ++i) {
      for (const auto& in : g.node(i).input()) note(in);
      for (const auto& in : extra[size_t(i)]) note(in);
    }
    for (const auto& o : g.output()) note(o.name());

    std::vector<std::string> available;
    if (is_main) {
      available = *main_available;
    } else {
      for (const auto& in : g.input()) available.push_back(in.name());
      for (const auto& init : g.initializer()) available.push_back(init.name());
      for (const auto& name : free) {
        KILN_CHECK(outer.count(name), ValueError, "value ", quoted(name),
                   " is read but neither this subgraph nor an enclosing graph defines it");
        available.push_back(name);
      }
    }
    out.order = topological_order(g, available, &extra);
    for (size_t pos = 0; pos < out.order.size(); ++pos) {
      const int index = out.order[pos];
      for (const auto& in : g.node(index).input()) out.last_use[in] = pos;
      for (const auto& in : extra[size_t(index)]) out.last_use[in] = pos;
    }
    for (const auto& o : g.output()) out.outputs.insert(o.name());
    out.drops.resize(out.order.size());
    for (const auto& [name, pos] : out.last_use) {
      if (!out.outputs.count(name)) out.drops[pos].push_back(name);
    }
    return free;
  }

 private:
  Model::State& state_;
  const std::string& base_dir_;
};

}  // namespace

void plan_graphs(Model::State& state, const std::vector<std::string>& main_available,
                 const std::string& base_dir) {
  Planner planner(state, base_dir);
  planner.plan(state.proto->graph(), {}, &main_available, state.main);
}

}  // namespace kiln::onnx
