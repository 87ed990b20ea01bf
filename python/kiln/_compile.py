"""kiln.compile: graph mode (decision 0081). The function (or a module's forward) runs once
per guard with the C++ tracer recording the ops it dispatches; later calls with the same guard
replay the optimised graph in C++ without running the Python code at all.

Guards: the structure of the arguments, each tensor's shape, dtype, device, layout and
requires_grad, the non-tensor arguments' values, grad / inference mode, and for a module the
training flags of its submodules. A capture that reads computed values on the host (item(),
tolist(), a branch on a tensor, printing one) may hide control flow that depends on the data:
that guard runs eagerly from then on, with one warning (torch.compile calls this a graph break).
Python state the function changes (attributes, lists) is not replayed; in-place updates of
tensors (buffers, parameters) are, since they are ops."""
import functools
import warnings

from . import _C

_G = _C._graph
Tensor = _C.Tensor

# Host reads of a tensor: during a capture each tells the tracer the values were looked at.
_HOST_READS = ("item", "tolist", "numpy", "__bool__", "__float__", "__int__", "__index__",
               "__repr__", "__str__", "__format__", "__array__")


class _HostReadWatch:
    """Wraps the Tensor methods that read values on the host for the time of one capture."""

    def __enter__(self):
        self.saved = {}
        for name in _HOST_READS:
            original = getattr(Tensor, name, None)
            if original is None:
                continue
            self.saved[name] = original

            def watched(self_, *args, __original=original, **kwargs):
                _G.note_host_read(self_)
                return __original(self_, *args, **kwargs)

            setattr(Tensor, name, watched)
        return self

    def __exit__(self, *exc):
        for name, original in self.saved.items():
            setattr(Tensor, name, original)
        return False


def _flatten(obj, tensors):
    """The structure of obj with each tensor replaced by its index in `tensors`."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return ("T", len(tensors) - 1)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # named tuples
        return ("N", type(obj), tuple(_flatten(x, tensors) for x in obj))
    if isinstance(obj, (list, tuple)):
        return ("L" if isinstance(obj, list) else "U", tuple(_flatten(x, tensors) for x in obj))
    if isinstance(obj, dict):
        return ("D", tuple((k, _flatten(v, tensors)) for k, v in obj.items()))
    return ("V", obj)


def _unflatten(spec, tensors):
    kind = spec[0]
    if kind == "T":
        return tensors[spec[1]]
    if kind == "N":
        return spec[1](*(_unflatten(s, tensors) for s in spec[2]))
    if kind in ("L", "U"):
        items = [_unflatten(s, tensors) for s in spec[1]]
        return items if kind == "L" else tuple(items)
    if kind == "D":
        return {k: _unflatten(s, tensors) for k, s in spec[1]}
    return spec[1]


def _hashable(spec):
    try:
        hash(spec)
        return spec
    except TypeError:
        return repr(spec)


def _tensor_guard(t):
    contiguous = t.is_contiguous()
    return (t.dtype, tuple(t.shape), str(t.device), t.requires_grad, contiguous,
            None if contiguous else tuple(t.stride()))


class _Entry:
    __slots__ = ("eager", "plain", "fused", "out_spec")


class CompiledFunction:
    """The callable kiln.compile returns for a function."""

    def __init__(self, fn, *, fuse=True, max_graphs=8, guard_extra=None):
        self._fn = fn
        self._fuse = fuse
        self._max_graphs = max_graphs
        self._guard_extra = guard_extra  # a callable adding to the guard (module flags)
        self._cache = {}
        self._warned = False
        self.captures = 0
        self.replays = 0
        functools.update_wrapper(self, fn)

    def _key(self, spec, tensors):
        extra = self._guard_extra() if self._guard_extra else None
        return (_hashable(spec), tuple(_tensor_guard(t) for t in tensors),
                _C.is_grad_enabled(), _C.is_inference_mode_enabled(), extra)

    def __call__(self, *args, **kwargs):
        tensors = []
        spec = _flatten((args, kwargs), tensors)
        key = self._key(spec, tensors)
        entry = self._cache.get(key)
        if entry is None:
            if len(self._cache) >= self._max_graphs:
                self._warn(f"more than {self._max_graphs} guards (shapes, dtypes, flags); "
                           "new ones run eagerly")
                return self._fn(*args, **kwargs)
            return self._capture(key, args, kwargs, tensors)
        if entry.eager:
            return self._fn(*args, **kwargs)
        graph = entry.plain if self._records_grad(entry, tensors) else entry.fused
        self.replays += 1
        return _unflatten(entry.out_spec, graph.run(tensors))

    @staticmethod
    def _records_grad(entry, tensors):
        if not _C.is_grad_enabled():
            return False
        return any(t.requires_grad for t in tensors) or any(
            c.requires_grad for c in entry.plain.constants)

    def _capture(self, key, args, kwargs, tensors):
        capture = _G.Capture()
        try:
            for t in tensors:
                capture.add_input(t)
            with _HostReadWatch():
                result = self._fn(*args, **kwargs)
            out_tensors = []
            out_spec = _flatten(result, out_tensors)
            graph = capture.finish(out_tensors)
            data_dependent = capture.data_dependent
        finally:
            capture.close()
        entry = _Entry()
        entry.eager = data_dependent
        entry.out_spec = out_spec
        entry.plain = entry.fused = None
        if data_dependent:
            self._warn("the function read a computed tensor's values on the host (item(), "
                       "a branch on a tensor, printing) or drew random numbers from an explicit "
                       "generator; this guard runs eagerly")
        else:
            entry.fused = graph.copy()
            graph.optimize(fuse=False)
            entry.fused.optimize(fuse=self._fuse)
            entry.plain = graph
        self._cache[key] = entry
        self.captures += 1
        return result

    def _warn(self, what):
        if not self._warned:
            self._warned = True
            warnings.warn(f"kiln.compile({getattr(self._fn, '__name__', 'fn')}): {what}",
                          stacklevel=3)

    def graphs(self):
        """The optimised graphs captured so far, as text (for inspection and tests)."""
        return [("eager" if e.eager else str(e.fused)) for e in self._cache.values()]


def compile(model=None, *, fullgraph=False, dynamic=None, backend="kiln", mode=None,
            options=None, disable=False):
    """torch.compile's signature. A module gets a compiled forward (the module itself is
    returned, as torch's OptimizedModule wraps it); a function a CompiledFunction. fullgraph,
    dynamic, backend, mode and options are accepted for compatibility: kiln has one backend, no
    symbolic shapes (each new shape is a new capture, up to 8 per function) and breaks a graph
    only by running that guard eagerly."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if disable:
        return model
    fuse = not (options or {}).get("no_fusion", False)
    from .nn.modules.module import Module
    if isinstance(model, Module):
        return _compile_module(model, fuse)
    if not callable(model):
        raise TypeError(f"kiln.compile: expected a function or a kiln.nn.Module, got "
                        f"{type(model).__name__}")
    return CompiledFunction(model, fuse=fuse)


def _compile_module(module, fuse):
    forward = module.forward

    def training_flags():
        return tuple(m.training for m in module.modules())

    compiled = CompiledFunction(forward, fuse=fuse, guard_extra=training_flags)
    module.forward = compiled
    module._compiled_forward = compiled
    module._orig_forward = forward
    return module
