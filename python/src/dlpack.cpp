// Zero-copy exchange with other array libraries:
//   - DLPack (decision 0014): Tensor.__dlpack__ / __dlpack_device__ export a CPU tensor as a
//     "dltensor" (legacy) or "dltensor_versioned" capsule that keeps the tensor alive;
//     kiln.from_dlpack imports an object with __dlpack__ or a capsule, renames the capsule
//     "used_..." (it may be consumed once) and calls the producer's deleter exactly once,
//     when the last kiln tensor over that memory goes away.
//   - The buffer protocol on kiln.Tensor: memoryview(t) and numpy.asarray(t) see a CPU
//     tensor's memory (strided included) without a copy.
#include <nanobind/ndarray.h>

#include <cstring>
#include <memory>

#include "bind.h"
#include "dlpack.h"

namespace kiln::py {

namespace {

using namespace dlpack;

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kUsedLegacyName = "used_dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kUsedVersionedName = "used_dltensor_versioned";

// Our DLTensor has the layout of the one nanobind's ndarray.h declares (also from the spec).
static_assert(sizeof(DLTensor) == sizeof(nb::dlpack::dltensor));
static_assert(offsetof(DLTensor, byte_offset) == offsetof(nb::dlpack::dltensor, byte_offset));
static_assert(sizeof(DLDataType) == 4 && sizeof(DLDevice) == 8);

DLDataType to_dl_dtype(DType t) {
  switch (t) {
    case DType::Bool: return {kDLBool, 8, 1};
    case DType::U8: return {kDLUInt, 8, 1};
    case DType::I8: return {kDLInt, 8, 1};
    case DType::I16: return {kDLInt, 16, 1};
    case DType::I32: return {kDLInt, 32, 1};
    case DType::I64: return {kDLInt, 64, 1};
    case DType::F16: return {kDLFloat, 16, 1};
    case DType::BF16: return {kDLBfloat, 16, 1};
    case DType::F32: return {kDLFloat, 32, 1};
    case DType::F64: return {kDLFloat, 64, 1};
  }
  throw nb::buffer_error("kiln: unknown dtype");
}

DType from_dl_dtype(DLDataType d) {
  if (d.lanes == 1) {
    switch (d.code) {
      case kDLBool:
        if (d.bits == 8) return DType::Bool;
        break;
      case kDLUInt:
        if (d.bits == 8) return DType::U8;
        break;
      case kDLInt:
        if (d.bits == 8) return DType::I8;
        if (d.bits == 16) return DType::I16;
        if (d.bits == 32) return DType::I32;
        if (d.bits == 64) return DType::I64;
        break;
      case kDLFloat:
        if (d.bits == 16) return DType::F16;
        if (d.bits == 32) return DType::F32;
        if (d.bits == 64) return DType::F64;
        break;
      case kDLBfloat:
        if (d.bits == 16) return DType::BF16;
        break;
      default: break;
    }
  }
  static const char* codes[] = {"int", "uint", "float", "opaque handle", "bfloat", "complex",
                                "bool"};
  std::string code = d.code < 7 ? codes[d.code] : "type code " + std::to_string(d.code);
  throw nb::buffer_error(("kiln.from_dlpack: unsupported DLPack dtype (" + code + ", " +
                          std::to_string(d.bits) + " bits, " + std::to_string(d.lanes) +
                          " lanes); kiln has bool, uint8, int8-64, float16/32/64, bfloat16")
                             .c_str());
}

// ---- export --------------------------------------------------------------------------

// The manager context of an exported tensor: the tensor (keeps its storage alive) and the
// shape/strides arrays the DLTensor points into.
template <typename Managed>
struct Export {
  Managed managed{};
  std::unique_ptr<ExportedTensor> tensor;  // the consumer may write it (see ExportedTensor)
  std::vector<int64_t> shape, strides;

