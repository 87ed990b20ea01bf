"""kiln.autograd: backward, grad, and the grad-mode context managers (also decorators)."""
import functools
import sys
import warnings

from . import _C

__all__ = ["backward", "grad", "detect_anomaly", "set_detect_anomaly", "no_grad", "enable_grad",
           "set_grad_enabled",
           "inference_mode", "is_grad_enabled", "is_inference_mode_enabled", "Function",
           "FunctionCtx", "once_differentiable", "gradcheck", "gradgradcheck", "GradcheckError"]

is_grad_enabled = _C.is_grad_enabled
is_inference_mode_enabled = _C.is_inference_mode_enabled


def _seq(x):
    if x is None:
        return None
    if isinstance(x, _C.Tensor):
        return [x]
    return list(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of `tensors` into the leaves' .grad (torch.autograd.backward);
    with inputs=, into those tensors' .grad only (leaves or not), as torch: the engine runs
    only what leads to them, and leaf inputs accumulate with their hooks."""
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is None:
        _C._backward(_seq(tensors), _seq(grad_tensors), bool(retain_graph), bool(create_graph))
        return
    ins = _seq(inputs)
    if not ins:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    # A non-leaf input keeps its gradient from now on, as torch (retain_grad): the pass
    # fills its .grad through that.
    for t in ins:
        if not t.is_leaf:
            t.retain_grad()
    _C._backward_to(_seq(tensors), _seq(grad_tensors), ins, bool(retain_graph),
                    bool(create_graph))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """Returns the gradients of `outputs` with respect to `inputs` (torch.autograd.grad)."""
    if allow_unused is None:
        allow_unused = materialize_grads
    from ._autograd_graph import GradientEdge
    # inputs may be GradientEdges (autograd.graph.get_gradient_edge), alone or in a list.
    ins = [inputs] if isinstance(inputs, GradientEdge) else _seq(inputs)
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


class detect_anomaly(_DecoratorContextManager):
    """Anomaly detection inside the block (torch.autograd.detect_anomaly): a backward node
    that returns NaN raises a RuntimeError naming it (kiln records no forward traces)."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self.prev = (False, True)

    def __enter__(self):
        self.prev = (_C.is_anomaly_enabled(), _C.is_anomaly_check_nan_enabled())
        _C.set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *exc):
        _C.set_anomaly_enabled(*self.prev)
        return False

    def clone(self):
        return self.__class__(self.check_nan)


class set_detect_anomaly(_DecoratorContextManager):
    """Sets anomaly mode at once; restores the previous mode when used with `with`."""

    def __init__(self, mode, check_nan=True):
        self.prev = (_C.is_anomaly_enabled(), _C.is_anomaly_check_nan_enabled())
        self.mode, self.check_nan = bool(mode), check_nan
        _C.set_anomaly_enabled(self.mode, check_nan)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _C.set_anomaly_enabled(*self.prev)
        return False

    def clone(self):
        return self.__class__(self.mode, self.check_nan)


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


# --- custom functions ----------------------------------------------------------------------

