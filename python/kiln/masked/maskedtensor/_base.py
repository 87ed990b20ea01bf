"""What every part of MaskedTensor needs: the argument checks, is_masked_tensor, and the
base class that stores (data, mask) and wraps results of operations. The operations are
mixins (elementwise.py, reductions.py, views.py) combined in core.MaskedTensor."""
import kiln

# the data dtypes torch's MaskedTensor accepts
_SUPPORTED_DTYPES = ("float16", "float32", "float64", "bool", "int8", "int16", "int32",
                     "int64")


def is_masked_tensor(obj, /):
    """Whether obj is a MaskedTensor."""
    return isinstance(obj, MaskedTensorBase)


def _dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _check_members(data, mask):
    """Same checks and messages as torch, in the same order."""
    if mask.dtype != kiln.bool:
        raise TypeError("mask must have dtype bool.")
    if _dtype_name(data.dtype) not in _SUPPORTED_DTYPES:
        raise TypeError(f"{data.dtype} is not supported in MaskedTensor.")
    if data.dim() != mask.dim():
        raise ValueError("data.dim() must equal mask.dim()")
    if data.shape != mask.shape:
        raise ValueError("data.size() must equal mask.size()")


def _check_tensors(data, mask):
    if is_masked_tensor(data) or not isinstance(data, kiln.Tensor):
        raise TypeError("data must be a Tensor")
    if is_masked_tensor(mask) or not isinstance(mask, kiln.Tensor):
        raise TypeError("mask must be a Tensor")


class MaskedTensorBase:
    """The storage: _masked_data and _masked_mask, always checked together."""

    @classmethod
    def _wrap(cls, data, mask):
        """A MaskedTensor over data and mask as they are: no copy, autograd history kept
        (the results of operations, and as_masked_tensor)."""
        _check_tensors(data, mask)
        obj = cls.__new__(cls)
        obj._set_data_mask(data, mask)
        return obj

    def _set_data_mask(self, data, mask):
        _check_members(data, mask)
        self._masked_data = data
        self._masked_mask = mask

    def get_data(self):
        """The data, masked-out elements included (their values mean nothing)."""
        return self._masked_data

    def get_mask(self):
        return self._masked_mask