  static void deleter(Managed* self) { delete static_cast<Export*>(self->manager_ctx); }
};

template <typename Managed>
Managed* make_managed(const Tensor& t) {
  auto* e = new Export<Managed>();
  e->tensor = std::make_unique<ExportedTensor>(t);
  e->shape.assign(t.shape().begin(), t.shape().end());
  e->strides.assign(t.strides().begin(), t.strides().end());
  DLTensor& dl = e->managed.dl_tensor;
  dl.data = t.numel() == 0 ? nullptr : t.raw_data();
  dl.device = {kDLCPU, 0};
  dl.ndim = int32_t(t.dim());
  dl.dtype = to_dl_dtype(t.dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  dl.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = &Export<Managed>::deleter;
  return &e->managed;
}

// Capsule destructors: an unconsumed capsule still owns the managed tensor; a consumed one
// ("used_...") belongs to its consumer.
void legacy_capsule_destructor(PyObject* cap) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (PyCapsule_IsValid(cap, kLegacyName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kLegacyName));
    if (m && m->deleter) m->deleter(m);
  }
  PyErr_Restore(type, value, tb);
}

void versioned_capsule_destructor(PyObject* cap) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (PyCapsule_IsValid(cap, kVersionedName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, kVersionedName));
    if (m && m->deleter) m->deleter(m);
  }
  PyErr_Restore(type, value, tb);
}

nb::tuple dlpack_device(const Tensor& t) {
  if (t.device().is_cpu()) return nb::make_tuple(int(kDLCPU), 0);
  // kiln's other devices have no DLPack device type; the testing device reports itself as
  // the reserved extension device.
  return nb::make_tuple(int(kDLExtDev), std::max<int>(t.device().index, 0));
}

nb::object export_dlpack(const Tensor& self, nb::handle stream, nb::handle max_version,
                         nb::handle dl_device, nb::handle copy) {
  if (!stream.is_none() && !PyLong_Check(stream.ptr()))
    throw nb::type_error("stream must be ``int`` or ``none``");
  if (autograd::requires_grad(self))  // as torch
    throw nb::buffer_error("Can't export tensors that require gradient, use tensor.detach()");
  if (!self.device().is_cpu())
    throw nb::buffer_error(("kiln exports only CPU tensors through DLPack, not " +
                            self.device().str() + " ones; copy with .cpu() first").c_str());
  if (!dl_device.is_none()) {
    nb::tuple d = nb::cast<nb::tuple>(dl_device);
    if (d.size() != 2 || nb::cast<int>(d[0]) != kDLCPU)
      throw nb::buffer_error("kiln: __dlpack__ can only export to the CPU device (1, 0)");
  }
  bool copied = !copy.is_none() && nb::cast<bool>(copy);
  Tensor t = copied ? nogil([&] { return self.clone(); }) : self;
  bool versioned = false;
  uint32_t minor = kMinorVersion;
  if (!max_version.is_none()) {
    nb::tuple v = nb::cast<nb::tuple>(max_version);
    if (v.size() != 2) throw nb::type_error("max_version must be a tuple (major, minor)");
    uint32_t major = nb::cast<uint32_t>(v[0]);
    versioned = major >= 1;
    if (major == 1) minor = std::min(minor, nb::cast<uint32_t>(v[1]));
  }
  if (versioned) {
    DLManagedTensorVersioned* m = make_managed<DLManagedTensorVersioned>(t);
    m->version = {kMajorVersion, minor};
    m->flags = copied ? kFlagIsCopied : 0;
    PyObject* cap = PyCapsule_New(m, kVersionedName, versioned_capsule_destructor);
    if (!cap) {
      m->deleter(m);
      throw nb::python_error();
    }
    return nb::steal(cap);
  }
  DLManagedTensor* m = make_managed<DLManagedTensor>(t);
  PyObject* cap = PyCapsule_New(m, kLegacyName, legacy_capsule_destructor);
  if (!cap) {
    m->deleter(m);
    throw nb::python_error();
  }
  return nb::steal(cap);
}

// ---- import --------------------------------------------------------------------------

void call_legacy_deleter(void* ctx, void*) {
  auto* m = static_cast<DLManagedTensor*>(ctx);
  if (m->deleter) m->deleter(m);
}

void call_versioned_deleter(void* ctx, void*) {
  auto* m = static_cast<DLManagedTensorVersioned*>(ctx);
  if (m->deleter) m->deleter(m);
}