class FunctionCtx:
    """The ctx object of a custom Function: what forward saves for backward."""

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, _C.Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    def mark_non_differentiable(self, *args):
        self.non_differentiable = args

    def mark_dirty(self, *args):
        self.dirty_tensors = args

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class BackwardCFunction(FunctionCtx):
    """The ctx that the graph node keeps: runs the Function's backward for the engine."""

    materialize_grads = True
    _released = False

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError("Trying to backward through the graph a second time (or directly "
                               "access saved tensors after they have already been freed). Saved "
                               "intermediate values of the graph are freed when you call "
                               ".backward() or autograd.grad(). Specify retain_graph=True if you "
                               "need to backward through the graph a second time or if you need "
                               "to access saved tensors after calling backward.")
        packed = getattr(self, "_packed", None)
        if packed is not None:
            return tuple(_unpack_saved(p) for p in packed)
        saved = getattr(self, "_saved", None)
        if saved is None:
            return getattr(self, "to_save", ())
        out = []
        for t, version in saved:
            if t is not None and t._version != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by "
                    f"an inplace operation: [{t.dtype} {list(t.shape)}] is at version "
                    f"{t._version}; expected version {version} instead.")
            out.append(t)
        return tuple(out)

    def _do_backward(self, grads):
        cls = self._forward_cls
        if self.materialize_grads:
            grads = tuple(_C.zeros(shape, dtype=dt, device=dev) if g is None and dt is not None
                          else g for g, (shape, dt, dev) in zip(grads, self._out_meta))
        result = cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self._input_meta)
        if len(result) != n:
            if len(result) > n and all(r is None for r in result[n:]):
                result = result[:n]
            else:
                raise RuntimeError(f"function {cls.__name__}Backward returned an incorrect "
                                   f"number of gradients (expected {n}, got {len(result)})")
        out = []
        for i, (g, meta) in enumerate(zip(result, self._input_meta)):
            if meta is None or g is None:
                out.append(None)
                continue
            if not isinstance(g, _C.Tensor):
                raise TypeError(f"function {cls.__name__}Backward returned a gradient different "
                                f"than None at position {i + 1}, but the corresponding forward "
                                "input was not a Variable")
            shape, dtype = meta
            if tuple(g.shape) != shape:
                try:
                    g = _sum_to(g, shape)
                except RuntimeError:
                    raise RuntimeError(f"Function {cls.__name__}Backward returned an invalid "
                                       f"gradient at index {i} - got {list(g.shape)} but expected "
                                       f"shape compatible with {list(shape)}") from None
            if g.dtype != dtype:
                g = g.to(dtype)
            out.append(g)
        return out

    def _release(self):
        self._released = True
        self._saved = None
        self._packed = None
        self.to_save = ()


def _sum_to(g, shape):
    lead = g.dim() - len(shape)
    if lead < 0:
        raise RuntimeError("gradient has fewer dims than the input")
    if lead:
        g = g.sum(tuple(range(lead)))
    dims = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    if dims:
        g = g.sum(dims, keepdim=True)
    if tuple(g.shape) != tuple(shape):
        raise RuntimeError("not expandable")
    return g


