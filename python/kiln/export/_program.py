"""ExportedProgram: the traced graph with its state lifted to inputs, its signature, and
module() to run it (torch.export.ExportedProgram)."""
import collections
import copy
import inspect
import warnings

from .. import _C
from ..fx._codegen import CodeGen, _annotation
from ..fx.graph import Graph
from ..fx.graph_module import GraphModule
from ..fx.node import Node
from ._dims import int_oo
from ._pytree import flatten_to_spec, tree_unflatten
from ._trace import make_placeholder
from ._signature import (ConstantArgument, ExportGraphSignature, InputKind, InputSpec,
                         OutputKind, OutputSpec, SymIntArgument, TensorArgument)

__all__ = ["ExportedProgram", "CallSpec", "GuardFailed"]

CallSpec = collections.namedtuple("CallSpec", ["in_spec", "out_spec"])


class GuardFailed(AssertionError, RuntimeError):
    """An input of an ExportedProgram's module() breaks what the program was exported for
    (a static size, a dynamic size's range, a specialized constant). torch 2.13 raises
    AssertionError("Guard failed: x.size()[1] == 8"); earlier versions a RuntimeError: this
    is both."""


class _ExportedModule(GraphModule):
    """What ExportedProgram.module() returns: a GraphModule whose mode cannot be switched
    (the graph was traced in one mode; batch_norm's training flag is a constant in it), as
    torch's unlifted module refuses train() / eval()."""

    def train(self, mode=True):
        raise NotImplementedError("Calling train() is not supported yet.")

    def eval(self):
        raise NotImplementedError("Calling eval() is not supported yet.")


class _ExportInfo:
    """What module() needs to take the original call's arguments: the input / output trees,
    the per-input checks, the symbols' ranges and the original forward's signature."""

    def __init__(self, in_spec, out_spec, input_checks, symbol_info, forward_signature,
                 n_args, kwarg_names):
        self.in_spec, self.out_spec = in_spec, out_spec
        self.input_checks = input_checks
        self.symbol_info = symbol_info
        self.forward_signature = forward_signature
        self.n_args, self.kwarg_names = n_args, list(kwarg_names)

    def _normalize(self, args, kwargs):
        """The call's arguments in the structure of the exported call (a keyword given
        positionally or the other way round is moved, by the forward's signature)."""
        if len(args) == self.n_args and set(kwargs) == set(self.kwarg_names):
            return args, kwargs
        try:
            params = [inspect.Parameter(n, getattr(inspect.Parameter, k))
                      for n, k in self.forward_signature]
            bound = inspect.Signature(params).bind_partial(*args, **kwargs)
        except (TypeError, ValueError, AttributeError):
            return args, kwargs
        new_args, new_kwargs = [], {}
        consumed = set()
        for p in params:
            if len(new_args) >= self.n_args:
                break
            if p.kind == inspect.Parameter.VAR_POSITIONAL:
                new_args.extend(bound.arguments.get(p.name, ()))
                consumed.add(p.name)
            elif p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                            inspect.Parameter.POSITIONAL_OR_KEYWORD):
                if p.name not in bound.arguments:
                    return args, kwargs
                new_args.append(bound.arguments[p.name])
                consumed.add(p.name)
        extra = {}
        for p in params:
            if p.kind == inspect.Parameter.VAR_KEYWORD:
                extra = bound.arguments.get(p.name, {})
        for k in self.kwarg_names:
            if k in bound.arguments and k not in consumed:
                new_kwargs[k] = bound.arguments[k]
            elif k in extra:
                new_kwargs[k] = extra[k]
            else:
                return args, kwargs
        return tuple(new_args), new_kwargs

    def flatten(self, args, kwargs):
        args, kwargs = self._normalize(tuple(args), dict(kwargs))
        if set(kwargs) != set(self.kwarg_names):
            raise ValueError(f"Ran into a kwarg keyword mismatch: Got the following keywords "
                             f"{list(kwargs)} but expected {self.kwarg_names}")
        flat = flatten_to_spec((tuple(args), dict(kwargs)), self.in_spec)
        if flat is None:
            from ._pytree import tree_flatten
            got = tree_flatten((tuple(args), dict(kwargs)))[1]
            raise ValueError(
                "Trying to flatten user inputs with exported input tree spec: \n"
                f"{self.in_spec}\nbut actually got inputs with tree spec of: \n{got}.\n"
                "Please check that the inputs have the same number and type of args and "
                "kwargs as the ones you used when tracing.")
        self.check(flat)
        return flat

    def check(self, flat):
        bound = {}
        for v, chk in zip(flat, self.input_checks):
            name = chk["name"]
            if chk["kind"] == "constant":
                want = chk["value"]
                if type(v) is not type(want) or v != want:
                    raise GuardFailed(f"Guard failed: {name} == {want!r} (the program was "
                                      f"exported with this value; got {v!r})")
                continue
            if not isinstance(v, _C.Tensor):
                raise GuardFailed(f"Guard failed: {name} is a Tensor (got "
                                  f"{type(v).__name__})")
            shape = chk["shape"]
            if v.dim() != len(shape):
                raise GuardFailed(f"Guard failed: {name}.dim() == {len(shape)} (got a tensor "
                                  f"of shape {list(v.shape)})")
            for d, want in enumerate(shape):
                size = v.shape[d]
                src = f"{name}.size()[{d}]"
                if isinstance(want, int):
                    if size != want:
                        raise GuardFailed(f"Guard failed: {src} == {want} (got {size})")
                    continue
                info = self.symbol_info[want]
                if size < info["min"]:
                    raise GuardFailed(f"Guard failed: {src} >= {info['min']} (got {size}; "
                                      f"{want} = {info.get('dim') or want} has range "
                                      f"[{info['min']}, {_fmt_max(info['max'])}])")
                if info["max"] is not None and size > info["max"]:
                    raise GuardFailed(f"Guard failed: {src} <= {info['max']} (got {size}; "
                                      f"{want} = {info.get('dim') or want} has range "
                                      f"[{info['min']}, {_fmt_max(info['max'])}])")
                if want in bound:
                    other_src, other = bound[want]
                    if other != size:
                        raise GuardFailed(f"Guard failed: {src} == {other_src} (got {size} "
                                          f"and {other}; both are "
                                          f"{info.get('dim') or want})")
                else:
                    bound[want] = (src, size)


