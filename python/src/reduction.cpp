// Reductions (sum, mean, prod, max/min, arg*, amax/amin, var/std, norm, logsumexp, all/any,
// cumsum/cumprod, softmax/log_softmax) as kiln.fn and Tensor.fn, with PyTorch's dim/keepdim
// conventions: dim=None reduces every dim; max/min with a dim return (values, indices).
#include <algorithm>
#include <cmath>

#include "bind.h"

namespace kiln::py {

#define BOTH(NAME, FN, ...)                                       \
  do {                                                            \
    m.def(NAME, FN, nb::arg("input") __VA_OPT__(, ) __VA_ARGS__); \
    cls.def(NAME, FN __VA_OPT__(, ) __VA_ARGS__);                 \
  } while (0)

namespace {

std::optional<int64_t> opt_dim(nb::handle h, const char* op) {
  if (h.is_none()) return std::nullopt;
  Shape d = shape_from_handle(h, "dim");
  KILN_CHECK(d.size() == 1, TypeError, op, "(): dim must be an int, got a sequence of ", d.size());
  return d[0];
}

double norm_p(nb::handle p) {
  if (p.is_none()) return 2;
  if (nb::isinstance<nb::str>(p)) {
    std::string s = nb::cast<std::string>(p);
    KILN_CHECK(s == "fro", NotImplementedError, "norm: p='", s, "' is not supported");
    return 2;
  }
  return nb::cast<double>(p);
}

nb::object minmax(const Tensor& x, nb::handle dim, bool keepdim, bool is_max) {
  if (dim.is_none()) {
    return nb::cast(nogil([&] { return is_max ? kiln::max(x) : kiln::min(x); }));
  }
  if (nb::isinstance<Tensor>(dim)) {  // max(input, other) is maximum
    const Tensor& o = nb::cast<const Tensor&>(dim);
    return nb::cast(nogil([&] { return is_max ? kiln::maximum(x, o) : kiln::minimum(x, o); }));
  }
  int64_t d = nb::cast<int64_t>(dim);
  auto r = nogil([&] { return is_max ? kiln::max(x, d, keepdim) : kiln::min(x, d, keepdim); });
  return make_return(is_max ? "max" : "min", std::get<0>(r), std::get<1>(r));
}

double correction_of(nb::handle unbiased, std::optional<double> correction) {
  if (correction) return *correction;
  if (!unbiased.is_none()) return nb::cast<bool>(unbiased) ? 1.0 : 0.0;
  return 1.0;
}

}  // namespace

void bind_reduction(nb::module_& m, nb::class_<Tensor>& cls) {
  auto sum_fn = [](const Tensor& x, nb::handle dim, bool keepdim, std::optional<DType> dtype) {
    Dims d = dims_from_handle(dim);
    return nogil([&] { return kiln::sum(x, d, keepdim, dtype); });
  };
  BOTH("sum", sum_fn, nb::arg("dim") = nb::none(), nb::arg("keepdim") = false, nb::kw_only(),
       nb::arg("dtype") = nb::none());
  auto mean_fn = [](const Tensor& x, nb::handle dim, bool keepdim, std::optional<DType> dtype) {
    Dims d = dims_from_handle(dim);
    return nogil([&] {
      Tensor y = dtype && *dtype != x.dtype() ? to_dtype(x, *dtype) : x;
      return kiln::mean(y, d, keepdim);
    });
  };
  BOTH("mean", mean_fn, nb::arg("dim") = nb::none(), nb::arg("keepdim") = false, nb::kw_only(),
       nb::arg("dtype") = nb::none());
  auto prod_fn = [](const Tensor& x, nb::handle dim, bool keepdim, std::optional<DType> dtype) {
    std::optional<int64_t> d = opt_dim(dim, "prod");
    return nogil([&] {
      if (!d) {
        Tensor r = kiln::prod(x, dtype);
        if (keepdim) r = r.reshape(Shape(size_t(x.dim()), 1));
        return r;
      }
      return kiln::prod(x, *d, keepdim, dtype);
    });
  };
  BOTH("prod", prod_fn, nb::arg("dim") = nb::none(), nb::arg("keepdim") = false, nb::kw_only(),
       nb::arg("dtype") = nb::none());
  BOTH("max", [](const Tensor& x, nb::handle dim, bool keepdim) {
    return minmax(x, dim, keepdim, true); }, nb::arg("dim") = nb::none(), nb::arg("keepdim") = false);
  BOTH("min", [](const Tensor& x, nb::handle dim, bool keepdim) {
    return minmax(x, dim, keepdim, false); }, nb::arg("dim") = nb::none(), nb::arg("keepdim") = false);
  BOTH("argmax", [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
    return nogil([&] { return kiln::argmax(x, dim, keepdim); }); },
    nb::arg("dim") = nb::none(), nb::arg("keepdim") = false);
  BOTH("argmin", [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
    return nogil([&] { return kiln::argmin(x, dim, keepdim); }); },
    nb::arg("dim") = nb::none(), nb::arg("keepdim") = false);
  BOTH("amax", [](const Tensor& x, nb::handle dim, bool keepdim) {
    Dims d = dims_from_handle(dim);
    return nogil([&] { return kiln::amax(x, d, keepdim); }); },
    nb::arg("dim") = nb::make_tuple(), nb::arg("keepdim") = false);
  BOTH("amin", [](const Tensor& x, nb::handle dim, bool keepdim) {
    Dims d = dims_from_handle(dim);
    return nogil([&] { return kiln::amin(x, d, keepdim); }); },
    nb::arg("dim") = nb::make_tuple(), nb::arg("keepdim") = false);
  // var/std(input, dim=None, unbiased=None, keepdim=False, *, correction=None); a bool in
  // the dim position is the legacy `unbiased` argument.
  auto var_std = [](bool is_std) {
    return [is_std](const Tensor& x, nb::handle dim, nb::handle unbiased, bool keepdim,
                    std::optional<double> correction) {
      if (PyBool_Check(dim.ptr())) {
        unbiased = dim;
        dim = nb::none();
      }
      Dims d = dims_from_handle(dim);
      double c = correction_of(unbiased, correction);
      return nogil([&] { return is_std ? kiln::std(x, d, c, keepdim) : kiln::var(x, d, c, keepdim); });
    };
  };
  BOTH("var", var_std(false), nb::arg("dim") = nb::none(), nb::arg("unbiased") = nb::none(),
       nb::arg("keepdim") = false, nb::kw_only(), nb::arg("correction") = nb::none());
  BOTH("std", var_std(true), nb::arg("dim") = nb::none(), nb::arg("unbiased") = nb::none(),
       nb::arg("keepdim") = false, nb::kw_only(), nb::arg("correction") = nb::none());
  BOTH("norm", [](const Tensor& x, nb::handle p, nb::handle dim, bool keepdim,
                  std::optional<DType> dtype) {
    double pv = norm_p(p);
    Dims d = dims_from_handle(dim);
    return nogil([&] {
      Tensor y = dtype && *dtype != x.dtype() ? to_dtype(x, *dtype) : x;
      return kiln::norm(y, pv, d, keepdim);
    }); }, nb::arg("p") = "fro", nb::arg("dim") = nb::none(), nb::arg("keepdim") = false,
    nb::arg("dtype") = nb::none());
  BOTH("logsumexp", [](const Tensor& x, nb::handle dim, bool keepdim) {
    Dims d = dims_from_handle(dim);
    return nogil([&] { return kiln::logsumexp(x, d, keepdim); }); },
    nb::arg("dim"), nb::arg("keepdim") = false);
  auto all_any = [](bool is_all) {
    return [is_all](const Tensor& x, nb::handle dim, bool keepdim) {
      Dims d = dims_from_handle(dim);
      return nogil([&] {
        if (dim.is_none()) {
          Tensor r = is_all ? kiln::all(x) : kiln::any(x);
          if (keepdim) r = r.reshape(Shape(size_t(x.dim()), 1));
          return r;
        }
        // Several dims: reduce one at a time, highest first.
        std::vector<int64_t> w;
        for (int64_t v : d) w.push_back(wrap_dim(v, x.dim()));
        std::sort(w.rbegin(), w.rend());
        Tensor r = x;
        for (int64_t v : w) r = is_all ? kiln::all(r, v, keepdim) : kiln::any(r, v, keepdim);
        return r;
      });
    };
  };
  BOTH("all", all_any(true), nb::arg("dim") = nb::none(), nb::arg("keepdim") = false);
  BOTH("any", all_any(false), nb::arg("dim") = nb::none(), nb::arg("keepdim") = false);
  BOTH("cumsum", [](const Tensor& x, int64_t dim, std::optional<DType> dtype) {
    return kiln::cumsum(x, dim, dtype); }, nb::arg("dim"), nb::kw_only(),
    nb::arg("dtype") = nb::none(), nb::call_guard<nb::gil_scoped_release>());
  BOTH("cumprod", [](const Tensor& x, int64_t dim, std::optional<DType> dtype) {
    return kiln::cumprod(x, dim, dtype); }, nb::arg("dim"), nb::kw_only(),
    nb::arg("dtype") = nb::none(), nb::call_guard<nb::gil_scoped_release>());
  BOTH("softmax", [](const Tensor& x, int64_t dim, std::optional<DType> dtype) {
    return kiln::softmax(x, dim, dtype); }, nb::arg("dim"), nb::arg("dtype") = nb::none(),
    nb::call_guard<nb::gil_scoped_release>());
  BOTH("log_softmax", [](const Tensor& x, int64_t dim, std::optional<DType> dtype) {
    return kiln::log_softmax(x, dim, dtype); }, nb::arg("dim"), nb::arg("dtype") = nb::none(),
    nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace kiln::py
