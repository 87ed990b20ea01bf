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

use_reentrant=False: the parameters and tensors requiring grad that function can reach (an
nn.Module, a bound method of one, closure cells, functools.partial arguments, default
arguments, and the tensor arguments) become inputs of the checkpoint node, and the
recomputation returns their gradients through the graph: correct for .backward() and for
autograd.grad, and the output requires grad whenever any of them does. Difference from torch
(which finds the tensors a recomputation saves through saved-tensor hooks): a leaf requiring
grad that function reaches only through a global name is found only in backward (a walk of
the recomputed graph); its gradient is then accumulated into .grad, as use_reentrant=True
does, with a warning (autograd.grad cannot receive it).
"""
import contextlib
import functools
import types
import warnings

from .. import _C

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn"]


class CheckpointError(RuntimeError):
    """The recomputation differs from the original forward (determinism_check)."""


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def _is_tensor(x):
    return isinstance(x, _C.Tensor)


def _reachable_tensors(fn, found, seen):
    """Tensors requiring grad that fn can reach through modules, bound methods, partials,
    closures and defaults (added to `found` in a stable order)."""
    from ..nn import Module
    if id(fn) in seen:
        return
    seen.add(id(fn))
    if _is_tensor(fn):
        if fn.requires_grad:
            found.setdefault(id(fn), fn)
        return
    if isinstance(fn, Module):
        for p in fn.parameters():
            if p.requires_grad:
                found.setdefault(id(p), p)
        return
    if isinstance(fn, (list, tuple)):
        for v in fn:
            _reachable_tensors(v, found, seen)
        return
    if isinstance(fn, dict):
        for v in fn.values():
            _reachable_tensors(v, found, seen)
        return
    if isinstance(fn, types.ModuleType):  # (a captured Python module is not searched)
        return
    if isinstance(fn, functools.partial):
        _reachable_tensors(fn.func, found, seen)
        for v in list(fn.args) + list(fn.keywords.values()):
            _reachable_tensors(v, found, seen)
        return
    self_obj = getattr(fn, "__self__", None)
    if self_obj is not None:  # a bound method: its object
        _reachable_tensors(self_obj, found, seen)
    func = getattr(fn, "__func__", fn)
    for cell in getattr(func, "__closure__", None) or ():
        try:
            _reachable_tensors(cell.cell_contents, found, seen)
        except ValueError:  # an empty cell
            pass
    for v in getattr(func, "__defaults__", None) or ():
        _reachable_tensors(v, found, seen)
    if callable(fn) and hasattr(fn, "__dict__") and not isinstance(
            fn, (types.FunctionType, types.MethodType, types.ModuleType, type)):
        for v in list(vars(fn).values()):  # a callable object: its attributes
            _reachable_tensors(v, found, seen)


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
        def forward(ctx, run, reentrant, n_args, *tensors):
            ctx.run, ctx.reentrant, ctx.n_args = run, reentrant, n_args
            ctx.tensors = tensors
            with autograd.no_grad():
                out = run.forward(tensors)
            outs = _as_tuple(out)
            ctx.is_tuple = isinstance(out, tuple)
            ctx.meta = _metadata(outs)
            return out

        @staticmethod
        def backward(ctx, *grads):
            run = ctx.run
            n = ctx.n_args
            args = [t.detach().requires_grad_(t.requires_grad) if _is_tensor(t) and
                    t.is_floating_point() else t for t in ctx.tensors[:n]]
            captured = list(ctx.tensors[n:])
            with autograd.enable_grad():
                outs = _as_tuple(run.recompute(args))
            if run.determinism_check != "none" and _metadata(outs) != ctx.meta:
                raise CheckpointError(
                    "torch.utils.checkpoint: Recomputed values for the following tensors have "
                    "different metadata than during the forward pass.\noriginal: "
                    f"{ctx.meta}\nrecomputed: {_metadata(outs)}")
            pairs = [(o, g) for o, g in zip(outs, grads)
                     if _is_tensor(o) and o.requires_grad and g is not None]
            diff = [a for a in args if _is_tensor(a) and a.requires_grad]
            if ctx.reentrant:
                if pairs:
                    _backward([o for o, _ in pairs], [g for _, g in pairs])
                arg_grads = [a.grad if _is_tensor(a) and a.requires_grad else None
                             for a in args]
                return (None, None, None, *arg_grads, *([None] * len(captured)))
            wanted = diff + captured
            outs_g = [o for o, _ in pairs]
            extra = _unlisted_leaves(outs_g, wanted) if pairs else []
            got = _grad(outs_g, wanted + extra, [g for _, g in pairs]) if pairs and \
                (wanted or extra) else [None] * (len(wanted) + len(extra))
            if extra:
                _accumulate_unlisted(extra, got[len(wanted):])
            by_id = {id(t): g for t, g in zip(wanted, got)}
            arg_grads = [by_id.get(id(a)) if _is_tensor(a) else None for a in args]
            cap_grads = [by_id.get(id(c)) for c in captured]
            return (None, None, None, *arg_grads, *cap_grads)

    return CheckpointFunction


def _unlisted_leaves(outputs, listed):
    """Leaves requiring grad that the recomputed graph of outputs reaches but that are not
    among `listed` (tensors the function reached only through globals). The walk stops at
    the listed tensors' own nodes, so it never enters the graph outside the checkpoint."""
    stop = {t.grad_fn for t in listed if t.grad_fn is not None}
    todo = [o.grad_fn for o in outputs if o.grad_fn is not None]
    seen, leaves = set(), []
    while todo:
        node = todo.pop()
        if node in seen or node in stop:
            continue
        seen.add(node)
        if node.name() == "AccumulateGrad":
            leaf = node.variable
            if not any(leaf._is_same(t) for t in listed):
                leaves.append(leaf)
            continue
        todo.extend(n for n, _ in node.next_functions if n is not None)
    return leaves


_warned_unlisted = False


def _accumulate_unlisted(leaves, grads):
    """What use_reentrant=True does for every leaf: add the gradient to .grad (right for
    .backward(); autograd.grad cannot route it, so it warns once)."""
    global _warned_unlisted
    if not _warned_unlisted:
        _warned_unlisted = True
        warnings.warn("kiln.utils.checkpoint: the function uses tensors requiring grad that it "
                      "reaches only through global names; their gradients are accumulated into "
                      ".grad (pass them as arguments, or reach them through a module or a "
                      "closure, for autograd.grad)")
    for leaf, g in zip(leaves, grads):
        if g is not None:
            leaf.grad = g.detach() if leaf.grad is None else leaf.grad + g.detach()


def _grad_enabled():
    from .. import autograd
    return autograd.is_grad_enabled()


def _backward(outputs, grads):
    from .. import autograd
    autograd.backward(outputs, grads)


def _grad(outputs, inputs, grads):
    from .. import autograd
    return autograd.grad(outputs, inputs, grads, allow_unused=True)


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
    captured = []
    if not use_reentrant:
        found, seen = {}, set(id(t) for t in tensors)
        _reachable_tensors(function, found, seen)
        for v in kwargs.values():
            _reachable_tensors(v, found, seen)
        captured = list(found.values())
    elif _grad_enabled() and not any(t.requires_grad for t in tensors):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)
    if not _grad_enabled():
        return function(*args, **kwargs)
    run = _Run(function, args, kwargs, preserve_rng_state, context_fn, determinism_check)
    if _FUNCTION is None:
        _FUNCTION = _function_class()
    return _FUNCTION.apply(run, use_reentrant, len(tensors), *tensors, *captured)


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