def _fmt_max(m):
    return "int_oo" if m is None else m


def _module_inputs(gm, args, kwargs):
    """The flat inputs of an exported module's graph from its call's arguments, checked
    (generated code calls this first)."""
    return gm.graph._codegen.export_info.flatten(args, kwargs)


def _module_outputs(gm, flat):
    """The call's result in the structure the exported program returned."""
    return tree_unflatten(list(flat), gm.graph._codegen.export_info.out_spec)


_module_inputs.__module__ = _module_outputs.__module__ = "kiln.export"


class _ModuleCodeGen(CodeGen):
    """forward(self, *args, **kwargs) taking the original call's arguments: flattened and
    checked by kiln.export._module_inputs, outputs put back in shape by _module_outputs.
    It holds the _ExportInfo they use, so that copies of the graph (deepcopy) keep it, as
    torch's pytree code generator holds the in / out specs."""

    def __init__(self, export_info):
        super().__init__()
        self.export_info = export_info

    def gen_fn_def(self, free_vars, maybe_return_annotation):
        names = [v for v in free_vars if v != "self"]
        call = "kiln.export._module_inputs(self, args, kwargs)"
        first = f"{', '.join(names)}, = {call}" if names else call
        return f"def forward(self, *args, **kwargs):\n    {first}"

    def generate_output(self, output_args, repr_fn=repr):
        return f"return kiln.export._module_outputs(self, {repr_fn(output_args)})"


