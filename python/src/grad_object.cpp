// The Python object behind each tensor's `.grad`: the one handed out last (or assigned), kept
// while the owning tensor's Python object lives and its gradient is still the same tensor.
//
// kiln's bindings wrap a new Python object around every tensor a C++ call returns, so
// `p.grad is p.grad` was False and an attribute set on `p.grad` was gone at the next read.
// torch keeps one Python object per TensorImpl. Doing that for every tensor would cost a table
// lookup on every op's result and a hook on every tensor's destruction; code relies on the
// identity of gradients (optimizers and hooks tag `p.grad`, tests compare `p.grad is g` after
// `p.grad = g`), so only `.grad` keeps its object. The table is keyed by the owner's
// PyObject, and a weak reference to the owner removes the entry when it dies (the owner's
// `__dict__` is not used: it travels through pickle and deepcopy).
#include <unordered_map>

#include "bind.h"

namespace kiln::py {

namespace {

struct Entry {
  PyObject* owner_ref = nullptr;  // weak reference to the owner (its callback erases the entry)
  PyObject* grad = nullptr;       // strong reference; nullptr while the owner has no gradient
};

// Leaked on purpose: entries hold Python references that must not be dropped after the
// interpreter is gone. Touched only with the GIL held.
std::unordered_map<PyObject*, Entry>& entries() {
  static auto* table = new std::unordered_map<PyObject*, Entry>();
  return *table;
}

void drop_grad(Entry& e) {
  PyObject* g = e.grad;
  e.grad = nullptr;
  Py_XDECREF(g);  // last: its destruction may run arbitrary code
}

// Called by the owner's weak reference when the owner dies.
void forget_owner(PyObject* owner) {
  auto it = entries().find(owner);
  if (it == entries().end()) return;
  Entry e = it->second;
  entries().erase(it);
  Py_XDECREF(e.owner_ref);
  Py_XDECREF(e.grad);
}

// Keeps `grad` as owner's gradient object (creating the entry and its weak reference on the
// owner's first gradient). An owner that takes no weak reference is left out: its `.grad` is
// then a fresh object per read, as before.
void remember(nb::handle owner, nb::handle grad) {
  auto it = entries().find(owner.ptr());
  if (it == entries().end()) {
    PyObject* key = owner.ptr();
    nb::object callback = nb::cpp_function([key](nb::handle) { forget_owner(key); });
    PyObject* ref = PyWeakref_NewRef(owner.ptr(), callback.ptr());
    if (!ref) {
      PyErr_Clear();
      return;
    }
    it = entries().emplace(key, Entry{ref, nullptr}).first;
  }
  PyObject* old = it->second.grad;
  it->second.grad = grad.inc_ref().ptr();
  Py_XDECREF(old);
}

}  // namespace

nb::object grad_object(nb::handle owner) {
  const Tensor& t = *nb::inst_ptr<Tensor>(owner);
  Tensor g = autograd::grad(t);
  auto it = entries().find(owner.ptr());
  if (!g.defined()) {
    if (it != entries().end()) drop_grad(it->second);
    return nb::none();
  }
  if (it != entries().end() && it->second.grad &&
      nb::inst_ptr<Tensor>(it->second.grad)->impl() == g.impl())
    return nb::borrow(it->second.grad);
  nb::object obj = nb::cast(std::move(g));
  remember(owner, obj);
  return obj;
}

void set_grad_object(nb::handle owner, nb::handle value) {
  Tensor& t = *nb::inst_ptr<Tensor>(owner);
  if (value.is_none()) {
    autograd::set_grad(t, Tensor());
    auto it = entries().find(owner.ptr());
    if (it != entries().end()) drop_grad(it->second);
    return;
  }
  if (!nb::isinstance<Tensor>(value))
    throw nb::type_error(("assigned grad expected to be a Tensor or None but got grad of type " +
                          std::string(nb::type_name(value.type()).c_str()))
                             .c_str());
  const Tensor& g = *nb::inst_ptr<Tensor>(value);
  autograd::set_grad(t, g);
  // set_grad checks and stores the tensor itself; should it ever store another, the next read
  // wraps that one instead.
  if (autograd::grad(t).impl() == g.impl()) remember(owner, value);
}

}  // namespace kiln::py
