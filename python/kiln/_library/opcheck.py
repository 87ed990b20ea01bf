"""opcheck: checks that an operator's registrations agree with what it does (torch.library
.opcheck). The tests, each on copies of the inputs:

- test_schema: the arguments the kernel mutates are exactly those the schema marks Tensor(a!),
  and outputs alias inputs (or each other) only as the schema's alias annotations say;
- test_autograd_registration: with inputs that require grad, the op has an Autograd /
  CompositeImplicitAutograd kernel (register_autograd), or else its outputs do not require grad
  (a backend kernel that records gradients through the ops it calls is the mistake caught);
- test_faketensor: the fake impl (run on meta copies of the inputs) gives the real outputs'
  number, shapes, dtypes and strides;
- test_aot_dispatch_dynamic / _static: kiln has no AOTAutograd; the op is run through
  kiln.compile (a capture, then a replay) and its outputs and input gradients compared with
  eager ones."""
import warnings

from .. import _C
from . import ops as _ops
from . import schema as _schema
from .fake_impl import DynamicOutputShapeException

Tensor = _C.Tensor

DEFAULT_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor",
                      "test_aot_dispatch_dynamic")


class OpCheckError(Exception):
    """An opcheck test failed (the cause is chained)."""


class MetadataMismatchError(RuntimeError):
    """The fake impl's outputs differ from the real ones in shape, dtype or strides."""


def _map_tensors(fn, obj):
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(_map_tensors(fn, o) for o in obj)
    if isinstance(obj, list):
        return [_map_tensors(fn, o) for o in obj]
    if isinstance(obj, dict):
        return {k: _map_tensors(fn, v) for k, v in obj.items()}
    return obj


