"""torch.autograd.graph: saved-tensor hooks, gradient edges, multi-tensor gradient hooks
(decision 0101). Importable as kiln.autograd.graph."""
import contextlib
from typing import NamedTuple

from . import _C

Node = _C.Node


class GradientEdge(NamedTuple):
    """Where a gradient enters the graph: a node and which of its inputs. autograd.grad
    accepts these as inputs (the gradient flowing there, even for a tensor since gone)."""
    node: object
    output_nr: int


def get_gradient_edge(tensor):
    """The GradientEdge of tensor: its grad_fn, or for a leaf its AccumulateGrad node."""
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"get_gradient_edge expects a Tensor, got {type(tensor).__name__}")
    node, output_nr = _C._gradient_edge(tensor)
    return GradientEdge(node, output_nr)


def increment_version(tensor):
    """Bumps the version counter of tensor (or of each tensor of a list), as an in-place write
    would: saved tensors then fail their check in backward."""
    tensors = (tensor,) if isinstance(tensor, _C.Tensor) else tensor
    for t in tensors:
        _C._increment_version(t)


class saved_tensors_hooks:
    """While active, every tensor that the graph saves for backward goes through
    pack_hook(tensor) -> any object, and backward gets it back through unpack_hook(object),
    which must return a tensor with the same shape, dtype and device (checked). Both run with
    grad mode off. Only the innermost pair applies; hooks are per thread.

    kiln saves every input and output of a recorded op (torch saves only what each
    derivative reads), so pack runs for more tensors than in torch. A saved output is given
    to pack without its grad_fn: keeping it cannot form a reference cycle with its node."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _C._push_saved_tensors_hooks(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc):
        _C._pop_saved_tensors_hooks()
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors of any device are kept in host memory and moved back for backward
    (activation offloading). pin_memory asks for pinned host copies (kiln's host memory is
    already what its devices copy from: the flag only selects non_blocking copies back)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack_to_cpu(tensor):
            return (tensor.device, tensor.cpu())

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Within this context installing saved-tensor hooks fails with error_message (and
    entering it while hooks are installed fails the same way)."""
    previous = _C._set_saved_tensors_hooks_disabled(error_message)
    try:
        yield
    finally:
        _C._set_saved_tensors_hooks_disabled(previous)


class _MultiHandle:
    def __init__(self, handles):
        self.handles = tuple(handles)

    def remove(self):
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """Hook over several tensors, per backward pass.

    mode "all": fn(grads) with one entry per tensor (None for those that got no gradient in
    this pass), once the pass has computed them; kiln calls it when the backward pass ends
    (torch as soon as the last of them is computed: the same arguments, later).
    mode "any": fn(grad) with the first gradient computed among the tensors, once per pass."""
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    if not all(isinstance(t, _C.Tensor) for t in tensors):
        raise TypeError("register_multi_grad_hook expects a sequence of Tensors")
    # Per backward pass (identified by the engine, so that a pass that failed half-way
    # leaves nothing behind for the next one).
    state = {"pass": None, "grads": None}

    if mode == "all":
        def flush(grads):
            fn(tuple(grads))

        def make_hook(i):
            def hook(grad):
                current = _C._current_backward_pass_id()
                if state["pass"] != current:
                    state["pass"], state["grads"] = current, [None] * len(tensors)
                    grads = state["grads"]
                    _C._queue_callback(lambda: flush(grads))
                state["grads"][i] = grad
            return hook
    else:
        def make_hook(i):
            def hook(grad):
                current = _C._current_backward_pass_id()
                if state["pass"] != current:
                    state["pass"] = current
                    fn(grad)
            return hook

    handles = [t.register_hook(make_hook(i)) for i, t in enumerate(tensors) if t.requires_grad]
    return _MultiHandle(handles)


class _AllowMutationContext:
    def __init__(self):
        self.active = True


@contextlib.contextmanager
def allow_mutation_on_saved_tensors():
    """Tensors saved for backward inside this context may be modified in place afterwards:
    backward sees the values they had when saved. kiln keeps a copy of each saved tensor
    when it is saved (torch copies lazily, at the first in-place write: less memory). The
    graph must be run backward inside the context."""
    ctx = _AllowMutationContext()

    def pack(tensor):
        return tensor.clone()

    def unpack(copy):
        if not ctx.active:
            # AssertionError as torch 2.13
            raise AssertionError("Trying to backward outside of the "
                                 "'allow_mutation_on_saved_tensors' context in which the graph "
                                 "was originally recorded.")
        return copy

    with saved_tensors_hooks(pack, unpack):
        try:
            yield ctx
        finally:
            ctx.active = False
