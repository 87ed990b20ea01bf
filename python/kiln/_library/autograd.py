"""register_autograd: the Autograd kernel of a custom op, as a kiln.autograd.Function
(torch._library.autograd.make_autograd_impl). Tensor-list arguments and outputs are flattened
into the Function's inputs and outputs and rebuilt for setup_context and backward, so that
backward sees one gradient per output (a list for a Tensor[] output, None for a non-Tensor
one) and returns one per input (a list for a Tensor[] input), with ctx.needs_input_grad shaped
the same way."""
from .. import _C
from ..autograd import Function
from . import schema as _schema

Tensor = _C.Tensor


class Info:
    """The backward / setup_context pair of an op (CustomOpDef keeps its own)."""

    def __init__(self, backward_fn, setup_context_fn):
        self._backward_fn = backward_fn
        self._setup_context_fn = setup_context_fn


class _Meta:
    __slots__ = ("kw", "in_spec", "out_spec")

    def __init__(self, kw, in_spec):
        self.kw, self.in_spec, self.out_spec = kw, in_spec, None


def _flatten_inputs(schema, pos):
    """(flat values, spec): a Tensor-list argument contributes its elements (spec: its
    length), any other argument itself (spec: None)."""
    flat, spec = [], []
    positional = [a for a in schema.arguments if not a.kwarg_only]
    for a, v in zip(positional, pos):
        if _schema.is_tensor_list_type(a.type) and isinstance(v, list):
            flat.extend(v)
            spec.append(len(v))
        else:
            flat.append(v)
            spec.append(None)
    return flat, spec


def _unflatten(flat, spec):
    out, i = [], 0
    for n in spec:
        if n is None:
            out.append(flat[i])
            i += 1
        else:
            out.append(list(flat[i:i + n]))
            i += n
    return out


def _flatten_output(result, tensors):
    """The structure of an op's result with its tensors moved to `tensors`."""
    if isinstance(result, Tensor):
        tensors.append(result)
        return ("T",)
    if isinstance(result, tuple):
        return ("U", [_flatten_output(r, tensors) for r in result])
    if isinstance(result, list) and result and all(isinstance(r, Tensor) for r in result):
        tensors.extend(result)
        return ("L", len(result))
    return ("V", result)


def _rebuild_output(spec, it):
    kind = spec[0]
    if kind == "T":
        return next(it)
    if kind == "U":
        return tuple(_rebuild_output(s, it) for s in spec[1])
    if kind == "L":
        return [next(it) for _ in range(spec[1])]
    return spec[1]


def _output_grads(spec, it):
    """One gradient per output of the op, in its structure (None for non-Tensor outputs)."""
    kind = spec[0]
    if kind == "T":
        return [next(it)]
    if kind == "U":
        out = []
        for s in spec[1]:
            out.extend(_output_grads(s, it))
        return out
    if kind == "L":
        return [[next(it) for _ in range(spec[1])]]
    return [None]


def make_autograd_impl(entry, info, display):
    """The Autograd kernel of `entry`: runs the op's backend through a generated Function when
    a Tensor input requires grad; info holds _backward_fn and _setup_context_fn (read at call
    time, so a later register_autograd takes effect)."""
    schema = entry.schema
    has_kwarg_only = any(a.kwarg_only for a in schema.arguments)
    overload = entry.overload or "default"
    name = f"GeneratedBackwardFor_{entry.ns}_{entry.name}_{overload}"
    has_tensor_return = any(_schema.is_tensor_type(r.type) or _schema.is_tensor_list_type(r.type)
                            for r in schema.returns)

    def forward(ctx, *flat):
        meta = flat[-1]
        pos = _unflatten(flat[:-1], meta.in_spec)
        result = entry.dispatch(pos, meta.kw, below_autograd=True)
        setup = info._setup_context_fn
        if setup is not None:
            if has_kwarg_only:
                setup(ctx=ctx, inputs=tuple(pos), keyword_only_inputs=dict(meta.kw),
                      output=result)
            else:
                setup(ctx=ctx, inputs=tuple(pos), output=result)
        tensors = []
        meta.out_spec = _flatten_output(result, tensors)
        ctx._kiln_op_meta = meta
        return tuple(tensors)

    def backward(ctx, *grads):
        backward_fn = info._backward_fn
        if backward_fn is None:
            raise RuntimeError(f"Trying to backward through {display} but no autograd formula "
                               "was registered. Please use register_autograd to add one.")
        meta = ctx._kiln_op_meta
        user_grads = _output_grads(meta.out_spec, iter(grads))
        flat_needs = ctx.needs_input_grad
        ctx.needs_input_grad = tuple(_unflatten(flat_needs, meta.in_spec))
        try:
            result = backward_fn(ctx, *user_grads)
        finally:
            ctx.needs_input_grad = flat_needs
        if not isinstance(result, tuple):
            result = (result,)
        n_inputs = len(meta.in_spec)
        if len(result) != n_inputs:
            raise RuntimeError(
                f"{display}: the backward registered with register_autograd returned "
                f"{len(result)} gradient(s) but the op has {n_inputs} positional input(s); "
                "return one per input (None for inputs that are not differentiable, a list "
                "for a Tensor[] input)")
        flat = []
        for arg, n, g in zip([a for a in schema.arguments if not a.kwarg_only],
                             meta.in_spec, result):
            if n is None:
                if g is not None and not isinstance(g, Tensor):
                    raise RuntimeError(f"{display}: backward returned a {type(g).__name__} as "
                                       f"the gradient of '{arg.name}'; expected a Tensor or None")
                flat.append(g)
            elif g is None:
                flat.extend([None] * n)
            else:
                if not isinstance(g, (list, tuple)) or len(g) != n:
                    got = type(g).__name__
                    if isinstance(g, (list, tuple)):
                        got += f" of {len(g)}"
                    raise RuntimeError(
                        f"{display}: the gradient of the Tensor[] input '{arg.name}' must be a "
                        f"list of {n} tensors (or None), got {got}")
                flat.extend(g)
        flat.append(None)  # the metadata argument
        return tuple(flat)

    generated = type(name, (Function,), {"forward": staticmethod(forward),
                                         "backward": staticmethod(backward)})

    def autograd_impl(*pos, **kw):
        pos = list(pos)
        if not has_tensor_return:
            return entry.dispatch(pos, kw, below_autograd=True)
        flat, in_spec = _flatten_inputs(schema, pos)
        meta = _Meta(kw, in_spec)
        out = generated.apply(*flat, meta)
        if meta.out_spec is None:  # forward did not run (cannot happen) -- be safe
            return out
        return _rebuild_output(meta.out_spec, iter(out))

    autograd_impl._generated = generated
    return autograd_impl
