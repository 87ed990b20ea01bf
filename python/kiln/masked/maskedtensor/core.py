"""MaskedTensor: a tensor of data and a boolean mask of the same shape saying which elements
are specified. Unlike torch's (a Tensor subclass that intercepts every op through
__torch_dispatch__), kiln's is a plain Python object: its operations are its methods and
operators (elementwise.py, reductions.py, views.py), and kiln functions such as kiln.exp do
not accept it. Autograd runs on the data tensor: a MaskedTensor made with requires_grad=True
holds a leaf, and .grad wraps that leaf's gradient in the same mask."""
import kiln

from ._base import MaskedTensorBase, _check_tensors, is_masked_tensor
from .elementwise import ElementwiseOps
from .reductions import ReductionOps
from .views import ViewOps

__all__ = ["MaskedTensor", "is_masked_tensor"]


class MaskedTensor(MaskedTensorBase, ElementwiseOps, ReductionOps, ViewOps):
    """MaskedTensor(data, mask, requires_grad=False): copies of data (detached: a leaf, that
    requires grad if asked) and mask (bool, same shape)."""

    __hash__ = object.__hash__  # the comparison operators are elementwise, as on tensors

    def __init__(self, data, mask, requires_grad=False):
        _check_tensors(data, mask)
        data = data.detach().clone()
        if requires_grad:
            data.requires_grad_(True)
        self._set_data_mask(data, mask.clone())

    @classmethod
    def _from_values(cls, data, mask):
        """The differentiable constructor: gradients flow from the result back to data."""
        _check_tensors(data, mask)
        return cls._wrap(data.clone(), mask.clone())

    # --- the two parts ---------------------------------------------------------------

    def to_tensor(self, value):
        """A plain tensor: the data with masked-out elements set to value."""
        return self._masked_data.masked_fill(~self._masked_mask, value)

    def is_sparse_coo(self):
        return False  # kiln has strided tensors only

    def is_sparse_csr(self):
        return False

    @property
    def is_sparse(self):
        return False

    # --- tensor attributes -----------------------------------------------------------

    @property
    def shape(self):
        return self._masked_data.shape

    def size(self, dim=None):
        return self._masked_data.shape if dim is None else self._masked_data.size(dim)

    def dim(self):
        return self._masked_data.dim()

    @property
    def ndim(self):
        return self._masked_data.dim()

    def numel(self):
        return self._masked_data.numel()

    def __len__(self):
        return len(self._masked_data)

    @property
    def dtype(self):
        return self._masked_data.dtype

    @property
    def device(self):
        return self._masked_data.device

    def item(self):
        """The data's single value, specified or not (as torch)."""
        return self._masked_data.item()

    # --- autograd --------------------------------------------------------------------

    @property
    def requires_grad(self):
        return self._masked_data.requires_grad

    def requires_grad_(self, requires_grad=True):
        self._masked_data.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self):
        return self._masked_data.is_leaf

    @property
    def grad(self):
        """The gradient of a leaf, as a MaskedTensor with this one's mask (None before any
        backward)."""
        g = self._masked_data.grad
        return None if g is None else MaskedTensor._wrap(g, self._masked_mask)

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        if is_masked_tensor(gradient):
            gradient = gradient.get_data()
        self._masked_data.backward(gradient, retain_graph=retain_graph,
                                   create_graph=create_graph)

    def detach(self):
        return MaskedTensor._wrap(self._masked_data.detach(), self._masked_mask)

    def clone(self):
        return MaskedTensor._wrap(self._masked_data.clone(), self._masked_mask.clone())

    # --- conversions -----------------------------------------------------------------

    def to(self, *args, **kwargs):
        """data.to(...); the mask stays bool and follows the data's device."""
        data = self._masked_data.to(*args, **kwargs)
        return MaskedTensor._wrap(data, self._masked_mask.to(device=data.device))

    def float(self):
        return self.to(kiln.float32)

    def double(self):
        return self.to(kiln.float64)

    def half(self):
        return self.to(kiln.float16)

    def int(self):
        return self.to(kiln.int32)

    def long(self):
        return self.to(kiln.int64)

    def bool(self):
        return self.to(kiln.bool)

    def contiguous(self):
        return MaskedTensor._wrap(self._masked_data.contiguous(),
                                  self._masked_mask.contiguous())

    # --- printing --------------------------------------------------------------------

    def __repr__(self):
        # torch's layout: "--" for masked-out elements, floats as {:8.4f}
        if self.dim() == 0:
            value = _format(self._masked_data.item())
            if not self._masked_mask.item():
                value = "--"
            return f"MaskedTensor({value}, {self._masked_mask.item()})"
        body = _nested_str(self._masked_data, self._masked_mask)
        return "MaskedTensor(\n" + "\n".join("  " + line for line in body.split("\n")) + "\n)"


def _format(v):
    return "{0:8.4f}".format(v) if isinstance(v, float) else str(v)


def _nested_str(data, mask):
    if data.dim() == 1:
        items = [_format(v) for v in data.tolist()]
        specified = mask.tolist()
        width = max(len(s) if m else 8 for s, m in zip(items, specified))
        return "[" + ", ".join(s if m else "--".rjust(width)
                               for s, m in zip(items, specified)) + "]"
    rows = [_nested_str(d, m) for d, m in zip(data, mask)]
    rows = ["\n".join("  " + line for line in r.split("\n")) for r in rows]
    return "[\n" + ",\n".join(rows) + "\n]"
