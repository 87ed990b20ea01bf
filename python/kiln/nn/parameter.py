"""kiln.nn.Parameter and buffers: tensors that a Module registers when assigned to it."""
from .. import _C, _pickle
from .._C import Tensor
from .._torch_function_dispatch import disabled_torch_function_impl


class Parameter(Tensor):
    """A Tensor that is a module parameter (requires grad by default), as torch.nn.Parameter.
    Arithmetic on a Parameter returns plain Tensors."""
    # As torch's: out of __torch_function__ dispatch (decision 0109), so results are plain.
    __torch_function__ = disabled_torch_function_impl

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.empty(0)
        return Tensor._make_subclass(cls, data, requires_grad)

    def __init__(self, data=None, requires_grad=True):
        pass  # built by __new__ (Tensor.__init__ would construct a second tensor)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        r = type(self)(self.detach().clone(), self.requires_grad)
        if self.grad is not None:
            r.grad = self.grad.detach().clone()
        memo[id(self)] = r
        if self.__dict__:  # Python attributes are deep-copied too, as torch
            import copy
            r.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return r

    def __reduce_ex__(self, proto):
        state = dict(self.__dict__) or None  # Python attributes, restored by pickle
        if self.is_meta:
            return (_rebuild_meta_parameter,
                    (tuple(self.shape), str(self.dtype).split(".")[-1], self.requires_grad),
                    state)
        array, dtype, device = _pickle.tensor_state(self)
        return (_rebuild_parameter, (array, dtype, self.requires_grad, device), state)


def _rebuild_parameter(array, dtype, requires_grad, device="cpu"):
    return Parameter(_pickle.tensor_from_state(array, dtype, device), requires_grad)


def _rebuild_meta_parameter(shape, dtype, requires_grad):
    return Parameter(_C.empty(shape, dtype=getattr(_C, dtype), device="meta"), requires_grad)


class Buffer:
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute
    (torch.nn.Buffer)."""

    def __init__(self, data, *, persistent=True):
        self.data = data
        self.persistent = persistent
