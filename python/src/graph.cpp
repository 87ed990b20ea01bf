// kiln._C._graph: graph capture, passes and replay (kiln/graph/), for kiln.compile
// (python/kiln/_compile.py keeps the guards and the Python-side structure of arguments).
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind.h"
#include "kiln/graph/capture.h"
#include "kiln/graph/passes.h"

namespace kiln::py {

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
