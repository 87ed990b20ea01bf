// kiln._C: the extension module behind the `kiln` Python package. Each topic registers
// itself from its own file; this file only creates the module and the Tensor class.
#include <cstdlib>

#include "bind.h"

NB_MODULE(_C, m) {
  using namespace kiln::py;
  m.doc() = "kiln C++ runtime bindings";
  // A hook that closes over module globals makes a cycle through C++ (tensor -> hook ->
  // globals -> tensor) that Python's GC cannot see, so objects left at exit are reported as
  // leaks. KILN_LEAK_WARNINGS=1 turns nanobind's report on (to debug reference counts).
  const char* leaks = std::getenv("KILN_LEAK_WARNINGS");
  nb::set_leak_warnings(leaks != nullptr && leaks[0] == '1');
  kiln::ensure_ops_registered();
  kiln::ensure_builtin_backends();
  bind_errors(m);
  bind_runtime(m);
  // Attributes and weak references on tensors, as torch's (libraries tag tensors and keep
  // weak-keyed tables of them).
  nb::class_<kiln::Tensor> cls(m, "Tensor", nb::type_slots(tensor_type_slots()),
                               nb::dynamic_attr(), nb::is_weak_referenceable());
  bind_tensor(m, cls);
  bind_interop(m, cls);
  bind_complex(m, cls);
  bind_dlpack(m, cls);
  bind_indexing(m, cls);
  bind_operators(m, cls);
  bind_elementwise(m, cls);
  bind_reduction(m, cls);
  bind_linalg_views(m, cls);
  bind_shape_ops(m, cls);
  bind_out_forms(m);  // after every plain form it adds an out= overload to
  bind_factories(m);
  bind_random_methods(cls);
  bind_autograd(m, cls);
  bind_coverage(m);
  bind_nn_functional(m);
  bind_autograd_function(m);
  bind_saved_tensor_hooks(m);
  bind_shared_memory(m, cls);
  bind_io(m);
  bind_onnx(m);
  bind_linalg_decompositions(m);
  bind_graph(m);
  bind_gguf(m);
}
