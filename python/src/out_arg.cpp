// kiln.fn(..., out=t) for the elementwise functions, matmul / mm / bmm, cat / stack, sum /
// mean and (through add_generic_out) the other single-result functions listed at the end, as
// PyTorch's out= forms: the result is written into t and t is returned. These
// overloads are registered after the plain ones, so a call without out= never reaches them.
//   - t of the result's shape: the C++ *_out function writes into it directly (no temporary
//     when t already has the result's dtype; otherwise the result is cast to t's dtype where
//     PyTorch allows it, and RuntimeError where it does not, e.g. a float result into int64).
//   - an empty t (numel 0, not a view; PyTorch's `torch.empty(0)` idiom): t becomes the
//     result.
//   - any other shape: RuntimeError (decision 0004: PyTorch resizes a non-empty t with a
//     deprecation warning; kiln refuses rather than silently detaching it from its views).
//   - like PyTorch, out= is refused when grad mode is on and an argument requires grad.
#include "kiln/core/shape.h"
#include "kiln/ops/copy.h"
#include "kiln/tensor/promotion.h"
#include "bind.h"

namespace kiln::py {

namespace {

using Out = nb::handle_t<Tensor>;

void check_autograd(const char* fn, const std::vector<const Tensor*>& ins, const Tensor& out) {
  if (!autograd::is_grad_enabled()) return;
  bool any = autograd::requires_grad(out);
  for (const Tensor* t : ins) any = any || autograd::requires_grad(*t);
  KILN_CHECK(!any, Error, fn,
             "(): functions with out=... arguments don't support automatic differentiation, "
             "but one of the arguments requires grad.");
}

void check_shape(const char* fn, const Tensor& out, const Shape& shape) {
  KILN_CHECK(out.shape() == shape || (out.numel() == 0 && !out.is_view()), ShapeError, fn,
             "(): out has shape ", shape_str(out.shape()), " but the result has shape ",
             shape_str(shape),
             "; kiln resizes out only when it is empty (numel 0) and not a view (decision 0004)");
}

// Writes a computed result r into out: cast and copied when out has r's shape, else (an
// empty out) out becomes r.
void store(const char* fn, Tensor& out, const Tensor& r) {
  check_shape(fn, out, r.shape());
  KILN_CHECK(can_cast(r.dtype(), out.dtype()), Error, fn, "(): result type ",
             dtype_name(r.dtype()), " can't be cast to the desired output type ",
             dtype_name(out.dtype()));
  KILN_CHECK(r.device() == out.device(), DeviceError, fn, "(): expected out on ",
             r.device().str(), ", got out on ", out.device().str());
  if (out.shape() == r.shape()) copy_(out, r);
  else out = r.dtype() == out.dtype() ? r : r.to(out.dtype());
}

// write(t) calls the C++ *_out function; compute() the plain one (for an empty t).
template <typename Write, typename Compute>
nb::object write_out(const char* fn, Out out_obj, const Shape& shape,
                     const std::vector<const Tensor*>& ins, Write&& write, Compute&& compute) {
  Tensor& out = *nb::inst_ptr<Tensor>(out_obj);
  check_autograd(fn, ins, out);
  check_shape(fn, out, shape);
  nogil([&] {
    if (out.shape() == shape) write(out);
    else store(fn, out, compute());
  });
  return nb::borrow(out_obj);
}

// Functions without a C++ *_out form (matmul, cat, ...): the result is computed, then
// stored into out (one copy through a temporary, which also makes an out that overlaps an
// input safe).
template <typename Compute>
nb::object compute_then_store(const char* fn, Out out_obj, const std::vector<const Tensor*>& ins,
                              Compute&& compute) {
  Tensor& out = *nb::inst_ptr<Tensor>(out_obj);
  check_autograd(fn, ins, out);
  nogil([&] { store(fn, out, compute()); });
  return nb::borrow(out_obj);
}

// The tensors among a call's arguments (lists included), for the autograd check.
std::vector<Tensor> tensor_args(const nb::args& args, const nb::dict& kwargs) {
  std::vector<Tensor> found;
  auto visit = [&](nb::handle h) {
    if (nb::isinstance<Tensor>(h)) {
      found.push_back(nb::cast<Tensor>(h));
    } else if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
      for (nb::handle e : h)
        if (nb::isinstance<Tensor>(e)) found.push_back(nb::cast<Tensor>(e));
    }
  };
  for (nb::handle a : args) visit(a);
  for (auto [k, v] : kwargs) visit(v);
  return found;
}

// out= for a function whose plain overloads return one tensor: an overload taking any
// arguments, tried after them (so only a call that the plain forms refused reaches it); with
// out= it calls the plain function without out and stores the result (compute_then_store's
// rules), without out= it passes on, and nanobind reports the usual argument error.
// (The function is looked up at call time: nanobind moves the overloads of an existing
// function object into a new one when an overload is added, so a captured object dangles.
// Without out, the lookup can reach only the plain overloads or this one, which passes.)
void add_generic_out(nb::module_& m, const char* name) {
  nb::handle module = m;
  m.def(name, [module, name](nb::args args, nb::kwargs kwargs) -> nb::object {
    if (!kwargs.contains("out")) throw nb::next_overload();
    nb::object out_obj = kwargs["out"];
    KILN_CHECK(nb::isinstance<Tensor>(out_obj), Error, name,
               "(): argument 'out' must be Tensor, not ", nb::type_name(out_obj.type()).c_str());
    nb::dict rest;
    for (auto [k, v] : kwargs)
      if (nb::cast<std::string>(k) != "out") rest[k] = v;
    Tensor& out = nb::cast<Tensor&>(out_obj);
    std::vector<Tensor> ins = tensor_args(args, rest);
    std::vector<const Tensor*> in_ptrs;
    for (const Tensor& t : ins) in_ptrs.push_back(&t);
    check_autograd(name, in_ptrs, out);
    nb::object r = module.attr(name)(*args, **rest);
    KILN_CHECK(nb::isinstance<Tensor>(r), Error, name,
               "(): out= is supported only where the function returns one tensor");
    const Tensor result = nb::cast<Tensor>(r);
    nogil([&] { store(name, out, result); });
    return out_obj;
  });
}

}  // namespace

