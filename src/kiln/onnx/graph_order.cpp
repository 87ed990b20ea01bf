#include <map>
#include <set>

#include "kiln/onnx/model_state.h"

namespace kiln::onnx {

std::string describe_node(const pb::NodeProto& node, int index) {
  std::string who = node.name().empty() ? "#" + std::to_string(index) : quoted(node.name());
  std::string op = node.domain().empty() || node.domain() == "ai.onnx"
                       ? node.op_type()
                       : node.domain() + ":" + node.op_type();
  return "node " + who + " (" + printable(op, 100) + ")";
}

std::vector<int> topological_order(const pb::GraphProto& graph,
                                   const std::vector<std::string>& available,
                                   const std::vector<std::vector<std::string>>* extra_inputs) {
  const int n = graph.node_size();
  std::set<std::string> known(available.begin(), available.end());
  std::map<std::string, int> producer;  // value name -> node index
  for (int i = 0; i < n; ++i) {
    for (const auto& out : graph.node(i).output()) {
      if (out.empty()) continue;
      KILN_CHECK(!known.count(out), ValueError, describe_node(graph.node(i), i), ": output ",
                 quoted(out), " is already a graph input or initializer");
      KILN_CHECK(producer.emplace(out, i).second, ValueError, describe_node(graph.node(i), i),
                 ": output ", quoted(out), " is also produced by ",
                 describe_node(graph.node(producer[out]), producer[out]));
    }
  }
  // Kahn's algorithm; ties keep the file's order so runs are deterministic.
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> consumers(n);
  for (int i = 0; i < n; ++i) {
    std::set<int> deps;
    std::vector<std::string> reads(graph.node(i).input().begin(), graph.node(i).input().end());
    if (extra_inputs) reads.insert(reads.end(), (*extra_inputs)[size_t(i)].begin(), (*extra_inputs)[size_t(i)].end());
    for (const auto& in : reads) {
      if (in.empty() || known.count(in)) continue;
      auto it = producer.find(in);
      KILN_CHECK(it != producer.end(), ValueError, describe_node(graph.node(i), i), ": input ",
                 quoted(in), " is not produced by any node and is not a graph input or initializer");
      deps.insert(it->second);
    }
    pending[i] = int(deps.size());
    for (int d : deps) consumers[d].push_back(i);
  }
  std::set<int> ready;
  for (int i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.insert(i);
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int c : consumers[i]) {
      if (--pending[c] == 0) ready.insert(c);
    }
  }
  if (int(order.size()) != n) {
    for (int i = 0; i < n; ++i) {
      KILN_CHECK(pending[i] == 0, ValueError, "the graph has a cycle: ", describe_node(graph.node(i), i),
                 " depends (through its inputs) on its own outputs");
    }
  }
  for (const auto& out : graph.output()) {
    KILN_CHECK(known.count(out.name()) || producer.count(out.name()), ValueError, "graph output ",
               quoted(out.name()), " is not produced by any node");
  }
  return order;
}

}  // namespace kiln::onnx
