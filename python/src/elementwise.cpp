// Elementwise ops as kiln.fn(input, ...) and Tensor.fn(...), with the in-place Tensor.fn_
// forms returning self. Ops run with the GIL released.
#include "bind.h"
#include "kiln/ops/adam_step.h"

namespace kiln::py {

using Self = nb::handle_t<Tensor>;
#define GIL nb::call_guard<nb::gil_scoped_release>()
// Registers fn as kiln.NAME(input, ...) and Tensor.NAME(...).
#define BOTH(NAME, FN, ...)                                  \
  do {                                                       \
    m.def(NAME, FN, nb::arg("input") __VA_OPT__(, ) __VA_ARGS__); \
    cls.def(NAME, FN __VA_OPT__(, ) __VA_ARGS__);            \
  } while (0)

namespace {
template <typename F>
nb::object inplace(Self self, F&& f) {
  Tensor& t = *nb::inst_ptr<Tensor>(self);
  nogil([&] { f(t); });
  return nb::borrow(self);
}
}  // namespace

void bind_elementwise(nb::module_& m, nb::class_<Tensor>& cls) {
#define UNARY(name)                                                                         \
  BOTH(#name, [](const Tensor& x) { return kiln::name(x); }, GIL);                          \
  cls.def(#name "_", [](Self s) { return inplace(s, [](Tensor& t) { kiln::name##_(t); }); });

  UNARY(neg) UNARY(abs) UNARY(exp) UNARY(exp2) UNARY(log) UNARY(log2) UNARY(log1p) UNARY(expm1)
  UNARY(sqrt) UNARY(rsqrt) UNARY(sin) UNARY(cos) UNARY(tan) UNARY(tanh) UNARY(sigmoid)
  UNARY(relu) UNARY(erf) UNARY(floor) UNARY(ceil) UNARY(trunc) UNARY(sign)
  UNARY(reciprocal) UNARY(logical_not) UNARY(erfc) UNARY(erfinv) UNARY(lgamma) UNARY(digamma)
#undef UNARY
  cls.def("polygamma", [](const Tensor& x, int64_t n) { return kiln::polygamma(n, x); },
          nb::arg("n"), GIL);  // x.polygamma(n), and kiln.polygamma(n, x) as torch:
  m.def("polygamma", [](int64_t n, const Tensor& x) { return kiln::polygamma(n, x); },
        nb::arg("n"), nb::arg("input"), GIL);
  BOTH("negative", [](const Tensor& x) { return kiln::neg(x); }, GIL);
  BOTH("absolute", [](const Tensor& x) { return kiln::abs(x); }, GIL);
  BOTH("fix", [](const Tensor& x) { return kiln::trunc(x); }, GIL);
  m.def("silu", [](const Tensor& x) { return kiln::silu(x); }, nb::arg("input"), GIL);
  m.def("silu_", [](Self s) { return inplace(s, [](Tensor& t) { kiln::silu_(t); }); });
  m.def("relu_", [](Self s) { return inplace(s, [](Tensor& t) { kiln::relu_(t); }); });
  // round(decimals=0)
  auto round_fn = [](const Tensor& x, int64_t decimals) {
    KILN_CHECK(decimals == 0, NotImplementedError, "round: decimals != 0 is not supported yet");
    return nogil([&] { return kiln::round(x); });
  };
  BOTH("round", round_fn, nb::kw_only(), nb::arg("decimals") = 0);
  cls.def("round_", [](Self s) { return inplace(s, [](Tensor& t) { kiln::round_(t); }); });

  auto gelu_fn = [](const Tensor& x, const std::string& approximate) {
    return kiln::gelu(x, approximate);
  };
  m.def("gelu", gelu_fn, nb::arg("input"), nb::kw_only(), nb::arg("approximate") = "none", GIL);
  auto softplus_fn = [](const Tensor& x, const Scalar& beta, const Scalar& threshold) {
    return kiln::softplus(x, beta, threshold);
  };
  m.def("softplus", softplus_fn, nb::arg("input"), nb::arg("beta") = 1, nb::arg("threshold") = 20, GIL);
  BOTH("isnan", [](const Tensor& x) { return kiln::isnan(x); }, GIL);
  BOTH("isinf", [](const Tensor& x) { return kiln::isinf(x); }, GIL);
  BOTH("isfinite", [](const Tensor& x) { return kiln::isfinite(x); }, GIL);
  auto nan_to_num_fn = [](const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                          std::optional<double> neginf) {
    return kiln::nan_to_num(x, nan, posinf, neginf);
  };
  BOTH("nan_to_num", nan_to_num_fn, nb::arg("nan") = 0.0, nb::arg("posinf") = nb::none(),
       nb::arg("neginf") = nb::none(), GIL);

  // clamp(min=None, max=None): numbers or tensors.
  auto clamp_fn = [](const Tensor& x, nb::handle lo, nb::handle hi) {
    bool tensors = nb::isinstance<Tensor>(lo) || nb::isinstance<Tensor>(hi);
    KILN_CHECK(!lo.is_none() || !hi.is_none(), Error,
               "torch.clamp: At least one of 'min' or 'max' must not be None");
    if (tensors) {
      Tensor a = lo.is_none() ? Tensor() : as_tensor_arg(lo, x.device());
      Tensor b = hi.is_none() ? Tensor() : as_tensor_arg(hi, x.device());
      return nogil([&] { return kiln::clamp(x, a, b); });
    }
    std::optional<Scalar> a, b;
    if (!lo.is_none()) a = nb::cast<Scalar>(lo);
    if (!hi.is_none()) b = nb::cast<Scalar>(hi);
    return nogil([&] { return kiln::clamp(x, a, b); });
  };
  BOTH("clamp", clamp_fn, nb::arg("min") = nb::none(), nb::arg("max") = nb::none());
  BOTH("clip", clamp_fn, nb::arg("min") = nb::none(), nb::arg("max") = nb::none());
  auto clamp_inplace = [](Self s, std::optional<Scalar> lo, std::optional<Scalar> hi) {
    return inplace(s, [&](Tensor& t) { kiln::clamp_(t, lo, hi); });
  };
  cls.def("clamp_", clamp_inplace, nb::arg("min") = nb::none(), nb::arg("max") = nb::none());
  cls.def("clip_", clamp_inplace, nb::arg("min") = nb::none(), nb::arg("max") = nb::none());
  BOTH("clamp_min", [](const Tensor& x, const Scalar& v) {
    return kiln::clamp(x, v, std::nullopt); }, nb::arg("min"), GIL);
  BOTH("clamp_max", [](const Tensor& x, const Scalar& v) {
    return kiln::clamp(x, std::nullopt, v); }, nb::arg("max"), GIL);

  // Binary ops: other is a tensor or a number.
#define BINARY(pyname, name)                                                                  \
  BOTH(pyname, [](const Tensor& a, const Tensor& b) { return kiln::name(a, b); },             \
       nb::arg("other"), GIL);                                                                \
  BOTH(pyname, [](const Tensor& a, const Scalar& b) { return kiln::name(a, b); },             \
       nb::arg("other"), GIL);                                                                \
  cls.def(pyname "_", [](Self s, const Tensor& b) {                                           \
    return inplace(s, [&](Tensor& t) { kiln::name##_(t, b); }); }, nb::arg("other"));         \
  cls.def(pyname "_", [](Self s, const Scalar& b) {                                           \
    return inplace(s, [&](Tensor& t) { kiln::name##_(t, b); }); }, nb::arg("other"));

  BINARY("mul", mul) BINARY("multiply", mul) BINARY("pow", pow)
  BINARY("fmod", fmod) BINARY("remainder", remainder)
  BINARY("eq", eq) BINARY("ne", ne)
  BINARY("lt", lt) BINARY("le", le) BINARY("gt", gt) BINARY("ge", ge)
  BINARY("not_equal", ne) BINARY("less", lt) BINARY("less_equal", le) BINARY("greater", gt)
  BINARY("greater_equal", ge)
  BINARY("bitwise_and", bitwise_and) BINARY("bitwise_or", bitwise_or)
  BINARY("bitwise_xor", bitwise_xor)
#undef BINARY
  // Tensor-only binary ops (PyTorch rejects a number as `other` for these).
#define BINARY_T(pyname, name)                                                                \
  BOTH(pyname, [](const Tensor& a, const Tensor& b) { return kiln::name(a, b); },             \
       nb::arg("other"), GIL);                                                                \
  cls.def(pyname "_", [](Self s, const Tensor& b) {                                           \
    return inplace(s, [&](Tensor& t) { kiln::name##_(t, b); }); }, nb::arg("other"));
  BINARY_T("maximum", maximum) BINARY_T("minimum", minimum) BINARY_T("atan2", atan2)
  BINARY_T("arctan2", atan2) BINARY_T("logical_and", logical_and)
  BINARY_T("logical_or", logical_or) BINARY_T("logical_xor", logical_xor)
#undef BINARY_T
  m.def("pow", [](const Scalar& a, const Tensor& b) { return kiln::pow(a, b); },
        nb::arg("self"), nb::arg("exponent"), GIL);

  // add/sub with alpha.
#define ADDSUB(pyname, name)                                                                  \
  BOTH(pyname, [](const Tensor& a, const Tensor& b, const Scalar& alpha) {                    \
    return kiln::name(a, b, alpha); }, nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1, GIL); \
  BOTH(pyname, [](const Tensor& a, const Scalar& b, const Scalar& alpha) {                    \
    return kiln::name(a, b, alpha); }, nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1, GIL); \
  cls.def(pyname "_", [](Self s, const Tensor& b, const Scalar& alpha) {                      \
    return inplace(s, [&](Tensor& t) { kiln::name##_(t, b, alpha); }); },                     \
    nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1);                                   \
  cls.def(pyname "_", [](Self s, const Scalar& b, const Scalar& alpha) {                      \
    return inplace(s, [&](Tensor& t) { kiln::name##_(t, b, alpha); }); },                     \
    nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1);
  ADDSUB("add", add) ADDSUB("sub", sub) ADDSUB("subtract", sub)
#undef ADDSUB
  BOTH("rsub", [](const Tensor& a, const Scalar& b, const Scalar& alpha) {
    return kiln::rsub(a, b, alpha); }, nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1, GIL);

  // div with rounding_mode (None, "trunc", "floor").
  auto mode = [](const std::optional<std::string>& r) {
    std::string s = r.value_or("");
    KILN_CHECK(s.empty() || s == "trunc" || s == "floor", Error,
               "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", s, "'");
    return s;
  };
  for (const char* name : {"div", "divide", "true_divide"}) {
    bool rounding = std::string(name) != "true_divide";
    if (rounding) {
      BOTH(name, [mode](const Tensor& a, const Tensor& b, const std::optional<std::string>& r) {
        std::string md = mode(r);
        return nogil([&] { return kiln::div(a, b, md); });
      }, nb::arg("other"), nb::kw_only(), nb::arg("rounding_mode") = nb::none());
      BOTH(name, [mode](const Tensor& a, const Scalar& b, const std::optional<std::string>& r) {
        std::string md = mode(r);
        return nogil([&] { return kiln::div(a, b, md); });
      }, nb::arg("other"), nb::kw_only(), nb::arg("rounding_mode") = nb::none());
      cls.def((std::string(name) + "_").c_str(), [mode](Self s, const Tensor& b,
                                                        const std::optional<std::string>& r) {
        std::string md = mode(r);
        return inplace(s, [&](Tensor& t) { kiln::div_(t, b, md); });
      }, nb::arg("other"), nb::kw_only(), nb::arg("rounding_mode") = nb::none());
      cls.def((std::string(name) + "_").c_str(), [mode](Self s, const Scalar& b,
                                                        const std::optional<std::string>& r) {
        std::string md = mode(r);
        return inplace(s, [&](Tensor& t) { kiln::div_(t, b, md); });
      }, nb::arg("other"), nb::kw_only(), nb::arg("rounding_mode") = nb::none());
    } else {
      BOTH(name, [](const Tensor& a, const Tensor& b) { return kiln::div(a, b); },
           nb::arg("other"), GIL);
      BOTH(name, [](const Tensor& a, const Scalar& b) { return kiln::div(a, b); },
           nb::arg("other"), GIL);
    }
  }
  BOTH("floor_divide", [](const Tensor& a, const Tensor& b) { return kiln::div(a, b, "floor"); },
       nb::arg("other"), GIL);
  BOTH("floor_divide", [](const Tensor& a, const Scalar& b) { return kiln::div(a, b, "floor"); },
       nb::arg("other"), GIL);
  cls.def("floor_divide_", [](Self s, const Tensor& b) {
    return inplace(s, [&](Tensor& t) { kiln::div_(t, b, "floor"); }); }, nb::arg("other"));
  cls.def("floor_divide_", [](Self s, const Scalar& b) {
    return inplace(s, [&](Tensor& t) { kiln::div_(t, b, "floor"); }); }, nb::arg("other"));
  BOTH("bitwise_not", [](const Tensor& x) -> Tensor {
    if (x.dtype() == DType::Bool) return kiln::logical_not(x);
    KILN_CHECK(is_integral(x.dtype()), NotImplementedError,
               "bitwise_not: expected an integral or bool dtype, got ", dtype_name(x.dtype()));
    return kiln::bitwise_xor(x, Scalar(int64_t(-1)));
  }, GIL);

  // Ternary ops.
  auto where_fn = [](const Tensor& cond, nb::handle a, nb::handle b) -> nb::object {
    if (a.is_none() && b.is_none()) {
      Tensor nz = nogil([&] { return kiln::nonzero(cond); });
      nb::list l;
      for (int64_t d = 0; d < nz.size(1); ++d) l.append(nogil([&] { return kiln::select(nz, 1, d); }));
      return nb::tuple(l);
    }
    bool ta = nb::isinstance<Tensor>(a), tb = nb::isinstance<Tensor>(b);
    if (ta && tb) {
      const Tensor &x = nb::cast<const Tensor&>(a), &y = nb::cast<const Tensor&>(b);
      return nb::cast(nogil([&] { return kiln::where(cond, x, y); }));
    }
    if (ta) {
      const Tensor& x = nb::cast<const Tensor&>(a);
      Scalar y = nb::cast<Scalar>(b);
      return nb::cast(nogil([&] { return kiln::where(cond, x, y); }));
    }
    if (tb) {
      Scalar x = nb::cast<Scalar>(a);
      const Tensor& y = nb::cast<const Tensor&>(b);
      return nb::cast(nogil([&] { return kiln::where(cond, x, y); }));
    }
    Tensor x = wrapped_scalar(nb::cast<Scalar>(a), cond.device());
    Tensor y = wrapped_scalar(nb::cast<Scalar>(b), cond.device());
    return nb::cast(nogil([&] { return kiln::where(cond, x, y); }));
  };
  m.def("where", where_fn, nb::arg("condition"), nb::arg("input") = nb::none(),
        nb::arg("other") = nb::none());
  cls.def("where", [where_fn](const Tensor& self, const Tensor& cond, nb::handle other) {
    return where_fn(cond, nb::cast(self), other);
  }, nb::arg("condition"), nb::arg("other"));
  BOTH("lerp", [](const Tensor& a, const Tensor& b, const Tensor& w) {
    return kiln::lerp(a, b, w); }, nb::arg("end"), nb::arg("weight"), GIL);
  BOTH("lerp", [](const Tensor& a, const Tensor& b, const Scalar& w) {
    return kiln::lerp(a, b, w); }, nb::arg("end"), nb::arg("weight"), GIL);
  // The fused Adam / AdamW update of python/kiln/optim/adam.py (include/kiln/ops/adam_step.h).
  m.def("_adam_step_supported", [](const Tensor& p, const Tensor& g, const Tensor& ea,
                                   const Tensor& eas) { return adam_step_supported(p, g, ea, eas); });
  m.def("_adam_step_", [](Tensor p, const Tensor& g, Tensor ea, Tensor eas, double decay,
                          double lerp_weight, double beta2, double one_minus_beta2,
                          double bias_correction2_sqrt, double eps, double neg_step_size,
                          bool maximize) {
    adam_step_(p, g, ea, eas, {decay, lerp_weight, beta2, one_minus_beta2,
                               bias_correction2_sqrt, eps, neg_step_size, maximize});
  }, GIL);
  BOTH("addcmul", [](const Tensor& s, const Tensor& a, const Tensor& b, const Scalar& v) {
    return kiln::addcmul(s, a, b, v); }, nb::arg("tensor1"), nb::arg("tensor2"), nb::kw_only(),
    nb::arg("value") = 1, GIL);
  BOTH("addcdiv", [](const Tensor& s, const Tensor& a, const Tensor& b, const Scalar& v) {
    return kiln::addcdiv(s, a, b, v); }, nb::arg("tensor1"), nb::arg("tensor2"), nb::kw_only(),
    nb::arg("value") = 1, GIL);
  cls.def("addcmul_", [](Self s, const Tensor& a, const Tensor& b, const Scalar& v) {
    return inplace(s, [&](Tensor& t) { kiln::addcmul_(t, a, b, v); }); },
    nb::arg("tensor1"), nb::arg("tensor2"), nb::kw_only(), nb::arg("value") = 1);
  cls.def("addcdiv_", [](Self s, const Tensor& a, const Tensor& b, const Scalar& v) {
    return inplace(s, [&](Tensor& t) { kiln::addcdiv_(t, a, b, v); }); },
    nb::arg("tensor1"), nb::arg("tensor2"), nb::kw_only(), nb::arg("value") = 1);
}

}  // namespace kiln::py
