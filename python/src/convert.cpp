// Conversions between Python objects and kiln values: numbers, shapes, dims, kiln.Size,
// named-tuple results, wrapped scalars, and kiln.tensor(data) from nested sequences.
#include <cmath>
#include <cstring>

#include "bind.h"

namespace kiln::py {

namespace {

int64_t int_from_handle(nb::handle h, const char* what) {
  if (PyBool_Check(h.ptr()) || !PyIndex_Check(h.ptr()))
    KILN_THROW(TypeError, what, " must be a sequence of ints, but got an element of type ",
               Py_TYPE(h.ptr())->tp_name);
  int overflow = 0;
  nb::object idx = nb::steal(PyNumber_Index(h.ptr()));
  if (!idx.is_valid()) throw nb::python_error();
  long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
  KILN_CHECK(!overflow, Error, "Overflow when unpacking long");
  return v;
}

// module.name, looked up once; the reference is kept for the life of the process (a static
// nb::object would be released after the interpreter is gone).
nb::handle cached_attr(const char* module, const char* name, PyObject*& cache) {
  if (!cache) cache = nb::object(nb::module_::import_(module).attr(name)).release().ptr();
  return cache;
}

}  // namespace

Shape shape_from_handle(nb::handle h, const char* what) {
  Shape shape;
  if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(h.ptr());
    shape.reserve(size_t(n));
    PyObject** items = PySequence_Fast_ITEMS(h.ptr());
    for (Py_ssize_t i = 0; i < n; ++i) shape.push_back(int_from_handle(items[i], what));
    return shape;
  }
  if (PyIndex_Check(h.ptr()) && !PyBool_Check(h.ptr())) return {int_from_handle(h, what)};
  if (nb::isinstance<Tensor>(h)) {  // a 1-d integer tensor, as torch accepts
    const Tensor& t = nb::cast<const Tensor&>(h);
    KILN_CHECK(t.dim() <= 1 && !t.is_floating_point(), TypeError, what,
               " must be a sequence of ints, got a tensor of dtype ", dtype_name(t.dtype()));
    return t.reshape({-1}).to_vector<int64_t>();
  }
  KILN_THROW(TypeError, what, " must be a tuple of ints, not ", Py_TYPE(h.ptr())->tp_name);
}

Shape shape_from_args(const nb::args& args, const char* what) {
  if (args.size() == 1) return shape_from_handle(args[0], what);
  Shape shape;
  shape.reserve(args.size());
  for (nb::handle a : args) shape.push_back(int_from_handle(a, what));
  return shape;
}

std::vector<int64_t> dims_from_handle(nb::handle h) {
  if (!h.is_valid() || h.is_none()) return {};
  return shape_from_handle(h, "dim");
}

void check_layout_arg(nb::handle layout) {
  if (layout.is_none()) return;
  std::string name = nb::cast<std::string>(nb::repr(layout));
  KILN_CHECK(name == "kiln.strided" || name == "torch.strided", NotImplementedError,
             "layout: kiln tensors are dense (kiln.strided); got ", name);
}

void release_python_object(PyObject* o) {
  if (!Py_IsInitialized()) return;
#if PY_VERSION_HEX >= 0x030D0000
  bool finalizing = Py_IsFinalizing();
#else
  bool finalizing = _Py_IsFinalizing();
#endif
  if (finalizing && !PyGILState_Check()) return;
  PyGILState_STATE s = PyGILState_Ensure();
  Py_DECREF(o);
  PyGILState_Release(s);
}

// A memory_format= argument: None (the default) or a kiln.memory_format value.
std::optional<MemoryFormat> memory_format_arg(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  KILN_CHECK(nb::isinstance<MemoryFormat>(h), TypeError,
             "memory_format: expected a kiln.memory_format (kiln.contiguous_format, "
             "kiln.channels_last or kiln.preserve_format), got ", Py_TYPE(h.ptr())->tp_name);
  return nb::cast<MemoryFormat>(h);
}

DType dtype_arg(nb::handle h, const char* name) {
  KILN_CHECK(PyObject_TypeCheck(h.ptr(), dtype_type()), TypeError, "argument '", name,
             "' must be kiln.dtype, not ", Py_TYPE(h.ptr())->tp_name);
  return nb::cast<DType>(h);
}

Device device_arg(nb::handle h, const char* name) {
  KILN_CHECK(nb::isinstance<Device>(h) || nb::isinstance<nb::str>(h), TypeError, "argument '",
             name, "' must be kiln.device or str, not ", Py_TYPE(h.ptr())->tp_name);
  return nb::cast<Device>(h);
}

