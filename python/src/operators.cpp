// Python operators on kiln.Tensor: + - * / // % ** @, unary - + ~ abs, comparisons,
// & | ^, their reflected forms (number op tensor) and in-place forms (+= ...). A number on
// either side takes part in type promotion as a scalar, as in PyTorch. An unsupported
// operand type makes the operator return NotImplemented (so Python raises TypeError).
#include "bind.h"

namespace kiln::py {

using Self = nb::handle_t<Tensor>;
#define GIL nb::call_guard<nb::gil_scoped_release>()
#define OP nb::is_operator()

namespace {
template <typename F>
nb::object inplace(Self self, F&& f) {
  Tensor& t = *nb::inst_ptr<Tensor>(self);
  nogil([&] { f(t); });
  return nb::borrow(self);
}

Tensor invert(const Tensor& x) {
  if (x.dtype() == DType::Bool) return kiln::logical_not(x);
  KILN_CHECK(is_integral(x.dtype()), TypeError,
             "~ (operator.invert) is only implemented on integer and Boolean-type tensors");
  return kiln::bitwise_xor(x, Scalar(int64_t(-1)));
}
}  // namespace

void bind_operators(nb::module_&, nb::class_<Tensor>& cls) {
  // tensor op tensor, tensor op number, number op tensor, tensor op= x.
#define BINOP(py, fn)                                                                        \
  cls.def("__" py "__", [](const Tensor& a, const Tensor& b) { return fn(a, b); }, OP, GIL); \
  cls.def("__" py "__", [](const Tensor& a, const Scalar& b) { return fn(a, b); }, OP, GIL);
#define RBINOP(py, expr)                                                                        \
  cls.def("__r" py "__", [](const Tensor& a, const Scalar& b) { return expr; }, OP, GIL);
#define IBINOP(py, fn)                                                                          \
  cls.def("__i" py "__", [](Self s, const Tensor& b) {                                          \
    return inplace(s, [&](Tensor& t) { fn(t, b); }); }, OP);                                    \
  cls.def("__i" py "__", [](Self s, const Scalar& b) {                                          \
    return inplace(s, [&](Tensor& t) { fn(t, b); }); }, OP);

  BINOP("add", kiln::add) RBINOP("add", kiln::add(a, b)) IBINOP("add", kiln::add_)
  BINOP("sub", kiln::sub) RBINOP("sub", kiln::rsub(a, b)) IBINOP("sub", kiln::sub_)
  BINOP("mul", kiln::mul) RBINOP("mul", kiln::mul(a, b)) IBINOP("mul", kiln::mul_)
  BINOP("truediv", kiln::div) RBINOP("truediv", kiln::div(b, a)) IBINOP("truediv", kiln::div_)
  BINOP("pow", kiln::pow) RBINOP("pow", kiln::pow(b, a)) IBINOP("pow", kiln::pow_)
  BINOP("mod", kiln::remainder)
  RBINOP("mod", kiln::remainder(wrapped_scalar(b, a.device()), a))
  IBINOP("mod", kiln::remainder_)
  BINOP("and", kiln::bitwise_and) RBINOP("and", kiln::bitwise_and(a, b))
  IBINOP("and", kiln::bitwise_and_)
  BINOP("or", kiln::bitwise_or) RBINOP("or", kiln::bitwise_or(a, b))
  IBINOP("or", kiln::bitwise_or_)
  BINOP("xor", kiln::bitwise_xor) RBINOP("xor", kiln::bitwise_xor(a, b))
  IBINOP("xor", kiln::bitwise_xor_)
  BINOP("eq", kiln::eq) BINOP("ne", kiln::ne) BINOP("lt", kiln::lt) BINOP("le", kiln::le)
  BINOP("gt", kiln::gt) BINOP("ge", kiln::ge)
#undef BINOP
#undef RBINOP
#undef IBINOP

  cls.def("__floordiv__", [](const Tensor& a, const Tensor& b) { return kiln::div(a, b, "floor"); },
          OP, GIL);
  cls.def("__floordiv__", [](const Tensor& a, const Scalar& b) { return kiln::div(a, b, "floor"); },
          OP, GIL);
  cls.def("__rfloordiv__", [](const Tensor& a, const Scalar& b) {
    return kiln::div(wrapped_scalar(b, a.device()), a, "floor"); }, OP, GIL);
  cls.def("__ifloordiv__", [](Self s, const Tensor& b) {
    return inplace(s, [&](Tensor& t) { kiln::div_(t, b, "floor"); }); }, OP);
  cls.def("__ifloordiv__", [](Self s, const Scalar& b) {
    return inplace(s, [&](Tensor& t) { kiln::div_(t, b, "floor"); }); }, OP);
  cls.def("__matmul__", [](const Tensor& a, const Tensor& b) { return kiln::matmul(a, b); }, OP, GIL);
  cls.def("__rmatmul__", [](const Tensor& a, const Tensor& b) { return kiln::matmul(b, a); }, OP, GIL);

  cls.def("__neg__", [](const Tensor& a) {
    KILN_CHECK(a.dtype() != DType::Bool, Error,
               "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
               "to invert a mask, use the `~` or `logical_not()` operator instead.");
    return kiln::neg(a);
  }, GIL);
  cls.def("__pos__", [](Self s) { return nb::borrow(s); });
  cls.def("__abs__", [](const Tensor& a) { return kiln::abs(a); }, GIL);
  cls.def("__invert__", &invert, GIL);
}

}  // namespace kiln::py
