// Constant folding at load time. Exporters leave work that depends only on weights inside
// the graph (weights re-sliced and concatenated into another gate order, shapes computed
// from constants, Constant nodes inside loop bodies and If branches); doing it once here
// keeps it out of every run. Folding runs the same op-table entries on the CPU, so a folded
// value is exactly what the run would compute; Model::to moves the results with the weights.
#include <set>

#include "kiln/onnx/model_state.h"
#include "kiln/onnx/op_table.h"

namespace kiln::onnx {

namespace {

// Results larger than this stay computed at run time (a folded ConstantOfShape or Expand
// could otherwise hold a huge tensor in the model).
constexpr int64_t kMaxFoldedBytes = int64_t(64) << 20;

}  // namespace

// Operators whose result is not a function of their inputs alone, or that run subgraphs.
bool pure_function_node(const pb::NodeProto& node) {
  static const std::set<std::string> never{"RandomNormal", "RandomUniform", "RandomNormalLike",
                                           "RandomUniformLike", "Bernoulli", "Multinomial", "Dropout",
                                           "If", "Loop", "Scan", "SequenceMap"};
  if (!(node.domain().empty() || node.domain() == "ai.onnx")) return false;
  if (never.count(node.op_type())) return false;
  for (const auto& a : node.attribute()) {
    if (a.has_g() || a.graphs_size() > 0) return false;
  }
  return true;
}

namespace {

int64_t bytes_of(const Value& v) {
  int64_t n = v.tensor.defined() ? v.tensor.numel() * int64_t(element_size(v.tensor.dtype())) : 0;
  if (v.sequence) {
    for (const Tensor& t : *v.sequence) n += t.numel() * int64_t(element_size(t.dtype()));
  }
  return n;
}

class Folder {
 public:
  explicit Folder(Model::State& state) : state_(state) {}

  // known: constant values visible here (from enclosing graphs, then this graph's own).
  void fold(const pb::GraphProto& g, GraphPlan& plan, std::map<std::string, Value> known,
            const std::map<std::string, Tensor>& initializers) {
    std::set<std::string> inputs;
    for (const auto& in : g.input()) {
      inputs.insert(in.name());
      known.erase(in.name());  // a subgraph input hides an outer value of the same name
    }
    for (const auto& [name, t] : initializers) {
      if (!inputs.count(name)) known[name] = t;  // a fed input may override the others
    }
    for (int index : plan.order) {
      const pb::NodeProto& node = g.node(index);
      for_each_subgraph(node, [&](const pb::GraphProto& sub) {
        GraphPlan& sub_plan = state_.subgraphs.at(&sub);
        fold(sub, sub_plan, known, sub_plan.initializers);
      });
      // Until proven constant, this node's outputs hide outer values of the same names.
      for (const auto& o : node.output()) known.erase(o);
      if (!pure_function_node(node)) continue;
      std::vector<Value> in;
      bool all_known = true;
      for (const auto& name : node.input()) {
        if (name.empty()) {
          in.emplace_back();
          continue;
        }
        auto it = known.find(name);
        if (it == known.end()) {
          all_known = false;
          break;
        }
        in.push_back(it->second);
      }
      if (!all_known) continue;
      std::vector<Value> outs;
      const bool is_constant = node.op_type() == "Constant";
      try {
        outs = evaluate(node, std::move(in));
      } catch (const NotImplementedError& e) {
        if (is_constant) KILN_THROW(NotImplementedError, describe_node(node, index), ": ", e.what());
        continue;
      } catch (const Error& e) {
        if (is_constant) KILN_THROW(ValueError, describe_node(node, index), ": ", e.what());
        continue;
      }
      int64_t bytes = 0;
      bool complete = true;
      for (int i = 0; i < node.output_size(); ++i) {
        if (node.output(i).empty()) continue;
        complete = complete && size_t(i) < outs.size() && outs[size_t(i)].defined();
        if (complete) bytes += bytes_of(outs[size_t(i)]);
      }
      if (!complete || (!is_constant && bytes > kMaxFoldedBytes)) continue;
      outs.resize(size_t(node.output_size()));
      for (int i = 0; i < node.output_size(); ++i) {
        if (!node.output(i).empty()) known[node.output(i)] = outs[size_t(i)];
      }
      plan.folded[index] = std::move(outs);
    }
  }

 private:
  std::vector<Value> evaluate(const pb::NodeProto& node, std::vector<Value> in) const {
    OpFunction fn = op_table().find(node.op_type());
    KILN_CHECK(fn != nullptr, NotImplementedError, "operator not supported by kiln");
    OpContext ctx(node, state_.opset, std::move(in), Device(DeviceType::CPU, 0));
    std::vector<Tensor> tensors = fn(ctx);
    std::vector<Value> outs(tensors.begin(), tensors.end());
    for (auto& [i, v] : ctx.value_outputs()) {
      if (outs.size() <= i) outs.resize(i + 1);
      outs[i] = std::move(v);
    }
    return outs;
  }

  Model::State& state_;
};

}  // namespace

void fold_constants(Model::State& state) {
  Folder folder(state);
  folder.fold(state.proto->graph(), state.main, {}, state.initializers);
}

}  // namespace kiln::onnx
