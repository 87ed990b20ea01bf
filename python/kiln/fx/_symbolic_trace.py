"""Symbolic tracing (torch.fx's Tracer, symbolic_trace, wrap).

The traced function runs once with Proxies for its inputs; everything it does to them is
recorded (see proxy.py). For the duration, kiln.nn.Module.__call__ and __getattr__ are patched
as torch patches torch.nn.Module's: a call of a leaf module (kiln.nn's built-in layers) becomes
one call_module node and other modules are traced through; reading a parameter gives a Proxy
of a get_attr node. Functions registered with wrap() are patched in their module's globals to
record a call_function node instead of being traced through."""
import collections
import functools
import inspect
import math
import types
import warnings

from ._patching import (HAS_VARSTUFF, _autowrap_check, _kiln_rebinds, _patch_function,
                        _patch_wrapped_functions, _Patcher, wrap)
from .graph import Graph
from .node import has_side_effect
from .proxy import Proxy, TracerBase

__all__ = ["Tracer", "symbolic_trace", "wrap", "is_fx_tracing", "PH"]

_is_fx_tracing_flag = False


def is_fx_tracing():
    """Whether a kiln.fx trace is running (code may branch on it to stay traceable)."""
    return _is_fx_tracing_flag


class PHBase:
    """The type of PH."""

    def __repr__(self):
        return "PH"


PH = PHBase()  # a concrete_args value meaning "this stays an input" (a placeholder)


@has_side_effect
def _assert(condition, message=""):
    """What a specialized concrete argument checks at run time (torch._assert's role).
    Traced (generated code traced again on unpickling), it records itself."""
    if isinstance(condition, Proxy):
        return condition.tracer.create_proxy("call_function", _assert, (condition, message), {})
    if not condition:
        raise AssertionError(message)


@has_side_effect
def _assert_is_none(value, msg):
    if isinstance(value, Proxy):
        return value.tracer.create_proxy("call_function", _assert_is_none, (value, msg), {})
    if value is not None:
        raise AssertionError(msg)


# Generated code names them kiln.fx._assert / kiln.fx._assert_is_none (kiln.fx exports both).
_assert.__module__ = _assert_is_none.__module__ = "kiln.fx"


