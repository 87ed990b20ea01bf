// kiln._C._graph: graph capture, passes and replay (kiln/graph/), for kiln.compile
// (python/kiln/_compile.py keeps the guards and the Python-side structure of arguments).
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <variant>

#include "bind.h"
#include "kiln/graph/capture.h"
#include "kiln/graph/passes.h"

namespace kiln::py {

namespace {

nb::object attr_to_python(const AttrValue& a) {
  return std::visit([](const auto& v) -> nb::object {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, std::monostate>) return nb::none();
    else if constexpr (std::is_same_v<V, Scalar>) return scalar_to_python(v);
    else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
      nb::list l;
      for (int64_t x : v) l.append(x);
      return l;
    } else {
      return nb::cast(v);
    }
  }, a);
}

const char* node_kind_name(graph::NodeKind k) {
  switch (k) {
    case graph::NodeKind::Op: return "op";
    case graph::NodeKind::Alias: return "alias";
    case graph::NodeKind::Fresh: return "fresh";
  }
  return "?";
}

// The graph as plain Python data, for tools that translate it (kiln.onnx.export): one dict
// per node and per value.
nb::dict graph_description(const graph::Graph& gr) {
  nb::dict d;
  d["num_values"] = gr.num_values;
  d["inputs"] = nb::cast(gr.inputs);
  d["outputs"] = nb::cast(gr.outputs);
  nb::list constants;
  for (const auto& [id, t] : gr.constants) constants.append(nb::make_tuple(id, t));
  d["constants"] = constants;
  nb::list values;
  for (const graph::ValueInfo& v : gr.info) {
    nb::dict vi;
    vi["shape"] = nb::cast(std::vector<int64_t>(v.shape.begin(), v.shape.end()));
    vi["dtype"] = nb::cast(v.dtype);
    vi["device"] = nb::cast(v.device);
    vi["literal"] = v.literal;
    values.append(vi);
  }
  d["values"] = values;
  nb::list nodes;
  for (const graph::Node& n : gr.nodes) {
    nb::dict nd;
    nd["kind"] = node_kind_name(n.kind);
    nd["op"] = n.op ? nb::cast(n.op->name) : nb::none();
    nd["schema"] = n.op ? nb::cast(n.op->schema) : nb::none();
    nd["inputs"] = nb::cast(n.inputs);
    nb::list attrs;
    for (const AttrValue& a : n.attrs) attrs.append(attr_to_python(a));
    nd["attrs"] = attrs;
    nd["outs"] = nb::cast(n.outs);
    nd["results"] = nb::cast(n.results);
    nd["device"] = n.device ? nb::cast(*n.device) : nb::none();
    if (n.kind == graph::NodeKind::Alias) {
      nd["shape"] = nb::cast(std::vector<int64_t>(n.shape.begin(), n.shape.end()));
      nd["strides"] = nb::cast(std::vector<int64_t>(n.strides.begin(), n.strides.end()));
      nd["relative_offset"] = n.relative_offset;
    }
    if (n.kind == graph::NodeKind::Fresh) nd["snapshot"] = nb::cast(n.snapshot);
    nodes.append(nd);
  }
  d["nodes"] = nodes;
  return d;
}

}  // namespace

void bind_graph(nb::module_& m) {
  using graph::Capture;
  using graph::Graph;
  nb::module_ g = m.def_submodule("_graph", "graph capture and replay behind kiln.compile");
  nb::class_<Graph>(g, "Graph")
      .def("run", [](const Graph& gr, const std::vector<Tensor>& inputs) {
        return nogil([&] { return graph::run(gr, inputs); });
      })
      .def("copy", [](const Graph& gr) { return Graph(gr); })
      .def("optimize", [](Graph& gr, bool fuse) {
        const graph::PassStats s = nogil([&] { return graph::optimize(gr, fuse); });
        return std::map<std::string, int64_t>{
            {"dead", s.dead}, {"common", s.common}, {"folded", s.folded}, {"fused", s.fused}};
      }, nb::arg("fuse"))
      .def("__str__", &Graph::to_string)
      .def_prop_ro("op_names", [](const Graph& gr) {
        std::vector<std::string> names;
        for (const graph::Node& n : gr.nodes) names.push_back(n.op->name);
        return names;
      })
      .def_prop_ro("mutates", &Graph::mutates)
      .def("describe", &graph_description)
      .def_prop_ro("constants", [](const Graph& gr) {
        std::vector<Tensor> ts;
        for (const auto& c : gr.constants) ts.push_back(c.second);
        return ts;
      });
  nb::class_<Capture>(g, "Capture")
      .def(nb::init<>())
      .def("add_input", &Capture::add_input)
      .def("finish", &Capture::finish)
      .def("close", &Capture::close)
      .def_prop_ro("data_dependent", &Capture::data_dependent);
  g.def("note_host_read", &graph::note_host_read);
  g.def("is_capturing", &graph::is_capturing);
}

}  // namespace kiln::py
