"""What tracing patches for its duration, and wrap() (torch.fx's _Patcher / wrap / autowrap).

- wrap("fn") at module level registers a global function as a leaf: while tracing, that
  module's global is replaced by a function that records one call_function node when a Proxy
  is among its arguments.
- autowrap: functions of math (math.sqrt...) seen in a traced forward's globals are wrapped
  the same way, as torch does.
- kiln functions a module bound by name before the __torch_function__ wrappers existed
  (`from kiln import relu` at import) are the originals, which reject Proxies; their globals
  are rebound to the wrappers for the trace.
Every patch is undone when the trace ends, error or not."""
import builtins
import functools
import inspect
import types

from .node import map_aggregate
from .proxy import Proxy

__all__ = ["wrap"]

HAS_VARSTUFF = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def _patch_function(fn, nargs):
    """fn with every parameter made positional (*args / **kwargs / keyword-only included), so
    the tracer can pass one Proxy per parameter."""
    co = fn.__code__
    new_code = co.replace(co_argcount=nargs, co_posonlyargcount=0, co_kwonlyargcount=0,
                          co_flags=co.co_flags & ~HAS_VARSTUFF)
    return types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)


class _Patcher:
    """Sets attributes / globals for the duration of a trace and restores them after."""

    def __init__(self):
        self.patches_made = []   # (restore function), undone in reverse order
        self.visited = set()

    def patch(self, frame_dict, name, new_fn):
        if name in frame_dict:
            old = frame_dict[name]
            self.patches_made.append(lambda: frame_dict.__setitem__(name, old))
        else:
            self.patches_made.append(lambda: frame_dict.pop(name, None))
        frame_dict[name] = new_fn

    def patch_method(self, cls, name, new_fn):
        if name in cls.__dict__:
            old = cls.__dict__[name]
            self.patches_made.append(lambda: setattr(cls, name, old))
        else:
            self.patches_made.append(lambda: delattr(cls, name))
        setattr(cls, name, new_fn)

    def visit_once(self, thing):
        key = id(thing)
        if key in self.visited:
            return False
        self.visited.add(key)
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        while self.patches_made:
            self.patches_made.pop()()
        self.visited.clear()


# (id(globals dict), function name) -> globals dict: what wrap() registered.
_wrapped_fns_to_patch = {}


def wrap(fn_or_name):
    """At module level: makes the global function fn_or_name (or named so) a leaf of tracing:
    calls with a Proxy argument record one call_function node instead of being traced
    through (for code that tracing cannot follow: len(), loops over values, asserts...)."""
    if callable(fn_or_name):
        fn_name = fn_or_name.__name__
    elif isinstance(fn_or_name, str):
        fn_name = fn_or_name
    else:
        raise AssertionError("fn_or_name must be a global function or string name")
    f = inspect.currentframe().f_back
    if f.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    _wrapped_fns_to_patch[(id(f.f_globals), fn_name)] = f.f_globals
    return fn_or_name


def _find_proxy(*objects):
    found = []

    def visit(x):
        if isinstance(x, Proxy):
            found.append(x)
        return x
    map_aggregate(objects, visit)
    return found[0] if found else None


def _create_wrapped_func(orig_fn):
    @functools.wraps(orig_fn)
    def wrapped(*args, **kwargs):
        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            out = proxy.tracer.create_proxy("call_function", orig_fn, args, kwargs)
            out.node.meta["is_wrapped"] = True
            return out
        return orig_fn(*args, **kwargs)
    return wrapped


def _patch_wrapped_functions(patcher):
    for (_, name), frame_dict in list(_wrapped_fns_to_patch.items()):
        if name not in frame_dict and hasattr(builtins, name):
            orig_fn = getattr(builtins, name)
        else:
            orig_fn = frame_dict[name]
        patcher.patch(frame_dict, name, _create_wrapped_func(orig_fn))


def _kiln_rebinds():
    """original -> wrapper for kiln's covered functions. A module that did
    `from kiln import relu` before the __torch_function__ wrappers were installed holds the
    original, which knows nothing of Proxies; tracing rebinds such globals to the wrapper."""
    from .._torch_function_install import _covered_modules
    table = {}
    for module in _covered_modules():
        for name, value in vars(module).items():
            orig = getattr(value, "__wrapped__", None)
            if not name.startswith("_") and orig is not None:
                table[id(orig)] = value
    return table


def _autowrap_check(patcher, frame_dict, function_ids, rebinds):
    """Patches, in one module's globals, the functions auto-wrapped (math.sqrt...) and the
    kiln functions bound before installation (see _kiln_rebinds)."""
    if not patcher.visit_once(frame_dict):
        return
    for name, value in list(frame_dict.items()):
        if name.startswith("_") or not callable(value):
            continue
        if id(value) in function_ids:
            patcher.patch(frame_dict, name, _create_wrapped_func(value))
        elif id(value) in rebinds:
            patcher.patch(frame_dict, name, rebinds[id(value)])
