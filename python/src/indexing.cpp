// x[index] and x[index] = value with PyTorch's rules: ints, slices (positive steps), None,
// Ellipsis and Python bools are applied as views; integer/bool tensors, lists and numpy
// arrays are advanced indices handed to kiln::index / kiln::index_put_ at the dims they
// occupy after the basic indexing. Also the index ops (index_select, gather, scatter, ...).
#include <nanobind/stl/tuple.h>

#include "bind.h"

namespace kiln::py {

namespace {

struct Parsed {
  Tensor view;                   // self after the basic (view) indexing
  std::vector<Tensor> advanced;  // kiln::index's list (undefined = whole dim); empty if none
};

bool is_advanced(nb::handle h) {
  return nb::isinstance<Tensor>(h) || PyList_Check(h.ptr()) ||
         (!PyLong_Check(h.ptr()) && !PySlice_Check(h.ptr()) && h.ptr() != Py_Ellipsis &&
          !h.is_none() && nb::hasattr(h, "__array_interface__"));
}

Tensor index_tensor(nb::handle h, Device device) {
  if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
  Tensor t = tensor_from_data(h, std::nullopt, device);
  if (t.numel() == 0 && t.dtype() != DType::Bool) t = t.to(DType::I64);  // x[[]]
  return t;
}

// Python ints, numpy integer scalars and 0-d integer arrays (not tensors, lists or n-d arrays).
bool is_int_like(nb::handle h) {
  PyObject* o = h.ptr();
  if (PyLong_Check(o)) return true;
  if (!PyIndex_Check(o) || nb::isinstance<Tensor>(h) || PyList_Check(o)) return false;
  if (nb::hasattr(h, "ndim")) return nb::cast<int64_t>(h.attr("ndim")) == 0;
  return true;
}

// Dims an index item consumes of the tensor being indexed.
int64_t consumed(nb::handle h) {
  if (h.is_none() || h.ptr() == Py_Ellipsis || PyBool_Check(h.ptr())) return 0;
  if (nb::isinstance<Tensor>(h)) {
    const Tensor& t = nb::cast<const Tensor&>(h);
    return t.dtype() == DType::Bool ? t.dim() : 1;
  }
  return 1;  // int, slice, list, array
}

Parsed parse(const Tensor& self, nb::handle index) {
  Parsed p;
  p.view = self;
  PyObject* single[1] = {index.ptr()};
  PyObject** items = single;
  Py_ssize_t n = 1;
  if (PyTuple_Check(index.ptr())) {
    items = PySequence_Fast_ITEMS(index.ptr());
    n = PyTuple_GET_SIZE(index.ptr());
  }
  int64_t specified = 0;
  bool seen_ellipsis = false;
  for (Py_ssize_t k = 0; k < n; ++k) {
    if (items[k] == Py_Ellipsis) {
      KILN_CHECK(!seen_ellipsis, IndexError, "an index can only have a single ellipsis ('...')");
      seen_ellipsis = true;
    }
    specified += consumed(items[k]);
  }
  KILN_CHECK(specified <= self.dim(), IndexError, "too many indices for tensor of dimension ",
             self.dim());
  int64_t dim = 0;      // the next dim of p.view to index
  int64_t covered = 0;  // dims of p.view described by p.advanced so far
  bool any_advanced = false;
  for (Py_ssize_t k = 0; k < n; ++k) {
    nb::handle h = items[k];
    PyObject* o = h.ptr();
    if (PyBool_Check(o)) {  // x[True] / x[False]: a new dim of size 1 / 0
      any_advanced = true;
      while (covered < dim) { p.advanced.emplace_back(); ++covered; }
      p.advanced.push_back(scalar_tensor(o == Py_True, DType::Bool));
    } else if (is_int_like(h)) {
      nb::object io = nb::steal(PyNumber_Index(o));
      if (!io.is_valid()) throw nb::python_error();
      int64_t i = PyLong_AsLongLong(io.ptr());
      if (i == -1 && PyErr_Occurred()) throw nb::python_error();
      KILN_CHECK(p.view.dim() > 0, IndexError, "invalid index of a 0-dim tensor. Use "
                 "`tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim "
                 "tensor to a number");
      p.view = select(p.view, dim, i);
    } else if (PySlice_Check(o)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(o, &start, &stop, &step) < 0) throw nb::python_error();
      KILN_CHECK(step > 0, ValueError, "step must be greater than zero");
      PySliceObject* s = (PySliceObject*)o;
      std::optional<int64_t> a, b;
      if (s->start != Py_None) a = start;
      if (s->stop != Py_None) b = stop;
      if (!(a.value_or(0) == 0 && !b && step == 1)) p.view = slice(p.view, dim, a, b, step);
      ++dim;
    } else if (h.is_none()) {
      p.view = unsqueeze(p.view, dim);
      ++dim;
    } else if (o == Py_Ellipsis) {
      dim += self.dim() - specified;
    } else if (is_advanced(h)) {
      Tensor t = index_tensor(h, self.device());
      KILN_CHECK(t.dtype() == DType::Bool || is_integral(t.dtype()), IndexError,
                 "tensors used as indices must be long, int, byte or bool tensors");
      if (t.dtype() != DType::Bool && t.dtype() != DType::I64 && t.dtype() != DType::I32)
        t = t.to(DType::I64);
      if (t.device() != self.device()) t = t.to(self.device());  // as torch: CPU indices work
      any_advanced = true;
      while (covered < dim) { p.advanced.emplace_back(); ++covered; }
      p.advanced.push_back(t);
      int64_t c = t.dtype() == DType::Bool ? t.dim() : 1;
      covered += c;
      dim += c;
    } else {
      KILN_THROW(IndexError, "only integers, slices (`:`), ellipsis (`...`), None and long or "
                 "byte Variables are valid indices (got ", Py_TYPE(o)->tp_name, ")");
    }
  }
  if (!any_advanced) p.advanced.clear();
  return p;
}

Tensor alias(const Tensor& t) {
  return t.dim() == 0 ? kiln::view(t, {}) : kiln::slice(t, 0, std::nullopt, std::nullopt, 1);
}

Tensor getitem(const Tensor& self, nb::handle index) {
  // Fast paths: x[i] and x[a:b].
  if (PyLong_CheckExact(index.ptr())) {
    int64_t i = PyLong_AsLongLong(index.ptr());
    if (i == -1 && PyErr_Occurred()) throw nb::python_error();
    KILN_CHECK(self.dim() > 0, IndexError, "invalid index of a 0-dim tensor. Use "
               "`tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor "
               "to a number");
    return nogil([&] { return select(self, 0, i); });
  }
  Parsed p = parse(self, index);
  if (p.advanced.empty()) {
    if (p.view.is_same(self)) return nogil([&] { return alias(self); });
    return p.view;
  }
  return nogil([&] { return kiln::index(p.view, p.advanced); });
}

void setitem(Tensor& self, nb::handle index, nb::handle value) {
  Parsed p = parse(self, index);
  Scalar s;
  bool is_scalar = !nb::isinstance<Tensor>(value) && scalar_from_handle(value, s, true);
  Tensor v;
  if (!is_scalar) v = nb::isinstance<Tensor>(value) ? nb::cast<Tensor>(value)
                                                    : tensor_from_data(value, self.dtype(), self.device());
  nogil([&] {
    if (p.advanced.empty()) {
      if (is_scalar) kiln::fill_(p.view, s);
      else kiln::copy_(p.view, v);
      return;
    }
    KILN_CHECK(is_scalar || v.dtype() == self.dtype(), Error,
               "Index put requires the source and destination dtypes match, got ",
               dtype_name(self.dtype()), " for the destination and ", dtype_name(v.dtype()),
               " for the source.");
    Tensor vals = is_scalar ? full({}, s, TensorOptions(self.dtype(), self.device())) : v;
    kiln::index_put_(p.view, p.advanced, vals, false);
  });
}

}  // namespace

