// View ops (view, reshape, permute, transpose, expand, narrow, select, squeeze, ...) and the
// linear-algebra ops (einsum, matmul, mm, bmm, addmm, baddbmm, outer, dot, linear). Shapes and dims
// are accepted as varargs or as one sequence, as in PyTorch.
#include <nanobind/stl/string.h>

#include "bind.h"
#include "kiln/ops/einsum.h"
#include "kiln/ops/sparse.h"

namespace kiln::py {

#define GIL nb::call_guard<nb::gil_scoped_release>()
#define BOTH(NAME, FN, ...)                                       \
  do {                                                            \
    m.def(NAME, FN, nb::arg("input") __VA_OPT__(, ) __VA_ARGS__); \
    cls.def(NAME, FN __VA_OPT__(, ) __VA_ARGS__);                 \
  } while (0)

void bind_linalg_views(nb::module_& m, nb::class_<Tensor>& cls) {
  // The compressed-row sparse x dense product under kiln.sparse.mm (python/kiln/sparse/).
  m.def("_sparse_csr_mm", &kiln::sparse_csr_mm, nb::arg("crow_indices"), nb::arg("col_indices"),
        nb::arg("values"), nb::arg("dense"), GIL);
  // Methods taking a shape as varargs or a sequence; module forms take a sequence.
  cls.def("view", [](const Tensor& t, nb::args shape) -> nb::object {
    if (shape.size() == 1 && PyObject_TypeCheck(shape[0].ptr(), dtype_type())) {
      const DType to = nb::cast<DType>(shape[0]);
      return nb::cast(nogil([&] { return kiln::view(t, to); }));
    }
    Shape s = shape_from_args(shape, "view");
    return nb::cast(nogil([&] { return kiln::view(t, s); }));
  });
  cls.def("view_as", [](const Tensor& t, const Tensor& o) { return kiln::view(t, o.shape()); },
          nb::arg("other"), GIL);
  cls.def("reshape", [](const Tensor& t, nb::args shape) {
    Shape s = shape_from_args(shape, "reshape");
    return nogil([&] { return kiln::reshape(t, s); });
  });
  m.def("reshape", [](const Tensor& t, nb::handle shape) {
    Shape s = shape_from_handle(shape, "reshape");
    return nogil([&] { return kiln::reshape(t, s); });
  }, nb::arg("input"), nb::arg("shape"));
  cls.def("reshape_as", [](const Tensor& t, const Tensor& o) { return kiln::reshape(t, o.shape()); },
          nb::arg("other"), GIL);
  cls.def("permute", [](const Tensor& t, nb::args dims) {
    Shape d = shape_from_args(dims, "permute");
    return nogil([&] { return kiln::permute(t, d); });
  });
  m.def("permute", [](const Tensor& t, nb::handle dims) {
    Shape d = shape_from_handle(dims, "permute");
    return nogil([&] { return kiln::permute(t, d); });
  }, nb::arg("input"), nb::arg("dims"));
  cls.def("expand", [](const Tensor& t, nb::args shape) {
    Shape s = shape_from_args(shape, "expand");
    return nogil([&] { return kiln::expand(t, s); });
  });
  cls.def("expand_as", [](const Tensor& t, const Tensor& o) { return kiln::expand(t, o.shape()); },
          nb::arg("other"), GIL);
  m.def("broadcast_to", [](const Tensor& t, nb::handle shape) {
    Shape s = shape_from_handle(shape, "broadcast_to");
    return nogil([&] { return kiln::expand(t, s); });
  }, nb::arg("input"), nb::arg("size"));
  m.def("broadcast_shapes", [](nb::args shapes) {
    Shape r;
    for (nb::handle s : shapes) r = broadcast_shapes(r, shape_from_handle(s, "shape"));
    return make_size(r);
  });

  auto transpose_fn = [](const Tensor& t, int64_t d0, int64_t d1) { return kiln::transpose(t, d0, d1); };
  BOTH("transpose", transpose_fn, nb::arg("dim0"), nb::arg("dim1"), GIL);
  BOTH("swapaxes", transpose_fn, nb::arg("axis0"), nb::arg("axis1"), GIL);
  BOTH("swapdims", transpose_fn, nb::arg("dim0"), nb::arg("dim1"), GIL);
  BOTH("t", [](const Tensor& x) { return kiln::t(x); }, GIL);
  cls.def_prop_ro("T", [](const Tensor& x) {
    return nogil([&] {
      if (x.dim() <= 2) return kiln::t(x);
      std::vector<int64_t> d;
      for (int64_t i = x.dim() - 1; i >= 0; --i) d.push_back(i);
      return kiln::permute(x, d);
    });
  });
  cls.def_prop_ro("mT", [](const Tensor& x) { return nogil([&] { return kiln::transpose(x, -2, -1); }); });
  BOTH("narrow", [](const Tensor& x, int64_t dim, int64_t start, int64_t length) {
    return kiln::narrow(x, dim, start, length); }, nb::arg("dim"), nb::arg("start"),
    nb::arg("length"), GIL);
  BOTH("select", [](const Tensor& x, int64_t dim, int64_t index) {
    return kiln::select(x, dim, index); }, nb::arg("dim"), nb::arg("index"), GIL);
  BOTH("squeeze", [](const Tensor& x, nb::handle dim) {
    if (dim.is_none()) return nogil([&] { return kiln::squeeze(x); });
    Dims d = dims_from_handle(dim);
    return nogil([&] { return kiln::squeeze(x, d); });
  }, nb::arg("dim") = nb::none());
  BOTH("unsqueeze", [](const Tensor& x, int64_t dim) { return kiln::unsqueeze(x, dim); },
       nb::arg("dim"), GIL);
  BOTH("flatten", [](const Tensor& x, int64_t s, int64_t e) { return kiln::flatten(x, s, e); },
       nb::arg("start_dim") = 0, nb::arg("end_dim") = -1, GIL);
  BOTH("ravel", [](const Tensor& x) { return kiln::flatten(x); }, GIL);
  BOTH("unflatten", [](const Tensor& x, int64_t dim, nb::handle sizes) {
    Shape s = shape_from_handle(sizes, "sizes");
    return nogil([&] { return kiln::unflatten(x, dim, s); });
  }, nb::arg("dim"), nb::arg("sizes"));
  BOTH("as_strided", [](const Tensor& x, nb::handle size, nb::handle stride,
                        std::optional<int64_t> offset) {
    Shape s = shape_from_handle(size, "size");
    Strides st = shape_from_handle(stride, "stride");
    return nogil([&] { return kiln::as_strided(x, s, st, offset); });
  }, nb::arg("size"), nb::arg("stride"), nb::arg("storage_offset") = nb::none());
  BOTH("diagonal", [](const Tensor& x, int64_t offset, int64_t d1, int64_t d2) {
    return kiln::diagonal(x, offset, d1, d2); }, nb::arg("offset") = 0, nb::arg("dim1") = 0,
    nb::arg("dim2") = 1, GIL);
  cls.def("unfold", [](const Tensor& x, int64_t dim, int64_t size, int64_t step) {
    return kiln::unfold(x, dim, size, step); }, nb::arg("dimension"), nb::arg("size"),
    nb::arg("step"), GIL);
  BOTH("movedim", [](const Tensor& x, int64_t s, int64_t d) { return kiln::movedim(x, s, d); },
       nb::arg("source"), nb::arg("destination"), GIL);
  BOTH("moveaxis", [](const Tensor& x, int64_t s, int64_t d) { return kiln::movedim(x, s, d); },
       nb::arg("source"), nb::arg("destination"), GIL);

  // Linear algebra. einsum(equation, *operands) or einsum(equation, [operands]); the sublist
  // form (einsum(a, [0, 1], b, [1, 2])) is not supported.
  m.def("einsum", [](const std::string& equation, nb::args rest) {
    std::vector<Tensor> operands;
    if (rest.size() == 1 && !nb::isinstance<Tensor>(rest[0])) {
      for (nb::handle h : nb::iter(rest[0])) operands.push_back(nb::cast<Tensor>(h));
    } else {
      for (nb::handle h : rest) operands.push_back(nb::cast<Tensor>(h));
    }
    nb::gil_scoped_release release;
    return kiln::einsum(equation, operands);
  }, nb::arg("equation"), nb::arg("operands"));
  BOTH("matmul", [](const Tensor& a, const Tensor& b) { return kiln::matmul(a, b); },
       nb::arg("other"), GIL);
  BOTH("mm", [](const Tensor& a, const Tensor& b) { return kiln::mm(a, b); }, nb::arg("mat2"), GIL);
  m.def("_int_mm", [](const Tensor& a, const Tensor& b) { return kiln::int_mm(a, b); },
        nb::arg("self"), nb::arg("mat2"), GIL);
  BOTH("bmm", [](const Tensor& a, const Tensor& b) { return kiln::bmm(a, b); }, nb::arg("mat2"), GIL);
  BOTH("addmm", [](const Tensor& s, const Tensor& a, const Tensor& b, const Scalar& beta,
                   const Scalar& alpha) { return kiln::addmm(s, a, b, beta, alpha); },
       nb::arg("mat1"), nb::arg("mat2"), nb::kw_only(), nb::arg("beta") = 1, nb::arg("alpha") = 1, GIL);
  BOTH("baddbmm", [](const Tensor& s, const Tensor& a, const Tensor& b, const Scalar& beta,
                     const Scalar& alpha) { return kiln::baddbmm(s, a, b, beta, alpha); },
       nb::arg("batch1"), nb::arg("batch2"), nb::kw_only(), nb::arg("beta") = 1,
       nb::arg("alpha") = 1, GIL);
  BOTH("outer", [](const Tensor& a, const Tensor& b) { return kiln::outer(a, b); }, nb::arg("vec2"), GIL);
  BOTH("ger", [](const Tensor& a, const Tensor& b) { return kiln::outer(a, b); }, nb::arg("vec2"), GIL);
  BOTH("dot", [](const Tensor& a, const Tensor& b) { return kiln::dot(a, b); }, nb::arg("tensor"), GIL);
  m.def("linear", [](const Tensor& x, const Tensor& w, std::optional<Tensor> b) {
    return nogil([&] { return kiln::linear(x, w, b ? *b : Tensor()); });
  }, nb::arg("input"), nb::arg("weight"), nb::arg("bias") = nb::none());
}

}  // namespace kiln::py
