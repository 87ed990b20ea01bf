// Eager execution: nodes run in the planned order, each through its op-table entry; values
// are dropped after their last use. Subgraphs run in a scope whose lookups fall back to the
// enclosing graphs' values (ONNX's outer-scope rule).
#include <algorithm>
#include <set>

#include "kiln/onnx/model_state.h"
#include "kiln/onnx/op_table.h"
#include "kiln/ops/copy.h"

namespace kiln::onnx {

namespace {

// Rethrows the current exception with the node named in front, keeping its class (the
// Python bindings map classes to exception types).
[[noreturn]] void rethrow_for_node(const std::string& where) {
  try {
    throw;
  } catch (const ValueError& e) {
    throw ValueError(where + ": " + e.what());
  } catch (const TypeError& e) {
    throw TypeError(where + ": " + e.what());
  } catch (const IndexError& e) {
    throw IndexError(where + ": " + e.what());
  } catch (const ShapeError& e) {
    throw ShapeError(where + ": " + e.what());
  } catch (const DeviceError& e) {
    throw DeviceError(where + ": " + e.what());
  } catch (const NotImplementedError& e) {
    throw NotImplementedError(where + ": " + e.what());
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(where + ": " + e.what());
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(where + ": out of host memory");
  } catch (const std::exception& e) {
    throw Error(where + ": " + e.what());
  }
}

void check_input(const ValueInfo& info, const Value& v, Device device) {
  const std::string who = "model input " + quoted(info.name);
  if (info.kind == "optional") return;  // empty, a tensor or a sequence
  if (info.kind == "sequence") {
    KILN_CHECK(v.is_sequence(), TypeError, who, " is a sequence; a tensor was given");
    for (const Tensor& t : *v.sequence) {
      KILN_CHECK(t.defined() && t.device() == device, DeviceError, who,
                 ": every element must be a tensor on the model's device ", device);
    }
    return;
  }
  KILN_CHECK(!v.is_sequence(), TypeError, who, " is a ", info.kind, "; a sequence was given");
  const Tensor& t = v.tensor;
  KILN_CHECK(t.defined(), ValueError, who, " is an undefined tensor");
  KILN_CHECK(info.kind == "tensor", NotImplementedError, who, " is a ", info.kind,
             "; kiln feeds tensors and sequences only");
  KILN_CHECK(t.device() == device, DeviceError, who, " is on ", t.device(), " but the model is on ",
             device, " (move the model with Model::to or the input with Tensor::to)");
  if (info.onnx_elem_type != 0) {
    KILN_CHECK(info.dtype.has_value(), NotImplementedError, who, " has element type ",
               info.onnx_elem_type, " which kiln lacks");
    KILN_CHECK(t.dtype() == *info.dtype, TypeError, who, " must be ", *info.dtype, ", got ", t.dtype());
  }
  if (info.shape) {
    const auto& dims = *info.shape;
    KILN_CHECK(int64_t(dims.size()) == t.dim(), ShapeError, who, " must have rank ", dims.size(),
               ", got shape ", shape_str(t.shape()));
    for (size_t d = 0; d < dims.size(); ++d) {
      KILN_CHECK(!dims[d].value || *dims[d].value == t.size(int64_t(d)), ShapeError, who,
                 " must have size ", dims[d].value.value_or(0), " in dim ", d, ", got shape ",
                 shape_str(t.shape()));
    }
  }
}

// The values of one running graph, by slot (GraphPlan::slot_of); lookups by name fall back
// to the enclosing graph's scope (ONNX's outer-scope rule).
struct Scope {
  const Scope* parent = nullptr;
  const GraphPlan* plan = nullptr;
  std::vector<Value> slots;
  // The input shapes of the Shape / Size nodes run so far, the enclosing graphs' first
  // (shape_cache.cpp; recorded only where GraphPlan::shape_tracking).
  std::vector<Shape> observed;

  Scope(const GraphPlan& p, const Scope* outer)
      : parent(outer), plan(&p), slots(p.slot_of.size()) {}

  Value& at(const std::string& name) { return slots[size_t(plan->slot_of.at(name))]; }

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent) {
      auto it = s->plan->slot_of.find(name);
      if (it != s->plan->slot_of.end() && s->slots[size_t(it->second)].defined())
        return &s->slots[size_t(it->second)];
    }
    return nullptr;
  }

  // Input `name` at `slot` of this scope (kNoSlot: outer names), else the enclosing scopes'.
  const Value* find(int slot, const std::string& name) const {
    if (slot != GraphPlan::kNoSlot && slots[size_t(slot)].defined()) return &slots[size_t(slot)];
    return parent ? parent->find(name) : nullptr;
  }
};

void execute(const Model::State& s, const pb::GraphProto& g, const GraphPlan& plan, Scope& scope);