def _leaves(obj, out=None):
    out = [] if out is None else out
    if isinstance(obj, (tuple, list)):
        for o in obj:
            _leaves(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _leaves(o, out)
    else:
        out.append(obj)
    return out


def _copy(t):
    c = t.detach().clone()
    if t.requires_grad:
        c.requires_grad_(True)
    return c


def _copy_inputs(args, kwargs):
    return _map_tensors(_copy, args), _map_tensors(_copy, kwargs)


def _any_abstract(args, kwargs):
    return any(isinstance(t, Tensor) and t.device.type == "meta"
               for t in _leaves((args, kwargs)))


def _same_values(a, b):
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        return False
    if a.device.type == "meta":
        return True
    with _no_grad():
        eq = a == b
        if a.is_floating_point() or a.is_complex():
            eq = eq | (a.isnan() & b.isnan())
        return bool(eq.all())


def _no_grad():
    from ..autograd import no_grad
    return no_grad()


# --- the tests ------------------------------------------------------------------------------

def check_schema(op, args, kwargs, *, rtol=None, atol=None):
    if _any_abstract(args, kwargs):
        return
    entry = op._entry
    schema = entry.schema
    args, kwargs = _copy_inputs(args, kwargs)
    pos, kw = _schema.bind(entry.qualname, schema, args, kwargs)
    values = []
    it = iter(pos)
    for a in schema.arguments:
        values.append(kw[a.name] if a.kwarg_only else next(it))
    before = [_map_tensors(lambda t: t.detach().clone(), v) for v in values]
    result = op(*args, **kwargs)

    for a, v, b in zip(schema.arguments, values, before):
        if _schema.is_tensor_type(a.type) and isinstance(v, Tensor):
            mutated = not _same_values(b, v.detach())
        elif _schema.is_tensor_list_type(a.type) and isinstance(v, list):
            mutated = any(isinstance(x, Tensor) and not _same_values(y, x.detach())
                          for x, y in zip(v, b))
        else:
            continue
        if a.is_write != mutated:
            raise RuntimeError(
                f"{entry.key}: for argument '{a.name}': the operator's schema {schema} specified "
                f"that the operator {'mutates' if a.is_write else 'does not mutate'} the "
                "argument, but this seems to be empirically wrong. Please make the schema and "
                "operator behavior consistent. You can specify that an operator mutates a "
                "Tensor by e.g. changing its schema type from 'Tensor name' to 'Tensor(a!) name'"
                " (use different identifiers (a, b, c, ...) for different Tensors), or with "
                "mutates_args= in custom_op.")

    # aliasing: storage identities of the inputs, by argument
    input_keys = {}
    for a, v in zip(schema.arguments, values):
        for t in _leaves(v):
            if isinstance(t, Tensor):
                k = _ops.storage_key(t)
                if k is not None:
                    input_keys.setdefault(k, a)
    rets = schema.returns
    if not rets:
        outs = []
    elif len(rets) == 1 and not schema.tuple_return:
        outs = [result]
    else:
        outs = list(result)
    seen_outputs = {}
    for i, (r, out) in enumerate(zip(rets, outs)):
        for t in _leaves(out):
            if not isinstance(t, Tensor):
                continue
            k = _ops.storage_key(t)
            if k is None:
                continue
            aliased = input_keys.get(k)
            where = "" if len(rets) == 1 else f" {i}"
            if r.alias_info is None:
                if aliased is not None:
                    raise RuntimeError(
                        f"{entry.key}: output{where} aliases the input '{aliased.name}' (shares "
                        f"its memory), but the schema {schema} declares no alias for it. Return "
                        "a new tensor (e.g. x.clone()), or annotate the schema (Tensor(a) for a "
                        "view, Tensor(a!) for an input returned after an in-place update).")
                if k in seen_outputs:
                    raise RuntimeError(
                        f"{entry.key}: outputs {seen_outputs[k]} and {i} share memory, but the "
                        f"schema {schema} declares no alias between them; return separate "
                        "tensors (e.g. .clone() one of them).")
            else:
                sets = set(r.alias_info.before_set)
                expected = [a for a in schema.arguments if a.alias_info is not None and
                            sets & set(a.alias_info.before_set)]
                if expected and (aliased is None or aliased not in expected):
                    raise RuntimeError(
                        f"{entry.key}: the schema {schema} says output{where} aliases the "
                        f"input '{expected[0].name}', but the returned tensor does not share "
                        "its memory.")
            seen_outputs.setdefault(k, i)


def check_autograd_registration(op, args, kwargs, *, rtol=None, atol=None):
    if _any_abstract(args, kwargs):
        return
    args, kwargs = _copy_inputs(args, kwargs)
    tensors = [t for t in _leaves((args, kwargs)) if isinstance(t, Tensor)]
    if not any(t.requires_grad for t in tensors):
        return  # nothing to check without inputs that require grad (as torch's opcheck)
    entry = op._entry
    backends = {_ops._DEVICE_KEYS.get(t.device.type, t.device.type) for t in tensors}
    for key in ["Autograd", "CompositeImplicitAutograd"] + ["Autograd" + b for b in backends]:
        if entry.has_kernel(key):
            return
    outs = op(*args, **kwargs)
    inputs = {id(t) for t in tensors}
    if any(isinstance(t, Tensor) and t.requires_grad and id(t) not in inputs
           for t in _leaves(outs)):
        raise AssertionError(
            f"{entry.key}: at least one output of this operator has requires_grad=True but the "
            "operator does not have an autograd kernel defined at an autograd key (e.g. "
            "DispatchKey::Autograd). This could mean that you have incorrectly registered an "
            "autograd kernel to a non-Autograd DispatchKey (the gradients then come from the "
            "ops your backend kernel happens to call), which may lead to silently incorrect "
            "results. Register a backward with kiln.library.register_autograd, or register "
            "the implementation as CompositeImplicitAutograd if it consists of kiln ops.")


def _has_meta_path(entry):
    return any(entry.has_kernel(k) for k in ("Meta", "CompositeExplicitAutograd",
                                             "CompositeImplicitAutograd"))


def check_fake(op, args, kwargs, *, rtol=None, atol=None):
    if _any_abstract(args, kwargs):
        return
    entry = op._entry
    if not _has_meta_path(entry):
        return  # torch checks only ops with a meta / fake path too
    args, kwargs = _copy_inputs(args, kwargs)

    def to_meta(t):
        return t.detach().to("meta")

    fargs, fkwargs = _map_tensors(to_meta, args), _map_tensors(to_meta, kwargs)
    context = (f"When comparing the output of {op} on meta tensors (its fake impl) and concrete "
               "Tensors, found")
    try:
        with _no_grad():
            fake = op(*fargs, **fkwargs)
    except DynamicOutputShapeException:
        return  # a data-dependent output shape: nothing to compare on the meta device
    with _no_grad():
        real = op(*args, **kwargs)
    r_flat, f_flat = _leaves(real), _leaves(fake)
    if len(r_flat) != len(f_flat):
        raise MetadataMismatchError(f"{context} mismatch in number of returns "
                                    f"{len(f_flat)} != {len(r_flat)}")
    has_tensor_input = any(isinstance(t, Tensor) for t in _leaves((args, kwargs)))
    for i, (r, f) in enumerate(zip(r_flat, f_flat)):
        where = "" if len(r_flat) == 1 else f" for output[{i}]"
        if isinstance(r, Tensor) != isinstance(f, Tensor):
            raise MetadataMismatchError(f"{context} mismatched number of tensor outputs "
                                        f"(output[{i}] is a {type(r).__name__} for real "
                                        f"tensors, a {type(f).__name__} from the fake impl)")
        if not isinstance(r, Tensor):
            continue
        problem = None
        if tuple(r.shape) != tuple(f.shape):
            problem = f"shape mismatch: fake {list(f.shape)} != real {list(r.shape)}"
        elif r.dtype != f.dtype:
            problem = f"dtype mismatch: fake {f.dtype} != real {r.dtype}"
        elif has_tensor_input and f.device.type != "meta":
            problem = (f"device mismatch: the fake impl returned a tensor on {f.device} for "
                       "meta inputs; make it on the inputs' device (x.new_empty(...), "
                       "kiln.empty(..., device=x.device))")
        else:
            rs, fs = r.stride(), f.stride()
            for d, n in enumerate(r.shape):
                if n > 1 and rs[d] != fs[d]:
                    problem = f"stride mismatch: fake {list(fs)} != real {list(rs)}"
                    break
            if problem is None and r.storage_offset() != f.storage_offset():
                problem = (f"storage_offset mismatch: fake {f.storage_offset()} != real "
                           f"{r.storage_offset()}")
        if problem is not None:
            raise MetadataMismatchError(f"{context} mismatched tensor metadata{where}: {problem}")


def _float_outputs(out):
    return [t for t in _leaves(out) if isinstance(t, Tensor) and
            (t.is_floating_point() or t.is_complex()) and t.requires_grad]


def check_compile(op, args, kwargs, *, rtol=None, atol=None):
    """kiln's stand-in for torch's test_aot_dispatch_*: the op through kiln.compile (capture,
    then replay) against eager: outputs, and the inputs' gradients of the outputs' sum."""
    if _any_abstract(args, kwargs):
        return
    from .._compile import compile as kiln_compile
    from ..testing import assert_close

    def run(fn):
        a, k = _copy_inputs(args, kwargs)
        out = fn(*a, **k)
        grads = None
        leaves = [t for t in _leaves((a, k)) if isinstance(t, Tensor) and t.requires_grad]
        diff = _float_outputs(out)
        if leaves and diff and _C.is_grad_enabled():
            from ..autograd import grad
            total = sum(t.sum() if not t.is_complex() else t.real.sum() for t in diff)
            grads = grad(total, leaves, allow_unused=True)
        return out, grads

    def call(*a, **k):
        return op(*a, **k)

    expected = run(call)
    compiled = kiln_compile(call)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for attempt in ("capture", "replay"):
            got = run(compiled)
            kw = {} if rtol is None else {"rtol": rtol, "atol": atol}
            e_out, g_out = _leaves(expected[0]), _leaves(got[0])
            if len(e_out) != len(g_out):
                raise AssertionError(f"{op} under kiln.compile ({attempt}) returned "
                                     f"{len(g_out)} values, eagerly {len(e_out)}")
            for i, (e, g) in enumerate(zip(e_out, g_out)):
                if isinstance(e, Tensor):
                    try:
                        assert_close(g.detach(), e.detach(), **kw)
                    except AssertionError as err:
                        raise AssertionError(f"{op} under kiln.compile ({attempt}): output {i} "
                                             f"differs from eager: {err}") from None
                elif e != g:
                    raise AssertionError(f"{op} under kiln.compile ({attempt}): output {i} is "
                                         f"{g!r}, eagerly {e!r}")
            if (expected[1] is None) != (got[1] is None):
                raise AssertionError(f"{op} under kiln.compile ({attempt}): gradients "
                                     f"{'missing' if got[1] is None else 'unexpected'}")
            if expected[1] is not None:
                for i, (e, g) in enumerate(zip(expected[1], got[1])):
                    if (e is None) != (g is None):
                        raise AssertionError(f"{op} under kiln.compile ({attempt}): the "
                                             f"gradient of input {i} is "
                                             f"{'None' if g is None else 'not None'}, eagerly "
                                             f"{'None' if e is None else 'not None'}")
                    if e is not None:
                        try:
                            assert_close(g, e, **kw)
                        except AssertionError as err:
                            raise AssertionError(f"{op} under kiln.compile ({attempt}): the "
                                                 f"gradient of input {i} differs from eager: "
                                                 f"{err}") from None


ALL_TEST_UTILS = {
    "test_schema": check_schema,
    "test_autograd_registration": check_autograd_registration,
    "test_faketensor": check_fake,
    "test_aot_dispatch_static": check_compile,
    "test_aot_dispatch_dynamic": check_compile,
}


def _resolve(op):
    from .custom_ops import CustomOpDef
    if isinstance(op, CustomOpDef):
        return op._opoverload
    if isinstance(op, _ops.OpOverloadPacket):
        names = op.overloads()
        if len(names) != 1:
            raise ValueError(f"opcheck(op, ...): the operator {op} has {len(names)} overloads "
                             f"({names}); pass one of them, e.g. "
                             f"{op}.{names[0] if names else 'default'}")
        return getattr(op, names[0])
    if isinstance(op, _ops.OpOverload):
        return op
    raise ValueError(f"opcheck(op, ...): op must be a CustomOpDef (from custom_op) or an "
                     f"operator from kiln.ops (e.g. kiln.ops.mylib.foo.default), got {type(op)}")


def opcheck(op, args, kwargs=None, *, test_utils=DEFAULT_TEST_UTILS, raise_exception=True,
            rtol=None, atol=None):
    """Checks op's registrations on these sample arguments (see the module's docstring).
    Returns {test name: "SUCCESS" or the exception}; with raise_exception (the default), the
    first failure raises OpCheckError naming the test and the problem."""
    if (rtol is None) ^ (atol is None):
        raise ValueError("opcheck(op, ...): if you specify one of rtol/atol, you must specify "
                         "both")
    if kwargs is None:
        kwargs = {}
    if not isinstance(args, tuple):
        raise TypeError(f"opcheck(op, args, ...): args must be a tuple, got "
                        f"{type(args).__name__}")
    op = _resolve(op)
    if test_utils == "ALL":
        test_utils = tuple(ALL_TEST_UTILS)
    if isinstance(test_utils, str):
        test_utils = (test_utils,)
    if not isinstance(test_utils, (tuple, list)) or not set(test_utils) <= set(ALL_TEST_UTILS):
        raise ValueError(f"opcheck(op, ..., test_utils={test_utils}), expected test_utils to be "
                         f"subset of {tuple(ALL_TEST_UTILS)} but it was not")
    results = {}
    for name in test_utils:
        try:
            ALL_TEST_UTILS[name](op, args, kwargs, rtol=rtol, atol=atol)
            results[name] = "SUCCESS"
        except Exception as ex:
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {ex} (scroll up for "
                                   "stack trace)") from ex
            results[name] = ex
    return results
