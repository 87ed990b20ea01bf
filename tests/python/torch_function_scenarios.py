"""__torch_function__ scenarios for test_torch_function.py, each written once for a library
`lib` (kiln or torch) and returning what can be compared between the two: the function names
a handler saw, result types (as names), values. Run as a script, it prints
{scenario: {lib: result}} as JSON; the tests run it in a subprocess, so the wrappers kiln
installs here never reach the rest of the suite."""
import json
import sys


def _overrides(lib):
    return lib.overrides


def _names(seen):
    return [getattr(f, "__name__", repr(f)) for f in seen]


def logging_subclass(lib):
    seen = []

    class Logged(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs)

    x = lib.ones(2, 3).as_subclass(Logged)
    y = lib.ones(2, 3).as_subclass(Logged)
    out = {}
    for label, fn in [("x + 1", lambda: x + 1), ("add", lambda: lib.add(x, y)),
                      ("sum", lambda: x.sum()), ("relu", lambda: lib.nn.functional.relu(x)),
                      ("cat", lambda: lib.cat([x, y])), ("index", lambda: x[0]),
                      ("1 - x", lambda: 1 - x), ("x * x", lambda: x * x),
                      ("x < 1", lambda: x < 1), ("shape", lambda: x.shape),
                      ("setitem", lambda: x.__setitem__(0, 2.0)), ("neg", lambda: -x),
                      ("matmul", lambda: x @ y.T), ("iadd", lambda: x.__iadd__(1)),
                      ("str", lambda: str(x)[:7]), ("len", lambda: len(x))]:
        seen.clear()
        r = fn()
        out[label] = [_names(seen), type(r).__name__]
    seen.clear()
    lib.add(lib.ones(2), 1)  # plain tensors: no handler
    out["plain"] = _names(seen)
    return out


def result_types(lib):
    class Sub(lib.Tensor):
        pass

    x = lib.Tensor._make_subclass(Sub, lib.tensor([1.0, -2.0, 3.0]), True)
    y = (x * 2).relu()
    y.sum().backward()
    mx = x.max(0)
    return {"mul": type(x * 2).__name__, "relu": type(y).__name__,
            "values": (x * 2).tolist(), "grad": type(x.grad).__name__,
            "grad_values": x.grad.tolist(), "data": type(x.data).__name__,
            "detach": type(x.detach()).__name__, "max": [type(mx).__name__, type(mx[0]).__name__],
            "split": [type(t).__name__ for t in x.split(2)], "shape": type(x.shape).__name__,
            "plain_op_sub": type(lib.ones(3) + x).__name__,
            "item": type(x[0].item()).__name__, "dtype": str(x.dtype).split(".")[-1],
            "requires_grad": y.requires_grad}


_duck = []


def _Duck():
    """A duck type (not a Tensor) with __torch_function__; the class is made on first use, so
    importing this module defines no __torch_function__ class."""
    if not _duck:
        class _Duck:
            seen = []

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                cls.seen.append((func.__name__, [t.__name__ for t in types], len(args)))
                return "duck:" + func.__name__

        _duck.append(_Duck)
    return _duck[0]()


def duck_type(lib):
    d = _Duck()
    type(d).seen = []
    w = lib.ones(2, 2)
    r = [lib.add(d, 1), lib.nn.functional.linear(w, d), lib.cat([w, d]), w + d, w.mul(d)]
    try:
        lib.add(object(), 1)
        plain = "no error"
    except TypeError:
        plain = "TypeError"
    return {"results": r, "seen": type(d).seen, "object": plain}


