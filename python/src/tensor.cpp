// kiln.Tensor: geometry, dtype/device, host reads (item, tolist, repr), conversions
// (to, cpu, float, ...), copies, fills and the new_* constructors.
#include "kiln/tensor/print_options.h"
#include "bind.h"
#include "kiln/autograd/node.h"

namespace kiln::py {

namespace {

using Self = nb::handle_t<Tensor>;
Tensor& self_ref(Self h) { return *nb::inst_ptr<Tensor>(h); }

// torch prints the CPU and meta devices without an index (each has one device).
Device public_device(const Tensor& t) {
  Device d = t.device();
  return d.is_cpu() || d.type == DeviceType::Meta ? Device(d.type) : d;
}

nb::object tolist_rec(const std::vector<double>& f, const std::vector<int64_t>& i, DType dt,
                      const Shape& shape, size_t d, int64_t& pos) {
  if (d == shape.size()) {
    int64_t k = pos++;
    if (dt == DType::Bool) return nb::bool_(i[size_t(k)] != 0);
    if (is_floating(dt)) return nb::float_(f[size_t(k)]);
    if (is_complex(dt))
      return nb::steal(PyComplex_FromDoubles(f[2 * size_t(k)], f[2 * size_t(k) + 1]));
    return nb::int_(i[size_t(k)]);
  }
  nb::list l;
  for (int64_t j = 0; j < shape[d]; ++j) l.append(tolist_rec(f, i, dt, shape, d + 1, pos));
  return l;
}

std::string repr(const Tensor& t) {
  std::vector<std::string> extra;
  if (auto fn = autograd::grad_fn(t)) extra.push_back("grad_fn=<" + fn->name() + ">");
  else if (autograd::requires_grad(t)) extra.push_back("requires_grad=True");
  return nogil([&] { return tensor_repr(t, extra); });
}

// Tensor.to(...) in all of torch's forms: to(dtype), to(device, dtype=None), to(tensor),
// keywords dtype=, device=, non_blocking=, copy=.

nb::object to_impl(Self self, nb::args args, nb::kwargs kwargs) {
  const Tensor& t = self_ref(self);
  std::optional<DType> dtype;
  std::optional<Device> device;
  bool non_blocking = false, copy = false;
  std::optional<MemoryFormat> format;
  int bools = 0;
  for (size_t k = 0; k < args.size(); ++k) {
    nb::handle a = args[k];
    if (PyObject_TypeCheck(a.ptr(), dtype_type())) dtype = nb::cast<DType>(a);
    else if (nb::isinstance<Tensor>(a)) {
      const Tensor& o = nb::cast<const Tensor&>(a);
      dtype = o.dtype();
      device = o.device();
    } else if (nb::isinstance<Device>(a) || nb::isinstance<nb::str>(a)) {
      device = nb::cast<Device>(a);
    } else if (PyBool_Check(a.ptr()) && k > 0) {
      (bools++ == 0 ? non_blocking : copy) = a.ptr() == Py_True;
    } else {
      KILN_THROW(TypeError, "to() received an invalid combination of arguments: got ",
                 Py_TYPE(a.ptr())->tp_name);
    }
  }
  for (auto [key, value] : kwargs) {
    std::string k = nb::cast<std::string>(key);
    if (k == "dtype") { if (!value.is_none()) dtype = dtype_arg(value); }
    else if (k == "device") { if (!value.is_none()) device = device_arg(value); }
    else if (k == "non_blocking") non_blocking = nb::cast<bool>(value);
    else if (k == "copy") copy = nb::cast<bool>(value);
    else if (k == "memory_format") format = memory_format_arg(value);
    else KILN_THROW(TypeError, "to() got an unexpected keyword argument '", k, "'");
  }
  Tensor r = nogil([&] {
    Tensor x = t;
    if (device && resolve_device(*device) != x.device()) x = to_device(x, *device, non_blocking);
    if (dtype && *dtype != x.dtype()) x = to_dtype(x, *dtype);
    if (format && *format != MemoryFormat::Preserve && !x.is_contiguous(*format))
      x = x.contiguous(*format);
    if (copy && x.is_same(t)) x = kiln::clone(x);
    return x;
  });
  if (r.is_same(t)) return nb::borrow(self);
  return nb::cast(std::move(r));
}

nb::object convert_to(Self self, DType dtype) {
  const Tensor& t = self_ref(self);
  if (t.dtype() == dtype) return nb::borrow(self);
  return nb::cast(nogil([&] { return to_dtype(t, dtype); }));
}

struct FactoryKw {
  std::optional<DType> dtype;
  std::optional<Device> device;
  bool requires_grad = false;
};
FactoryKw new_kwargs(const Tensor& t, const nb::kwargs& kw) {
  FactoryKw f;
  for (auto [key, value] : kw) {
    std::string k = nb::cast<std::string>(key);
    if (k == "dtype") { if (!value.is_none()) f.dtype = dtype_arg(value); }
    else if (k == "device") { if (!value.is_none()) f.device = device_arg(value); }
    else if (k == "requires_grad") f.requires_grad = nb::cast<bool>(value);
    else if (k == "layout") check_layout_arg(value);
    else if (k != "pin_memory")
      KILN_THROW(TypeError, "got an unexpected keyword argument '", k, "'");
  }
  if (!f.dtype) f.dtype = t.dtype();
  if (!f.device) f.device = t.device();
  return f;
}
Tensor finish(Tensor r, const FactoryKw& f) {
  if (f.requires_grad) autograd::set_requires_grad(r, true);
  return r;
}

}  // namespace

void bind_tensor(nb::module_& m, nb::class_<Tensor>& cls) {
  nb::enum_<MemoryFormat>(m, "memory_format")
      .value("contiguous_format", MemoryFormat::Contiguous)
      .value("channels_last", MemoryFormat::ChannelsLast)
      .value("preserve_format", MemoryFormat::Preserve)
      .export_values();
  cls.def("__init__", [](Tensor* self, nb::args args) {
    if (args.size() == 0) {
      new (self) Tensor(empty({0}, default_float_dtype()));
    } else if (args.size() == 1 && !PyLong_Check(args[0].ptr())) {
      new (self) Tensor(tensor_from_data(args[0], default_float_dtype(), std::nullopt));
    } else {
      Shape s = shape_from_args(args, "size");
      new (self) Tensor(empty(s, default_float_dtype()));
    }
  });
  // Used by subclasses (kiln.nn.Parameter): an instance of cls sharing data's storage.
  cls.def_static("_make_subclass", [](nb::type_object cls, const Tensor& data, bool require_grad) {
    nb::object inst = nb::inst_alloc(cls);
    Tensor* p = nb::inst_ptr<Tensor>(inst);
    new (p) Tensor(autograd::detach(data));
    nb::inst_mark_ready(inst);
    if (require_grad) autograd::set_requires_grad(*p, true);
    return inst;
  }, nb::arg("cls"), nb::arg("data"), nb::arg("require_grad") = false);

  // torch's as_subclass: an instance of cls over the same data that stays on the autograd
  // graph (an alias view, so a leaf's gradient still flows back to it).
  cls.def("as_subclass", [](nb::handle self, nb::type_object cls) {
    KILN_CHECK(PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()),
                                reinterpret_cast<PyTypeObject*>(self.type().ptr())) ||
                   PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()),
                                    reinterpret_cast<PyTypeObject*>(nb::type<Tensor>().ptr())),
               TypeError, "as_subclass: expected a subclass of kiln.Tensor, got ",
               nb::cast<std::string>(nb::str(cls)));
    const Tensor& t = nb::cast<const Tensor&>(self);
    nb::object inst = nb::inst_alloc(cls);
    Tensor* p = nb::inst_ptr<Tensor>(inst);
    new (p) Tensor(t.view(t.shape()));
    nb::inst_mark_ready(inst);
    return inst;
  }, nb::arg("cls"));

  // Geometry.
  cls.def_prop_ro("shape", [](const Tensor& t) { return make_size(t.shape()); });
  cls.def("size", [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
    if (dim) return nb::int_(t.size(*dim));
    return make_size(t.shape());
  }, nb::arg("dim") = nb::none());
  cls.def("dim", &Tensor::dim);
  cls.def("ndimension", &Tensor::dim);
  cls.def_prop_ro("ndim", &Tensor::dim);
  cls.def("numel", &Tensor::numel);
  cls.def("nelement", &Tensor::numel);
  cls.def("stride", [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
    if (dim) return nb::int_(t.stride(*dim));
    const Strides& s = t.strides();
    nb::object tup = nb::steal(PyTuple_New(Py_ssize_t(s.size())));
    for (size_t i = 0; i < s.size(); ++i)
      PyTuple_SET_ITEM(tup.ptr(), Py_ssize_t(i), PyLong_FromLongLong(s[i]));
    return tup;
  }, nb::arg("dim") = nb::none());
  cls.def("is_contiguous", [](const Tensor& t, nb::handle format) {
    const auto f = memory_format_arg(format);
    return f ? t.is_contiguous(*f) : t.is_contiguous();
  }, nb::arg("memory_format") = nb::none());
  cls.def("storage_offset", &Tensor::storage_offset);
  cls.def("element_size", &Tensor::element_size);
  cls.def_prop_ro("itemsize", &Tensor::element_size);
  cls.def_prop_ro("nbytes", &Tensor::nbytes);
  cls.def_prop_ro("dtype", &Tensor::dtype);
  cls.def_prop_ro("device", &public_device);
  cls.def_prop_ro("is_cpu", [](const Tensor& t) { return t.device().is_cpu(); });
  cls.def_prop_ro("is_cuda", [](const Tensor&) { return false; });
  cls.def_prop_ro("is_xpu", [](const Tensor& t) { return t.device().type == DeviceType::XPU; });
  // torch's flags for devices kiln has no backend for: always false here.
  for (const char* flag : {"is_mps", "is_xla", "is_ipu", "is_mtia", "is_maia", "is_vulkan"})
    cls.def_prop_ro(flag, [](const Tensor&) { return false; });
  cls.def_prop_ro("is_meta", [](const Tensor& t) { return t.device().type == DeviceType::Meta; });
  cls.def("is_floating_point", &Tensor::is_floating_point);
  cls.def("is_complex", [](const Tensor& t) { return is_complex(t.dtype()); });
  cls.def("_is_view", &Tensor::is_view);
  cls.def("data_ptr", [](const Tensor& t) { return uintptr_t(t.raw_data()); });
  cls.def_prop_ro("_version", &Tensor::version);
  cls.def("_is_same", [](const Tensor& a, const Tensor& b) { return a.is_same(b); });

  // Host reads.
  cls.def("item", [](const Tensor& t) {
    KILN_CHECK(t.numel() == 1, Error, "a Tensor with ", t.numel(),
               " elements cannot be converted to Scalar");
    return nogil([&] { return t.item(); });
  });
  cls.def("tolist", [](const Tensor& t) {
    std::vector<double> f;
    std::vector<int64_t> i;
    nogil([&] {
      if (is_complex(t.dtype())) f = kiln::view_as_real(kiln::contiguous(t)).to_vector<double>();
      else if (is_floating(t.dtype())) f = t.to_vector<double>();
      else i = t.to_vector<int64_t>();
    });
    int64_t pos = 0;
    return tolist_rec(f, i, t.dtype(), t.shape(), 0, pos);
  });
  cls.def("__repr__", &repr);
  cls.def("__str__", &repr);
  cls.def("__len__", [](const Tensor& t) {
    KILN_CHECK(t.dim() > 0, TypeError, "len() of a 0-d tensor");
    return t.size(0);
  });
  cls.def("__bool__", [](const Tensor& t) {
    KILN_CHECK(t.numel() == 1, Error, "Boolean value of Tensor with ",
               t.numel() == 0 ? "no values" : "more than one value", " is ambiguous");
    return nogil([&] { return t.item().to_bool(); });
  });
  cls.def("__float__", [](const Tensor& t) {
    KILN_CHECK(t.numel() == 1, ValueError, "only one element tensors can be converted to Python scalars");
    return nogil([&] { return t.item().to_double(); });
  });
  cls.def("__int__", [](const Tensor& t) {
    KILN_CHECK(t.numel() == 1, ValueError, "only one element tensors can be converted to Python scalars");
    return nogil([&] { return t.item().to_int(); });
  });
  cls.def("__index__", [](const Tensor& t) {
    KILN_CHECK(t.numel() == 1 && is_integral(t.dtype(), true), TypeError,
               "only integer tensors of a single element can be converted to an index");
    return nogil([&] { return t.item().to_int(); });
  });

  // Conversions.
  cls.def("to", &to_impl);
  cls.def("cpu", [](Self self) -> nb::object {
    const Tensor& t = self_ref(self);
    if (t.device().is_cpu()) return nb::borrow(self);
    return nb::cast(nogil([&] { return t.cpu(); }));
  });
  cls.def("float", [](Self s) { return convert_to(s, DType::F32); });
  cls.def("double", [](Self s) { return convert_to(s, DType::F64); });
  cls.def("half", [](Self s) { return convert_to(s, DType::F16); });
  cls.def("bfloat16", [](Self s) { return convert_to(s, DType::BF16); });
  cls.def("int", [](Self s) { return convert_to(s, DType::I32); });
  cls.def("long", [](Self s) { return convert_to(s, DType::I64); });
  cls.def("short", [](Self s) { return convert_to(s, DType::I16); });
  cls.def("char", [](Self s) { return convert_to(s, DType::I8); });
  cls.def("byte", [](Self s) { return convert_to(s, DType::U8); });
  cls.def("bool", [](Self s) { return convert_to(s, DType::Bool); });
  cls.def("type_as", [](Self s, const Tensor& o) { return convert_to(s, o.dtype()); });
  // clone(memory_format=): preserve (the default) keeps a channels-last layout; the other
  // formats copy into that format. Always a new tensor.
  cls.def("clone", [](const Tensor& t, nb::handle format) {
    const MemoryFormat f = memory_format_arg(format).value_or(MemoryFormat::Preserve);
    return nogil([&] {
      if (f == MemoryFormat::Preserve) return kiln::clone(t);
      Tensor r = t.contiguous(f);
      return r.is_same(t) ? kiln::clone(t) : r;
    });
  }, nb::arg("memory_format") = nb::none());
  cls.def("contiguous", [](Self self, nb::handle format) -> nb::object {
    const Tensor& t = self_ref(self);
    const MemoryFormat f = memory_format_arg(format).value_or(MemoryFormat::Contiguous);
    if (t.is_contiguous(f)) return nb::borrow(self);
    return nb::cast(nogil([&] { return t.contiguous(f); }));
  }, nb::arg("memory_format") = nb::none());
  cls.def("copy_", [](Self self, const Tensor& src, bool non_blocking) {
    Tensor& t = self_ref(self);
    nogil([&] { kiln::copy_(t, src, non_blocking); });
    return nb::borrow(self);
  }, nb::arg("src"), nb::arg("non_blocking") = false);
  cls.def("resize_", [](Self self, nb::args sizes, nb::kwargs kwargs) {
    Tensor& t = self_ref(self);
    for (auto [key, value] : kwargs) {
      const std::string k = nb::cast<std::string>(key);
      KILN_CHECK(k == "memory_format", TypeError, "resize_() got an unexpected keyword argument '",
                 k, "'");
      const auto f = memory_format_arg(value);
      KILN_CHECK(!f || *f != MemoryFormat::ChannelsLast, NotImplementedError,
                 "resize_: memory_format=channels_last is not supported (contiguous only)");
    }
    Shape shape;
    if (sizes.size() == 1 && !nb::isinstance<nb::int_>(sizes[0]))
      shape = nb::cast<Shape>(sizes[0]);  // resize_((2, 3)) or resize_(t.shape)
    else
      for (nb::handle s : sizes) shape.push_back(nb::cast<int64_t>(s));
    nogil([&] { kiln::resize_(t, shape); });
    return nb::borrow(self);
  });
  cls.def("resize_as_", [](Self self, const Tensor& other) {
    Tensor& t = self_ref(self);
    nogil([&] { kiln::resize_as_(t, other); });
    return nb::borrow(self);
  }, nb::arg("the_template"));
  cls.def("fill_", [](Self self, const Scalar& v) {
    Tensor& t = self_ref(self);
    nogil([&] { kiln::fill_(t, v); });
    return nb::borrow(self);
  }, nb::arg("value"));
  cls.def("fill_", [](Self self, const Tensor& v) {
    KILN_CHECK(v.dim() == 0, Error, "fill_ only supports 0-dimension value tensor but got tensor with ",
               v.dim(), " dimensions.");
    Tensor& t = self_ref(self);
    nogil([&] { kiln::fill_(t, v.item()); });
    return nb::borrow(self);
  }, nb::arg("value"));
  cls.def("zero_", [](Self self) {
    Tensor& t = self_ref(self);
    nogil([&] { t.zero_(); });
    return nb::borrow(self);
  });

  // new_* : same dtype and device as self unless given.
  cls.def("new_zeros", [](const Tensor& t, nb::args size, nb::kwargs kw) {
    FactoryKw f = new_kwargs(t, kw);
    Shape s = shape_from_args(size, "size");
    return finish(nogil([&] { return zeros(s, TensorOptions(*f.dtype, *f.device)); }), f);
  });
  cls.def("new_ones", [](const Tensor& t, nb::args size, nb::kwargs kw) {
    FactoryKw f = new_kwargs(t, kw);
    Shape s = shape_from_args(size, "size");
    return finish(nogil([&] { return ones(s, TensorOptions(*f.dtype, *f.device)); }), f);
  });
  cls.def("new_empty", [](const Tensor& t, nb::args size, nb::kwargs kw) {
    FactoryKw f = new_kwargs(t, kw);
    Shape s = shape_from_args(size, "size");
    return finish(nogil([&] { return empty(s, TensorOptions(*f.dtype, *f.device)); }), f);
  });
  cls.def("new_full", [](const Tensor& t, nb::handle size, const Scalar& value, nb::kwargs kw) {
    FactoryKw f = new_kwargs(t, kw);
    Shape s = shape_from_handle(size, "size");
    return finish(nogil([&] { return full(s, value, TensorOptions(*f.dtype, *f.device)); }), f);
  }, nb::arg("size"), nb::arg("fill_value"), nb::arg("kwargs"));
  cls.def("new_tensor", [](const Tensor& t, nb::handle data, nb::kwargs kw) {
    FactoryKw f = new_kwargs(t, kw);
    return finish(tensor_from_data(data, f.dtype, f.device), f);
  }, nb::arg("data"), nb::arg("kwargs"));
}

}  // namespace kiln::py
