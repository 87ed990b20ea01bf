"""GraphModule: a kiln.nn.Module whose forward is generated from a Graph (torch.fx's).

The constructor copies from root what the graph refers to (submodules of call_module nodes,
parameters / buffers / tensors of get_attr nodes) into the same dotted paths, so the result
has the state_dict, parameters() and .to() of an ordinary module. forward is the graph's
Python source, exec'd (and registered with linecache so tracebacks and inspect show it);
after editing the graph in place, recompile() regenerates it. Each GraphModule gets its own
class (a subclass made in __new__) because forward is a class attribute.

Pickling keeps the source, not the Graph (as torch: source is the stable format): unpickling
execs it and traces it again with every submodule a leaf."""
import copy
import itertools
import linecache

from ..nn import Module
from .graph import Graph

__all__ = ["GraphModule", "reduce_graph_module"]

_eval_counter = itertools.count()


def _exec_with_source(src, globals_):
    """exec src under a unique fake file name whose lines linecache knows."""
    key = f"<eval_with_key>.{next(_eval_counter)}"
    linecache.cache[key] = (len(src), None, src.splitlines(True), key)
    exec(compile(src, key, "exec", dont_inherit=True), globals_)


def _forward_from_src(src, globals_):
    globals_copy = dict(globals_)
    _exec_with_source(src, globals_copy)
    return globals_copy.pop("forward")


def _format_import_statement(name, obj):
    builtin_imports = {"inf": "from math import inf", "nan": "from math import nan",
                       "NoneType": "NoneType = type(None)", "kiln": "import kiln",
                       "device": "from kiln import device"}
    if name in builtin_imports:
        return builtin_imports[name]
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if module == "kiln._C":
        module = "kiln"
    if module is None or qualname is None or "<" in qualname:
        raise RuntimeError(f"cannot pickle a GraphModule using {obj!r}: it has no importable "
                           "name")
    if "." in qualname:  # a method or nested class: import its top-level owner
        head, rest = qualname.split(".", 1)
        return f"from {module} import {head} as _{name}_owner\n{name} = _{name}_owner.{rest}"
    return f"from {module} import {qualname} as {name}"


def _format_import_block(globals_):
    return "\n".join(sorted({_format_import_statement(n, o) for n, o in globals_.items()}))


def reduce_graph_module(body, import_block):
    """Unpickles a GraphModule: exec its source, trace that again (see __reduce__)."""
    fn_src = body.get("_code") or body["code"]
    forward = _forward_from_src(import_block + fn_src, {})
    return _deserialize_graph_module(forward, body)


class _CodeOnlyModule(Module):
    """A module that is a __dict__ and a forward: the root re-traced on unpickling / copied
    from on deepcopy."""

    def __init__(self, body):
        super().__init__()
        self.__dict__ = body


def _deserialize_graph_module(forward, body):
    from ._symbolic_trace import Tracer

    class _CodeOnly(_CodeOnlyModule):
        pass
    _CodeOnly.forward = forward
    tracer_cls = body.get("_tracer_cls") or Tracer

    class KeepModules(tracer_cls):
        # the submodules were not traced into when the GraphModule was made
        def is_leaf_module(self, _m, _name):
            return True

    com = _CodeOnly(body)
    graph = KeepModules().trace(com, **(body.get("_tracer_extras") or {}))
    graph._tracer_cls = tracer_cls
    gm = GraphModule(com, graph, class_name=body.get("_graphmodule_cls_name", "GraphModule"))
    for k, v in body.items():  # keep what the graph does not reference
        if not hasattr(gm, k):
            setattr(gm, k, v)
    return gm


def _copy_attr(from_module, to_module, target):
    """Copies the value at dotted path target, creating empty Modules on the way; a plain
    tensor becomes a buffer (so state_dict and .to() see it)."""
    from .._C import Tensor
    from ..nn import Parameter
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(from_module, item)
        t = getattr(to_module, item, None)
        if f is t:
            return  # a parent was installed already, with everything below it
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        from_module, to_module = f, t
    orig = getattr(from_module, field)
    if isinstance(orig, Tensor) and not isinstance(orig, Parameter):
        to_module.register_buffer(field, orig)
    else:
        setattr(to_module, field, orig)


def _assign_attr(from_obj, to_module, target):
    from .._C import Tensor
    from ..nn import Parameter
    *prefix, field = target.split(".")
    for item in prefix:
        t = getattr(to_module, item, None)
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        to_module = t
    if isinstance(from_obj, Tensor) and not isinstance(from_obj, Parameter):
        to_module.register_buffer(field, from_obj)
    else:
        setattr(to_module, field, from_obj)


def _addindent(s, num_spaces):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join((num_spaces * " ") + line for line in lines)


