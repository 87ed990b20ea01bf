// torch.autograd.graph.saved_tensors_hooks over kiln/autograd/saved_tensor_hooks.h: a pair
// of Python callables; pack's result (any Python object) is what the graph keeps.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bind.h"
#include "kiln/autograd/saved_tensor_hooks.h"

namespace kiln::py {

namespace {

// A Python object owned from C++, released with the GIL from whichever thread drops it
// (backward runs without the GIL and frees saved tensors there).
struct PyRef {
  PyObject* obj;
  explicit PyRef(nb::handle h) : obj(h.inc_ref().ptr()) {}
  ~PyRef() { release_python_object(obj); }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
};

class PyPackedTensor : public autograd::PackedTensor {
 public:
  PyPackedTensor(std::shared_ptr<PyRef> unpack, nb::handle packed)
      : unpack_(std::move(unpack)), packed_(packed) {}
  Tensor unpack() override {
    nb::gil_scoped_acquire gil;
    nb::object r = nb::handle(unpack_->obj)(nb::handle(packed_.obj));
    if (!nb::isinstance<Tensor>(r))
      throw nb::type_error(("Output of saved tensor unpack_hook expected to be a Tensor but got "
                            "result of type " + std::string(nb::type_name(r.type()).c_str())).c_str());
    return nb::cast<Tensor>(r);
  }

 private:
  std::shared_ptr<PyRef> unpack_;
  PyRef packed_;
};

class PySavedTensorHooks : public autograd::SavedTensorHooks {
 public:
  PySavedTensorHooks(nb::handle pack, nb::handle unpack)
      : pack_(std::make_shared<PyRef>(pack)), unpack_(std::make_shared<PyRef>(unpack)) {}
  std::shared_ptr<autograd::PackedTensor> pack(const Tensor& t) override {
    nb::gil_scoped_acquire gil;
    nb::object packed = nb::handle(pack_->obj)(t);
    return std::make_shared<PyPackedTensor>(unpack_, packed);
  }
  nb::tuple pair() const { return nb::make_tuple(nb::handle(pack_->obj), nb::handle(unpack_->obj)); }

 private:
  std::shared_ptr<PyRef> pack_, unpack_;
};

}  // namespace

void bind_saved_tensor_hooks(nb::module_& m) {
  m.def("_push_saved_tensors_hooks", [](nb::handle pack, nb::handle unpack) {
    if (!PyCallable_Check(pack.ptr()) || !PyCallable_Check(unpack.ptr()))
      throw nb::type_error("saved_tensors_hooks: pack_hook and unpack_hook must be callable");
    autograd::push_saved_tensor_hooks(std::make_shared<PySavedTensorHooks>(pack, unpack));
  }, nb::arg("pack_hook"), nb::arg("unpack_hook"));
  m.def("_pop_saved_tensors_hooks", &autograd::pop_saved_tensor_hooks);
  // The innermost (pack, unpack) pair of this thread, or None: custom Functions' ctx saves
  // through it in Python.
  m.def("_current_saved_tensors_hooks", []() -> nb::object {
    auto hooks = autograd::current_saved_tensor_hooks();
    if (!hooks) return nb::none();
    if (auto* py = dynamic_cast<PySavedTensorHooks*>(hooks.get())) return py->pair();
    return nb::none();  // C++ hooks: not visible as Python callables
  });
  m.def("_set_saved_tensors_hooks_disabled", &autograd::set_saved_tensor_hooks_disabled,
        nb::arg("message").none());
}

}  // namespace kiln::py
