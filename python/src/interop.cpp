// numpy interop without copies: kiln.from_numpy wraps the array's memory (the tensor keeps
// the array alive), Tensor.numpy() returns an array over the tensor's memory (the array
// keeps the tensor alive). Both sides see each other's writes, as in PyTorch.
#include <nanobind/ndarray.h>

#include "bind.h"

namespace kiln::py {

namespace {


// DataPtr deleter for numpy-owned memory: drops the reference to the array (any thread).
void release_array(void* ctx, void*) { release_python_object((PyObject*)ctx); }

DType dtype_from_typestr(const std::string& ts) {
  KILN_CHECK(ts.size() >= 3 && ts[0] != '>', TypeError,
             "can't convert a numpy array with non-native byte order (", ts, ")");
  std::string k = ts.substr(1);
  if (k == "b1") return DType::Bool;
  if (k == "u1") return DType::U8;
  if (k == "i1") return DType::I8;
  if (k == "i2") return DType::I16;
  if (k == "i4") return DType::I32;
  if (k == "i8") return DType::I64;
  if (k == "f2") return DType::F16;
  if (k == "f4") return DType::F32;
  if (k == "f8") return DType::F64;
  if (k == "c8") return DType::C64;
  if (k == "c16") return DType::C128;
  KILN_THROW(TypeError, "can't convert np.ndarray of type '", ts,
             "'. The only supported types are: complex128, complex64, float64, float32, float16, int64, int32, int16, "
             "int8, uint8, and bool.");
}

nb::dlpack::dtype dlpack_dtype(DType t) {
  switch (t) {
    case DType::Bool: return nb::dtype<bool>();
    case DType::U8: return nb::dtype<uint8_t>();
    case DType::I8: return nb::dtype<int8_t>();
    case DType::I16: return nb::dtype<int16_t>();
    case DType::I32: return nb::dtype<int32_t>();
    case DType::I64: return nb::dtype<int64_t>();
    case DType::F16: return {uint8_t(nb::dlpack::dtype_code::Float), 16, 1};
    case DType::F32: return nb::dtype<float>();
    case DType::F64: return nb::dtype<double>();
    case DType::C64: return {uint8_t(nb::dlpack::dtype_code::Complex), 64, 1};
    case DType::C128: return {uint8_t(nb::dlpack::dtype_code::Complex), 128, 1};
    default: break;
  }
  KILN_THROW(TypeError, "Got unsupported ScalarType ", dtype_name(t),
             " (numpy has no ", dtype_name(t), "; convert with .float() first)");
}

bool is_numpy_array(nb::handle h) {
  return PyObject_IsInstance(h.ptr(), numpy_ndarray_type().ptr()) == 1;
}

}  // namespace

Tensor from_numpy_array(nb::handle array) {
  nb::dict iface = nb::cast<nb::dict>(array.attr("__array_interface__"));
  DType dt = dtype_from_typestr(nb::cast<std::string>(iface["typestr"]));
  nb::tuple data = nb::cast<nb::tuple>(iface["data"]);
  bool readonly = nb::cast<bool>(data[1]);
  char* ptr = (char*)nb::cast<uintptr_t>(data[0]);
  Shape shape = shape_from_handle(iface["shape"], "shape");
  int64_t item = int64_t(element_size(dt));
  Strides strides;
  if (iface.contains("strides") && !iface["strides"].is_none()) {
    Shape byte_strides = shape_from_handle(iface["strides"], "strides");
    for (size_t i = 0; i < byte_strides.size(); ++i) {
      int64_t b = byte_strides[i];
      KILN_CHECK(b >= 0 || shape[i] <= 1, ValueError,
                 "At least one stride in the given numpy array is negative, and tensors with "
                 "negative strides are not currently supported. (You can probably work around "
                 "this by making a copy of your array with array.copy().)");
      KILN_CHECK(b % item == 0, ValueError,
                 "given numpy array strides not a multiple of the element byte size. Copy the "
                 "numpy array to reallocate the memory.");
      strides.push_back(shape[i] <= 1 ? std::max<int64_t>(b / item, 0) : b / item);
    }
  } else {
    strides = contiguous_strides(shape);
  }
  if (readonly)
    PyErr_WarnEx(PyExc_UserWarning,
                 "The given NumPy array is not writable, and kiln does not support non-writable "
                 "tensors. Writing to this tensor changes the array's memory.", 1);
  int64_t extent = 0;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) empty = true;
    extent += (shape[i] - 1) * strides[i];
  }
  size_t nbytes = empty ? 0 : size_t(extent + 1) * size_t(item);
  Py_INCREF(array.ptr());
  DataPtr dp(ptr, array.ptr(), &release_array, Device(DeviceType::CPU, 0));
  auto storage = std::make_shared<StorageImpl>(std::move(dp), nbytes);
  storage->mark_foreign();  // NumPy may write it: no packed copies of it are cached
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, shape, strides, dt));
}

void bind_interop(nb::module_& m, nb::class_<Tensor>& cls) {
  m.def("from_numpy", [](nb::handle array) {
    KILN_CHECK(is_numpy_array(array), TypeError, "expected np.ndarray (got ",
               Py_TYPE(array.ptr())->tp_name, ")");
    return from_numpy_array(array);
  }, nb::arg("ndarray"));

  cls.def("numpy", [](const Tensor& self, bool force) -> nb::object {
    Tensor t = self;
    if (force) {
      t = nogil([&] { return autograd::detach(self).cpu(); });
    } else {
      // As torch: refused only while grad mode is on (under no_grad the array cannot
      // become part of a graph).
      KILN_CHECK(!autograd::requires_grad(t) || !autograd::is_grad_enabled(), Error,
                 "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                 "instead.");
      KILN_CHECK(t.device().is_cpu(), TypeError, "can't convert ", t.device().str(),
                 " device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
                 "memory first.");
    }
    nb::dlpack::dtype dt = dlpack_dtype(t.dtype());
    std::vector<size_t> shape(t.shape().begin(), t.shape().end());
    const Strides& st = t.strides();
    auto* keep = new ExportedTensor(t);  // NumPy may write it: no cached packed copies
    nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<ExportedTensor*>(p); });
    nb::ndarray<nb::numpy> arr(t.raw_data(), shape.size(), shape.data(), owner, st.data(), dt,
                               nb::device::cpu::value);
    return arr.cast();
  }, nb::arg("force") = false);
}

}  // namespace kiln::py
