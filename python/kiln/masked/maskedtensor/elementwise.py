"""Elementwise operations of MaskedTensor: the op runs on the data and the result keeps the
mask (torch's unary and binary op lists, their in-place forms, and the Python operators).

Unary ops take no further tensor argument (numbers and keywords only). Binary ops combine a
MaskedTensor with another one of the same mask (else ValueError), a tensor or a number; the
result's mask is the MaskedTensor's, expanded to the result's shape. kiln also defines the
reflected operators (2 - mt, 2 / mt), which torch's MaskedTensor refuses."""
import operator

import kiln

from ._base import is_masked_tensor

UNARY_NAMES = [
    "abs", "absolute", "acos", "arccos", "acosh", "arccosh", "angle", "asin", "arcsin",
    "asinh", "arcsinh", "atan", "arctan", "atanh", "arctanh", "bitwise_not", "ceil", "clamp",
    "clip", "conj_physical", "cos", "cosh", "deg2rad", "digamma", "erf", "erfc", "erfinv",
    "exp", "exp2", "expm1", "fix", "floor", "frac", "lgamma", "log", "log10", "log1p", "log2",
    "logit", "i0", "isnan", "nan_to_num", "neg", "negative", "positive", "pow", "rad2deg",
    "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sgn", "signbit", "sin", "sinc",
    "sinh", "sqrt", "square", "tan", "tanh", "trunc"]
# conj_physical_ is torch's too but kiln tensors have no such method
INPLACE_UNARY_NAMES = [n + "_" for n in UNARY_NAMES
                       if n not in ("angle", "positive", "signbit", "isnan", "conj_physical")]

BINARY_NAMES = [
    "add", "atan2", "arctan2", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_left_shift", "bitwise_right_shift", "div", "divide", "floor_divide", "fmod",
    "logaddexp", "logaddexp2", "mul", "multiply", "nextafter", "remainder", "sub",
    "subtract", "true_divide", "eq", "ne", "le", "ge", "greater", "greater_equal", "gt",
    "less_equal", "lt", "less", "maximum", "minimum", "fmax", "fmin", "not_equal"]
INPLACE_BINARY_NAMES = [n + "_" for n in BINARY_NAMES
                        if n not in ("logaddexp", "logaddexp2", "fmin", "minimum", "maximum",
                                     "fmax")]


def _masks_match(a, b):
    """Two MaskedTensors match when their masks have as many dims and are equal (after
    broadcasting, as torch compares them); anything else matches."""
    if is_masked_tensor(a) and is_masked_tensor(b):
        ma, mb = a.get_mask(), b.get_mask()
        return ma.dim() == mb.dim() and bool(kiln.eq(ma, mb).all().item())
    return True


def _data(x):
    return x.get_data() if is_masked_tensor(x) else x


def _unary(name, inplace):
    def op(self, *args, **kwargs):
        if any(isinstance(a, kiln.Tensor) or is_masked_tensor(a)
               for a in list(args) + list(kwargs.values())):
            raise TypeError("MaskedTensor unary ops do not support additional Tensor "
                            "arguments")
        # in-place names modify the data tensor itself (views of it see the change)
        result = getattr(self._masked_data, name)(*args, **kwargs)
        if inplace:
            self._set_data_mask(result, self._masked_mask)
            return self
        return self._wrap(result, self._masked_mask)
    op.__name__ = name
    op.__doc__ = f"Tensor.{name} on the data; the mask is kept."
    return op


def _binary_check(args, kwargs):
    if kwargs:
        raise ValueError("len(kwargs) must equal 0")
    if not _masks_match(*args[:2]):
        raise ValueError("Input masks must match. If you need support for this, please open "
                         "an issue on Github.")


def _binary(name, inplace):
    def op(self, other, **kwargs):
        _binary_check((self, other), kwargs)
        result = getattr(self._masked_data, name)(_data(other))
        if inplace:
            self._set_data_mask(result, self._masked_mask)
            return self
        return self._wrap(result, self._masked_mask.expand_as(result))
    op.__name__ = name
    op.__doc__ = f"Tensor.{name} on the data (masks must match); the mask is kept."
    return op


def _operator(fn, reflected=False):
    """A Python operator: fn(data, other) (or fn(other, data) when reflected)."""
    def op(self, other):
        if not isinstance(other, (kiln.Tensor, int, float, bool, complex)) \
                and not is_masked_tensor(other):
            return NotImplemented
        _binary_check((self, other), {})
        a, b = self._masked_data, _data(other)
        result = fn(b, a) if reflected else fn(a, b)
        return self._wrap(result, self._masked_mask.expand_as(result))
    return op


class ElementwiseOps:
    """Mixin of MaskedTensor: the unary and binary methods and operators."""

    def __lt__(self, other):
        # torch's __lt__ takes this mask and does not compare it with other's
        return self._wrap(self._masked_data < _data(other), self._masked_mask)

    def __neg__(self):
        return self.neg()

    def __pos__(self):
        return self.positive()

    def __abs__(self):
        return self.abs()

    def __invert__(self):
        return self.bitwise_not()

    def __pow__(self, exponent):
        return self.pow(exponent)

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)


for _name in UNARY_NAMES:
    setattr(ElementwiseOps, _name, _unary(_name, False))
for _name in INPLACE_UNARY_NAMES:
    setattr(ElementwiseOps, _name, _unary(_name, True))
for _name in BINARY_NAMES:
    if _name != "lt":  # lt is __lt__'s method form below
        setattr(ElementwiseOps, _name, _binary(_name, False))
for _name in INPLACE_BINARY_NAMES:
    setattr(ElementwiseOps, _name, _binary(_name, True))
ElementwiseOps.lt = ElementwiseOps.__lt__

for _dunder, _fn in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                     ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                     ("mod", operator.mod), ("and", operator.and_), ("or", operator.or_),
                     ("xor", operator.xor)]:
    setattr(ElementwiseOps, f"__{_dunder}__", _operator(_fn))
    setattr(ElementwiseOps, f"__r{_dunder}__", _operator(_fn, reflected=True))
for _dunder, _fn in [("eq", operator.eq), ("ne", operator.ne), ("le", operator.le),
                     ("gt", operator.gt), ("ge", operator.ge)]:
    setattr(ElementwiseOps, f"__{_dunder}__", _operator(_fn))
del _name, _dunder, _fn
