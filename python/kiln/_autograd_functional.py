"""kiln.autograd.functional: vjp, jvp, jacobian, hessian, hvp and vhp of a function of tensors,
as torch.autograd.functional (decision 0082). All are reverse mode over kiln.autograd.grad:
jvp, hvp and jacobian(strategy="forward-mode") use the double-backward trick (the gradient of
a vjp with respect to its cotangent, which the vjp depends on linearly), jacobian loops over
the output elements (forward-mode: over the input elements).

Each function runs `func` on fresh graph roots (detached copies of the inputs, or views of
them with create_graph=True so the results stay differentiable with respect to the caller's
tensors) and returns detached results unless create_graph is set. Tuples in, tuples out: a
single tensor given gives a single tensor back, as torch."""
from . import _C
from .autograd import grad as _grad, enable_grad, set_grad_enabled

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


# --- argument handling ---------------------------------------------------------------------

def _tensors_of(value, arg_name, fn_name):
    """(given as a tuple?, tuple of tensors); a TypeError naming what was given otherwise."""
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, item in enumerate(items):
        if not isinstance(item, _C.Tensor):
            where = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but {where} has type {type(item)}.")
    return is_tuple, items


def _outputs_of(func, inputs, fn_name):
    return _tensors_of(func(*inputs), "outputs of the user-provided function", fn_name)


def _graph_roots(tensors, create_graph, need_graph):
    """Tensors to differentiate with respect to. With create_graph an input that requires grad
    is viewed (not detached), so the results keep their graph back to the caller's tensor."""
    return tuple(t.view_as(t) if create_graph and t.requires_grad
                 else t.detach().requires_grad_(need_graph) for t in tensors)


def _vector(v, refs, refs_are_tuple, fn_name, create_graph, none_message):
    """The vector v of a product, checked against refs (count and sizes)."""
    if v is None:
        if len(refs) != 1 or refs[0].nelement() != 1:
            raise RuntimeError(none_message)
        return tuple(_C.ones_like(r) for r in refs)  # the one element's derivative
    _, v = _tensors_of(v, "v", fn_name)
    v = _graph_roots(v, create_graph, need_graph=False)
    if len(v) != len(refs):
        if refs_are_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(refs)} but got "
                               f"{len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (vi, ref) in enumerate(zip(v, refs)):
        if vi.shape != ref.shape:
            where = f"Entry {i} in " if refs_are_tuple else ""
            raise RuntimeError(f"{where}v has invalid size: should be {ref.size()} but got "
                               f"{vi.size()}.")
    return v


_V_NONE_FOR_INPUT = ("The vector v can only be None if the input to the user-provided function "
                     "is a single Tensor with a single element.")


def _strict_check(tensors, kind, strict):
    """strict mode: every tensor must exist and require grad (kind says which stage failed)."""
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if t.requires_grad:
            continue
        if kind == "outputs":
            raise RuntimeError(f"Output {i} of the user-provided function does not require "
                               "gradients. The outputs must be computed in a differentiable "
                               "manner from the input when running in strict mode.")
        if kind == "grad_inputs":
            raise RuntimeError(f"The gradient with respect to input {i} is independent of the "
                               "inputs of the user-provided function. This is not allowed in "
                               "strict mode.")
        if kind == "jacobian":
            raise RuntimeError("While computing the hessian, found that the jacobian of the "
                               f"user-provided function with respect to input {i} is "
                               "independent of the input. This is not allowed in strict mode. "
                               "You should ensure that your function is twice differentiable "
                               "and that the jacobian depends on the inputs (this would be "
                               "violated by a linear function for example).")
        raise RuntimeError(f"The hessian of the user-provided function with respect to input "
                           f"{i} is independent of the input. This is not allowed in strict "
                           "mode. You should ensure that your function is thrice "
                           "differentiable and that the hessian depends on the inputs.")


