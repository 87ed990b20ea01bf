// Shape-building ops (cat, stack, split, chunk, unbind, tril/triu, repeat, flip, roll, pad,
// one_hot) and sorting/selection (sort, argsort, topk, unique) as kiln.fn and Tensor.fn.
#include <nanobind/stl/tuple.h>

#include "bind.h"

namespace kiln::py {

#define GIL nb::call_guard<nb::gil_scoped_release>()
#define BOTH(NAME, FN, ...)                                       \
  do {                                                            \
    m.def(NAME, FN, nb::arg("input") __VA_OPT__(, ) __VA_ARGS__); \
    cls.def(NAME, FN __VA_OPT__(, ) __VA_ARGS__);                 \
  } while (0)

namespace {
nb::tuple to_tuple(const std::vector<Tensor>& ts) {
  nb::list l;
  for (const Tensor& t : ts) l.append(t);
  return nb::tuple(l);
}
}  // namespace

void bind_shape_ops(nb::module_& m, nb::class_<Tensor>& cls) {
  auto cat_fn = [](const std::vector<Tensor>& xs, int64_t dim) { return kiln::cat(xs, dim); };
  for (const char* n : {"cat", "concat", "concatenate"})
    m.def(n, cat_fn, nb::arg("tensors"), nb::arg("dim") = 0, GIL);
  m.def("stack", [](const std::vector<Tensor>& xs, int64_t dim) { return kiln::stack(xs, dim); },
        nb::arg("tensors"), nb::arg("dim") = 0, GIL);
  auto split_fn = [](const Tensor& x, nb::handle size, int64_t dim) {
    std::vector<Tensor> r;
    if (PyLong_Check(size.ptr())) {
      int64_t s = nb::cast<int64_t>(size);
      r = nogil([&] { return kiln::split(x, s, dim); });
    } else {
      Shape s = shape_from_handle(size, "split_size_or_sections");
      r = nogil([&] { return kiln::split(x, s, dim); });
    }
    return to_tuple(r);
  };
  BOTH("split", split_fn, nb::arg("split_size_or_sections"), nb::arg("dim") = 0);
  BOTH("chunk", [](const Tensor& x, int64_t chunks, int64_t dim) {
    return to_tuple(nogil([&] { return kiln::chunk(x, chunks, dim); }));
  }, nb::arg("chunks"), nb::arg("dim") = 0);
  BOTH("unbind", [](const Tensor& x, int64_t dim) {
    int64_t d = wrap_dim(dim, x.dim());
    std::vector<Tensor> r = nogil([&] {
      std::vector<Tensor> v;
      for (int64_t i = 0; i < x.size(d); ++i) v.push_back(kiln::select(x, d, i));
      return v;
    });
    return to_tuple(r);
  }, nb::arg("dim") = 0);
  BOTH("tril", [](const Tensor& x, int64_t k) { return kiln::tril(x, k); }, nb::arg("diagonal") = 0, GIL);
  BOTH("triu", [](const Tensor& x, int64_t k) { return kiln::triu(x, k); }, nb::arg("diagonal") = 0, GIL);
  cls.def("repeat", [](const Tensor& x, nb::args repeats) {
    Shape r = shape_from_args(repeats, "repeats");
    return nogil([&] { return kiln::repeat(x, r); });
  });
  BOTH("repeat_interleave", [](const Tensor& x, nb::handle repeats, std::optional<int64_t> dim) {
    if (nb::isinstance<Tensor>(repeats)) {
      const Tensor& r = nb::cast<const Tensor&>(repeats);
      return nogil([&] { return kiln::repeat_interleave(x, r, dim); });
    }
    int64_t r = nb::cast<int64_t>(repeats);
    return nogil([&] { return kiln::repeat_interleave(x, r, dim); });
  }, nb::arg("repeats"), nb::arg("dim") = nb::none());
  m.def("flip", [](const Tensor& x, nb::handle dims) {
    Shape d = shape_from_handle(dims, "dims");
    return nogil([&] { return kiln::flip(x, d); });
  }, nb::arg("input"), nb::arg("dims"));
  cls.def("flip", [](const Tensor& x, nb::args dims) {
    Shape d = shape_from_args(dims, "dims");
    return nogil([&] { return kiln::flip(x, d); });
  });
  BOTH("roll", [](const Tensor& x, nb::handle shifts, nb::handle dims) {
    Shape s = shape_from_handle(shifts, "shifts");
    Dims d = dims_from_handle(dims);
    return nogil([&] { return kiln::roll(x, s, d); });
  }, nb::arg("shifts"), nb::arg("dims") = nb::none());
  m.def("pad", [](const Tensor& x, nb::handle pad, const std::string& mode,
                  std::optional<double> value) {
    Shape p = shape_from_handle(pad, "pad");
    return nogil([&] { return kiln::pad(x, p, mode, value.value_or(0.0)); });
  }, nb::arg("input"), nb::arg("pad"), nb::arg("mode") = "constant", nb::arg("value") = nb::none());
  m.def("one_hot", [](const Tensor& x, int64_t n) { return kiln::one_hot(x, n); },
        nb::arg("input"), nb::arg("num_classes") = -1, GIL);

  auto sort_fn = [](const Tensor& x, int64_t dim, bool descending, bool stable) {
    auto r = nogil([&] { return kiln::sort(x, dim, descending, stable); });
    return make_return("sort", std::get<0>(r), std::get<1>(r));
  };
  BOTH("sort", sort_fn, nb::arg("dim") = -1, nb::arg("descending") = false, nb::kw_only(), nb::arg("stable") = false);
  BOTH("argsort", [](const Tensor& x, int64_t dim, bool descending, bool stable) {
    return kiln::argsort(x, dim, descending, stable);
  }, nb::arg("dim") = -1, nb::arg("descending") = false, nb::kw_only(), nb::arg("stable") = false, GIL);
  auto topk_fn = [](const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
    auto r = nogil([&] { return kiln::topk(x, k, dim, largest, sorted); });
    return make_return("topk", std::get<0>(r), std::get<1>(r));
  };
  BOTH("topk", topk_fn, nb::arg("k"), nb::arg("dim") = -1, nb::arg("largest") = true, nb::arg("sorted") = true);
  auto unique_fn = [](const Tensor& x, bool sorted, bool return_inverse, bool return_counts,
                      std::optional<int64_t> dim) -> nb::object {
    auto r = nogil([&] { return kiln::unique(x, sorted, return_inverse, return_counts, dim); });
    if (!return_inverse && !return_counts) return nb::cast(std::get<0>(r));
    nb::list l;
    l.append(std::get<0>(r));
    if (return_inverse) l.append(std::get<1>(r));
    if (return_counts) l.append(std::get<2>(r));
    return nb::tuple(l);
  };
  BOTH("unique", unique_fn, nb::arg("sorted") = true, nb::arg("return_inverse") = false, nb::arg("return_counts") = false,
     nb::arg("dim") = nb::none());
}

}  // namespace kiln::py
