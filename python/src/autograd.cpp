// Autograd on kiln.Tensor (requires_grad, grad, grad_fn, is_leaf, backward, detach, hooks,
// retain_grad), graph nodes (grad_fn objects with name()), and the module-level pieces that
// kiln/autograd.py builds on: grad mode, inference mode, backward and grad.
#include <nanobind/stl/shared_ptr.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "bind.h"
#include "kiln/autograd/node.h"

namespace kiln::py {

namespace {

using Self = nb::handle_t<Tensor>;


// A Python callable owned from C++: released with the GIL held, from any thread.
struct PyCallable {
  PyObject* fn;
  explicit PyCallable(nb::handle h) : fn(h.inc_ref().ptr()) {}
  ~PyCallable() { release_python_object(fn); }
};

// A Python hook held by a tensor or node. remove() drops the callable at once (its closure
// may hold large tensors); the emptied slot stays in the hook list. The mutex: backward may
// run the hook on a thread without the GIL while another thread removes it.
struct RegisteredHook {
  explicit RegisteredHook(nb::handle fn) : fn_(std::make_shared<PyCallable>(fn)) {}
  std::shared_ptr<PyCallable> callable() {
    std::lock_guard lock(mutex_);
    return fn_;
  }
  void remove() {
    std::shared_ptr<PyCallable> dropped;
    {
      std::lock_guard lock(mutex_);
      dropped = std::move(fn_);
    }  // released here, outside the lock (it takes the GIL)
  }