class ExportedProgram:
    """A program exported by kiln.export.export: graph_module / graph (state lifted to
    placeholders), graph_signature, state_dict (parameters and persistent buffers),
    constants (lifted tensors, non-persistent buffers), range_constraints (the dynamic
    dimensions' symbols and their ranges), example_inputs. module() gives a kiln.nn.Module
    that runs it."""

    def __init__(self, graph_module, graph_signature, state_dict, constants,
                 range_constraints, example_inputs, info):
        self._graph_module = graph_module
        self._graph_signature = graph_signature
        self._state_dict = state_dict
        self._constants = constants
        self._range_constraints = range_constraints
        self._example_inputs = example_inputs
        self._info = info

    # --- torch's attributes ------------------------------------------------------------------

    @property
    def graph_module(self):
        return self._graph_module

    @property
    def graph(self):
        return self._graph_module.graph

    @property
    def graph_signature(self):
        return self._graph_signature

    @property
    def state_dict(self):
        return self._state_dict

    @property
    def constants(self):
        return self._constants

    @property
    def tensor_constants(self):
        return self._constants

    @property
    def range_constraints(self):
        return self._range_constraints

    @property
    def example_inputs(self):
        return self._example_inputs

    @property
    def call_spec(self):
        return CallSpec(self._info.in_spec, self._info.out_spec)

    @property
    def dialect(self):
        return "TRAINING"

    def parameters(self):
        for _, p in self.named_parameters():
            yield p

    def named_parameters(self):
        for name in self._graph_signature.parameters:
            yield name, self._state_dict[name]

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    def named_buffers(self):
        non_persistent = set(self._graph_signature.non_persistent_buffers)
        for name in self._graph_signature.buffers:
            yield name, (self._constants[name] if name in non_persistent
                         else self._state_dict[name])

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Unable to call ExportedProgram directly. You should use "
                           "`exported_program.module()` instead.")

    # --- running it -----------------------------------------------------------------------------

    def _lifted_value(self, spec):
        if spec.kind == InputKind.PARAMETER:
            return self._state_dict[spec.target]
        if spec.kind == InputKind.BUFFER:
            if spec.persistent is False:
                return self._constants[spec.target]
            return self._state_dict[spec.target]
        return self._constants[spec.target]

    def module(self):
        """A kiln.nn.Module (a GraphModule) that runs the program: called with the same kind
        of arguments as the exported module, it checks them (static sizes, dynamic sizes'
        ranges, specialized constants: GuardFailed), runs the graph with the parameters,
        buffers and constants as attributes, applies buffer mutations, and returns the
        outputs in the original structure."""
        lifted = self.graph
        g = Graph()
        g.set_codegen(_ModuleCodeGen(self._info))
        specs = {s.arg.name: s for s in self._graph_signature.input_specs}
        env = {}
        placeholders = [n for n in lifted.nodes if n.op == "placeholder"]
        for node in placeholders:
            if specs[node.name].kind == InputKind.USER_INPUT:
                env[node] = make_placeholder(g, node.name)
                env[node].meta = dict(node.meta)
        root = {}
        state_attr = {}
        for node in placeholders:
            spec = specs[node.name]
            if spec.kind == InputKind.USER_INPUT:
                continue
            attr = g.create_node("get_attr", spec.target, name=spec.target.replace(".", "_"))
            attr.meta = dict(node.meta)
            env[node] = attr
            state_attr[spec.target] = attr
            root[spec.target] = self._lifted_value(spec)
        for node in lifted.nodes:
            if node.op in ("placeholder", "output"):
                continue
            env[node] = g.node_copy(node, lambda n: env[n])
        outs = lifted.output_node.args[0]
        user_outs = []
        for spec, v in zip(self._graph_signature.output_specs, outs):
            value = env[v] if isinstance(v, Node) else v
            if spec.kind == OutputKind.BUFFER_MUTATION:
                g.call_method("copy_", (state_attr[spec.target], value))
            elif spec.kind == OutputKind.USER_INPUT_MUTATION:
                target = next(n for n in placeholders if n.name == spec.target)
                g.call_method("copy_", (env[target], value))
            else:
                user_outs.append(value)
        g.output(tuple(user_outs))
        gm = _ExportedModule(root, g, class_name="GraphModule")
        # constants and non-persistent buffers are not in the module's state_dict
        for spec in self._graph_signature.input_specs:
            if spec.kind == InputKind.CONSTANT_TENSOR or \
                    (spec.kind == InputKind.BUFFER and spec.persistent is False):
                owner_path, _, leaf = spec.target.rpartition(".")
                owner = gm.get_submodule(owner_path) if owner_path else gm
                if leaf in owner._buffers:
                    owner._non_persistent_buffers_set.add(leaf)
        gm.meta["exported_program"] = "kiln.export"
        return gm

    def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
        """A new ExportedProgram whose graph is functional: in-place updates of buffers and
        inputs (`b_count.add_(1)`, batch_norm's running statistics in training mode) become
        out-of-place ops whose results are BUFFER_MUTATION / USER_INPUT_MUTATION outputs, as
        torch's run_decompositions() gives. kiln's graphs are recorded at the level of
        kiln's functions, not ATen's: there is no lower operator set to decompose into, so
        decomp_table is accepted and not used; the ops stay as they are."""
        from ._functionalize import functionalize
        graph, output_specs = functionalize(self)
        gm = GraphModule({}, graph, class_name="GraphModule")
        sig = ExportGraphSignature(copy.copy(self._graph_signature.input_specs), output_specs)
        return ExportedProgram(gm, sig, self._state_dict, self._constants,
                               self._range_constraints, self._example_inputs, self._info)

    def validate(self):
        self.graph.lint()

    # --- printing ---------------------------------------------------------------------------------

    def _readable_code(self):
        code = self._graph_module.print_readable(print_output=False)
        lines = code.split("\n")
        params = []
        for node in self.graph.nodes:
            if node.op == "placeholder":
                ann = _annotation(node.meta)
                params.append(f"{node.name}{ann}")
        for i, line in enumerate(lines):
            if line.lstrip().startswith("def forward(self"):
                indent = line[:len(line) - len(line.lstrip())]
                lines[i] = f"{indent}def forward(self{''.join(', ' + p for p in params)}):"
                break
        return "\n".join(lines)

    def __str__(self):
        code = self._readable_code()
        code = "\n".join("    " + line if line else line for line in code.split("\n"))
        sig = "\n".join("    " + line if line else line
                        for line in str(self._graph_signature).split("\n"))
        return (f"ExportedProgram:\n{code.rstrip()}\n\nGraph signature: {sig}\n"
                f"Range constraints: {self._range_constraints}\n")

    def __repr__(self):
        return self.__str__()