void bind_out_forms(nb::module_& m) {
#define UNARY_OUT(name)                                                                      \
  m.def(#name, [](const Tensor& x, Out out) {                                                \
    return write_out(#name, out, x.shape(), {&x}, [&](Tensor& o) { kiln::name##_out(x, o); }, \
                     [&] { return kiln::name(x); });                                         \
  }, nb::arg("input"), nb::kw_only(), nb::arg("out"));
  UNARY_OUT(neg) UNARY_OUT(abs) UNARY_OUT(exp) UNARY_OUT(exp2) UNARY_OUT(log) UNARY_OUT(log2)
  UNARY_OUT(log1p) UNARY_OUT(expm1) UNARY_OUT(sqrt) UNARY_OUT(rsqrt) UNARY_OUT(sin)
  UNARY_OUT(cos) UNARY_OUT(tan) UNARY_OUT(tanh) UNARY_OUT(sigmoid)
  UNARY_OUT(erf) UNARY_OUT(floor) UNARY_OUT(ceil) UNARY_OUT(trunc) UNARY_OUT(sign)
  UNARY_OUT(reciprocal) UNARY_OUT(logical_not)
#undef UNARY_OUT

  // Binary ops: other a tensor or a Python number (a wrapped scalar, promoted as one).
#define BINARY_OUT(pyname, name)                                                             \
  m.def(pyname, [](const Tensor& a, nb::handle b_obj, Out out) {                             \
    const Tensor b = as_tensor_arg(b_obj, a.device());                                       \
    return write_out(pyname, out, broadcast_shapes(a.shape(), b.shape()), {&a, &b},          \
                     [&](Tensor& o) { kiln::name##_out(a, b, o); },                          \
                     [&] { return kiln::name(a, b); });                                      \
  }, nb::arg("input"), nb::arg("other"), nb::kw_only(), nb::arg("out"));
  BINARY_OUT("mul", mul) BINARY_OUT("multiply", mul) BINARY_OUT("pow", pow)
  BINARY_OUT("maximum", maximum) BINARY_OUT("minimum", minimum) BINARY_OUT("fmod", fmod)
  BINARY_OUT("remainder", remainder) BINARY_OUT("atan2", atan2)
  BINARY_OUT("eq", eq) BINARY_OUT("ne", ne) BINARY_OUT("lt", lt) BINARY_OUT("le", le)
  BINARY_OUT("gt", gt) BINARY_OUT("ge", ge)
  BINARY_OUT("logical_and", logical_and) BINARY_OUT("logical_or", logical_or)
  BINARY_OUT("logical_xor", logical_xor) BINARY_OUT("bitwise_and", bitwise_and)
  BINARY_OUT("bitwise_or", bitwise_or) BINARY_OUT("bitwise_xor", bitwise_xor)
#undef BINARY_OUT

#define ADDSUB_OUT(pyname, name)                                                             \
  m.def(pyname, [](const Tensor& a, nb::handle b_obj, const Scalar& alpha, Out out) {        \
    const Tensor b = as_tensor_arg(b_obj, a.device());                                       \
    return write_out(pyname, out, broadcast_shapes(a.shape(), b.shape()), {&a, &b},          \
                     [&](Tensor& o) { kiln::name##_out(a, b, o, alpha); },                   \
                     [&] { return kiln::name(a, b, alpha); });                               \
  }, nb::arg("input"), nb::arg("other"), nb::kw_only(), nb::arg("alpha") = 1, nb::arg("out"));
  ADDSUB_OUT("add", add) ADDSUB_OUT("sub", sub) ADDSUB_OUT("subtract", sub)
#undef ADDSUB_OUT

  for (const char* name : {"div", "divide", "true_divide"}) {
    m.def(name, [name](const Tensor& a, nb::handle b_obj, const std::optional<std::string>& mode,
                       Out out) {
      const Tensor b = as_tensor_arg(b_obj, a.device());
      const std::string md = mode.value_or("");
      KILN_CHECK(md.empty() || md == "trunc" || md == "floor", Error,
                 "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
                 md, "'");
      return write_out(name, out, broadcast_shapes(a.shape(), b.shape()), {&a, &b},
                       [&](Tensor& o) { kiln::div_out(a, b, o, md); },
                       [&] { return kiln::div(a, b, md); });
    }, nb::arg("input"), nb::arg("other"), nb::kw_only(), nb::arg("rounding_mode") = nb::none(),
       nb::arg("out"));
  }

  // Matrix products and joins: computed, then stored.
#define PRODUCT_OUT(pyname, name, arg2)                                                      \
  m.def(pyname, [](const Tensor& a, const Tensor& b, Out out) {                              \
    return compute_then_store(pyname, out, {&a, &b}, [&] { return kiln::name(a, b); });      \
  }, nb::arg("input"), nb::arg(arg2), nb::kw_only(), nb::arg("out"));
  PRODUCT_OUT("matmul", matmul, "other") PRODUCT_OUT("mm", mm, "mat2")
  PRODUCT_OUT("bmm", bmm, "mat2")
#undef PRODUCT_OUT
  auto joined = [](const std::vector<Tensor>& xs) {
    std::vector<const Tensor*> p;
    for (const Tensor& x : xs) p.push_back(&x);
    return p;
  };
  for (const char* name : {"cat", "concat", "concatenate"}) {
    m.def(name, [name, joined](const std::vector<Tensor>& xs, int64_t dim, Out out) {
      return compute_then_store(name, out, joined(xs), [&] { return kiln::cat(xs, dim); });
    }, nb::arg("tensors"), nb::arg("dim") = 0, nb::kw_only(), nb::arg("out"));
  }
  // Reductions: sum and mean over dims (None: every dim), as their plain forms.
  m.def("sum", [](const Tensor& x, nb::handle dim, bool keepdim, std::optional<DType> dtype,
                  Out out) {
    const Dims d = dims_from_handle(dim);
    return compute_then_store("sum", out, {&x}, [&] { return kiln::sum(x, d, keepdim, dtype); });
  }, nb::arg("input"), nb::arg("dim") = nb::none(), nb::arg("keepdim") = false, nb::kw_only(),
     nb::arg("dtype") = nb::none(), nb::arg("out"));
  m.def("mean", [](const Tensor& x, nb::handle dim, bool keepdim, std::optional<DType> dtype,
                   Out out) {
    const Dims d = dims_from_handle(dim);
    return compute_then_store("mean", out, {&x}, [&] {
      return kiln::mean(dtype && *dtype != x.dtype() ? to_dtype(x, *dtype) : x, d, keepdim);
    });
  }, nb::arg("input"), nb::arg("dim") = nb::none(), nb::arg("keepdim") = false, nb::kw_only(),
     nb::arg("dtype") = nb::none(), nb::arg("out"));
  m.def("stack", [joined](const std::vector<Tensor>& xs, int64_t dim, Out out) {
    return compute_then_store("stack", out, joined(xs), [&] { return kiln::stack(xs, dim); });
  }, nb::arg("tensors"), nb::arg("dim") = 0, nb::kw_only(), nb::arg("out"));

  // The other single-result functions torch gives out=: the plain call, then a store.
  for (const char* name :
       {"prod", "amax", "amin", "var", "std", "norm", "logsumexp", "all", "any", "argmax",
        "argmin", "cumsum", "cumprod", "clamp", "clip", "where", "lerp", "addcmul", "addcdiv",
        "addmm", "baddbmm", "outer", "ger", "dot", "tril", "triu", "nan_to_num", "clamp_min",
        "clamp_max", "softmax", "log_softmax", "floor_divide", "bernoulli", "multinomial",
        "erfinv", "erfc", "digamma", "complex", "negative", "scatter", "pow", "max", "min"})
    add_generic_out(m, name);

  // The out= forms of functions written in Python (python/kiln/_out_forms.py): the result
  // they computed, stored into out by the rules above (inputs: the call's tensors, for the
  // autograd check).
  m.def("_store_out", [](const std::string& fn, nb::object out_obj, nb::object result,
                         const std::vector<Tensor>& inputs) -> nb::object {
    KILN_CHECK(nb::isinstance<Tensor>(out_obj), Error, fn,
               "(): argument 'out' must be Tensor, not ", nb::type_name(out_obj.type()).c_str());
    KILN_CHECK(nb::isinstance<Tensor>(result), Error, fn,
               "(): out= is supported only where the function returns one tensor");
    Tensor& out = nb::cast<Tensor&>(out_obj);
    std::vector<const Tensor*> in_ptrs;
    for (const Tensor& t : inputs) in_ptrs.push_back(&t);
    check_autograd(fn.c_str(), in_ptrs, out);
    const Tensor r = nb::cast<Tensor>(result);
    nogil([&] { store(fn.c_str(), out, r); });
    return out_obj;
  }, nb::arg("fn"), nb::arg("out"), nb::arg("result"), nb::arg("inputs"));
}

}  // namespace kiln::py
