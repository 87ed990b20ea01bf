// Printing and running a graph (include/kiln/graph/graph.h).
#include <sstream>

#include "kiln/autograd/autograd.h"
#include "kiln/dispatch/dispatcher.h"
#include "kiln/tensor/empty.h"
#include "kiln/graph/graph.h"
#include "kiln/runtime/generator.h"

namespace kiln::graph {

namespace {

std::string attr_str(const AttrValue& a) {
  std::ostringstream os;
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) {
          os << "None";
        } else if constexpr (std::is_same_v<V, bool>) {
          os << (v ? "True" : "False");
        } else if constexpr (std::is_same_v<V, int64_t> || std::is_same_v<V, double>) {
          os << v;
        } else if constexpr (std::is_same_v<V, Scalar>) {
          os << v.to_double();
        } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
          os << shape_str(v);
        } else if constexpr (std::is_same_v<V, DType>) {
          os << dtype_name(v);
        } else if constexpr (std::is_same_v<V, Device>) {
          os << device_type_name(v.type);
        } else {
          os << "'" << v << "'";
        }
      },
      a);
  return os.str();
}

void value_list(std::ostringstream& os, const std::vector<ValueId>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) os << ", ";
    if (ids[i] == kNoValue)
      os << "None";
    else
      os << "%" << ids[i];
  }
}

}  // namespace

std::string Graph::to_string() const {
  std::ostringstream os;
  os << "graph(";
  value_list(os, inputs);
  os << "):\n";
  for (const auto& [id, t] : constants)
    os << "  %" << id << " = constant " << (info[size_t(id)].literal ? "literal " : "")
       << dtype_name(t.dtype()) << shape_str(t.shape()) << "\n";
  for (const Node& n : nodes) {
    os << "  ";
    value_list(os, n.results);
    if (n.kind == NodeKind::Fresh) {
      os << " = fresh copy " << dtype_name(n.snapshot.dtype()) << shape_str(n.snapshot.shape())
         << "\n";
      continue;
    }
    if (n.kind == NodeKind::Alias) {
      os << " = alias(%" << n.inputs[0] << ", " << shape_str(n.shape) << ")\n";
      continue;
    }
    os << " = " << n.op->name << "(";
    value_list(os, n.inputs);
    for (const AttrValue& a : n.attrs) os << (n.inputs.empty() ? "" : ", ") << attr_str(a);
    if (!n.outs.empty()) {
      os << ", out=";
      value_list(os, n.outs);
    }
    os << ")\n";
  }
  os << "  return ";
  value_list(os, outputs);
  os << "\n";
  return os.str();
}

bool Graph::mutates() const {
  for (const Node& n : nodes)
    if (!n.outs.empty()) return true;
  return false;
}

namespace {

// The node after which each value is read for the last time (-1: never read by a node), so
// a run can drop its intermediates as eager code does and the caching allocator hands their
// blocks, still in cache, to the next ops.
std::vector<int64_t> last_reads(const Graph& graph) {
  std::vector<int64_t> last(size_t(graph.num_values), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (ValueId id : graph.nodes[i].inputs)
      if (id != kNoValue) last[size_t(id)] = int64_t(i);
    for (ValueId id : graph.nodes[i].outs)
      if (id != kNoValue) last[size_t(id)] = int64_t(i);
  }
  for (ValueId id : graph.outputs)
    if (id != kNoValue) last[size_t(id)] = int64_t(graph.nodes.size());
  return last;
}

// Whether a fresh value's first use overwrites it whole (as the out= tensor of an op that
// does not also read it): then a run only needs new memory of its geometry, not its contents.
bool written_before_read(const Graph& graph, size_t fresh_node) {
  const ValueId v = graph.nodes[fresh_node].results[0];
  for (size_t i = fresh_node + 1; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    bool reads = false, writes = false;
    for (ValueId id : n.inputs) reads = reads || id == v;
    for (ValueId id : n.outs) writes = writes || id == v;
    if (reads || writes) return writes && !reads && n.kind == NodeKind::Op;
  }
  return false;
}

}  // namespace

std::vector<Tensor> run(const Graph& graph, const std::vector<Tensor>& inputs) {
  KILN_CHECK(inputs.size() == graph.inputs.size(), ValueError, "graph: expected ",
             graph.inputs.size(), " inputs, got ", inputs.size());
  std::vector<Tensor> env(size_t(graph.num_values));
  for (size_t i = 0; i < inputs.size(); ++i) env[size_t(graph.inputs[i])] = inputs[i];
  for (const auto& [id, t] : graph.constants) env[size_t(id)] = t;
  const std::vector<int64_t> last = last_reads(graph);
  auto value = [&](ValueId id) { return id == kNoValue ? Tensor() : env[size_t(id)]; };
  auto release_after = [&](const Node& n, int64_t i) {
    for (const std::vector<ValueId>* ids : {&n.inputs, &n.outs})
      for (ValueId id : *ids)
        if (id != kNoValue && last[size_t(id)] == i) env[size_t(id)] = Tensor();
  };
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    if (n.kind == NodeKind::Fresh) {
      const Tensor& s = n.snapshot;
      env[size_t(n.results[0])] =
          written_before_read(graph, i)
              ? empty_strided_tensor(s.shape(), s.strides(), s.dtype(), s.device())
              : s.clone();
      continue;
    }
    if (n.kind == NodeKind::Alias) {
      const Tensor& base = env[size_t(n.inputs[0])];
      env[size_t(n.results[0])] = autograd::detach(
          make_view(base, n.shape, n.strides, base.storage_offset() + n.relative_offset));
      release_after(n, int64_t(i));
      continue;
    }
    OpCall call;
    call.op = n.op;
    call.inputs.reserve(n.inputs.size());
    for (ValueId id : n.inputs) call.inputs.push_back(value(id));
    call.attrs = n.attrs;
    if (n.random_blocks >= 0) {  // fresh draws: reserve as the op's wrapper would
      Generator& g = default_generator(n.generator_device);
      const size_t k = call.attrs.size();
      call.attrs[k - 2] = int64_t(g.seed());
      call.attrs[k - 1] = int64_t(g.reserve(uint64_t(n.random_blocks)));
    }
    for (ValueId id : n.outs) call.outs.push_back(value(id));
    call.device = n.device;
    std::vector<Tensor> results = dispatch(call);
    release_after(n, int64_t(i));
    for (size_t k = 0; k < n.results.size() && k < results.size(); ++k)
      if (n.results[k] != kNoValue) env[size_t(n.results[k])] = std::move(results[k]);
  }
  std::vector<Tensor> out;
  out.reserve(graph.outputs.size());
  for (ValueId id : graph.outputs) out.push_back(value(id));
  return out;
}

}  // namespace kiln::graph