bool scalar_from_handle(nb::handle h, Scalar& out, bool convert) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) {
    out = Scalar(o == Py_True);
    return true;
  }
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) {  // as torch: values beyond int64 become floats only if they fit a double
      double d = PyLong_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      out = Scalar(d);
      return true;
    }
    out = Scalar(int64_t(v));
    return true;
  }
  if (PyFloat_Check(o)) {
    out = Scalar(PyFloat_AS_DOUBLE(o));
    return true;
  }
  if (PyComplex_Check(o)) {  // Python complex and numpy's complex128 (its subclass)
    out = Scalar::complex(PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o));
    return true;
  }
  if (!convert || nb::isinstance<Tensor>(h)) return false;
  // numpy scalars and other numbers: integers through __index__, the rest through __float__.
  nb::handle type = (PyObject*)Py_TYPE(o);
  nb::object np_bool;
  if (nb::hasattr(type, "__module__") &&
      nb::str(type.attr("__module__")).equal(nb::str("numpy"))) {
    if (nb::str(type.attr("__name__")).equal(nb::str("bool")) ||
        nb::str(type.attr("__name__")).equal(nb::str("bool_"))) {
      out = Scalar(bool(PyObject_IsTrue(o)));
      return true;
    }
  }
  if (PyIndex_Check(o)) {
    nb::object i = nb::steal(PyNumber_Index(o));
    if (!i.is_valid()) {
      PyErr_Clear();
      return false;
    }
    return scalar_from_handle(i, out, false);
  }
  if (PyNumber_Check(o) && Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float) {
    double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    out = Scalar(d);
    return true;
  }
  return false;
}

nb::object scalar_to_python(const Scalar& s) {
  if (s.is_bool()) return nb::bool_(s.to_bool());
  if (s.is_integral()) return nb::int_(s.to_int());
  if (s.is_complex()) return nb::steal(PyComplex_FromDoubles(s.real(), s.imag()));
  return nb::float_(s.to_double());
}

nb::object make_size(const Shape& shape) {
  static PyObject* size_cls = nullptr;
  nb::handle cls = cached_attr("kiln._size", "Size", size_cls);
  nb::object tup = nb::steal(PyTuple_New(Py_ssize_t(shape.size())));
  for (size_t i = 0; i < shape.size(); ++i)
    PyTuple_SET_ITEM(tup.ptr(), Py_ssize_t(i), PyLong_FromLongLong(shape[i]));
  return cls(tup);
}

nb::object make_return(const char* name, const Tensor& a, const Tensor& b) {
  static PyObject* mod = nullptr;
  if (!mod) mod = nb::module_::import_("kiln.return_types").release().ptr();
  return nb::handle(mod).attr(name)(a, b);
}

nb::handle numpy_ndarray_type() {
  static PyObject* type = nullptr;
  return cached_attr("numpy", "ndarray", type);
}

Tensor wrapped_scalar(const Scalar& s, Device device) {
  // As PyTorch: a double / int64 / bool 0-d tensor; promotion treats it by category only.
  DType dt = s.is_floating()   ? DType::F64
             : s.is_complex()  ? DType::C128
             : s.is_integral() ? DType::I64
                               : DType::Bool;
  Tensor t = full({}, s, TensorOptions(dt, device));
  t.impl()->is_wrapped_number = true;
  return t;
}

Tensor as_tensor_arg(nb::handle h, Device device) {
  if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
  Scalar s;
  if (scalar_from_handle(h, s, true)) return wrapped_scalar(s, device);
  return tensor_from_data(h, std::nullopt, device);
}

// ---- kiln.tensor(data) ------------------------------------------------------------------

