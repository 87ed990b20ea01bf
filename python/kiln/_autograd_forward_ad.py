"""kiln.autograd.forward_ad: dual tensors as torch.autograd.forward_ad's API (dual_level,
make_dual, unpack_dual, enter_dual_level, exit_dual_level), over reverse mode.

kiln has no forward-mode dispatch: ops do not carry tangents along. What they do record is the
reverse graph, and that is enough to get the same tangents on demand:
- make_dual(x, t) returns a view of a graph root standing for x, and remembers t for it.
- ops on dual tensors build kiln's ordinary autograd graph.
- unpack_dual(y) computes y's tangent when asked: the Jacobian of y with respect to the duals
  of the level, applied to their tangents, by the double-backward trick (two reverse passes over
  y's graph: see kiln/func/_linearize.py). The values are those of forward mode; the cost is two
  reverse passes per unpack_dual (of a tensor other than a dual itself) and the graph.

What differs from torch, because tangents follow the autograd graph:
- grad mode must be on: make_dual under no_grad / inference_mode raises NotImplementedError
  (torch's forward AD works there). A tensor computed from duals under no_grad has no graph, so
  unpack_dual cannot see its tangent and returns None for it (torch returns the tangent).
- dual tensors (and results computed from them) have requires_grad=True; in-place ops on a dual
  itself are refused as on any view of a leaf that requires grad (ops on results are fine).
- every op's backward must be differentiable (kiln's ops are; a custom Function marked
  @once_differentiable raises an error naming it).
- one level at a time, as torch (nested levels are not supported there either).
"""
import collections
import functools

from .autograd import is_grad_enabled

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual",
           "unpack_dual", "dual_level"]

UnpackedDualTensor = collections.namedtuple("UnpackedDualTensor", ["primal", "tangent"])
UnpackedDualTensor.__doc__ = ("Namedtuple returned by unpack_dual: the primal and the tangent "
                              "(None when the tensor does not depend on the level's duals).")

_current_level = -1


class _Dual:
    """What make_dual registered: the dual returned, the graph root it views (seed), its tangent,
    the dual's version then (an in-place change makes the stored tangent stale) and whether the
    primal came from the caller's graph (then results keep theirs)."""

    __slots__ = ("dual", "seed", "tangent", "version", "from_user_graph", "own_leaf_node")

    def __init__(self, dual, seed, tangent, from_user_graph):
        self.dual, self.seed, self.tangent = dual, seed, tangent
        self.version, self.from_user_graph = dual._version, from_user_graph
        # the AccumulateGrad node of a seed make_dual created (None: the seed is the caller's)
        self.own_leaf_node = None if from_user_graph else dual.grad_fn.next_functions[0][0]


_duals = {}  # id(dual tensor) -> _Dual, for the current level; the entries keep the ids valid


def enter_dual_level():
    """Enter the forward-AD level (0) and make it the default of the other functions; returns
    it. Only one level at a time."""
    global _current_level
    if _current_level >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _current_level = 0
    return _current_level


def exit_dual_level(*, level=None):
    """Exit the level: its dual tensors lose their tangents (unpack_dual gives None)."""
    global _current_level
    if level is None:
        level = _current_level
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    if level != _current_level:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           "was created. This is not supported.")
    _duals.clear()
    _current_level = level - 1


class dual_level:
    """Context manager (also a decorator, as torch's) entering and exiting the forward-AD
    level; `with dual_level():` yields the level."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with dual_level():
                return func(*args, **kwargs)
        return wrapper


def _level_or_current(level, fn_name):
    if level is None:
        return _current_level
    if level != _current_level:
        raise RuntimeError(f"kiln.autograd.forward_ad.{fn_name}: level {level} is not the "
                           f"current forward AD level ({_current_level}); kiln has one level.")
    return level


def make_dual(tensor, tangent, *, level=None):
    """A dual tensor: a view of tensor whose tangent is `tangent` (kept as is). Backward
    differentiable with respect to tensor, as torch's."""
    if level is None and _current_level < 0 or level is not None and level < 0:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    level = _level_or_current(level, "make_dual")
    if not tensor.is_floating_point():
        raise ValueError(f"Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not tangent.is_floating_point():
        raise ValueError(f"Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than "
                           "that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor.shape)} while the given forward gradient is of "
                           f"size {list(tangent.shape)}.")
    entry = _duals.get(id(tensor))
    if entry is not None and entry.dual is tensor:
        raise RuntimeError("Making a dual Tensor based on a Tensor that already has a forward "
                           f"gradient at the same level {level} is not supported.")
    if not is_grad_enabled():
        raise NotImplementedError(
            "kiln.autograd.forward_ad.make_dual: kiln computes tangents from the autograd graph "
            "(it has no forward-mode dispatch), which ops record only with grad mode on; "
            "make_dual was called under no_grad / inference_mode. Run the forward-AD code "
            "under kiln.enable_grad(), or use kiln.func.jvp.")
    from_user_graph = tensor.requires_grad
    # The seed is what the tangents are taken with respect to; the dual a view of it, so that
    # the seed keeps standing for the primal whatever is done to the dual.
    seed = tensor.view_as(tensor) if from_user_graph else tensor.detach().requires_grad_(True)
    dual = seed.view_as(seed)
    _duals[id(dual)] = _Dual(dual, seed, tangent, from_user_graph)
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of tensor at the level. For a dual (unchanged since make_dual) the
    tangent given; for a tensor computed from duals its Jacobian-vector product with their
    tangents, computed now by two reverse passes over its graph; None for a tensor that does not
    depend on any dual (or no level is active)."""
    if level is None and _current_level < 0:
        return UnpackedDualTensor(tensor, None)
    _level_or_current(level, "unpack_dual")
    entry = _duals.get(id(tensor))
    if entry is not None and entry.dual is tensor and tensor._version == entry.version:
        primal = entry.seed.view_as(entry.seed) if entry.from_user_graph else tensor.detach()
        return UnpackedDualTensor(primal, entry.tangent)
    # imported here: kiln.func (its package imports kiln.nn) loads after kiln.autograd
    from .func._linearize import Linearization, has_derivative
    if not has_derivative(tensor) or not _duals:
        return UnpackedDualTensor(tensor, None)
    entries = list(_duals.values())
    linear = Linearization([tensor], [e.seed for e in entries],
                           "kiln.autograd.forward_ad.unpack_dual")
    keep_graph = is_grad_enabled() and _reaches_user_leaves(tensor, entries)
    got, = linear.push([e.tangent for e in entries], create_graph=keep_graph)
    if not linear.reached[0]:
        return UnpackedDualTensor(tensor, None)
    if not keep_graph:  # only the level's own graph roots behind it: plain tensors, as torch
        return UnpackedDualTensor(tensor.detach(), got.detach())
    return UnpackedDualTensor(tensor.view_as(tensor), got)


def _reaches_user_leaves(tensor, entries):
    """Whether tensor's graph reaches a leaf other than the graph roots make_dual created (a
    tensor of the caller that requires grad, a primal given to make_dual included: then primal
    and tangent stay differentiable, as torch's)."""
    own = {e.own_leaf_node for e in entries if e.own_leaf_node is not None}
    seen, stack = set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if node.name() == "AccumulateGrad" and node not in own:
            return True
        stack.extend(nxt for nxt, _ in node.next_functions)
    return False