// Runs subgraphs of the nodes of one scope.
class ScopeRunner final : public GraphRunner {
 public:
  ScopeRunner(const Model::State& s, const Scope& scope) : s_(s), scope_(scope) {}
  std::vector<Value> run(const pb::GraphProto& g, std::vector<Value> inputs) const override {
    auto it = s_.subgraphs.find(&g);
    KILN_CHECK(it != s_.subgraphs.end(), ValueError, "subgraph ", quoted(g.name()), " was not planned");
    const GraphPlan& plan = it->second;
    KILN_CHECK(inputs.size() == size_t(g.input_size()), ValueError, "subgraph ", quoted(g.name()),
               " declares ", g.input_size(), " inputs but is given ", inputs.size());
    Scope inner(plan, &scope_);
    for (const auto& [n, t] : plan.initializers) inner.at(n) = t;
    for (int i = 0; i < g.input_size(); ++i)
      inner.at(g.input(i).name()) = std::move(inputs[size_t(i)]);
    execute(s_, g, plan, inner);
    std::vector<Value> outs;
    for (const auto& o : g.output()) {
      const Value* v = inner.find(o.name());
      KILN_CHECK(v != nullptr, ValueError, "subgraph ", quoted(g.name()), " output ", quoted(o.name()),
                 " was not produced");
      outs.push_back(*v);
    }
    return outs;
  }

 private:
  const Model::State& s_;
  const Scope& scope_;
};

// Runs one node through its op-table entry, its outputs into scope.
void run_node(const Model::State& s, const pb::GraphProto& g, const GraphPlan& plan, int index,
              Scope& scope, const ScopeRunner& runner) {
  const pb::NodeProto& node = g.node(index);
  const OpFunction fn = plan.functions[size_t(index)];
  KILN_CHECK(fn != nullptr, NotImplementedError, describe_node(node, index),
             ": operator not supported by kiln");
  std::vector<Value> inputs;
  inputs.reserve(size_t(node.input_size()));
  const std::vector<int>& in_slots = plan.input_slots[size_t(index)];
  for (int k = 0; k < node.input_size(); ++k) {
    const std::string& name = node.input(k);
    if (name.empty()) {
      inputs.emplace_back();
      continue;
    }
    const Value* v = scope.find(in_slots[size_t(k)], name);
    KILN_CHECK(v != nullptr, ValueError, describe_node(node, index), ": input ", quoted(name),
               " has no value (an optional output that was not produced)");
    inputs.push_back(*v);
  }
  std::vector<Value> outs;
  try {
    OpContext ctx(node, s.opset, std::move(inputs), s.device, &runner);
    std::vector<Tensor> tensors = fn(ctx);
    outs.assign(tensors.begin(), tensors.end());
    for (auto& [i, v] : ctx.value_outputs()) {
      if (outs.size() <= i) outs.resize(i + 1);
      outs[i] = std::move(v);
    }
  } catch (...) {
    rethrow_for_node(describe_node(node, index));
  }
  for (int i = 0; i < node.output_size(); ++i) {
    const std::string& name = node.output(i);
    if (name.empty()) continue;
    if (size_t(i) < outs.size() && outs[size_t(i)].defined()) {
      scope.slots[size_t(plan.output_slots[size_t(index)][size_t(i)])] = std::move(outs[size_t(i)]);
    } else {
      KILN_CHECK(!plan.outputs.count(name) && !plan.last_use.count(name), NotImplementedError,
                 describe_node(node, index), ": output ", i, " (", quoted(name),
                 ") is not produced by kiln's implementation");
    }
  }
}

// A fused chain at its last node: one program over its root when it applies, else its nodes
// one by one (their intermediate values dropped again).
void run_chain(const Model::State& s, const pb::GraphProto& g, const GraphPlan& plan,
               const FusedChain& chain, Scope& scope, const ScopeRunner& runner) {
  const int tail = chain.nodes.back();
  const Value* root = scope.find(plan.chain_root_slots.at(tail), chain.root);
  if (root && fused_chain_applies(chain, *root)) {
    try {
      scope.slots[size_t(plan.chain_output_slots.at(tail))] = run_fused_chain(chain, *root);
    } catch (...) {
      rethrow_for_node(describe_node(g.node(tail), tail));
    }
    return;
  }
  for (int i : chain.nodes) run_node(s, g, plan, i, scope, runner);
  for (int i : chain.nodes)
    if (i != tail) scope.slots[size_t(plan.output_slots[size_t(i)][0])] = Value();
}

// The input shape of a Shape / Size node (a source of shape-derived values), read after it ran.
Shape source_shape(const pb::NodeProto& node, const GraphPlan& plan, int index,
                   const Scope& scope) {
  const Value* v = scope.find(plan.input_slots[size_t(index)][0], node.input(0));
  if (v == nullptr || v->is_sequence() || !v->tensor.defined()) return Shape{-1};
  return v->tensor.shape();
}

