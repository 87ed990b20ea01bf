"""The pair for tensors and tensor-likes (numpy arrays, anything kiln.as_tensor takes)."""
import kiln
from ._isclose import isclose
from ._messages import scalar_mismatch_msg, tensor_mismatch_msg
from ._pair import Pair
from ._tolerances import get_tolerances


def _layout(t):
    # kiln tensors are all strided and have no .layout yet; read it when one exists so that
    # check_layout starts to mean something without a change here.
    return getattr(t, "layout", "strided")


class TensorLikePair(Pair):
    """Two tensors (or two tensor-likes of directly related types) compared attribute by
    attribute (shape always; layout, stride, device, dtype as the check_* flags say), then
    value by value (isclose) after moving both to the CPU and promoting to a
    common dtype where those checks were switched off."""

    def __init__(self, actual, expected, *, id=(), allow_subclasses=True, rtol=None,
                 atol=None, equal_nan=False, check_device=True, check_dtype=True,
                 check_layout=True, check_stride=False, **options):
        actual, expected = self._process_inputs(actual, expected, allow_subclasses)
        super().__init__(actual, expected, id=id, **options)
        self.rtol, self.atol = get_tolerances(actual, expected, rtol=rtol, atol=atol, id=id)
        self.equal_nan = equal_nan
        self.check_device = check_device
        self.check_dtype = check_dtype
        self.check_layout = check_layout
        self.check_stride = check_stride

    def _process_inputs(self, actual, expected, allow_subclasses):
        # A numpy array and a kiln tensor are not "directly related", nor a list and a
        # tensor: comparing them is refused rather than silently converting one side.
        if not (isinstance(actual, type(expected)) or isinstance(expected, type(actual))):
            self._unsupported()
        if not allow_subclasses and type(actual) is not type(expected):
            self._unsupported()
        return self._to_tensor(actual), self._to_tensor(expected)

    def _to_tensor(self, x):
        if isinstance(x, kiln.Tensor):
            return x
        try:
            return kiln.as_tensor(x)
        except Exception:
            self._unsupported()

    def compare(self):
        a, e = self.actual, self.expected
        self._compare_attributes(a, e)
        a, e = self._equalize(a, e)
        self._compare_values(a, e)

    def _attribute_mismatch(self, name, a, e):
        self._fail(AssertionError,
                   f"The values for attribute '{name}' do not match: {a} != {e}.")

    def _compare_attributes(self, a, e):
        if a.shape != e.shape:
            self._attribute_mismatch("shape", a.shape, e.shape)
        if a.is_quantized != e.is_quantized:
            self._attribute_mismatch("is_quantized", a.is_quantized, e.is_quantized)
        if _layout(a) != _layout(e):
            if self.check_layout:
                self._attribute_mismatch("layout", _layout(a), _layout(e))
        elif self.check_stride and a.stride() != e.stride():
            self._attribute_mismatch("stride()", a.stride(), e.stride())
        if self.check_device and a.device != e.device:
            self._attribute_mismatch("device", a.device, e.device)
        if self.check_dtype and a.dtype != e.dtype:
            self._attribute_mismatch("dtype", a.dtype, e.dtype)

    @staticmethod
    def _equalize(a, e):
        """Both on the CPU (when on different devices) in their promoted dtype, detached:
        the message code writes into differences of them."""
        a, e = a.detach(), e.detach()
        if a.device != e.device:
            a, e = a.cpu(), e.cpu()
        if a.dtype != e.dtype:
            dtype = kiln.promote_types(a.dtype, e.dtype)
            a, e = a.to(dtype), e.to(dtype)
        return a, e

    def _compare_values(self, a, e):
        matches = isclose(a, e, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan)
        if bool(kiln.all(matches).item()):
            return
        if a.dim() == 0:
            msg = scalar_mismatch_msg(a.item(), e.item(), rtol=self.rtol, atol=self.atol)
        else:
            msg = tensor_mismatch_msg(a, e, matches, rtol=self.rtol, atol=self.atol)
        self._fail(AssertionError, msg)

    def extra_repr(self):
        return ("rtol", "atol", "equal_nan", "check_device", "check_dtype", "check_layout",
                "check_stride")
