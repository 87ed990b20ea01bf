"""kiln.utils.checkpoint: activation checkpointing (torch.utils.checkpoint).

checkpoint(function, *args) runs function without recording its graph and keeps only its
inputs; backward runs it again with autograd on (restoring the CPU random state first, so
dropout draws the same mask) and differentiates that recomputation. Memory: the activations
inside function are not kept between forward and backward.

use_reentrant=True (torch's default when not given, with torch's warning): torch's reentrant
algorithm. The recomputation's backward() accumulates into every leaf it reaches (parameters
included), and the tensor arguments receive their gradients through the graph; as in torch,
that is for .backward() (not autograd.grad with respect to parameters), and when no tensor
argument requires grad the output does not either (with torch's warning).

use_reentrant=False: torch's algorithm on saved-tensor hooks (_checkpoint_frame.py): the
function's graph is recorded as usual but keeps placeholders instead of the tensors it saves,
and the first use of one in backward reruns the function to fill them all. Gradients reach
everything the function used (arguments, parameters, globals), for .backward() and
autograd.grad alike.
"""
import contextlib
import warnings

from .. import _C
from ._checkpoint_frame import run_without_reentrant

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn"]


class CheckpointError(RuntimeError):
    """The recomputation differs from the original forward (determinism_check)."""


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def _is_tensor(x):
    return isinstance(x, _C.Tensor)


def _rng_state():
    return _C.default_generator.get_state()


class _ForkedRng:
    """Runs a block with the CPU generator at `state`, then puts the current state back."""

    def __init__(self, state):
        self.state = state

    def __enter__(self):
        self.saved = _C.default_generator.get_state()
        _C.default_generator.set_state(self.state)

    def __exit__(self, *exc):
        _C.default_generator.set_state(self.saved)
        return False


def _metadata(outputs):
    return [(tuple(o.shape), o.dtype) if _is_tensor(o) else type(o) for o in outputs]


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _function_class():
    from .. import autograd

    class CheckpointFunction(autograd.Function):
        @staticmethod
        def forward(ctx, run, *tensors):
            ctx.run, ctx.tensors = run, tensors
            with autograd.no_grad():
                out = run.forward(tensors)
            ctx.meta = _metadata(_as_tuple(out))
            return out

        @staticmethod
        def backward(ctx, *grads):
            run = ctx.run
            args = [t.detach().requires_grad_(t.requires_grad) if t.is_floating_point() else t
                    for t in ctx.tensors]
            with autograd.enable_grad():
                outs = _as_tuple(run.recompute(args))
            if run.determinism_check != "none" and _metadata(outs) != ctx.meta:
                raise CheckpointError(
                    "torch.utils.checkpoint: Recomputed values for the following tensors have "
                    "different metadata than during the forward pass.\noriginal: "
                    f"{ctx.meta}\nrecomputed: {_metadata(outs)}")
            pairs = [(o, g) for o, g in zip(outs, grads)
                     if _is_tensor(o) and o.requires_grad and g is not None]
            if pairs:  # accumulates into every leaf the recomputation reaches
                _backward([o for o, _ in pairs], [g for _, g in pairs])
            return (None, *[a.grad if a.requires_grad else None for a in args])

    return CheckpointFunction


def _grad_enabled():
    from .. import autograd
    return autograd.is_grad_enabled()


def _backward(outputs, grads):
    from .. import autograd
    autograd.backward(outputs, grads)


_FUNCTION = None


class _Run:
    """function with its non-tensor arguments, kwargs, RNG state and context managers."""

    def __init__(self, function, args, kwargs, preserve_rng_state, context_fn,
                 determinism_check):
        self.function, self.kwargs = function, kwargs
        self.template = [None if _is_tensor(a) else a for a in args]
        self.tensor_slots = [i for i, a in enumerate(args) if _is_tensor(a)]
        self.rng = _rng_state() if preserve_rng_state else None
        self.context_fn = context_fn
        self.determinism_check = determinism_check

    def _call(self, tensors, ctx):
        args = list(self.template)
        for slot, t in zip(self.tensor_slots, tensors):
            args[slot] = t
        with ctx:
            return self.function(*args, **self.kwargs)

    def forward(self, tensors):
        fwd_ctx, self.recompute_ctx = self.context_fn()
        return self._call(tensors[:len(self.tensor_slots)], fwd_ctx)

    def recompute(self, args):
        tensors = [args[i] for i in range(len(self.tensor_slots))]
        rng = _ForkedRng(self.rng) if self.rng is not None else contextlib.nullcontext()
        with rng:
            return self._call(tensors, self.recompute_ctx)


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check="default", debug=False, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its activations recomputed in backward instead of kept."""
    global _FUNCTION
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly. use_reentrant=False is recommended (kiln.utils.checkpoint "
                      "follows torch's default, True)", stacklevel=2)
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError("determinism_check should be one of ['default', 'none'], but got "
                         f"{determinism_check}")
    if use_reentrant and (context_fn is not noop_context_fn or debug):
        raise ValueError("Passing `context_fn` or `debug` is only supported when "
                         "use_reentrant=False.")
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    tensors = [a for a in args if _is_tensor(a)]
    if use_reentrant and _grad_enabled() and not any(t.requires_grad for t in tensors):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)
    if not _grad_enabled():
        return function(*args, **kwargs)
    run = _Run(function, args, kwargs, preserve_rng_state, context_fn, determinism_check)
    if not use_reentrant:
        return run_without_reentrant(run, tensors, CheckpointError)
    if _FUNCTION is None:
        _FUNCTION = _function_class()
    return _FUNCTION.apply(run, *tensors)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """A Sequential (or list of modules) run in `segments` checkpointed pieces; the last
    segment runs normally, as torch."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant "
                      "parameter should be passed explicitly", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    from ..nn import Sequential
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    functions = list(functions)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be >= 1, got {segments}")
    size = len(functions) // segments
    end = -1

    def run_range(start, stop, fns):
        def forward(x):
            for j in range(start, stop + 1):
                x = fns[j](x)
            return x
        return forward

    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run_range(start, end, functions), input,
                           use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run_range(end + 1, len(functions) - 1, functions)(input)