def _program_from_trace(mod, res, args, kwargs):
    """The ExportedProgram of a trace_export result."""
    params = dict(mod.named_parameters())
    buffers = dict(mod.named_buffers())
    input_specs, state_dict, constants = [], {}, {}
    for node, kind, target, persistent in res.input_specs:
        if kind == "PARAMETER":
            input_specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(node.name),
                                         target))
            state_dict[target] = params[target]
        elif kind == "BUFFER":
            input_specs.append(InputSpec(InputKind.BUFFER, TensorArgument(node.name), target,
                                         persistent))
            if persistent:
                state_dict[target] = buffers[target]
            else:
                constants[target] = buffers[target]
        elif kind == "CONSTANT_TENSOR":
            input_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(node.name),
                                         target))
            constants[target] = res.constants[target]
        else:
            if node.name in res.user_input_constants:
                arg = ConstantArgument(node.name, res.user_input_constants[node.name])
            else:
                arg = TensorArgument(node.name)
            input_specs.append(InputSpec(InputKind.USER_INPUT, arg))
    output_specs = []
    for kind, v in res.output_specs:
        if kind == "constant":
            output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, ConstantArgument("", v)))
        elif kind == "sym":
            output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, SymIntArgument(v.name)))
        else:
            output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(v.name)))
    gm = GraphModule({}, res.graph, class_name="GraphModule")
    info = _ExportInfo(res.in_spec, res.out_spec, res.input_checks, res.symbol_info,
                       res.signature, res.n_args, res.kwarg_names)
    return ExportedProgram(gm, ExportGraphSignature(input_specs, output_specs), state_dict,
                           constants, res.symbols, (tuple(args), dict(kwargs)), info)


def _warn_unused(name, value):
    if value:
        warnings.warn(f"kiln.export.export: {name} is accepted for torch's signature and not "
                      "used", stacklevel=3)


_ = int_oo  # re-exported by name in messages
