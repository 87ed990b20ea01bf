"""When each module of a model ran, forward and backward, as time spans (CLOCK_MONOTONIC ns,
the profiler's clock), so that the op events the C++ profiler records can be attributed to
the modules they ran in. Used by kiln.utils.flop_counter.FlopCounterMode.

Modules are named as torch.utils.module_tracker names them: a root by its class name, a
submodule by its path below it ("Sequential.0"). With roots given, the modules followed are
the roots and their submodules (a hook on each); without, every module that runs, through the
global module hooks (as torch's ModuleTracker), named when first seen.

Forward: from the module's forward pre-hook to its forward hook. Backward, as torch's
ModuleTracker: from the first gradient computed for one of the module's outputs (tensor hooks
registered by the forward hook) to the last computed for its inputs; a module whose inputs
need no gradient (the first layer) stays open until that backward pass ends."""
import time
import weakref
from functools import partial

from ._pytree import tree_leaves
from .. import _C


class _Call:
    """One forward call of a module, and its backward per backward pass."""

    def __init__(self, name, start):
        self.name = name
        self.start = start
        self.end = None
        self.backward = {}  # pass id -> [first output grad, last input grad, pass end]


def _grad_tensors(tree):
    return [t for t in tree_leaves(tree) if isinstance(t, _C.Tensor) and t.requires_grad]


class ModuleSpans:
    def __init__(self, roots):
        self.roots = list(roots)
        self.calls = []
        self._open = {}           # id(module) -> [_Call] (forward in progress; may recurse)
        self._hook_handles = []   # module hooks
        self._grad_handles = []   # tensor hooks

    def __enter__(self):
        if not self.roots:
            from ..nn.modules import module as _module
            self._names = weakref.WeakKeyDictionary()
            self._named_children = weakref.WeakSet()
            self._hook_handles.append(_module.register_module_forward_pre_hook(
                lambda mod, args: self._pre(self._name_of(mod), mod, args)))
            self._hook_handles.append(_module.register_module_forward_hook(
                lambda mod, args, result: self._post(None, mod, args, result)))
            return self
        seen = set()
        for root in self.roots:
            for name, mod in root.named_modules(prefix=type(root).__name__):
                if id(mod) in seen:
                    continue
                seen.add(id(mod))
                # first pre-hook and last forward hook: the span covers the other hooks too
                self._hook_handles.append(
                    mod.register_forward_pre_hook(partial(self._pre, name), prepend=True))
                self._hook_handles.append(mod.register_forward_hook(partial(self._post, name)))
        return self

    def __exit__(self, *exc):
        for h in self._hook_handles + self._grad_handles:
            h.remove()
        self._hook_handles.clear()
        self._grad_handles.clear()
        return False

    def _name_of(self, mod):
        """torch's ModuleTracker naming: a module first seen on its own is named by its class;
        its children (recursively) by their paths below it."""
        if mod not in self._names:
            self._names[mod] = type(mod).__name__
        name = self._names[mod]
        if mod not in self._named_children:
            self._named_children.add(mod)
            for child_name, child in mod.named_children():
                self._names[child] = f"{name}.{child_name}"
                self._name_of(child)
        return name

    def _pre(self, name, mod, args):
        call = _Call(name, time.monotonic_ns())
        self.calls.append(call)
        self._open.setdefault(id(mod), []).append(call)
        for t in _grad_tensors(args):
            self._grad_handles.append(t.register_hook(partial(self._input_grad, call)))

    def _post(self, name, mod, args, result):
        call = self._open[id(mod)].pop()
        call.end = time.monotonic_ns()
        for t in _grad_tensors(result):
            self._grad_handles.append(t.register_hook(partial(self._output_grad, call)))

    @staticmethod
    def _output_grad(call, grad):
        span = call.backward.get(_C._current_backward_pass_id())
        if span is None:
            span = call.backward[_C._current_backward_pass_id()] = [time.monotonic_ns(), None,
                                                                   None]
            # closes the span of a module whose inputs get no gradient
            _C._queue_callback(lambda: span.__setitem__(2, time.monotonic_ns()))

    @staticmethod
    def _input_grad(call, grad):
        span = call.backward.get(_C._current_backward_pass_id())
        if span is not None:
            span[1] = time.monotonic_ns()

    def spans(self):
        """(name, start_ns, end_ns) of every forward and backward run so far (one still
        running ends at the current time)."""
        now = time.monotonic_ns()
        out = []
        for c in self.calls:
            out.append((c.name, c.start, c.end if c.end is not None else now))
            for first, last_input, pass_end in c.backward.values():
                end = last_input if last_input is not None else pass_end
                out.append((c.name, first, end if end is not None else now))
        return out
