// Custom autograd functions (kiln.autograd.Function): a graph Node whose backward is a Python
// method. Function.apply runs forward without recording, then _C._function_node links the
// outputs to a PyFunctionNode holding the ctx object; the engine calls ctx._do_backward with
// the output gradients (taking the GIL) and ctx._release when the graph is freed.
#include <nanobind/stl/shared_ptr.h>

#include "bind.h"
#include "kiln/autograd/node.h"

namespace kiln::py {

namespace {

class PyFunctionNode : public Node {
 public:
  PyFunctionNode(nb::handle ctx, std::string name, uint32_t num_outputs)
      : ctx_(ctx.inc_ref().ptr()), name_(std::move(name)), num_outputs_(num_outputs) {}
  ~PyFunctionNode() override { release_python_object(ctx_); }
  std::string name() const override { return name_; }
  uint32_t num_outputs() const override { return num_outputs_; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    nb::gil_scoped_acquire gil;
    nb::list gl;
    for (uint32_t i = 0; i < num_outputs_; ++i)
      gl.append(i < grads.size() && grads[i].defined() ? nb::cast(grads[i]) : nb::none());
    nb::object r = nb::handle(ctx_).attr("_do_backward")(nb::tuple(gl));
    std::vector<Tensor> out;
    for (nb::handle g : r) out.push_back(g.is_none() ? Tensor() : nb::cast<Tensor>(g));
    out.resize(next_edges.size());
    return out;
  }

  void release_saved() override {
    nb::gil_scoped_acquire gil;
    nb::handle(ctx_).attr("_release")();
  }

 private:
  PyObject* ctx_;
  std::string name_;
  uint32_t num_outputs_;
};

}  // namespace

void bind_autograd_function(nb::module_& m) {
  // inputs: the tensor arguments of forward (None for non-tensors); outputs: the tensors it
  // returned; differentiable[i]: whether output i gets the node as grad_fn. Returns aliases of
  // the outputs (same storage) carrying the graph link.
  m.def("_function_node", [](nb::handle ctx, const std::string& name, nb::handle inputs,
                             const std::vector<Tensor>& outputs,
                             const std::vector<bool>& differentiable) {
    auto node = std::make_shared<PyFunctionNode>(ctx, name, uint32_t(outputs.size()));
    for (nb::handle h : inputs)
      node->next_edges.push_back(h.is_none() ? Edge{} : gradient_edge(nb::cast<Tensor>(h)));
    nb::list result;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Tensor o = autograd::detach(outputs[i]);
      if (differentiable[i] && (is_floating(o.dtype()) || is_complex(o.dtype()))) {
        auto meta = std::make_shared<AutogradMeta>();
        meta->requires_grad = true;
        meta->grad_fn = node;
        meta->output_nr = uint32_t(i);
        o.impl()->autograd_meta = std::move(meta);
      }
      result.append(nb::cast(o));
    }
    return result;
  }, nb::arg("ctx"), nb::arg("name"), nb::arg("inputs"), nb::arg("outputs"),
     nb::arg("differentiable"));

  // Tensor.data = new: the Python object now wraps `data` (detached), keeping requires_grad
  // (Module.to / .double() convert parameters without replacing the Parameter objects).
  m.def("_set_data", [](nb::handle_t<Tensor> self, const Tensor& data) {
    Tensor& t = *nb::inst_ptr<Tensor>(self);
    bool rg = autograd::requires_grad(t);
    KILN_CHECK(autograd::is_leaf(t) || !rg, Error,
               "set_data: only leaf tensors can have their data replaced");
    t = autograd::detach(data);
    if (rg) autograd::set_requires_grad(t, true);
  }, nb::arg("self"), nb::arg("data"));
}

}  // namespace kiln::py