namespace {

struct Collected {
  Shape shape;
  bool shape_known = false;
  enum Kind { Bool = 0, Int = 1, Float = 2, Complex = 3 } kind = Bool;
  std::vector<double> floats;
  std::vector<double> imags;  // imaginary parts, one per leaf (0 for real leaves)
  std::vector<int64_t> ints;  // kept while every value is integral (exact int64)
  std::vector<uint8_t> bools;
  bool saw_leaf = false;
};

bool is_sequence(nb::handle h) {
  return PyList_Check(h.ptr()) || PyTuple_Check(h.ptr());
}

void add_leaf(nb::handle h, Collected& c) {
  PyObject* o = h.ptr();
  c.saw_leaf = true;
  if (nb::isinstance<Tensor>(h)) {
    const Tensor& t = nb::cast<const Tensor&>(h);
    KILN_CHECK(t.numel() == 1, ValueError,
               "only one element tensors can be converted to Python scalars");
    Scalar s = nogil([&] { return t.item(); });
    nb::object py = scalar_to_python(s);
    add_leaf(py, c);
    return;
  }
  Scalar s;
  if (!scalar_from_handle(h, s, true)) {
    KILN_CHECK(!PyUnicode_Check(o), ValueError, "too many dimensions 'str'");
    KILN_THROW(Error, "Could not infer dtype of ", Py_TYPE(o)->tp_name);
  }
  c.imags.push_back(s.imag());
  if (s.is_complex()) {
    c.kind = Collected::Complex;
    c.floats.push_back(s.real());
    c.ints.push_back(0);
    c.bools.push_back(s.to_bool());
  } else if (s.is_bool()) {
    c.bools.push_back(s.to_bool());
    c.ints.push_back(s.to_bool());
    c.floats.push_back(s.to_bool());
  } else if (s.is_integral()) {
    c.kind = std::max(c.kind, Collected::Int);
    c.ints.push_back(s.to_int());
    c.floats.push_back(double(s.to_int()));
    c.bools.push_back(s.to_int() != 0);
  } else {
    c.kind = std::max(c.kind, Collected::Float);
    c.floats.push_back(s.to_double());
    c.ints.push_back(0);
    c.bools.push_back(s.to_double() != 0);
  }
}

void walk(nb::handle h, size_t depth, Collected& c) {
  if (!is_sequence(h)) {
    if (!c.shape_known) {
      c.shape.resize(depth);
      c.shape_known = true;
    }
    KILN_CHECK(depth == c.shape.size(), TypeError, "not a sequence (expected a sequence of "
               "length ", c.shape[depth], " at dim ", depth, ", got ", Py_TYPE(h.ptr())->tp_name,
               ")");
    add_leaf(h, c);
    return;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(h.ptr());
  if (!c.shape_known) {
    if (c.shape.size() <= depth) c.shape.resize(depth + 1);
    c.shape[depth] = n;
    if (n == 0) c.shape_known = true;  // [] or [[], []]: the shape ends here
  } else {
    KILN_CHECK(depth < c.shape.size(), TypeError, "'", Py_TYPE(h.ptr())->tp_name,
               "' object cannot be interpreted as a number (expected a number at dim ", depth, ")");
    KILN_CHECK(c.shape[depth] == n, ValueError, "expected sequence of length ", c.shape[depth],
               " at dim ", depth, " (got ", n, ")");
  }
  PyObject** items = PySequence_Fast_ITEMS(h.ptr());
  for (Py_ssize_t i = 0; i < n; ++i) walk(items[i], depth + 1, c);
}

bool has_array_interface(nb::handle h) {
  // numpy scalars (np.float64 subclasses float) count as arrays: they keep their dtype.
  return !is_sequence(h) && !PyFloat_CheckExact(h.ptr()) && !PyLong_CheckExact(h.ptr()) &&
         !PyBool_Check(h.ptr()) &&
         nb::hasattr(h, "__array_interface__");
}

}  // namespace

Tensor from_numpy_array(nb::handle array);  // interop.cpp

Tensor tensor_from_data(nb::handle data, std::optional<DType> dtype,
                        std::optional<Device> device) {
  KILN_CHECK(!PyUnicode_Check(data.ptr()) && !PyBytes_Check(data.ptr()), TypeError,
             "new(): invalid data type '", Py_TYPE(data.ptr())->tp_name, "'");
  Tensor t;
  if (nb::isinstance<Tensor>(data)) {
    t = autograd::detach(nb::cast<const Tensor&>(data));
    t = nogil([&] { return kiln::clone(t); });
  } else if (has_array_interface(data)) {
    nb::object arr = nb::module_::import_("numpy").attr("asarray")(data);
    Tensor view = from_numpy_array(arr);
    t = nogil([&] { return kiln::clone(view); });
  } else {
    Collected c;
    walk(data, 0, c);
    Shape shape = c.shape;
    DType natural;
    const void* ptr;
    std::vector<double> interleaved;  // complex128 leaves as (re, im) pairs
    if (c.kind == Collected::Complex) {
      natural = DType::C128;
      interleaved.resize(2 * c.floats.size());
      for (size_t k = 0; k < c.floats.size(); ++k) {
        interleaved[2 * k] = c.floats[k];
        interleaved[2 * k + 1] = c.imags[k];
      }
      ptr = interleaved.data();
    } else if (c.kind == Collected::Float) {
      natural = DType::F64;
      ptr = c.floats.data();
    } else if (c.kind == Collected::Int) {
      natural = DType::I64;
      ptr = c.ints.data();
    } else if (c.saw_leaf) {
      natural = DType::Bool;
      ptr = c.bools.data();
    } else {  // no elements at all: the default float dtype
      natural = default_float_dtype();
      ptr = nullptr;
    }
    t = nogil([&] { return from_blob_copy(ptr, shape, natural, Device(DeviceType::CPU, 0)); });
    if (!dtype && c.kind == Collected::Float) dtype = default_float_dtype();
    if (!dtype && c.kind == Collected::Complex) dtype = complex_dtype_for(default_float_dtype());
    KILN_CHECK(c.kind != Collected::Complex || is_complex(*dtype), TypeError,
               "can't convert complex to ", dtype_name(*dtype), " (the data holds complex numbers)");
  }
  return nogil([&] {
    Tensor r = t;
    if (dtype && r.dtype() != *dtype) r = to_dtype(r, *dtype);
    if (device && resolve_device(*device) != r.device()) r = to_device(r, *device);
    return r;
  });
}

}  // namespace kiln::py
