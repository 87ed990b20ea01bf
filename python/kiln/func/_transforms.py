"""grad, grad_and_value, vjp, jacrev and hessian as torch.func's, over kiln.autograd.grad
(decision 0082). torch.func wraps tensors per transform level; kiln has no such wrappers, so
each transform differentiates with respect to fresh graph roots of its arguments and always
builds the graph of its gradients (create_graph), which is what lets transforms nest
(hessian is jacrev of jacrev). The outermost transform then hands back detached results,
unless an argument it was given requires grad and grad mode is on: then, as torch.func, the
results stay differentiable with respect to it."""
import contextlib

from .. import _C
from ..autograd import enable_grad, grad as _autograd_grad
from . import _pytree

__all__ = ["grad", "grad_and_value", "vjp", "jacrev", "hessian"]

_depth = 0  # how many transforms are running (nesting)


@contextlib.contextmanager
def _transform(args):
    """Yields a function that finishes a result: detaches it at the outermost level when no
    argument connects it to the caller's graph."""
    global _depth
    keep_graph = _depth > 0 or (_C.is_grad_enabled() and any(
        isinstance(x, _C.Tensor) and x.requires_grad for x in _pytree.flatten(args)[0]))
    _depth += 1
    try:
        with enable_grad():
            yield (lambda tree: tree) if keep_graph else _detach_all
    finally:
        _depth -= 1


def _detach_all(tree):
    return _pytree.map_leaves(lambda x: x.detach() if isinstance(x, _C.Tensor) else x, tree)


def _graph_root(x):
    if not isinstance(x, _C.Tensor):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
    # a view keeps the link to an x with history (an outer transform's root); a fresh leaf
    # otherwise
    return x.view_as(x) if x.requires_grad else x.detach().requires_grad_(True)


def _check_argnums(argnums, nargs):
    """argnums normalised to non-negative positions (torch's RuntimeErrors for bad ones)."""
    if not isinstance(argnums, (int, tuple)) or isinstance(argnums, bool):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    for a in (argnums,) if isinstance(argnums, int) else argnums:
        if not isinstance(a, int):
            raise RuntimeError(f"argnum must be int, got: {type(a)}")
        if not -nargs <= a < nargs:
            raise RuntimeError(f"Got argnum={a}, but only {nargs} positional inputs")
    if isinstance(argnums, int):
        return argnums % nargs
    if not argnums:
        raise RuntimeError("argnums must be non-empty")
    if len(set(a % nargs for a in argnums)) != len(argnums):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return tuple(a % nargs for a in argnums)


def _with_roots(args, argnums):
    """(args with graph roots at argnums, the differentiated part: one arg or a tuple)."""
    args = list(args)
    for i in (argnums,) if isinstance(argnums, int) else argnums:
        args[i] = _pytree.map_leaves(_graph_root, args[i])
    diff = args[argnums] if isinstance(argnums, int) else tuple(args[i] for i in argnums)
    return tuple(args), diff


