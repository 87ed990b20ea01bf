"""Python source from a Graph (torch.fx's CodeGen): what GraphModule.code shows and execs.

The layout is torch's, so that code reads the same: one statement per node, operators written
as operators (`add = x + 1`, `getitem = x[0]`, `getattr_1 = x.shape`), methods as methods
(`view = x.view(2, -1)`), submodules and attributes through self (`linear = self.linear(x)`),
and each value set to None right after its last use (`;  x = None`) so that intermediates are
freed as soon as possible. kiln's functions are written by their public path (`kiln.relu`,
`kiln.nn.functional.softmax`) with `kiln` as the one global; any other callable is bound to a
sanitized global name (`test_fx_my_fn`)."""
import enum
import math
import re
from dataclasses import dataclass

from ._namespace import _Namespace, _illegal_names
from .node import Node, _get_qualified_name, _resolves_to, _type_repr

reflectable_magic_methods = {
    "add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "floordiv": "{} // {}",
    "truediv": "{} / {}", "div": "{} / {}", "mod": "{} % {}", "pow": "{} ** {}",
    "lshift": "{} << {}", "rshift": "{} >> {}", "and_": "{} & {}", "or_": "{} | {}",
    "xor": "{} ^ {}", "getitem": "{}[{}]", "matmul": "{} @ {}",
}

magic_methods = {
    "eq": "{} == {}", "ne": "{} != {}", "lt": "{} < {}", "gt": "{} > {}", "le": "{} <= {}",
    "ge": "{} >= {}", "pos": "+{}", "neg": "-{}", "invert": "~{}",
    **reflectable_magic_methods,
}

inplace_methods = {
    "iadd": "{} += {}", "iand": "{} &= {}", "ifloordiv": "{} //= {}", "ilshift": "{} <<= {}",
    "imod": "{} %= {}", "imul": "{} *= {}", "imatmul": "{} @= {}", "ior": "{} |= {}",
    "ipow": "{} **= {}", "irshift": "{} >>= {}", "isub": "{} -= {}", "itruediv": "{} /= {}",
    "ixor": "{} ^= {}", "setitem": "{}[{}] = {}",
}

# dtype abbreviations of print_readable's annotations (torch's dtype_abbrs)
dtype_abbrs = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
               "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
               "bool": "b8", "complex64": "c64", "complex128": "c128"}

_counter_regexp = re.compile(r"# COUNTER: (\d+)")


def _custom_builtins():
    """Globals every generated function has (torch's _custom_builtins, with kiln in the place
    of torch). Looked up when code is generated: kiln.fx may be imported while kiln is."""
    import kiln
    builtins_ = {"inf": math.inf, "nan": math.nan, "NoneType": type(None), "kiln": kiln,
                 "device": kiln.device}
    _illegal_names.update(builtins_)  # a builtin's own object may take its name
    return builtins_


def _register_illegal_names():
    # generated locals must not shadow these globals
    for name in ("inf", "nan", "NoneType", "kiln", "device"):
        _illegal_names.setdefault(name, object())


_register_illegal_names()


def _is_from_kiln(obj):
    module = getattr(obj, "__module__", None) or ""
    return module == "kiln" or module.startswith("kiln.")


def _format_target(base, target):
    """base.a.b for target 'a.b'; getattr(base, "0") for atoms that are not identifiers."""
    r = base
    for e in target.split("."):
        r = f'getattr({r}, "{e}")' if not e.isidentifier() else f"{r}.{e}"
    return r


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


def _annotation(meta):
    """`"f32[2, 3]"` for a node whose meta holds a tensor or ShapeProp's TensorMetadata."""
    val = meta.get("val", meta.get("tensor_meta", None))
    shape, dtype = getattr(val, "shape", None), getattr(val, "dtype", None)
    if shape is None or dtype is None:
        return ""
    abbr = dtype_abbrs.get(_dtype_name(dtype), _dtype_name(dtype))
    return f': "{abbr}[{", ".join(str(s) for s in shape)}]"'


@dataclass
class PythonCode:
    """src: the source of the function; globals: the names src uses -> their objects."""
    src: str
    globals: dict
    _lineno_map: dict = None


