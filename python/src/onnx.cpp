// kiln._C._onnx: ONNX models (kiln::onnx) from Python, behind `kiln.onnx.load(path)`. Built
// when the library has the importer (KILN_WITH_ONNX); otherwise load() raises
// NotImplementedError so `import kiln.onnx` still works.
#include <nanobind/stl/map.h>

#include "bind.h"

#ifdef KILN_PY_WITH_ONNX
#include "kiln/onnx/onnx.h"
#endif
#include "kiln/runtime/threads.h"

namespace kiln::py {

#ifdef KILN_PY_WITH_ONNX

namespace {

nb::list names_of(const std::vector<onnx::ValueInfo>& infos) {
  nb::list out;
  for (const auto& v : infos) out.append(nb::str(v.name.c_str()));
  return out;
}

}  // namespace

void bind_onnx(nb::module_& m) {
  nb::module_ o = m.def_submodule("_onnx", "ONNX import (kiln::onnx)");
  nb::class_<onnx::Model>(o, "Model")
      .def_prop_ro("inputs", [](const onnx::Model& mo) { return names_of(mo.inputs()); },
                   "names of the inputs to feed, in declaration order")
      .def_prop_ro("outputs", [](const onnx::Model& mo) { return names_of(mo.outputs()); })
      .def_prop_ro("opset_version", &onnx::Model::opset_version)
      .def_prop_ro("device", [](const onnx::Model& mo) {
        // As tensors report it: torch prints CPU devices without an index.
        Device d = mo.device();
        return d.is_cpu() ? Device(DeviceType::CPU) : d;
      })
      .def_prop_ro("op_types", &onnx::Model::op_types)
      .def_prop_ro("num_nodes", &onnx::Model::num_nodes)
      .def("to", [](const onnx::Model& mo, nb::handle device) {
        Device d = device_arg(device);
        return nogil([&] { return mo.to(d); });
      }, nb::arg("device"), "the same model with its weights on device")
      .def("run", [](const onnx::Model& mo, const std::map<std::string, Tensor>& feeds) {
        std::map<std::string, Tensor> r = nogil([&] { return mo.run(feeds); });
        nb::dict out;
        for (auto& [k, v] : r) out[nb::str(k.c_str())] = nb::cast(v);
        return out;
      }, nb::arg("inputs"), "runs the graph on a dict name -> Tensor; returns a dict of outputs")
      .def("save_weights", [](const onnx::Model& mo, const std::string& path) {
        nogil([&] { mo.save_weights(path); });
      }, nb::arg("path"))
      .def("__repr__", [](const onnx::Model& mo) {
        return "kiln.onnx.Model(opset " + std::to_string(mo.opset_version()) + ", " +
               std::to_string(mo.num_nodes()) + " nodes, device " + mo.device().str() + ")";
      });
  o.def("load", [](const std::string& path) { return nogil([&] { return onnx::load(path); }); }, nb::arg("path"));
  o.def("supported_operators", &onnx::supported_operators);
  o.attr("available") = true;
  // For benchmarks that compare thread counts (benchmarks/onnx_vs_ort.py) until the runtime
  // bindings expose kiln.set_num_threads.
  o.def("_set_num_threads", [](int n) { kiln::set_num_threads(n); }, nb::arg("threads"));
  o.def("_get_num_threads", [] { return kiln::get_num_threads(); });
}

#else

void bind_onnx(nb::module_& m) {
  nb::module_ o = m.def_submodule("_onnx", "ONNX import (not built)");
  o.def("load", [](const std::string&) -> nb::object {
    throw NotImplementedError("kiln was built without ONNX import (install libonnx-dev and libprotobuf-dev)");
  }, nb::arg("path"));
  o.def("supported_operators", [] { return std::vector<std::string>{}; });
  o.attr("available") = false;
}

#endif

}  // namespace kiln::py
