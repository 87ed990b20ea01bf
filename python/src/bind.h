#pragma once
// Shared pieces of the kiln._C bindings: type casters for DType, Scalar and Device, argument
// helpers (shapes, dims, index lists from Python objects), and `nogil`, which runs a C++ call
// with the GIL released. Conversions from Python objects happen before nogil is entered.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <utility>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/kiln.h"

namespace nb = nanobind;

namespace kiln::py {

// Runs f() without the GIL (kiln ops never touch Python objects).
template <typename F>
auto nogil(F&& f) -> decltype(f()) {
  nb::gil_scoped_release release;
  return f();
}

// Drops a reference owned by C++ (a hook, a numpy array behind a tensor) from any thread.
// While the interpreter shuts down, only a thread that holds the GIL may do so; otherwise
// (or once it is gone) the reference is leaked on purpose.
void release_python_object(PyObject* o);

// The Python type `kiln.dtype` wraps one DType; its ten instances are created once.
struct PyDType {
  DType value;
};
PyObject* dtype_object(DType t);      // borrowed reference to the singleton
PyTypeObject* dtype_type();           // the kiln.dtype type object

// Shapes: a tuple/list/Size of ints, or the ints themselves as varargs (x.view(2, 3)).
Shape shape_from_handle(nb::handle h, const char* what);
Shape shape_from_args(const nb::args& args, const char* what);
// dims: None (all dims), an int, or a sequence of ints.
std::vector<int64_t> dims_from_handle(nb::handle h);
// A keyword value that must be a kiln.dtype / device (str or kiln.device); TypeError naming
// the argument otherwise.
DType dtype_arg(nb::handle h, const char* name = "dtype");
Device device_arg(nb::handle h, const char* name = "device");
// A memory_format= argument: None (the default) or a kiln.memory_format value.
std::optional<MemoryFormat> memory_format_arg(nb::handle h);
// A layout= argument: None or kiln.strided (kiln tensors are dense); anything else is an error.
void check_layout_arg(nb::handle layout);
// Python number -> Scalar (bool, int, float and objects with __index__ / __float__).
bool scalar_from_handle(nb::handle h, Scalar& out, bool convert);
nb::object scalar_to_python(const Scalar& s);
// A kiln.Size (tuple subclass) of the values.
nb::object make_size(const Shape& shape);
// numpy.ndarray (imported on first use).
nb::handle numpy_ndarray_type();
// A named tuple of kiln.return_types (values/indices results of max, sort, topk, ...).
nb::object make_return(const char* name, const Tensor& a, const Tensor& b);

// A 0-d tensor from a Python number that takes part in promotion as a scalar (reflected ops).
Tensor wrapped_scalar(const Scalar& s, Device device);
// Tensor or Python number -> Tensor (numbers become wrapped scalars on `device`).
Tensor as_tensor_arg(nb::handle h, Device device);

// kiln.tensor(data, dtype=None, device=None): nested sequences, numbers, numpy arrays.
Tensor tensor_from_data(nb::handle data, std::optional<DType> dtype, std::optional<Device> device);

// t.grad's Python object (grad_object.cpp): the same object on every read while the gradient
// is the same tensor and the owner's object lives; the setter keeps the assigned object.
nb::object grad_object(nb::handle owner);
void set_grad_object(nb::handle owner, nb::handle value);

// Registration of each topic (one file each).
void bind_errors(nb::module_& m);
void bind_runtime(nb::module_& m);
void bind_tensor(nb::module_& m, nb::class_<Tensor>& cls);
void bind_interop(nb::module_& m, nb::class_<Tensor>& cls);
void bind_complex(nb::module_& m, nb::class_<Tensor>& cls);  // complex.cpp
void bind_indexing(nb::module_& m, nb::class_<Tensor>& cls);
void bind_operators(nb::module_& m, nb::class_<Tensor>& cls);
void bind_elementwise(nb::module_& m, nb::class_<Tensor>& cls);
void bind_out_forms(nb::module_& m);  // after the plain forms: out= overloads come last
void bind_reduction(nb::module_& m, nb::class_<Tensor>& cls);
void bind_linalg_views(nb::module_& m, nb::class_<Tensor>& cls);
void bind_shape_ops(nb::module_& m, nb::class_<Tensor>& cls);
void bind_factories(nb::module_& m);
void bind_random_methods(nb::class_<Tensor>& cls);
void bind_autograd(nb::module_& m, nb::class_<Tensor>& cls);
void bind_coverage(nb::module_& m);
void bind_nn_functional(nb::module_& m);
void bind_nn_conv(nb::module_& nn);  // into kiln._C._nn
void bind_nn_activation(nb::module_& nn);  // into kiln._C._nn
void bind_nn_recurrent(nb::module_& nn);   // into kiln._C._nn
void bind_dlpack(nb::module_& m, nb::class_<Tensor>& cls);
// Py_bf_getbuffer/releasebuffer for kiln.Tensor (the buffer protocol; dlpack.cpp).
PyType_Slot* tensor_type_slots();
void bind_autograd_function(nb::module_& m);
void bind_saved_tensor_hooks(nb::module_& m);
void bind_shared_memory(nb::module_& m, nb::class_<Tensor>& cls);
void bind_io(nb::module_& m);
void bind_onnx(nb::module_& m);  // kiln._C._onnx
void bind_linalg_decompositions(nb::module_& m);  // kiln._C._linalg
void bind_graph(nb::module_& m);  // kiln._C._graph
void bind_gguf(nb::module_& m);   // kiln._C._gguf

// A tensor handed to another library without a copy (a NumPy array, a DLPack capsule, a
// buffer view): while this lives its storage counts as foreign (StorageImpl::begin_export), so
// no packed copy of it is cached or served, and copies cached before the export are never
// served again (the export epoch moved): the other side may write the memory.
class ExportedTensor {
 public:
  explicit ExportedTensor(Tensor t) : tensor_(std::move(t)) {
    if (tensor_.defined()) tensor_.impl()->storage()->begin_export();
  }
  ~ExportedTensor() {
    if (tensor_.defined()) tensor_.impl()->storage()->end_export();
  }
  ExportedTensor(const ExportedTensor&) = delete;
  ExportedTensor& operator=(const ExportedTensor&) = delete;
  const Tensor& tensor() const { return tensor_; }

 private:
  Tensor tensor_;
};

}  // namespace kiln::py

// Type casters: kiln.dtype <-> DType; Python numbers <-> Scalar.
namespace nanobind::detail {

template <>
struct type_caster<kiln::DType> {
  NB_TYPE_CASTER(kiln::DType, const_name("kiln.dtype"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    if (!PyObject_TypeCheck(src.ptr(), kiln::py::dtype_type())) return false;
    value = nb::inst_ptr<kiln::py::PyDType>(src)->value;
    return true;
  }
  static handle from_cpp(kiln::DType t, rv_policy, cleanup_list*) noexcept {
    PyObject* o = kiln::py::dtype_object(t);
    Py_INCREF(o);
    return o;
  }
};

template <>
struct type_caster<kiln::Scalar> {
  NB_TYPE_CASTER(kiln::Scalar, const_name("Union[bool, int, float]"))
  bool from_python(handle src, uint8_t flags, cleanup_list*) noexcept {
    return kiln::py::scalar_from_handle(src, value, flags & (uint8_t)cast_flags::convert);
  }
  static handle from_cpp(const kiln::Scalar& s, rv_policy, cleanup_list*) noexcept {
    return kiln::py::scalar_to_python(s).release();
  }
};

}  // namespace nanobind::detail