 private:
  std::mutex mutex_;
  std::shared_ptr<PyCallable> fn_;
};

// What register_hook returns.
struct HookHandle {
  std::shared_ptr<RegisteredHook> hook;
  void remove() { hook->remove(); }
};

std::function<Tensor(const Tensor&)> make_hook(std::shared_ptr<RegisteredHook> hook) {
  return [hook](const Tensor& grad) -> Tensor {
    auto fn = hook->callable();
    if (!fn) return Tensor();
    nb::gil_scoped_acquire gil;
    nb::object r = nb::handle(fn->fn)(grad);
    if (r.is_none()) return Tensor();
    return nb::cast<Tensor>(r);
  };
}

// Gradients as node hooks see them: a tuple with None where no gradient flowed.
nb::tuple grads_tuple(const std::vector<Tensor>& grads) {
  nb::list l;
  for (const Tensor& g : grads) l.append(g.defined() ? nb::cast(g) : nb::none());
  return nb::tuple(l);
}

// A node hook's result: None keeps the gradients, else a sequence of the same length.
void replace_grads(nb::handle result, std::vector<Tensor>& grads, PyObject* hook) {
  if (result.is_none()) return;
  if (!nb::isinstance<nb::tuple>(result) && !nb::isinstance<nb::list>(result))
    throw nb::type_error(("expected a tuple of gradients (or None) from hook '" +
                          nb::cast<std::string>(nb::str(nb::getattr(
                              nb::handle(hook), "__name__", nb::str("?")))) +
                          "', got " + std::string(nb::type_name(result.type()).c_str()))
                             .c_str());
  size_t n = nb::len(result);
  if (n != grads.size()) {
    std::string name = nb::cast<std::string>(nb::str(nb::getattr(nb::handle(hook), "__name__",
                                                                 nb::str("?"))));
    KILN_THROW(Error, "hook '", name, "' has returned an incorrect number of values (got ", n,
               ", but expected ", grads.size(), ")");
  }
  size_t i = 0;
  for (nb::handle g : result) {
    grads[i++] = g.is_none() ? Tensor() : nb::cast<Tensor>(g);
  }
}

std::vector<Tensor> tensor_list(nb::handle h) {
  std::vector<Tensor> r;
  if (!h.is_valid() || h.is_none()) return r;
  if (nb::isinstance<Tensor>(h)) return {nb::cast<Tensor>(h)};
  for (nb::handle x : h) r.push_back(x.is_none() ? Tensor() : nb::cast<Tensor>(x));
  return r;
}

struct InferenceModeCtx {
  bool enabled;
  std::unique_ptr<autograd::InferenceMode> guard;
};

}  // namespace

void bind_autograd(nb::module_& m, nb::class_<Tensor>& cls) {
  nb::class_<Node>(m, "Node")
      .def("name", &Node::name)
      .def_prop_ro("next_functions", [](const Node& n) {
        nb::list l;
        for (const Edge& e : n.next_edges)
          l.append(nb::make_tuple(e.node ? nb::cast(e.node) : nb::none(), e.input_nr));
        return nb::tuple(l);
      })
      // AccumulateGrad's leaf (torch's .variable): graph walks (utils.checkpoint) find the
      // leaves a computation reached.
      .def_prop_ro("variable", [](const Node& n) -> Tensor {
        auto* acc = dynamic_cast<const AccumulateGrad*>(&n);
        if (!acc) throw nb::attribute_error("only AccumulateGrad nodes have a variable");
        return acc->leaf();
      })
      // Each access wraps the node in a new Python object: equality and hashing go by node.
      .def("__eq__", [](const Node& a, nb::handle b) {
        return nb::isinstance<Node>(b) && &a == &nb::cast<const Node&>(b);
      })
      .def("__hash__", [](const Node& n) { return std::hash<const void*>()(&n); })
      .def("__repr__", [](const Node& n) { return "<" + n.name() + ">"; })
      .def("register_prehook", [](Node& n, nb::callable fn) {
        auto hook = std::make_shared<RegisteredHook>(fn);
        n.node_pre_hooks.push_back([hook](std::vector<Tensor>& grad_outputs) {
          auto f = hook->callable();
          if (!f) return;
          nb::gil_scoped_acquire gil;
          nb::object r = nb::handle(f->fn)(grads_tuple(grad_outputs));
          replace_grads(r, grad_outputs, f->fn);
        });
        return HookHandle{hook};
      }, nb::arg("fn"))
      .def("register_hook", [](Node& n, nb::callable fn) {
        auto hook = std::make_shared<RegisteredHook>(fn);
        n.node_post_hooks.push_back([hook](std::vector<Tensor>& grad_inputs,
                                           const std::vector<Tensor>& grad_outputs) {
          auto f = hook->callable();
          if (!f) return;
          nb::gil_scoped_acquire gil;
          nb::object r = nb::handle(f->fn)(grads_tuple(grad_inputs), grads_tuple(grad_outputs));
          replace_grads(r, grad_inputs, f->fn);
        });
        return HookHandle{hook};
      }, nb::arg("fn"))
      // A dict per node, kept by the node (torch's Node.metadata).
      .def_prop_ro("metadata", [](Node& n) {
        if (!n.binding_metadata) n.binding_metadata = std::make_shared<PyCallable>(nb::dict());
        return nb::borrow<nb::dict>(static_cast<PyCallable*>(n.binding_metadata.get())->fn);
      });

  nb::class_<HookHandle>(m, "RemovableHandle").def("remove", &HookHandle::remove);

  cls.def_prop_rw("requires_grad", [](const Tensor& t) { return autograd::requires_grad(t); },
                  [](Tensor& t, bool v) { autograd::set_requires_grad(t, v); });
  cls.def("requires_grad_", [](Self s, bool v) {
    autograd::set_requires_grad(*nb::inst_ptr<Tensor>(s), v);
    return nb::borrow(s);
  }, nb::arg("requires_grad") = true);
  // One Python object per gradient while its owner lives (grad_object.cpp).
  cls.def_prop_rw("grad", [](Self s) { return grad_object(s); },
                  [](Self s, nb::handle g) { set_grad_object(s, g); },
                  nb::for_setter(nb::arg("value").none()));
  cls.def_prop_ro("grad_fn", [](const Tensor& t) { return autograd::grad_fn(t); });
  cls.def_prop_ro("is_leaf", [](const Tensor& t) { return autograd::is_leaf(t); });
  cls.def_prop_ro("retains_grad", [](const Tensor& t) {
    auto& meta = t.impl()->autograd_meta;
    return meta && meta->retains_grad;
  });
  cls.def("retain_grad", [](Tensor& t) { autograd::retain_grad(t); });
  cls.def("detach", [](const Tensor& t) { return autograd::detach(t); });
  cls.def("detach_", [](Self s) {
    autograd::detach_(*nb::inst_ptr<Tensor>(s));
    return nb::borrow(s);
  });
  cls.def_prop_ro("data", [](const Tensor& t) { return autograd::detach(t); });
  cls.def("register_hook", [](Tensor& t, nb::callable fn) {
    auto hook = std::make_shared<RegisteredHook>(fn);
    autograd::register_hook(t, make_hook(hook));
    return HookHandle{hook};
  }, nb::arg("hook"));
  cls.def("register_post_accumulate_grad_hook", [](Tensor& t, nb::callable fn) {
    auto hook = std::make_shared<RegisteredHook>(fn);
    autograd::register_post_accumulate_grad_hook(t, [hook](const Tensor& leaf) {
      auto f = hook->callable();
      if (!f) return;
      nb::gil_scoped_acquire gil;
      nb::handle(f->fn)(leaf);
    });
    return HookHandle{hook};
  }, nb::arg("hook"));
  cls.def("backward", [](const Tensor& t, std::optional<Tensor> gradient,
                         std::optional<bool> retain_graph, bool create_graph, nb::handle inputs) {
    if (!inputs.is_none()) {  // kiln.autograd.backward implements inputs= (through grad)
      nb::module_::import_("kiln.autograd").attr("backward")(
          t, gradient ? nb::cast(*gradient) : nb::none(),
          retain_graph ? nb::cast(*retain_graph) : nb::none(), create_graph, inputs);
      return;
    }
    bool retain = retain_graph.value_or(create_graph);
    std::vector<Tensor> g;
    if (gradient) g.push_back(*gradient);
    nogil([&] { autograd::backward({t}, g, retain, create_graph); });
  }, nb::arg("gradient") = nb::none(), nb::arg("retain_graph") = nb::none(),
     nb::arg("create_graph") = false, nb::arg("inputs") = nb::none());

  // Module-level pieces for kiln/autograd.py.
  m.def("is_grad_enabled", &autograd::is_grad_enabled);
  m.def("_set_grad_enabled", &autograd::set_grad_enabled, nb::arg("mode"));
  m.def("is_inference_mode_enabled", &autograd::is_inference_mode_enabled);
  m.def("is_anomaly_enabled", &autograd::is_anomaly_enabled);
  m.def("is_anomaly_check_nan_enabled", &autograd::is_anomaly_check_nan_enabled);
  m.def("set_anomaly_enabled", &autograd::set_anomaly_enabled, nb::arg("enabled"),
        nb::arg("check_nan") = true);
  nb::class_<InferenceModeCtx>(m, "_InferenceMode")
      .def("__init__", [](InferenceModeCtx* c, bool mode) { new (c) InferenceModeCtx{mode, nullptr}; },
           nb::arg("mode") = true)
      .def("__enter__", [](InferenceModeCtx& c) {
        c.guard = std::make_unique<autograd::InferenceMode>(c.enabled);
      })
      .def("__exit__", [](InferenceModeCtx& c, nb::args) { c.guard.reset(); });
  m.def("_backward", [](nb::handle tensors, nb::handle grad_tensors, bool retain_graph,
                        bool create_graph) {
    std::vector<Tensor> ts = tensor_list(tensors), gs = tensor_list(grad_tensors);
    nogil([&] { autograd::backward(ts, gs, retain_graph, create_graph); });
  }, nb::arg("tensors"), nb::arg("grad_tensors").none(), nb::arg("retain_graph"),
     nb::arg("create_graph"));
  // inputs: tensors, or GradientEdge pairs (node, output_nr) from _gradient_edge.
  m.def("_grad", [](nb::handle outputs, nb::handle inputs, nb::handle grad_outputs,
                    std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
    std::vector<Tensor> os = tensor_list(outputs), gs = tensor_list(grad_outputs);
    bool by_edge = false;
    if (!nb::isinstance<Tensor>(inputs))
      for (nb::handle x : inputs) by_edge = by_edge || nb::isinstance<nb::tuple>(x);
    std::vector<Tensor> r;
    if (by_edge) {
      std::vector<Edge> edges;
      for (nb::handle x : inputs) {
        if (nb::isinstance<Tensor>(x)) {
          const Tensor& t = nb::cast<const Tensor&>(x);
          KILN_CHECK(autograd::requires_grad(t), Error,
                     "One of the differentiated Tensors does not require grad");
          edges.push_back(gradient_edge(t));
          continue;
        }
        nb::tuple pair = nb::cast<nb::tuple>(x);
        if (pair.size() != 2 || pair[0].is_none())
          throw nb::value_error("grad: a GradientEdge needs a node and an output number");
        edges.push_back({nb::cast<std::shared_ptr<Node>>(pair[0]), nb::cast<uint32_t>(pair[1])});
      }
      r = nogil([&] {
        return autograd::grad_at_edges(os, edges, gs, retain_graph, create_graph, allow_unused);
      });
    } else {
      std::vector<Tensor> is = tensor_list(inputs);
      r = nogil([&] {
        return autograd::grad(os, is, gs, retain_graph, create_graph, allow_unused);
      });
    }
    nb::list l;
    for (const Tensor& t : r) l.append(t.defined() ? nb::cast(t) : nb::none());
    return nb::tuple(l);
  }, nb::arg("outputs"), nb::arg("inputs"), nb::arg("grad_outputs").none(),
     nb::arg("retain_graph").none(), nb::arg("create_graph"), nb::arg("allow_unused"));
  // torch.autograd.graph.get_gradient_edge: (node, output_nr) through which t's gradient flows.
  m.def("_gradient_edge", [](const Tensor& t) {
    KILN_CHECK(autograd::requires_grad(t), Error,
               "It is not possible to get the gradient edge for a Tensor that does not require "
               "gradients");
    Edge e = gradient_edge(t);
    return nb::make_tuple(e.node, e.input_nr);
  }, nb::arg("tensor"));
  // backward(inputs=): leaves among inputs accumulate (with their hooks); returns the
  // gradient reaching each input.
  m.def("_backward_to", [](nb::handle tensors, nb::handle grad_tensors, nb::handle inputs,
                           bool retain_graph, bool create_graph) {
    std::vector<Tensor> ts = tensor_list(tensors), gs = tensor_list(grad_tensors),
                        is = tensor_list(inputs);
    std::vector<Tensor> r = nogil([&] {
      return autograd::backward_to(ts, gs, is, retain_graph, create_graph);
    });
    nb::list l;
    for (const Tensor& t : r) l.append(t.defined() ? nb::cast(t) : nb::none());
    return nb::tuple(l);
  }, nb::arg("tensors"), nb::arg("grad_tensors").none(), nb::arg("inputs"),
     nb::arg("retain_graph"), nb::arg("create_graph"));
  m.def("_current_backward_pass_id", &autograd::current_backward_pass_id);
  m.def("_queue_callback", [](nb::callable fn) {
    auto callable = std::make_shared<PyCallable>(fn);
    autograd::queue_backward_callback([callable] {
      nb::gil_scoped_acquire gil;
      nb::handle(callable->fn)();
    });
  }, nb::arg("callback"));
  m.def("_increment_version", [](const Tensor& t) { t.impl()->bump_version(); }, nb::arg("tensor"));
}

}  // namespace kiln::py