def _grads(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """kiln.autograd.grad over the outputs that have a graph (None for an input none of them
    reaches; all None when no output has a graph, where autograd.grad would raise)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    outs, gos = zip(*pairs)
    return _grad(list(outs), list(inputs), list(gos), retain_graph=retain_graph,
                 create_graph=create_graph, allow_unused=True)


# Why a None gradient is an error in strict mode, per stage.
_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
            "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
                         "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                         "prevents from using the double backward trick to replace forward "
                         "mode AD.",
}


def _zeros_for_none(grads, refs, strict, create_graph, stage):
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            g = _C.zeros_like(ref)
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if stage.startswith("double") else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               "create_graph=True.")
        out.append(g)
    return tuple(out)


def _finish(tensors, create_graph):
    """Detached results unless create_graph (nested tuples for jacobian / hessian)."""
    if isinstance(tensors, _C.Tensor):
        return tensors if create_graph else tensors.detach()
    return tuple(_finish(t, create_graph) for t in tensors)


def _unpack(values, is_tuple):
    return values if is_tuple else values[0]


def _unpack2(values, outer_is_tuple, inner_is_tuple):
    if not inner_is_tuple:
        values = tuple(v[0] for v in values)
    return values if outer_is_tuple else values[0]


def _scalar_output_of(func, inputs, fn_name, strict):
    is_tuple, outputs = _outputs_of(func, inputs, fn_name)
    _strict_check(outputs, "outputs", strict)
    if is_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].nelement() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should "
                           "contain a single element")
    return outputs


# --- the products ----------------------------------------------------------------------------

def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product, shaped as the inputs."""
    with enable_grad():
        inputs_are_tuple, inputs = _tensors_of(inputs, "inputs", "vjp")
        inputs = _graph_roots(inputs, create_graph, need_graph=True)
        outputs_are_tuple, outputs = _outputs_of(func, inputs, "vjp")
        _strict_check(outputs, "outputs", strict)
        v = _vector(v, outputs, outputs_are_tuple, "vjp", create_graph,
                    "The vector v can only be None if the user-provided function returns a "
                    "single Tensor with a single element.")
    with set_grad_enabled(create_graph or _C.is_grad_enabled()):
        raw = _grads(outputs, inputs, v, create_graph=create_graph)
        result = _zeros_for_none(raw, inputs, strict, create_graph, "back")
    return (_unpack(_finish(outputs, create_graph), outputs_are_tuple),
            _unpack(_finish(result, create_graph), inputs_are_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, shaped as the outputs. The vjp
    u -> u^T J is linear in u; its gradient with respect to u, taken along v, is J v."""
    with enable_grad():
        inputs_are_tuple, inputs = _tensors_of(inputs, "inputs", "jvp")
        inputs = _graph_roots(inputs, create_graph, need_graph=True)
        v = _vector(v, inputs, inputs_are_tuple, "jvp", create_graph, _V_NONE_FOR_INPUT)
        outputs_are_tuple, outputs = _outputs_of(func, inputs, "jvp")
        _strict_check(outputs, "outputs", strict)
        cotangents = tuple(_C.zeros_like(o).requires_grad_(True) for o in outputs)
        vjps = _grads(outputs, inputs, cotangents, create_graph=True)
        _strict_check(vjps, "grad_inputs", strict)
    with set_grad_enabled(create_graph or _C.is_grad_enabled()):
        raw = _grads(vjps, cotangents, v, create_graph=create_graph)
        result = _zeros_for_none(raw, outputs, strict, create_graph, "back_trick")
    return (_unpack(_finish(outputs, create_graph), outputs_are_tuple),
            _unpack(_finish(result, create_graph), outputs_are_tuple))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of func at inputs: one row of vjps per output element (strategy=
    "forward-mode": one column of Jacobian-vector products per input element, by the
    double-backward trick; as torch, it needs vectorize=True and refuses create_graph / strict).
    Result[i][j] (shape output_i.shape + input_j.shape) with torch's nesting: a tensor level is
    dropped where a single tensor (not a tuple) was given or returned. vectorize only changes how
    torch batches the work; here it is the same loop (same values)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode", '
                             f'but got {strategy!r}.')  # torch's class
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("kiln.autograd.functional.jacobian: `create_graph=True` "
                                      'and `strategy="forward-mode"` are not supported together.')
        if strict:
            raise RuntimeError("kiln.autograd.functional.jacobian: `strict=True` and "
                               '`strategy="forward-mode"` are not supported together.')
        if not vectorize:  # as torch: its forward mode exists only in the vmapped form
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse "
                                      "Hessian is only implemented for `vectorize=True` (as "
                                      "torch, whose forward-mode AD runs vmapped).")
        return _jacobian_forward_mode(func, inputs)
    with enable_grad():
        inputs_are_tuple, inputs = _tensors_of(inputs, "inputs", "jacobian")
        inputs = _graph_roots(inputs, create_graph, need_graph=True)
        outputs_are_tuple, outputs = _outputs_of(func, inputs, "jacobian")
        _strict_check(outputs, "outputs", strict)
        if vectorize and strict:
            raise RuntimeError("kiln.autograd.functional.jacobian: `strict=True` and "
                               "`vectorized=True` are not supported together. Please either set "
                               "`strict=False` or `vectorize=False`.")
        rows = tuple(_jacobian_rows(i, out, inputs, create_graph, strict)
                     for i, out in enumerate(outputs))
    return _unpack2(_finish(rows, create_graph), outputs_are_tuple, inputs_are_tuple)


def _jacobian_forward_mode(func, inputs):
    """jacobian(strategy="forward-mode"): one Jacobian-vector product per input element, by the
    double-backward trick (kiln has no forward-mode AD: see kiln/func/_linearize.py). Entries
    have the output's dtype, as torch's forward mode."""
    # imported here: kiln.func (its package imports kiln.nn) loads after kiln.autograd
    from .func._linearize import Linearization
    with enable_grad():
        inputs_are_tuple, inputs = _tensors_of(inputs, "inputs", "jacobian")
        for inp in inputs:
            if not inp.is_floating_point():
                raise ValueError("Expected primal to be floating point or complex, but got: "
                                 f"{inp.dtype}")
        inputs = _graph_roots(inputs, create_graph=False, need_graph=True)
        outputs_are_tuple, outputs = _outputs_of(func, inputs, "jacobian")
        blocks = Linearization(outputs, inputs, "kiln.autograd.functional.jacobian").jacobian(
            create_graph=False)
    # lists, not tuples: torch's forward mode returns lists of lists where both are tuples
    rows = [[b.detach() for b in per_output] for per_output in blocks]
    return _unpack2(rows, outputs_are_tuple, inputs_are_tuple)


def _jacobian_rows(i, out, inputs, create_graph, strict):
    """d out / d input_j for every j, one vjp per element of out."""
    per_input = [[] for _ in inputs]
    flat = out.reshape(-1)
    for k in range(out.nelement()):
        grads = _grads((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
        for j, (g, inp) in enumerate(zip(grads, inputs)):
            if g is None:
                if strict:
                    raise RuntimeError(f"Output {i} of the user-provided function is "
                                       f"independent of input {j}. This is not allowed in "
                                       "strict mode.")
                g = _C.zeros_like(inp)
            elif strict and create_graph and not g.requires_grad:
                raise RuntimeError("The jacobian of the user-provided function is independent "
                                   f"of input {i}. This is not allowed in strict mode when "
                                   "create_graph=True.")
            per_input[j].append(g)
    return tuple(_stack_rows(rows, out, inp) for rows, inp in zip(per_input, inputs))


def _stack_rows(rows, out, inp):
    if not rows:  # an empty output: no rows to stack
        return inp.new_zeros(tuple(out.shape) + tuple(inp.shape))
    return _C.stack(rows, 0).view(tuple(out.shape) + tuple(inp.shape))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function returning one element: the jacobian of its gradient."""
    inputs_are_tuple, inputs = _tensors_of(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode", '
                             f'but got {outer_jacobian_strategy!r}.')

    def scalar_func(*inp):
        return _scalar_output_of(func, inp, "hessian", strict)[0].squeeze()

    def gradient(*inp):
        jac = jacobian(scalar_func, inp, create_graph=True)
        _strict_check(jac, "jacobian", strict)
        return jac

    res = jacobian(gradient, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _unpack2(res, inputs_are_tuple, inputs_are_tuple)


def _first_and_second_order(func, inputs, v, create_graph, strict, fn_name):
    """(inputs_are_tuple, graph roots, v, outputs, gradient with its graph) for vhp / hvp."""
    inputs_are_tuple, inputs = _tensors_of(inputs, "inputs", fn_name)
    inputs = _graph_roots(inputs, create_graph, need_graph=True)
    v = _vector(v, inputs, inputs_are_tuple, fn_name, create_graph, _V_NONE_FOR_INPUT)
    outputs = _scalar_output_of(func, inputs, fn_name, strict)
    gradient = _grads(outputs, inputs, create_graph=True)
    _strict_check(gradient, "jacobian", strict)
    return inputs_are_tuple, inputs, v, outputs, gradient


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): the vector-Hessian product of a one-element function."""
    with enable_grad():
        inputs_are_tuple, inputs, v, outputs, gradient = _first_and_second_order(
            func, inputs, v, create_graph, strict, "vhp")
    with set_grad_enabled(create_graph or _C.is_grad_enabled()):
        raw = _grads(gradient, inputs, v, create_graph=create_graph)
        result = _zeros_for_none(raw, inputs, strict, create_graph, "double_back")
    return (_finish(outputs[0], create_graph),
            _unpack(_finish(result, create_graph), inputs_are_tuple))


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the Hessian-vector product, by the double-backward trick applied
    to the gradient (H is symmetric, so this equals vhp up to rounding)."""
    with enable_grad():
        inputs_are_tuple, inputs, v, outputs, gradient = _first_and_second_order(
            func, inputs, v, create_graph, strict, "hvp")
        cotangents = tuple(_C.zeros_like(i).requires_grad_(True) for i in inputs)
        double_back = _grads(gradient, inputs, cotangents, create_graph=True)
        _strict_check(gradient, "hessian", strict)
    with set_grad_enabled(create_graph or _C.is_grad_enabled()):
        raw = _grads(double_back, cotangents, v, create_graph=create_graph)
        result = _zeros_for_none(raw, inputs, strict, create_graph, "double_back_trick")
    return (_finish(outputs[0], create_graph),
            _unpack(_finish(result, create_graph), inputs_are_tuple))