def _grads_or_zeros(outputs, inputs, grad_outputs=None, retain_graph=None):
    """Gradients with a graph, zeros (as torch.func) for inputs the outputs do not reach."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs or (None,) * len(outputs))
             if o.requires_grad]
    if not pairs:
        return tuple(_C.zeros_like(x) for x in inputs)
    outs, gos = zip(*pairs)
    got = _autograd_grad(list(outs), list(inputs), list(gos), retain_graph=retain_graph,
                         create_graph=True, allow_unused=True)
    return tuple(_C.zeros_like(x) if g is None else g for g, x in zip(got, inputs))


def _split_aux(output, has_aux, api):
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if "
                           "has_aux is True")
    return output


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning (gradient of func with respect to args[argnums], func's value);
    func must return a scalar tensor (or (scalar, aux) with has_aux, then the value is
    (scalar, aux))."""
    api = "grad_and_value(f)(*args)"

    def wrapper(*args, **kwargs):
        with _transform(args) as finish:
            nums = _check_argnums(argnums, len(args))
            args, diff = _with_roots(args, nums)
            output, aux = _split_aux(func(*args, **kwargs), has_aux, api)
            if not isinstance(output, _C.Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got "
                                   f"{type(output)}")
            if output.dim() != 0:
                raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got "
                                   f"tensor with {output.dim()} dims. Maybe you wanted to use "
                                   "the vjp or jacrev APIs instead?")
            leaves, spec = _pytree.flatten(diff)
            grads = _pytree.unflatten(_grads_or_zeros((output,), leaves), spec)
            value = (output, aux) if has_aux else output
            return finish(grads), finish(value)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of func (a scalar) with respect to args[argnums]
    (with has_aux: (gradient, aux))."""
    both = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        grads, value = both(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return wrapper


def _check_float_outputs(leaves, api):
    if not leaves:
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output (got "
                           "output = [])")
    for out in leaves:
        if not isinstance(out, _C.Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got "
                               f"unsupported type {type(out)}")
        if not out.is_floating_point():
            raise RuntimeError("vjp(f, ...): All outputs of f must be floating-point or complex "
                               f"Tensors, got Tensor with dtype {out.dtype}")


def _vjp(func, primals, argnums, has_aux):
    """(output, vjp_fn, aux) where vjp_fn(cotangents) gives the gradients structured as the
    differentiated primals (all of them when argnums is None)."""
    api = "vjp(f, *primals)"
    with _transform(primals) as finish:
        if argnums is None:
            primals = _pytree.map_leaves(_graph_root, primals)
            diff = primals
        else:
            primals, diff = _with_roots(primals, _check_argnums(argnums, len(primals)))
        output, aux = _split_aux(func(*primals), has_aux, "vjp(f, *primals)")
        out_leaves, out_spec = _pytree.flatten(output)
        _check_float_outputs(out_leaves, api)
        diff_leaves, diff_spec = _pytree.flatten(diff)

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        ct_leaves, ct_spec = _pytree.flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree "
                               f"structure of outputs to the function. cotangents: {ct_spec!r}, "
                               f"primal output: {out_spec!r}")
        with enable_grad():
            got = _grads_or_zeros(out_leaves, diff_leaves, ct_leaves, retain_graph=retain_graph)
        if create_graph is False or (create_graph is None and not _C.is_grad_enabled()):
            got = tuple(g.detach() for g in got)
        return finish(_pytree.unflatten(got, diff_spec))

    return finish(output), vjp_fn, finish(aux)


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn[, aux]): vjp_fn(cotangents) is the tuple of the cotangents'
    products with the Jacobian, one per primal."""
    output, vjp_fn, aux = _vjp(func, primals, None, has_aux)
    return (output, vjp_fn, aux) if has_aux else (output, vjp_fn)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """A function returning the Jacobian of func with respect to args[argnums]: for each
    output leaf, an entry (per argnum when argnums is a tuple) of shape
    output.shape + arg.shape; one vjp per output element (chunk_size changes nothing)."""
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    def wrapper(*args):
        with _transform(args) as finish:
            output, vjp_fn, aux = _vjp(func, args, argnums, has_aux)
            out_leaves, out_spec = _pytree.flatten(output)
            nums = _check_argnums(argnums, len(args))
            primals = (args[nums],) if isinstance(nums, int) else tuple(args[i] for i in nums)
            primal_leaves, primal_spec = _pytree.flatten(primals)
            columns = _jacobian_columns(vjp_fn, out_leaves, out_spec, primal_leaves)
            per_output = []
            for k, out in enumerate(out_leaves):
                blocks = [col[k].view(tuple(out.shape) + tuple(p.shape))
                          for col, p in zip(columns, primal_leaves)]
                entry = _pytree.unflatten(blocks, primal_spec)
                per_output.append(entry[0] if isinstance(nums, int) else entry)
            result = finish(_pytree.unflatten(per_output, out_spec))
            return (result, aux) if has_aux else result

    return wrapper


def _jacobian_columns(vjp_fn, out_leaves, out_spec, primal_leaves):
    """Per primal leaf: a list, per output leaf, of the rows d out / d primal stacked
    (out.numel() x primal.shape)."""
    rows = [[[] for _ in out_leaves] for _ in primal_leaves]
    for k, out in enumerate(out_leaves):
        for e in range(out.numel()):
            basis = [_C.zeros_like(o, memory_format=_C.contiguous_format) for o in out_leaves]
            basis[k].view(-1)[e] = 1
            got = _pytree.flatten(vjp_fn(_pytree.unflatten(basis, out_spec)))[0]
            for j, g in enumerate(got):
                rows[j][k].append(g)
    return [[_C.stack(r, 0) if r else p.new_zeros((0,) + tuple(p.shape))
             for r in per_out] for per_out, p in zip(rows, primal_leaves)]


def hessian(func, argnums=0):
    """The Hessian of func with respect to args[argnums]: jacrev of jacrev (torch.func takes
    jacfwd of jacrev; same values: kiln's jacfwd is itself built from reverse passes, see
    _forward.py, so the outer reverse pass is the cheaper one here)."""
    return jacrev(jacrev(func, argnums), argnums)