// A tensor over dl's memory whose storage calls `deleter(ctx)` when it goes away. Validates
// everything before taking ownership; the caller renames the capsule afterwards.
Tensor tensor_over(const DLTensor& dl, void* ctx, void (*deleter)(void*, void*)) {
  if (dl.device.device_type != kDLCPU)
    throw nb::buffer_error(("kiln.from_dlpack: unsupported device type " +
                            std::to_string(dl.device.device_type) +
                            " (kiln imports CPU memory only)").c_str());
  DType dt = from_dl_dtype(dl.dtype);
  if (dl.ndim < 0) throw nb::buffer_error("kiln.from_dlpack: negative ndim");
  Shape shape(dl.shape, dl.shape + dl.ndim);
  Strides strides = dl.strides ? Strides(dl.strides, dl.strides + dl.ndim)
                               : contiguous_strides(shape);
  int64_t extent = 0;
  bool empty = false;
  for (int32_t i = 0; i < dl.ndim; ++i) {
    if (shape[size_t(i)] < 0) throw nb::buffer_error("kiln.from_dlpack: negative size");
    if (shape[size_t(i)] == 0) empty = true;
    if (strides[size_t(i)] < 0 && shape[size_t(i)] > 1)
      throw nb::buffer_error("kiln.from_dlpack: tensors with negative strides are not "
                             "supported by kiln (make a copy on the producer side first)");
    if (shape[size_t(i)] <= 1) strides[size_t(i)] = std::max<int64_t>(strides[size_t(i)], 0);
    extent += (shape[size_t(i)] - 1) * strides[size_t(i)];
  }
  size_t item = element_size(dt);
  size_t nbytes = empty ? 0 : size_t(extent + 1) * item;
  char* ptr = static_cast<char*>(dl.data) + (dl.data ? dl.byte_offset : 0);
  DataPtr dp(ptr, ctx, deleter, Device(DeviceType::CPU, 0));
  auto storage = std::make_shared<StorageImpl>(std::move(dp), nbytes);
  storage->mark_foreign();  // the producer may write it: no packed copies of it are cached
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, shape, strides, dt));
}

Tensor import_capsule(nb::handle cap) {
  PyObject* c = cap.ptr();
  if (PyCapsule_IsValid(c, kVersionedName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kVersionedName));
    if (m->version.major != kMajorVersion)
      throw nb::buffer_error(("kiln.from_dlpack: unsupported DLPack version " +
                              std::to_string(m->version.major) + "." +
                              std::to_string(m->version.minor) + " (kiln reads 1.x)").c_str());
    Tensor t = tensor_over(m->dl_tensor, m, &call_versioned_deleter);
    PyCapsule_SetName(c, kUsedVersionedName);
    if (m->flags & kFlagReadOnly)
      PyErr_WarnEx(PyExc_UserWarning,
                   "The DLPack tensor is marked read-only, and kiln does not support read-only "
                   "tensors. Writing to this tensor changes the producer's memory.", 1);
    return t;
  }
  if (PyCapsule_IsValid(c, kLegacyName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kLegacyName));
    Tensor t = tensor_over(m->dl_tensor, m, &call_legacy_deleter);
    PyCapsule_SetName(c, kUsedLegacyName);
    return t;
  }
  PyErr_Clear();
  KILN_THROW(Error, "kiln.from_dlpack received an invalid capsule: expected one named "
             "'dltensor' or 'dltensor_versioned'. A DLPack capsule can be consumed only once; "
             "this one may have been used already.");
}

Tensor from_dlpack(nb::handle obj) {
  if (PyCapsule_CheckExact(obj.ptr())) return import_capsule(obj);
  if (!nb::hasattr(obj, "__dlpack__"))
    throw nb::type_error((std::string("kiln.from_dlpack: expected an object with __dlpack__ "
                                      "or a DLPack capsule, got ") +
                          Py_TYPE(obj.ptr())->tp_name).c_str());
  if (nb::hasattr(obj, "__dlpack_device__")) {
    nb::tuple d = nb::cast<nb::tuple>(obj.attr("__dlpack_device__")());
    int type = nb::cast<int>(nb::int_(d[0]));
    if (type != kDLCPU)
      throw nb::buffer_error(("kiln.from_dlpack: unsupported device type " +
                              std::to_string(type) + " (kiln imports CPU memory only)").c_str());
  }
  nb::object cap;
  try {
    cap = obj.attr("__dlpack__")(nb::arg("max_version") =
                                     nb::make_tuple(kMajorVersion, kMinorVersion));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    cap = obj.attr("__dlpack__")();  // a producer older than DLPack 1.0
  }
  return import_capsule(cap);
}

