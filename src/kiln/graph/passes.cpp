// Dead code, common subexpressions and constant folding (include/kiln/graph/passes.h).
#include <map>
#include <set>
#include <sstream>

#include "kiln/autograd/autograd.h"
#include "kiln/dispatch/dispatcher.h"
#include "kiln/graph/passes.h"

namespace kiln::graph {

namespace {

// Replaces value ids through `map` everywhere they are read.
void rename(Graph& g, const std::map<ValueId, ValueId>& map) {
  if (map.empty()) return;
  auto fix = [&](ValueId& id) {
    auto it = map.find(id);
    if (it != map.end()) id = it->second;
  };
  for (Node& n : g.nodes) {
    for (ValueId& id : n.inputs) fix(id);
    for (ValueId& id : n.outs) fix(id);
  }
  for (ValueId& id : g.outputs) fix(id);
}

void drop_unused_constants(Graph& g) {
  std::set<ValueId> used(g.outputs.begin(), g.outputs.end());
  for (const Node& n : g.nodes) {
    used.insert(n.inputs.begin(), n.inputs.end());
    used.insert(n.outs.begin(), n.outs.end());
  }
  std::vector<std::pair<ValueId, Tensor>> kept;
  for (auto& c : g.constants)
    if (used.count(c.first)) kept.push_back(std::move(c));
  g.constants = std::move(kept);
}

// An attribute list as text with each alternative's index, for equality of nodes.
std::string attrs_key(const std::vector<AttrValue>& attrs) {
  std::ostringstream os;
  for (const AttrValue& a : attrs) {
    os << a.index() << ':';
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::monostate>) {
          } else if constexpr (std::is_same_v<V, Scalar>) {
            os << (v.is_floating() ? 'f' : 'i') << v.to_double();
          } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
            for (int64_t x : v) os << x << ',';
          } else if constexpr (std::is_same_v<V, DType>) {
            os << int(v);
          } else if constexpr (std::is_same_v<V, Device>) {
            os << int(v.type) << '.' << v.index;
          } else {
            os << v;
          }
        },
        a);
    os << ';';
  }
  return os.str();
}

// Literal 0-d tensors of equal dtype and value become one value, so that x * 2 written twice
// is one subexpression.
void merge_equal_literals(Graph& g) {
  std::map<std::pair<int, double>, ValueId> seen;
  std::map<ValueId, ValueId> map;
  for (const auto& [id, t] : g.constants) {
    if (!g.info[size_t(id)].literal || t.dim() != 0) continue;
    const double v = t.item<double>();
    if (v != v) continue;  // NaN literals are never equal: leave them
    auto [it, fresh] = seen.emplace(std::make_pair(int(t.dtype()), v), id);
    if (!fresh) map[id] = it->second;
  }
  rename(g, map);
}

}  // namespace

int64_t eliminate_dead_code(Graph& g) {
  std::set<ValueId> live(g.outputs.begin(), g.outputs.end());
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool needed = !n.outs.empty() || (n.kind == NodeKind::Op && n.op->random);
    for (ValueId r : n.results) needed = needed || live.count(r);
    if (!needed) continue;
    keep[i] = true;
    live.insert(n.inputs.begin(), n.inputs.end());
    live.insert(n.outs.begin(), n.outs.end());
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i]) kept.push_back(std::move(g.nodes[i]));
  const int64_t removed = int64_t(g.nodes.size() - kept.size());
  g.nodes = std::move(kept);
  drop_unused_constants(g);
  return removed;
}

int64_t eliminate_common_subexpressions(Graph& g) {
  if (g.mutates()) return 0;
  merge_equal_literals(g);
  std::map<std::string, size_t> first;  // node key -> index of its first occurrence
  std::map<ValueId, ValueId> map;
  std::vector<Node> kept;
  int64_t merged = 0;
  for (Node& n : g.nodes) {
    for (ValueId& id : n.inputs) {
      auto it = map.find(id);
      if (it != map.end()) id = it->second;
    }
    if (n.kind == NodeKind::Op && !n.op->random) {
      std::ostringstream key;
      key << n.op->name << '(';
      for (ValueId id : n.inputs) key << id << ',';
      key << ')' << attrs_key(n.attrs);
      if (n.device) key << "@" << int(n.device->type) << '.' << n.device->index;
      auto [it, fresh] = first.emplace(key.str(), kept.size());
      if (!fresh) {
        const Node& same = kept[it->second];
        for (size_t k = 0; k < n.results.size(); ++k) map[n.results[k]] = same.results[k];
        ++merged;
        continue;
      }
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  rename(g, map);
  drop_unused_constants(g);
  return merged;
}

int64_t fold_constants(Graph& g) {
  if (g.mutates()) return 0;  // a folded tensor could be written by a later node
  // Values the function returns, or views of them: folding those would hand every call the
  // same storage, where eager calls return fresh tensors.
  std::set<ValueId> returned(g.outputs.begin(), g.outputs.end());
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool reaches = false;
    for (ValueId r : n.results) reaches = reaches || returned.count(r);
    const bool view = n.kind == NodeKind::Alias || (n.kind == NodeKind::Op && n.op->view);
    if (reaches && view && !n.inputs.empty()) returned.insert(n.inputs[0]);
  }
  std::set<ValueId> known;
  for (const auto& [id, t] : g.constants)
    if (g.info[size_t(id)].literal) known.insert(id);
  autograd::NoGradGuard no_grad;  // literals never require grad; keep folding off the tape
  std::vector<Node> kept;
  int64_t folded = 0;
  for (Node& n : g.nodes) {
    bool foldable = n.kind == NodeKind::Op && !n.op->random && !n.op->dynamic_shape;
    for (ValueId r : n.results) foldable = foldable && !returned.count(r);
    for (ValueId id : n.inputs) foldable = foldable && (id == kNoValue || known.count(id));
    if (!foldable) {
      kept.push_back(std::move(n));
      continue;
    }
    OpCall call;
    call.op = n.op;
    for (ValueId id : n.inputs) {
      Tensor t;
      for (const auto& c : g.constants)
        if (c.first == id) t = c.second;
      call.inputs.push_back(t);
    }
    call.attrs = n.attrs;
    call.device = n.device;
    std::vector<Tensor> results = dispatch(call);
    for (size_t k = 0; k < n.results.size() && k < results.size(); ++k) {
      if (n.results[k] == kNoValue) continue;
      g.constants.emplace_back(n.results[k], results[k]);
      g.info[size_t(n.results[k])].literal = true;
      known.insert(n.results[k]);
    }
    ++folded;
  }
  g.nodes = std::move(kept);
  drop_unused_constants(g);
  return folded;
}

PassStats optimize(Graph& g, bool fuse) {
  PassStats s;
  s.folded = fold_constants(g);
  s.common = eliminate_common_subexpressions(g);
  if (fuse) s.fused = fuse_pointwise(g);
  s.dead = eliminate_dead_code(g);
  return s;
}

}  // namespace kiln::graph