// A node computed from shapes and constants alone (shape_cache.cpp): its kept values when the
// sources that ran before it saw the shapes they were kept for, else it runs and is kept.
void run_shape_cached(const Model::State& s, const pb::GraphProto& g, const GraphPlan& plan,
                      int index, Scope& scope, const ScopeRunner& runner) {
  const size_t k = size_t(plan.sources_before[size_t(index)]);
  const std::vector<Shape>& observed = scope.observed;
  ShapeCache& cache = *plan.shape_cache;
  const pb::NodeProto& node = g.node(index);
  const std::vector<int>& out_slots = plan.output_slots[size_t(index)];
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.entries.find(index);
    if (it != cache.entries.end() && observed.size() >= k && it->second.key.size() == k &&
        std::equal(it->second.key.begin(), it->second.key.end(), observed.begin())) {
      for (int i = 0; i < node.output_size(); ++i)
        if (!node.output(i).empty())
          scope.slots[size_t(out_slots[size_t(i)])] = it->second.values[size_t(i)];
      return;
    }
  }
  run_node(s, g, plan, index, scope, runner);
  if (observed.size() < k) return;  // not reached through the planned path: nothing kept
  // Shape arithmetic is a few integers; a large value (a ConstantOfShape mask) would hold its
  // memory between runs for little gain: such nodes run every time.
  constexpr int64_t kMaxKeptBytes = int64_t(64) << 10;
  int64_t bytes = 0;
  std::vector<Value> values(size_t(node.output_size()));
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    const Value& v = scope.slots[size_t(out_slots[size_t(i)])];
    if (v.is_sequence() || v.none || !v.tensor.defined()) return;  // only tensors are kept
    bytes += v.tensor.numel() * int64_t(element_size(v.tensor.dtype()));
    if (bytes > kMaxKeptBytes) return;
    values[size_t(i)] = v;
  }
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.entries[index] =
      ShapeCache::Entry{std::vector<Shape>(observed.begin(), observed.begin() + k), values};
}

void execute(const Model::State& s, const pb::GraphProto& g, const GraphPlan& plan, Scope& scope) {
  const ScopeRunner runner(s, scope);
  const bool cached = plan.shape_cache != nullptr, tracking = plan.shape_tracking;
  if (tracking && scope.parent) scope.observed = scope.parent->observed;
  for (size_t pos = 0; pos < plan.order.size(); ++pos) {
    const int index = plan.order[pos];
    const pb::NodeProto& node = g.node(index);
    if (auto f = plan.folded.find(index); f != plan.folded.end()) {
      for (size_t i = 0; i < f->second.size(); ++i) {
        if (!node.output(int(i)).empty())
          scope.slots[size_t(plan.output_slots[size_t(index)][i])] = f->second[i];
      }
      continue;
    }
    if (plan.absorbed.count(index)) continue;  // its chain runs at the chain's last node
    if (auto f = plan.fused.find(index); f != plan.fused.end()) {
      run_chain(s, g, plan, f->second, scope, runner);
    } else if (cached && plan.shape_cached[size_t(index)]) {
      run_shape_cached(s, g, plan, index, scope, runner);
    } else {
      run_node(s, g, plan, index, scope, runner);
      if (tracking && plan.shape_source[size_t(index)])
        scope.observed.push_back(source_shape(node, plan, index, scope));
    }
    // Drop values (of this scope only) that nothing reads any more.
    for (int slot : plan.drop_slots[pos]) scope.slots[size_t(slot)] = Value();
  }
}

}  // namespace

std::map<std::string, Value> Model::run_values(const std::map<std::string, Value>& feeds) const {
  const State& s = state();
  const pb::GraphProto& g = s.proto->graph();
  Scope scope(s.main, nullptr);
  for (const auto& [n, t] : s.initializers) scope.at(n) = t;
  std::set<std::string> declared;
  for (const auto& in : g.input()) declared.insert(in.name());
  for (const auto& [name, v] : feeds) {
    KILN_CHECK(declared.count(name), ValueError, "the model has no input ", quoted(name));
    scope.at(name) = v;
  }
  for (const ValueInfo& in : s.inputs) {
    auto it = feeds.find(in.name);
    KILN_CHECK(it != feeds.end(), ValueError, "model input ", quoted(in.name), " was not given");
    check_input(in, it->second, s.device);
  }
  execute(s, g, s.main, scope);
  std::map<std::string, Value> result;
  for (const auto& out : g.output()) {
    const Value* v = scope.find(out.name());
    KILN_CHECK(v != nullptr, ValueError, "graph output ", quoted(out.name()), " was not produced");
    // An output that is the model's own memory (an initializer, a folded constant, a kept
    // shape value, or a view of one) goes out as a copy: the caller may write into it.
    Value copy = *v;
    if (copy.tensor.defined() && model_holds_storage(s, copy.tensor))
      copy.tensor = clone(copy.tensor);
    if (copy.sequence)
      for (Tensor& t : *copy.sequence)
        if (t.defined() && model_holds_storage(s, t)) t = clone(t);
    result[out.name()] = std::move(copy);
  }
  return result;
}

std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>& inputs) const {
  std::map<std::string, Value> feeds(inputs.begin(), inputs.end());
  std::map<std::string, Tensor> result;
  for (auto& [name, v] : run_values(feeds)) {
    KILN_CHECK(!v.is_sequence() && !v.none, TypeError, "graph output ", quoted(name), " is ",
               v.none ? "an empty optional" : "a sequence", "; use Model::run_values");
    result[name] = std::move(v.tensor);
  }
  return result;
}

}  // namespace kiln::onnx