class GraphModule(Module):
    """A Module generated from a Graph: `graph`, `code` and the generated `forward`."""

    def __new__(cls, *args, **kwargs):
        # one class per instance: forward lives on the class
        for t in cls.__mro__:
            if t.__qualname__.split(".")[-1] != "GraphModuleImpl":
                cls = t
                break

        class GraphModuleImpl(cls):
            pass
        return super().__new__(GraphModuleImpl)

    def __init__(self, root, graph, class_name="GraphModule"):
        """root: the module (or {dotted path: object}) the graph's get_attr / call_module
        targets are copied from; class_name: the name shown by repr and print_readable."""
        super().__init__()
        self.__class__.__name__ = class_name
        if isinstance(root, Module):
            if hasattr(root, "training"):
                self.training = root.training
            if isinstance(root, _CodeOnlyModule):
                # unpickling / deepcopy: keep every submodule and tensor, used or not
                for k, _ in root.named_children():
                    _copy_attr(root, self, k)
                for k, _ in root.named_buffers():
                    _copy_attr(root, self, k)
                for k, _ in root.named_parameters():
                    _copy_attr(root, self, k)
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    _copy_attr(root, self, node.target)
        elif isinstance(root, dict):
            targets = []
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(f"Node {node} referenced target {node.target} but "
                                           "that target was not provided in ``root``!")
                    targets.append(node.target)
            # parents before children, so that assigning foo.bar keeps foo.bar.baz
            for target in sorted(set(targets), key=lambda t: t.count(".")):
                _assign_attr(root[target], self, target)
        else:
            raise RuntimeError("Unsupported type " + str(root) + " passed for root!")
        self.graph = graph
        tracer_cls = graph._tracer_cls
        self._tracer_cls = tracer_cls if tracer_cls and \
            "<locals>" not in tracer_cls.__qualname__ else None
        self._tracer_extras = graph._tracer_extras or {}
        self.meta = {}

    @property
    def graph(self):
        return self._graph

    @graph.setter
    def graph(self, g):
        if not isinstance(g, Graph):
            raise AssertionError(f"Expected a Graph instance, but got {type(g)}")
        self._graph = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self):
        """The Python source of forward (regenerated by recompile())."""
        if not hasattr(self, "_code"):
            raise RuntimeError("Code has not been generated! Please report a bug to kiln")
        return self._code

    def recompile(self):
        """Regenerates forward from self.graph (call after editing the graph in place);
        returns the PythonCode."""
        python_code = self._graph.python_code(root_module="self")
        self._code = python_code.src
        self._lineno_map = python_code._lineno_map
        type(self).forward = _forward_from_src(self._code, python_code.globals)
        for _, mod in self.named_children():
            if isinstance(mod, GraphModule):
                mod.recompile()
        return python_code

    # --- submodules ---------------------------------------------------------------------

    def add_submodule(self, target, m):
        """Installs m at dotted path target, creating empty parents; False if a non-module
        is in the way."""
        *prefix, field = target.split(".")
        mod = self
        for item in prefix:
            submod = getattr(mod, item, None)
            if submod is None:
                submod = Module()
                setattr(mod, item, submod)
            if not isinstance(submod, Module):
                return False
            mod = submod
        mod.add_module(field, m)
        return True

    def delete_submodule(self, target):
        *path, target_submod = target.split(".")
        mod = self
        for item in path:
            if not hasattr(mod, item):
                return False
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                return False
        if not hasattr(mod, target_submod) or \
                not isinstance(getattr(mod, target_submod), Module):
            return False
        delattr(mod, target_submod)
        return True

    def delete_all_unused_submodules(self):
        """Deletes the submodules no call_module / get_attr node reaches."""
        used = set()
        for node in self.graph.nodes:
            if node.op in ("call_module", "get_attr"):
                atoms = node.target.split(".")
                for i in range(1, len(atoms) + 1):
                    used.add(".".join(atoms[:i]))
                if node.op == "call_module":  # everything inside a called module is used
                    for name, _ in self.get_submodule(node.target).named_modules():
                        if name:
                            used.add(node.target + "." + name)
        for name, _ in list(self.named_modules()):
            if name and name not in used:
                self.delete_submodule(name)

    # --- printing -----------------------------------------------------------------------

    def print_readable(self, print_output=True):
        """The generated code as a class, annotated with shapes where node.meta has them
        (after ShapeProp), nested GraphModules included; printed unless print_output=False."""
        out = self._readable(self._get_name())
        if print_output:
            print(out)
        return out

    def _readable(self, module_name):
        code = self.graph.python_code(root_module="self", verbose=True).src.lstrip("\n")
        text = _addindent(f"class {module_name}(kiln.nn.Module):\n" + code, 4)
        subs = [""] + [m._readable(n) for n, m in self.named_children()
                       if isinstance(m, GraphModule)]
        return text + _addindent("\n".join(subs), 4)

    def __str__(self):
        return "\n".join([super().__repr__(), self._code,
                          "# To see more debug info, please use `graph_module.print_readable()`"])

    # --- copying and pickling -----------------------------------------------------------

    def __reduce__(self):
        body = self.__dict__.copy()
        python_code = self.recompile()
        import_block = _format_import_block(python_code.globals)
        del body["_graph"]
        body["_graphmodule_cls_name"] = type(self).__name__
        return (reduce_graph_module, (body, import_block + "\n"))

    def __deepcopy__(self, memo):
        res = type(self).__new__(type(self))
        memo[id(self)] = res
        fake_mod = _CodeOnlyModule(copy.deepcopy(self.__dict__, memo))
        GraphModule.__init__(res, fake_mod, fake_mod.__dict__["_graph"],
                             class_name=type(self).__name__)
        for attr in ("_state_dict_hooks", "_load_state_dict_pre_hooks",
                     "_load_state_dict_post_hooks", "_forward_hooks", "_forward_pre_hooks"):
            if attr in self.__dict__:
                object.__setattr__(res, attr, copy.deepcopy(self.__dict__[attr], memo))
        res.meta = copy.deepcopy(getattr(self, "meta", {}), memo)
        return res

    def __copy__(self):
        res = GraphModule(self, self.graph, class_name=type(self).__name__)
        res.meta = getattr(self, "meta", {})
        return res