class Tracer(TracerBase):
    """Traces a kiln.nn.Module or function into a Graph (trace()). Override is_leaf_module
    to keep more modules as call_module nodes, create_arg for new argument types."""

    def __init__(self, autowrap_modules=(math,), autowrap_functions=(),
                 param_shapes_constant=False):
        super().__init__()
        self._autowrap_function_ids = {
            id(value) for module in autowrap_modules
            for name, value in module.__dict__.items()
            if not name.startswith("_") and callable(value)}
        self._autowrap_function_ids.update(id(f) for f in autowrap_functions)
        self._autowrap_search = list(autowrap_modules)
        self.param_shapes_constant = param_shapes_constant
        self.submodule_paths = None
        self.root_module_name = ""
        self.module_stack = collections.OrderedDict()
        self.num_calls = {}
        self.node_name_to_scope = {}

    # --- what becomes a node ------------------------------------------------------------

    def create_arg(self, a):
        """As TracerBase's, plus module state: a Parameter, buffer or submodule of root becomes
        a get_attr of its path; another tensor constant is stored on root as
        _tensor_constant<n> (or found under an attribute already holding it)."""
        from .._C import Tensor
        from ..nn import Module, Parameter
        if isinstance(a, Parameter):
            for n, p in self.root.named_parameters():
                if a is p:
                    return self.create_node("get_attr", n, (), {})
            raise NameError("parameter is not a member of this module")
        if isinstance(a, Tensor):
            for n, p in self.root.named_buffers():
                if a is p:
                    return self.create_node("get_attr", n, (), {})
        elif isinstance(a, Module):
            for n, p in self.root.named_modules():
                if a is p:
                    return self.create_node("get_attr", n, (), {})
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            args = tuple(self.create_arg(elem) for elem in a)
            return self.create_node("call_function", a.__class__, args, {})
        if isinstance(a, Tensor):
            entry = self.tensor_attrs.get(id(a))
            if entry is None:
                qualname = self.get_fresh_qualname("_tensor_constant")
                self.tensor_attrs[id(a)] = (a, qualname)
                setattr(self.root, qualname, a)
            else:
                qualname = entry[1]
            return self.create_node("get_attr", qualname, (), {})
        return super().create_arg(a)

    def get_fresh_qualname(self, prefix):
        """prefix<n> for the first n not yet an attribute of root."""
        qualname = f"{prefix}0"
        if not hasattr(self.root, qualname):
            self._qualname_counter = {**getattr(self, "_qualname_counter", {}), prefix: 0}
            return qualname
        counters = getattr(self, "_qualname_counter", {})
        i = counters.get(prefix, 0)
        while True:
            qualname = f"{prefix}{i}"
            i += 1
            if not hasattr(self.root, qualname):
                break
        counters[prefix] = i
        self._qualname_counter = counters
        return qualname

    def is_leaf_module(self, m, module_qualified_name):
        """kiln.nn's own layers are leaves (one call_module node each); Sequential and user
        modules are traced through."""
        from ..nn import Sequential
        return type(m).__module__.startswith("kiln.nn") and not isinstance(m, Sequential)

    def path_of_module(self, mod):
        if self.submodule_paths:
            path = self.submodule_paths.get(id(mod))
            if path is None:
                raise NameError("module is not installed as a submodule")
            return path
        for n, p in self.root.named_modules():
            if mod is p:
                return n
        raise NameError("module is not installed as a submodule")

    def call_module(self, m, forward, args, kwargs):
        """A call of submodule m: one call_module node if it is a leaf, else its forward
        traced through."""
        path = self.path_of_module(m)
        num_calls = self.num_calls.get(path, 0)
        key = f"{path}@{num_calls}" if num_calls > 0 else path
        self.module_stack[key] = (path, type(m))
        self.num_calls[path] = num_calls + 1
        try:
            if not self.is_leaf_module(m, path):
                return forward(*args, **kwargs)
            return self.create_proxy("call_module", path, args, kwargs)
        finally:
            self.module_stack.pop(key, None)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        """module.attr while tracing: a Parameter of root (and, with proxy_buffer_attributes,
        a buffer) becomes a get_attr Proxy, one per path; anything else is returned as is."""
        from .._C import Tensor
        from ..nn import Parameter

        def proxy_for(collection):
            for n, p in collection:
                if attr_val is p:
                    if n not in parameter_proxy_cache:
                        parameter_proxy_cache[n] = self.create_proxy("get_attr", n, (), {})
                    return parameter_proxy_cache[n]
            return None

        if isinstance(attr_val, Parameter):
            proxy = proxy_for(self.root.named_parameters())
            if proxy is not None:
                return proxy
        if self.proxy_buffer_attributes and isinstance(attr_val, Tensor):
            proxy = proxy_for(self.root.named_buffers())
            if proxy is not None:
                return proxy
        return attr_val

    # --- the trace ----------------------------------------------------------------------

    def create_args_for_root(self, root_fn, is_module, concrete_args=None):
        """One placeholder per parameter of root_fn (self excluded); concrete_args are passed
        as their values instead. Returns (function to call, its arguments)."""
        fn_for_analysis = inspect.unwrap(root_fn)
        co = fn_for_analysis.__code__
        total_args = co.co_argcount + co.co_kwonlyargcount
        names_iter = iter(co.co_varnames)
        args = []
        skip = 0
        if is_module:
            if total_args == 0:
                raise RuntimeError("``self`` argument cannot be part of *args expansion!")
            skip = 1
            next(names_iter)
            args.append(self.root)
        sig = inspect.signature(fn_for_analysis)
        arg_names = [next(names_iter) for _ in range(skip, total_args)]
        if isinstance(concrete_args, tuple):
            if len(arg_names) != len(concrete_args):
                raise RuntimeError(f"Tracing expected {len(arg_names)} arguments but got "
                                   f"{len(concrete_args)} concrete arguments")
            concrete_args = dict(zip(arg_names, concrete_args))
        args.extend(self._proxy_placeholder(name, concrete_args, sig, fn_for_analysis)
                    for name in arg_names)
        if co.co_kwonlyargcount > 0 or co.co_flags & HAS_VARSTUFF:
            if co.co_flags & inspect.CO_VARARGS:
                args.append(self._proxy_placeholder("*" + next(names_iter), concrete_args,
                                                    sig, fn_for_analysis))
            if co.co_flags & inspect.CO_VARKEYWORDS:
                args.append(self._proxy_placeholder("**" + next(names_iter), concrete_args,
                                                    sig, fn_for_analysis))
            root_fn = _patch_function(root_fn, len(args))
        return root_fn, args

    def _proxy_placeholder(self, name, concrete_args, sig, fn_for_analysis):
        if concrete_args is not None and name in concrete_args:
            return self._concrete_placeholder(name, concrete_args[name], sig)
        if name[0] == "*":
            default = ()
        else:
            param = sig.parameters[name]
            default = () if param.default is inspect.Parameter.empty else (param.default,)
        return self.create_proxy("placeholder", name, default, {},
                                 type_expr=fn_for_analysis.__annotations__.get(name, None))

    def _concrete_placeholder(self, name, value, sig):
        """A specialized argument, as torch: the function sees the value; the graph keeps an
        input `<name>_1` (with its default) and checks at run time that it still has the
        value traced with (numbers, bools, strings, None)."""
        param = sig.parameters.get(name)
        default = () if param is None or param.default is inspect.Parameter.empty \
            else (param.default,)
        out = self.create_proxy("placeholder", f"{name}_1", default, {})
        if value is PH:
            return out
        from .proxy import base_types
        from .._C import Tensor
        if type(value) is bool or (isinstance(value, base_types())
                                   and not isinstance(value, Tensor)):
            self.create_proxy("call_function", _assert,
                              (out == value, f"{name} has been specialized to have value "
                                             f"{value} but got another value"), {})
        elif value is None:
            self.create_proxy("call_function", _assert_is_none,
                              (out, f"{name} has been specialized to have value None but got "
                                    "another value"), {})
        else:
            warnings.warn(f"Was not able to add assertion to guarantee correct input {name} "
                          "to specialized function. It is up to the user to make sure that "
                          "your inputs match the inputs you specialized the function with.")
        return value

    def trace(self, root, concrete_args=None):
        """The Graph of root (a kiln.nn.Module, traced through forward, or a function).
        concrete_args: {parameter name: value} (or a tuple for all) to specialize on."""
        global _is_fx_tracing_flag
        from ..nn import Module
        from .proxy import _install_protocol
        _install_protocol()
        old_flag, _is_fx_tracing_flag = _is_fx_tracing_flag, True
        try:
            if isinstance(root, Module):
                self.root = root
                if not hasattr(type(root), self.traced_func_name):
                    raise AssertionError(f"traced_func_name={self.traced_func_name} doesn't "
                                         f"exist in {type(root).__name__}")
                fn = getattr(type(root), self.traced_func_name)
                self.root_module_name = root._get_name()
                self.submodule_paths = {id(mod): name for name, mod in root.named_modules()}
            else:
                self.root = Module()
                fn = root
            self.graph = Graph(tracer_cls=type(self))
            if hasattr(fn, "__code__"):
                code = fn.__code__
                self.graph._co_fields = {"co_name": code.co_name,
                                         "co_filename": code.co_filename,
                                         "co_firstlineno": code.co_firstlineno}
            # tensors held as plain attributes anywhere in the hierarchy: used as arguments
            # they become get_attr of that attribute rather than a new constant
            self.tensor_attrs = {}
            self._collect_tensor_attrs(self.root, [])
            if not isinstance(fn, types.FunctionType):
                raise AssertionError(f"Expected FunctionType, got {type(fn)}")
            fn_globals = fn.__globals__  # before create_args_for_root may re-create fn
            fn, args = self.create_args_for_root(fn, isinstance(root, Module), concrete_args)
            with _Patcher() as patcher:
                self._patch_modules(patcher)
                _patch_wrapped_functions(patcher)
                rebinds = _kiln_rebinds()
                self._rebinds = rebinds
                _autowrap_check(patcher, fn_globals, self._autowrap_function_ids, rebinds)
                for module in self._autowrap_search:
                    _autowrap_check(patcher, module.__dict__, self._autowrap_function_ids,
                                    rebinds)
                result = fn(*args)
                self.create_node("output", "output", (self.create_arg(result),), {},
                                 type_expr=inspect.unwrap(fn).__annotations__.get("return"))
            self.submodule_paths = None
        finally:
            _is_fx_tracing_flag = old_flag
        return self.graph

    def _collect_tensor_attrs(self, m, prefix_atoms):
        from .._C import Tensor
        for k, v in m.__dict__.items():
            if isinstance(v, Tensor):
                self.tensor_attrs[id(v)] = (v, ".".join(prefix_atoms + [k]))
        for k, v in m.named_children():
            self._collect_tensor_attrs(v, prefix_atoms + [k])

    def _patch_modules(self, patcher):
        """kiln.nn.Module.__getattr__ and __call__ for the trace (as torch patches
        torch.nn.Module): parameters read become get_attr Proxies; module calls go through
        call_module."""
        from ..nn import Module
        orig_getattr = Module.__getattr__
        orig_call = Module.__call__
        parameter_proxy_cache = {}
        tracer = self

        @functools.wraps(orig_getattr)
        def module_getattr_wrapper(mod, attr):
            return tracer.getattr(attr, orig_getattr(mod, attr), parameter_proxy_cache)

        @functools.wraps(orig_call)
        def module_call_wrapper(mod, *args, **kwargs):
            def forward(*args, **kwargs):
                return orig_call(mod, *args, **kwargs)
            _autowrap_check(patcher, getattr(getattr(mod, "forward", mod), "__globals__", {}),
                            tracer._autowrap_function_ids, tracer._rebinds)
            return tracer.call_module(mod, forward, args, kwargs)

        patcher.patch_method(Module, "__getattr__", module_getattr_wrapper)
        patcher.patch_method(Module, "__call__", module_call_wrapper)


def symbolic_trace(root, concrete_args=None):
    """A GraphModule recording what root (a kiln.nn.Module or a function) does to its inputs.
    concrete_args specializes some inputs to fixed values (a bool flag that picks a branch)."""
    from .graph_module import GraphModule
    from ..nn import Module
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else root.__name__
    return GraphModule(tracer.root, graph, name)
