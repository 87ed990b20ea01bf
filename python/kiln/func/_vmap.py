"""vmap as a loop: func runs once per index of the mapped dimension and the results are
stacked (decision 0082). torch batches the ops instead (one call on batched tensors); the
values are the same, the cost is one call per example. in_dims: an int or None for all
arguments, or a tuple with one int / None per positional argument (a nested argument takes
its entry for all its tensors); out_dims: an int, or a tuple with one int per output."""
import functools

from .. import _C
from . import _pytree

__all__ = ["vmap"]


def _name(func):
    return getattr(func, "__name__", repr(func))


def _dims_per_leaf(func, in_dims, args):
    """(flat args, their spec, in_dim per flat arg: None or a non-negative dimension)."""
    where = f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>)"
    if not isinstance(in_dims, (int, tuple)) and in_dims is not None:
        raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) tuple "
                         f"matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({_name(func)})(<inputs>): got no inputs. Maybe you forgot to add "
                         "inputs, or you are trying to vmap over a function with no inputs. The "
                         "latter is unsupported.")
    per_arg = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    if len(per_arg) != len(args):
        raise ValueError(f"{where}: in_dims is not compatible with the structure of `inputs`. "
                         f"in_dims has {len(per_arg)} entries but inputs has {len(args)}.")
    leaves, dims = [], []
    for arg, dim in zip(args, per_arg):
        if dim is not None and not isinstance(dim, int):
            raise ValueError(f"{where}: Got in_dim={dim} for an input but in_dim must be either "
                             "an integer dimension or None.")
        for leaf in _pytree.flatten(arg)[0]:
            leaves.append(leaf)
            dims.append(_checked_dim(where, leaf, dim))
    return leaves, _pytree.flatten(args)[1], dims


def _checked_dim(where, leaf, dim):
    if dim is None:
        return None
    if not isinstance(leaf, _C.Tensor):
        raise ValueError(f"{where}: Got in_dim={dim} for an input but the input is of type "
                         f"{type(leaf)}. We cannot vmap over non-Tensor arguments, please use "
                         "None as the respective in_dim")
    if not -leaf.dim() <= dim < leaf.dim():
        raise ValueError(f"{where}: Got in_dim={dim} for some input, but that input is a Tensor "
                         f"of dimensionality {leaf.dim()} so expected in_dim to satisfy "
                         f"-{leaf.dim()} <= in_dim < {leaf.dim()}.")
    return dim % leaf.dim()


def _batch_size(leaves, dims):
    sizes = [leaf.shape[d] for leaf, d in zip(leaves, dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0]


def _stack_outputs(func, results, out_dims):
    """results: one output structure per example; stacked leaf by leaf at out_dims."""
    flat = [_pytree.flatten(r) for r in results]
    leaves0, spec = flat[0]
    per_leaf = out_dims if isinstance(out_dims, tuple) else (out_dims,) * len(leaves0)
    if len(per_leaf) != len(leaves0):
        raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is "
                         "not compatible with the structure of `outputs`. out_dims has "
                         f"{len(per_leaf)} entries but outputs has {len(leaves0)}.")
    stacked = []
    for i, dim in enumerate(per_leaf):
        column = [leaves[i] for leaves, _ in flat]
        for value in column:
            if not isinstance(value, _C.Tensor):
                raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` must only return "
                                 f"Tensors, got type {type(value)}. Did you mean to set "
                                 "out_dims= to None for output?")
        if not isinstance(dim, int):
            raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must "
                             "be an int, None or a python collection of ints representing "
                             "where in the outputs the vmapped dimension should appear.")
        stacked.append(_C.stack(column, dim))
    return _pytree.unflatten(stacked, spec)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over dimension in_dims of its arguments; results stacked at out_dims."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        leaves, spec, dims = _dims_per_leaf(func, in_dims, args)
        size = _batch_size(leaves, dims)
        if size == 0:
            raise ValueError("vmap over a dimension of size 0: kiln's loop form cannot infer "
                             "the output shape")
        results = []
        for b in range(size):
            sliced = [x if d is None else x.select(d, b) for x, d in zip(leaves, dims)]
            results.append(func(*_pytree.unflatten(sliced, spec), **kwargs))
        return _stack_outputs(func, results, out_dims)

    return wrapper