def not_implemented_order(lib):
    order = []

    class A(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            order.append(("A", sorted(t.__name__ for t in types)))
            return NotImplemented

    class B(A):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            order.append(("B", sorted(t.__name__ for t in types)))
            return NotImplemented

    class C(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            order.append(("C", sorted(t.__name__ for t in types)))
            if func is lib.mul:
                with lib._C.DisableTorchFunctionSubclass():
                    return func(*args, **(kwargs or {})).as_subclass(cls)
            return NotImplemented

    a, b, c = (lib.ones(2).as_subclass(k) for k in (A, B, C))
    try:
        lib.add(a, b)
        err = None
    except TypeError as e:
        err = "handlers returned NotImplemented" in str(e)
    first = list(order)
    order.clear()
    r = lib.mul(a, c)
    second = list(order)
    order.clear()
    try:
        a + b
        op = "no error"
    except TypeError:
        op = "TypeError"
    return {"add": [err, first], "mul": [second, type(r).__name__], "op": [op, order]}


def default_impl_not_implemented(lib):
    class P(lib.Tensor):
        pass

    class Q(lib.Tensor):
        pass

    p, q = lib.ones(2).as_subclass(P), lib.ones(2).as_subclass(Q)
    try:
        lib.add(p, q)
        return "no error"
    except TypeError:
        return "TypeError"


def modes(lib):
    o = _overrides(lib)
    log = []

    class Log(o.TorchFunctionMode):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append((self.tag, func.__name__))
            return func(*args, **(kwargs or {}))

    x = lib.ones(2)
    with Log("outer"):
        with Log("inner") as inner:
            current = o._get_current_function_mode() is inner
            lib.add(x, 1)
            x.sum()
            lib.zeros(2)
        lib.mul(x, 2)
    after = list(log)
    log.clear()
    lib.add(x, 1)
    with Log("m"):
        with lib._C.DisableTorchFunction():
            lib.add(x, 1)
        with lib._C.DisableTorchFunctionSubclass():
            lib.sub(x, 1)
    return {"log": after, "current": current, "outside": len(log) == 0 and [], "disabled": log}


def mode_with_subclass(lib):
    log = []

    class Sub(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append(("sub", func.__name__))
            return super().__torch_function__(func, types, args, kwargs)

    class M(lib.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append(("mode", func.__name__, [t.__name__ for t in types]))
            return func(*args, **(kwargs or {}))

    s = lib.ones(2).as_subclass(Sub)
    with M():
        r = lib.add(s, 1)
    return {"log": log, "type": type(r).__name__}


def parameter_arithmetic(lib):
    p = lib.nn.Parameter(lib.ones(2))

    class Sub(lib.Tensor):
        pass

    s = lib.ones(2).as_subclass(Sub)
    lin = lib.nn.Linear(2, 2)
    return {"p+1": type(p + 1).__name__, "p*p": type(p * p).__name__,
            "data": type(p.data).__name__, "p*s": type(p * s).__name__,
            "linear_sub": type(lin(s)).__name__, "linear": type(lin(lib.ones(2))).__name__,
            "p.detach": type(p.detach()).__name__}


def has_torch_function(lib):
    o = _overrides(lib)

    class Sub(lib.Tensor):
        pass

    x = lib.ones(2)
    s = x.as_subclass(Sub)
    p = lib.nn.Parameter(x)
    r = [o.has_torch_function((x,)), o.has_torch_function((s,)), o.has_torch_function((p,)),
         o.has_torch_function((x, _Duck())), o.has_torch_function((1, 2.0)),
         o.is_tensor_like(x), o.is_tensor_like(_Duck()), o.is_tensor_like(1)]
    with lib._C.DisableTorchFunctionSubclass():
        r.append(o.has_torch_function((s,)))
    return r


def handle_torch_function(lib):
    o = _overrides(lib)
    seen = []

    class Sub(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(sorted(t.__name__ for t in types))
            return super().__torch_function__(func, types, args, kwargs)

    def double(t):
        if o.has_torch_function_unary(t):
            return o.handle_torch_function(double, (t,), t)
        return t * 2

    s = lib.ones(2).as_subclass(Sub)
    r = double(s)
    return [type(r).__name__, r.tolist(), seen, double(lib.ones(1)).tolist()]


def modules_call_public_functionals(lib):
    # Layers call the public functionals (F.conv2d, F.max_pool2d ...), so modes and tracers
    # see them, as torch's.
    o, nn = _overrides(lib), lib.nn
    log = []

    class Log(o.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if "conv" in name or "pool" in name:
                log.append(name)
            return func(*args, **(kwargs or {}))

    lib.manual_seed(0)
    layers = [(nn.Conv1d(2, 3, 3), (1, 2, 8)), (nn.Conv2d(2, 3, 3, padding_mode="reflect",
                                                          padding=1), (1, 2, 6, 6)),
              (nn.ConvTranspose2d(2, 3, 3), (1, 2, 5, 5)), (nn.MaxPool2d(2), (1, 2, 6, 6)),
              (nn.MaxPool1d(2, return_indices=True), (1, 2, 6)), (nn.AvgPool1d(2), (1, 2, 6)),
              (nn.AvgPool2d(2, divisor_override=3), (1, 2, 6, 6)), (nn.AvgPool3d(2), (1, 1, 4, 4, 4))]
    shapes = []
    with Log():
        for layer, shape in layers:
            out = layer(lib.ones(*shape))
            shapes.append(list((out[0] if isinstance(out, tuple) else out).shape))
    return {"log": log, "shapes": shapes}


SCENARIOS = [logging_subclass, result_types, duck_type, not_implemented_order,
             default_impl_not_implemented, modes, mode_with_subclass, parameter_arithmetic,
             has_torch_function, handle_torch_function, modules_call_public_functionals]


def _run(fn, lib):
    try:
        return fn(lib)
    except Exception as e:  # the exception type is a result to compare too
        return f"raised {type(e).__name__}: {e}"


if __name__ == "__main__":
    import torch
    import kiln
    import warnings
    warnings.simplefilter("ignore")
    names = sys.argv[1:] or [f.__name__ for f in SCENARIOS]
    out = {f.__name__: {lib.__name__: _run(f, lib) for lib in (torch, kiln)}
           for f in SCENARIOS if f.__name__ in names}
    print(json.dumps(out))