class CodeGen:
    """Turns a graph's nodes into the source of one function (def forward(self, ...))."""

    def __init__(self):
        self._body_transformer = None
        self._func_name = "forward"

    def gen_fn_def(self, free_vars, maybe_return_annotation):
        if not free_vars or free_vars[0] != "self":
            free_vars.insert(0, "self")
        return f"def {self._func_name}({', '.join(free_vars)}){maybe_return_annotation}:"

    def generate_output(self, output_args, repr_fn=repr):
        return f"return {repr_fn(output_args)}"

    def process_inputs(self, *args):
        return args

    def process_outputs(self, outputs):
        return outputs

    def additional_globals(self):
        return []

    def _gen_python_code(self, nodes, root_module, namespace, *, verbose=False):
        free_vars, body, globals_, wrapped_fns = [], [], {}, {}
        maybe_return_annotation = [""]

        def add_global(name_hint, obj):
            """The name generated code uses for an object outside the graph."""
            if _is_from_kiln(obj) and callable(obj):
                try:
                    path = _get_qualified_name(obj)
                except (RuntimeError, AttributeError):
                    path = None
                if path is not None and path.startswith("kiln.") and _resolves_to(path, obj):
                    return path
            global_name = namespace.create_name(name_hint, obj)
            if global_name in globals_:
                if globals_[global_name] is not obj:
                    raise AssertionError(f"Global name {global_name} already assigned to "
                                         "different object")
                return global_name
            globals_[global_name] = obj
            return global_name

        for name, obj in _custom_builtins().items():
            # bound by their own names (kiln.device is `device`, which the repr of a device,
            # device(type='cpu'), needs), not by the kiln path add_global would use
            globals_[namespace.create_name(name, obj)] = obj

        def type_repr(o):
            if o == ():
                return "()"
            return add_global(_type_repr(o), o)

        def get_repr(arg):
            if isinstance(arg, Node):
                return repr(arg)
            if isinstance(arg, tuple) and hasattr(arg, "_fields"):
                qualified = _get_qualified_name(type(arg))
                return f"{add_global(qualified, type(arg))}{repr(tuple(arg))}"
            if isinstance(arg, enum.Enum):
                import kiln
                if getattr(kiln, arg.name, None) is arg:  # kiln.contiguous_format...
                    return f"kiln.{arg.name}"
                return f"{add_global(type(arg).__name__, type(arg))}.{arg.name}"
            if _is_tensor(arg):
                return f"kiln.Tensor(size={list(arg.size())}, dtype={_dtype_name(arg.dtype)})"
            if isinstance(arg, tuple):
                if len(arg) == 1:
                    return f"({get_repr(arg[0])},)"
                return "(" + ", ".join(get_repr(a) for a in arg) + ")"
            if isinstance(arg, list):
                return "[" + ", ".join(get_repr(a) for a in arg) + "]"
            if isinstance(arg, dict):
                return "{" + ", ".join(f"{get_repr(k)}: {get_repr(v)}"
                                       for k, v in arg.items()) + "}"
            if isinstance(arg, slice):
                return (f"slice({get_repr(arg.start)}, {get_repr(arg.stop)}, "
                        f"{get_repr(arg.step)})")
            if isinstance(arg, type):
                return type_repr(arg)
            if _is_device(arg):
                # device('cpu'): kiln.device does not take repr's device(type='cpu') alone
                return f"device({str(arg)!r})"
            return repr(arg)

        def format_args(args, kwargs):
            res = [get_repr(a) for a in args]
            res.extend(f"{k} = {get_repr(v)}" for k, v in kwargs.items())
            return ", ".join(res)

        # The first use seen walking backwards is a value's last use: free it there.
        node_to_last_use, user_to_last_uses = {}, {}
        for node in reversed(nodes):
            for input_node in node._input_nodes:
                if input_node not in node_to_last_use:
                    node_to_last_use[input_node] = node
                    user_to_last_uses.setdefault(node, []).append(input_node)

        def delete_unused_values(user):
            if user.op == "placeholder":
                return
            if user.op == "output":
                body.append("\n")
                return
            to_delete = list(user_to_last_uses.get(user, []))
            if not user.users:
                # unused but kept (side effects): free its result at once
                to_delete.append(user)
            if to_delete:
                body.append(";  " + " = ".join([repr(n) for n in to_delete] + ["None"]) + "\n")
            else:
                body.append("\n")

        def emit_node(node):
            annotation = "" if node.type is None else f" : {type_repr(node.type)}"
            if verbose and node.op not in ("placeholder", "output"):
                annotation = _annotation(node.meta) or annotation
            if node.op == "placeholder":
                default = "" if not node.args else f" = {get_repr(node.args[0])}"
                free_vars.append(f"{node.target}{annotation}{default}")
                raw_name = node.target.replace("*", "")
                if raw_name != repr(node):
                    body.append(f"{repr(node)} = {raw_name}\n")
                return
            if node.op == "call_method":
                body.append(f"{repr(node)}{annotation} = "
                            f"{_format_target(get_repr(node.args[0]), node.target)}"
                            f"({format_args(node.args[1:], node.kwargs)})")
                return
            if node.op == "call_function":
                target = node.target
                name = getattr(target, "__name__", "")
                if getattr(target, "__module__", "") == "_operator" and name in magic_methods:
                    body.append(f"{repr(node)}{annotation} = " +
                                magic_methods[name].format(*(get_repr(a) for a in node.args)))
                    return
                if getattr(target, "__module__", "") == "_operator" and name in inplace_methods:
                    body.append(inplace_methods[name].format(*(get_repr(a) for a in node.args))
                                + f";  {repr(node)}{annotation} = {get_repr(node.args[0])}")
                    return
                global_name = add_global(_get_qualified_name(target), target)
                if (global_name == "getattr" and len(node.args) == 2
                        and isinstance(node.args[1], str) and node.args[1].isidentifier()):
                    body.append(f"{repr(node)}{annotation} = "
                                f"{_format_target(get_repr(node.args[0]), node.args[1])}")
                    return
                body.append(f"{repr(node)}{annotation} = "
                            f"{global_name}({format_args(node.args, node.kwargs)})")
                if node.meta.get("is_wrapped", False):
                    wrapped_fns.setdefault(global_name)
                return
            if node.op == "call_module":
                body.append(f"{repr(node)}{annotation} = {_format_target(root_module, node.target)}"
                            f"({format_args(node.args, node.kwargs)})")
                return
            if node.op == "get_attr":
                body.append(f"{repr(node)}{annotation} = "
                            f"{_format_target(root_module, node.target)}")
                return
            if node.op == "output":
                if node.type is not None:
                    maybe_return_annotation[0] = f" -> {type_repr(node.type)}"
                body.append(self.generate_output(node.args[0], repr_fn=get_repr))
                return
            raise NotImplementedError(f"node: {node.op} {node.target}")

        for i, node in enumerate(nodes):
            body.append(f"# COUNTER: {i}\n")  # for the line -> node map; removed below
            emit_node(node)
            delete_unused_values(node)

        if len(body) == 0:
            body.append("pass\n")
        if wrapped_fns:
            from ._patching import wrap
            wrap_name = add_global("wrap", wrap)
            wrap_stmts = "\n".join(f'{wrap_name}("{name}")' for name in wrapped_fns)
        else:
            wrap_stmts = ""
        if self._body_transformer:
            body = self._body_transformer(body)
        for name, value in self.additional_globals():
            add_global(name, value)

        prologue = self.gen_fn_def(free_vars, maybe_return_annotation[0])
        lineno_map, new_lines, cur_idx = {}, [], None
        prologue_len = prologue.count("\n") + 1
        for line in "".join(body).split("\n"):
            counter = _counter_regexp.search(line)
            if counter is not None:
                cur_idx = int(counter.group(1))
            else:
                lineno_map[len(new_lines) + prologue_len] = cur_idx
                new_lines.append(line)
        code = "\n".join(new_lines).lstrip("\n")
        code = "\n".join("    " + line for line in code.split("\n"))
        fn_code = f"\n{wrap_stmts}\n\n{prologue}\n{code}"
        return PythonCode(fn_code, globals_, lineno_map)


def _is_device(x):
    from .._C import device
    return isinstance(x, device)


def _is_tensor(x):
    from .._C import Tensor
    return isinstance(x, Tensor)


def python_code(graph, root_module, *, verbose=False):
    """Graph.python_code: the source and globals of the graph's function. Names come from a
    fresh namespace holding both the locals (node names) and the globals, so neither can
    shadow the other."""
    namespace = _Namespace()

    def node_repr(n):
        return namespace.create_name(n.name, n)

    saved = {}
    for node in graph.nodes:
        saved[node] = node._repr_fn
        node._repr_fn = node_repr
    try:
        return graph._codegen._gen_python_code(graph.nodes, root_module, namespace,
                                               verbose=verbose)
    finally:
        for node, fn in saved.items():
            node._repr_fn = fn