// ---- buffer protocol -----------------------------------------------------------------

const char* buffer_format(DType t) {
  switch (t) {
    case DType::Bool: return "?";
    case DType::U8: return "B";
    case DType::I8: return "b";
    case DType::I16: return "h";
    case DType::I32: return "i";
    case DType::I64: return "q";
    case DType::F16: return "e";
    case DType::F32: return "f";
    case DType::F64: return "d";
    default: return nullptr;
  }
}

struct BufferInfo {
  ExportedTensor tensor;  // keeps the storage alive even if the Python tensor is re-pointed
  std::vector<Py_ssize_t> shape, strides;
};

bool f_contiguous(const Tensor& t) {
  int64_t expected = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 1) continue;
    if (t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

int tensor_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  view->obj = nullptr;
  try {
    const Tensor& t = *nb::inst_ptr<Tensor>(nb::handle(self));
    if (!t.device().is_cpu())
      throw nb::buffer_error(("the buffer protocol needs a CPU tensor, not a " +
                              t.device().str() + " one; copy with .cpu() first").c_str());
    const char* format = buffer_format(t.dtype());
    if (!format)
      throw nb::buffer_error(("the buffer protocol has no format for " +
                              std::string(dtype_name(t.dtype())) +
                              "; convert with .float() first").c_str());
    const bool c_contig = t.is_contiguous();
    if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !c_contig)
      throw nb::buffer_error("the tensor is not contiguous; the consumer did not ask for "
                             "strides (call .contiguous() first)");
    if ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c_contig)
      throw nb::buffer_error("the tensor is not C-contiguous");
    if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !f_contiguous(t))
      throw nb::buffer_error("the tensor is not Fortran-contiguous");
    if ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS && !c_contig && !f_contiguous(t))
      throw nb::buffer_error("the tensor is not contiguous");
    auto* info = new BufferInfo{ExportedTensor(t), {}, {}};
    const Py_ssize_t item = Py_ssize_t(element_size(t.dtype()));
    for (int64_t d = 0; d < t.dim(); ++d) {
      info->shape.push_back(Py_ssize_t(t.size(d)));
      info->strides.push_back(Py_ssize_t(t.stride(d)) * item);
    }
    static char empty_byte = 0;
    void* data = t.numel() == 0 ? nullptr : t.raw_data();
    view->buf = data ? data : &empty_byte;
    view->obj = self;
    Py_INCREF(self);
    view->len = Py_ssize_t(t.numel()) * item;
    view->readonly = 0;
    view->itemsize = item;
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(format) : nullptr;
    view->ndim = int(t.dim());
    view->shape = (flags & PyBUF_ND) ? info->shape.data() : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? info->strides.data() : nullptr;
    view->suboffsets = nullptr;
    view->internal = info;
    return 0;
  } catch (nb::builtin_exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  } catch (std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  }
  return -1;
}

void tensor_releasebuffer(PyObject*, Py_buffer* view) {
  delete static_cast<BufferInfo*>(view->internal);
  view->internal = nullptr;
}

PyType_Slot g_tensor_slots[] = {
    {Py_bf_getbuffer, (void*)tensor_getbuffer},
    {Py_bf_releasebuffer, (void*)tensor_releasebuffer},
    {0, nullptr},
};

}  // namespace

PyType_Slot* tensor_type_slots() { return g_tensor_slots; }

void bind_dlpack(nb::module_& m, nb::class_<Tensor>& cls) {
  cls.def("__dlpack__", &export_dlpack, nb::kw_only(), nb::arg("stream").none() = nb::none(),
          nb::arg("max_version").none() = nb::none(), nb::arg("dl_device").none() = nb::none(),
          nb::arg("copy").none() = nb::none());
  cls.def("__dlpack_device__", &dlpack_device);
  m.def("_from_dlpack", &from_dlpack, nb::arg("ext_tensor"));
}

}  // namespace kiln::py