void bind_indexing(nb::module_& m, nb::class_<Tensor>& cls) {
  // .none(): x[None] passes None itself as the index (a tuple holding None already worked).
  cls.def("__getitem__", &getitem, nb::arg("index").none());
  cls.def("__setitem__", [](Tensor& self, nb::handle index, nb::handle value) {
    setitem(self, index, value);
  }, nb::arg("index").none(), nb::arg("value"));

  m.def("index_select", [](const Tensor& x, int64_t dim, const Tensor& index) {
    return kiln::index_select(x, dim, index);
  }, nb::arg("input"), nb::arg("dim"), nb::arg("index"), nb::call_guard<nb::gil_scoped_release>());
  cls.def("index_select", [](const Tensor& x, int64_t dim, const Tensor& index) {
    return kiln::index_select(x, dim, index);
  }, nb::arg("dim"), nb::arg("index"), nb::call_guard<nb::gil_scoped_release>());
  m.def("gather", [](const Tensor& x, int64_t dim, const Tensor& index) {
    return kiln::gather(x, dim, index);
  }, nb::arg("input"), nb::arg("dim"), nb::arg("index"), nb::call_guard<nb::gil_scoped_release>());
  cls.def("gather", [](const Tensor& x, int64_t dim, const Tensor& index) {
    return kiln::gather(x, dim, index);
  }, nb::arg("dim"), nb::arg("index"), nb::call_guard<nb::gil_scoped_release>());

  // scatter(input, dim, index, src|value, *, reduce=None)
  auto scatter_fn = [](const Tensor& x, int64_t dim, const Tensor& index, nb::handle src) {
    if (nb::isinstance<Tensor>(src)) {
      const Tensor& s = nb::cast<const Tensor&>(src);
      return nogil([&] { return kiln::scatter(x, dim, index, s); });
    }
    Scalar v = nb::cast<Scalar>(src);
    return nogil([&] { return kiln::scatter(x, dim, index, v); });
  };
  m.def("scatter", scatter_fn, nb::arg("input"), nb::arg("dim"), nb::arg("index"), nb::arg("src"));
  cls.def("scatter", scatter_fn, nb::arg("dim"), nb::arg("index"), nb::arg("src"));
  cls.def("scatter_", [scatter_fn](nb::handle_t<Tensor> self, int64_t dim, const Tensor& index,
                                   nb::handle src) {
    Tensor& x = *nb::inst_ptr<Tensor>(self);
    Tensor r = scatter_fn(x, dim, index, src);
    nogil([&] { kiln::copy_(x, r); });
    return nb::borrow(self);
  }, nb::arg("dim"), nb::arg("index"), nb::arg("src"));
  auto scatter_add_fn = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
    return kiln::scatter_add(x, dim, index, src);
  };
  m.def("scatter_add", scatter_add_fn, nb::arg("input"), nb::arg("dim"), nb::arg("index"),
        nb::arg("src"), nb::call_guard<nb::gil_scoped_release>());
  cls.def("scatter_add", scatter_add_fn, nb::arg("dim"), nb::arg("index"), nb::arg("src"),
          nb::call_guard<nb::gil_scoped_release>());
  auto scatter_reduce_fn = [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                              const std::string& reduce, bool include_self) {
    return kiln::scatter_reduce(x, dim, index, src, reduce, include_self);
  };
  m.def("scatter_reduce", scatter_reduce_fn, nb::arg("input"), nb::arg("dim"), nb::arg("index"),
        nb::arg("src"), nb::arg("reduce"), nb::kw_only(), nb::arg("include_self") = true,
        nb::call_guard<nb::gil_scoped_release>());
  cls.def("scatter_reduce", scatter_reduce_fn, nb::arg("dim"), nb::arg("index"), nb::arg("src"),
          nb::arg("reduce"), nb::kw_only(), nb::arg("include_self") = true,
          nb::call_guard<nb::gil_scoped_release>());

  auto index_put_fn = [](const Tensor& x, const std::vector<std::optional<Tensor>>& idx,
                         const Tensor& values, bool accumulate) {
    std::vector<Tensor> ii;
    for (const auto& i : idx) ii.push_back(i ? *i : Tensor());
    return nogil([&] { return kiln::index_put(x, ii, values, accumulate); });
  };
  m.def("index_put", index_put_fn, nb::arg("input"), nb::arg("indices"), nb::arg("values"),
        nb::arg("accumulate") = false);
  cls.def("index_put", index_put_fn, nb::arg("indices"), nb::arg("values"),
          nb::arg("accumulate") = false);
  cls.def("index_put_", [](nb::handle_t<Tensor> self, const std::vector<std::optional<Tensor>>& idx,
                           const Tensor& values, bool accumulate) {
    Tensor& x = *nb::inst_ptr<Tensor>(self);
    std::vector<Tensor> ii;
    for (const auto& i : idx) ii.push_back(i ? *i : Tensor());
    nogil([&] { kiln::index_put_(x, ii, values, accumulate); });
    return nb::borrow(self);
  }, nb::arg("indices"), nb::arg("values"), nb::arg("accumulate") = false);

  // masked_fill(mask, value): value a number or a 0-d tensor.
  auto masked_value = [](nb::handle v) {
    if (nb::isinstance<Tensor>(v)) {
      const Tensor& t = nb::cast<const Tensor&>(v);
      KILN_CHECK(t.dim() == 0, Error, "masked_fill_ only supports a 0-dimensional value tensor, "
                 "but got tensor with ", t.dim(), " dimension(s).");
      return nogil([&] { return t.item(); });
    }
    return nb::cast<Scalar>(v);
  };
  m.def("masked_fill", [masked_value](const Tensor& x, const Tensor& mask, nb::handle value) {
    Scalar v = masked_value(value);
    return nogil([&] { return kiln::masked_fill(x, mask, v); });
  }, nb::arg("input"), nb::arg("mask"), nb::arg("value"));
  cls.def("masked_fill", [masked_value](const Tensor& x, const Tensor& mask, nb::handle value) {
    Scalar v = masked_value(value);
    return nogil([&] { return kiln::masked_fill(x, mask, v); });
  }, nb::arg("mask"), nb::arg("value"));
  cls.def("masked_fill_", [masked_value](nb::handle_t<Tensor> self, const Tensor& mask,
                                         nb::handle value) {
    Tensor& x = *nb::inst_ptr<Tensor>(self);
    Scalar v = masked_value(value);
    nogil([&] { kiln::masked_fill_(x, mask, v); });
    return nb::borrow(self);
  }, nb::arg("mask"), nb::arg("value"));
  m.def("masked_select", [](const Tensor& x, const Tensor& mask) {
    return kiln::masked_select(x, mask);
  }, nb::arg("input"), nb::arg("mask"), nb::call_guard<nb::gil_scoped_release>());
  cls.def("masked_select", [](const Tensor& x, const Tensor& mask) {
    return kiln::masked_select(x, mask);
  }, nb::arg("mask"), nb::call_guard<nb::gil_scoped_release>());
  auto nonzero_fn = [](const Tensor& x, bool as_tuple) -> nb::object {
    Tensor nz = nogil([&] { return kiln::nonzero(x); });
    if (!as_tuple) return nb::cast(nz);
    nb::list l;
    if (x.dim() == 0) nz = nogil([&] { return kiln::nonzero(x.reshape({1})); });
    for (int64_t d = 0; d < nz.size(1); ++d)
      l.append(nogil([&] { return kiln::select(nz, 1, d); }));
    return nb::tuple(l);
  };
  m.def("nonzero", nonzero_fn, nb::arg("input"), nb::kw_only(), nb::arg("as_tuple") = false);
  cls.def("nonzero", nonzero_fn, nb::kw_only(), nb::arg("as_tuple") = false);
  m.def("argwhere", [](const Tensor& x) { return kiln::nonzero(x); }, nb::arg("input"),
        nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace kiln::py
