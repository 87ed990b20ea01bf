"""kiln.autograd: backward, grad, and the grad-mode context managers (also decorators)."""
import functools

from . import _C

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_grad_enabled", "is_inference_mode_enabled"]

is_grad_enabled = _C.is_grad_enabled
is_inference_mode_enabled = _C.is_inference_mode_enabled


def _seq(x):
    if x is None:
        return None
    if isinstance(x, _C.Tensor):
        return [x]
    return list(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of `tensors` into the leaves' .grad (torch.autograd.backward)."""
    if inputs is not None:
        raise NotImplementedError("backward(inputs=...) is not supported yet")
    if retain_graph is None:
        retain_graph = create_graph
    _C._backward(_seq(tensors), _seq(grad_tensors), bool(retain_graph), bool(create_graph))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """Returns the gradients of `outputs` with respect to `inputs` (torch.autograd.grad)."""
    if allow_unused is None:
        allow_unused = materialize_grads
    single = isinstance(inputs, _C.Tensor)
    ins = _seq(inputs)
    res = _C._grad(_seq(outputs), ins, _seq(grad_outputs), retain_graph, bool(create_graph),
                   bool(allow_unused))
    if materialize_grads:
        from . import zeros_like
        res = tuple(zeros_like(i) if g is None else g for g, i in zip(res, ins))
    return res


class _DecoratorContextManager:
    """A context manager that also works as a function decorator (@kiln.no_grad())."""

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_DecoratorContextManager):
    """Disables gradient recording inside the block."""

    def __init__(self):
        self.prev = False

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False


class enable_grad(_DecoratorContextManager):
    """Enables gradient recording inside the block (inside no_grad)."""

    def __init__(self):
        self.prev = False

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(True)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False


class set_grad_enabled(_DecoratorContextManager):
    """Sets grad mode: at once when called, and restores the old mode when used with `with`."""

    def __init__(self, mode):
        self.prev = _C.is_grad_enabled()
        self.mode = bool(mode)
        _C._set_grad_enabled(self.mode)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """No graph recording; tensors made inside cannot be used in autograd later."""

    def __init__(self, mode=True):
        self.mode = mode
        self._guard = None

    def __enter__(self):
        self._guard = _C._InferenceMode(self.mode)
        self._guard.__enter__()

    def __exit__(self, *exc):
        self._guard.__exit__(*exc)
        self._guard = None
        return False

    def clone(self):
        return self.__class__(self.mode)

    def __call__(self, func):
        if isinstance(func, bool):  # @inference_mode(False) written as inference_mode(False)(...)
            return self.__class__(func)
        return super().__call__(func)