class Function:
    """Base class of custom autograd operations (torch.autograd.Function):

        class Exp(kiln.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad):
                y, = ctx.saved_tensors
                return grad * y

        y = Exp.apply(x)

    forward runs without recording; the outputs get a graph node whose backward calls the
    Python backward (one gradient per forward argument, None for non-tensors)."""

    def __init__(self, *args, **kwargs):
        warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd functions "
                      "are all static, so you should invoke them on the class itself.",
                      DeprecationWarning, stacklevel=2)

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode AD.")

    vjp = backward

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = BackwardCFunction()
        ctx._forward_cls = cls
        ctx.needs_input_grad = tuple(isinstance(a, _C.Tensor) and a.requires_grad for a in args)
        record = _C.is_grad_enabled() and any(ctx.needs_input_grad)
        custom_setup = cls.setup_context is not Function.setup_context
        with no_grad():
            if custom_setup:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        is_tuple = isinstance(output, tuple)
        outs = output if is_tuple else (output,)
        to_save = getattr(ctx, "to_save", ())
        dirty = [d for d in getattr(ctx, "dirty_tensors", ()) if isinstance(d, _C.Tensor)]
        if any(not any(_same(d, o) for o in outs) for d in dirty):
            raise RuntimeError("Some elements marked as dirty during the forward method were not "
                               "returned as output. The inputs that are modified inplace must "
                               "all be outputs of the Function.")
        if not record:
            ctx._saved = [(t, t._version if t is not None else 0) for t in to_save]
            return output
        positions = [i for i, o in enumerate(outs) if isinstance(o, _C.Tensor)]
        tensors = [outs[i] for i in positions]
        nondiff = {id(t) for t in getattr(ctx, "non_differentiable", ())}
        differentiable = [id(t) not in nondiff for t in tensors]
        # mark_dirty: an input modified in place and returned. As in torch, the input object
        # itself is returned and takes the Function's node as its history (below).
        dirty_inputs = [d for d in dirty
                        if any(isinstance(a, _C.Tensor) and _same(d, a) for a in args)]
        if len(dirty_inputs) != len(dirty):
            warnings.warn("Only input Tensors should be given to ctx.mark_dirty(). If a Tensor "
                          "is not an input, there is no need to pass it to mark_dirty().",
                          stacklevel=2)
        dirty_at = [next((d for d in dirty_inputs if _same(d, t)), None) for t in tensors]
        for d, diff in zip(dirty_at, differentiable):
            if d is None or not diff or not d.is_floating_point():
                continue
            if d.requires_grad and d.is_leaf:
                raise RuntimeError("a leaf Variable that requires grad has been used in an "
                                   "in-place operation.")
            if d._is_view() and len(tensors) > 1:
                raise RuntimeError(_DIRTY_VIEW_MESSAGE)
        ctx._out_meta = [(tuple(t.shape), t.dtype if t.is_floating_point() else None, t.device)
                         for t in tensors]
        ctx._input_meta = [(tuple(a.shape), a.dtype) if isinstance(a, _C.Tensor) else None
                           for a in args]
        new = _C._function_node(ctx, cls.__name__ + "Backward",
                                [a if isinstance(a, _C.Tensor) else None for a in args], tensors,
                                differentiable)
        result = list(outs)
        for i, t, d in zip(positions, new, dirty_at):
            if d is None:
                result[i] = t
            elif t.requires_grad:
                # The node's edges already point at d's old history; an in-place copy from
                # the linked alias (same storage, so the values do not change) gives d itself
                # the node as history. kiln cannot set a grad_fn from Python, so d's grad_fn
                # is that copy's node (whose only edge is this Function's node), not the
                # Function's node itself; a view d is rebased through its base (CopySlices).
                with enable_grad():
                    d.copy_(t)
                result[i] = d
            elif not d.requires_grad:
                result[i] = d  # not differentiable: torch returns the input itself
            else:
                result[i] = t  # marked non-differentiable: a detached alias, as torch
        # Saved tensors: the forward's own objects (outputs without the graph link, so the
        # node and its ctx form no reference cycle; a dirty input is saved as a detached
        # alias for the same reason); versions checked in saved_tensors.
        to_save = [t.detach() if t is not None and any(_same(t, d) for d in dirty_inputs)
                   else t for t in to_save]
        hooks = _C._current_saved_tensors_hooks()
        if hooks is not None:
            # Saved-tensor hooks (autograd.graph.saved_tensors_hooks): ctx keeps only what
            # pack returned, and no version check applies (the hooks own the values).
            with no_grad():
                ctx._packed = [None if t is None else (hooks[1], hooks[0](t)) for t in to_save]
        else:
            ctx._saved = [(t, t._version if t is not None else 0) for t in to_save]
        ctx.to_save = ()
        return tuple(result) if is_tuple else result[0]


def _unpack_saved(entry):
    if entry is None:
        return None
    unpack_hook, packed = entry
    t = unpack_hook(packed)
    if not isinstance(t, _C.Tensor):
        raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                        f"result of type {type(t).__name__}")
    return t


def _same(a, b):
    return a is b or (isinstance(b, _C.Tensor) and a._is_same(b))


_DIRTY_VIEW_MESSAGE = (
    "If your Function modifies inplace an input that is a view of another Tensor, your Function "
    "cannot return more than one Tensor. This is not supported by the current autograd engine. "
    "You should either make sure the input is not a view (using .clone() for example) or make "
    "your Function only return one Tensor (potentially splitting it into two Functions: one "
    "doing the inplace that returns a single Tensor and a second one that does the other "
    "operations). You can ask on the forum https://discuss.pytorch.org/ if you need help to do "
    "this change.")


def once_differentiable(fn):
    """Marks a backward as not twice differentiable (kiln runs it in no_grad mode)."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)
    return wrapper

from . import _autograd_functional as functional  # noqa: E402,F401  (decision 0082)
from . import _autograd_forward_ad as forward_ad  # noqa: E402,F401
from ._autograd_gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402,F401
from . import _autograd_graph as graph  # noqa: E402,F401  (decision 0101)

# kiln.autograd is a module, not a package: registered so that `import kiln.autograd.functional`
# and `import kiln.autograd.forward_ad as fwAD` work as torch's.
sys.modules[__name__ + ".functional"] = functional
sys.modules[__name__ + ".forward_ad"] = forward_ad
sys.modules[__name__ + ".graph"] = graph
