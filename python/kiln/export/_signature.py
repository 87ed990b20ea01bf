"""ExportGraphSignature: what each placeholder and each output of an exported graph is
(torch.export.graph_signature's classes, same names and fields)."""
import dataclasses
import enum

__all__ = ["InputKind", "OutputKind", "TensorArgument", "SymIntArgument", "ConstantArgument",
           "InputSpec", "OutputSpec", "ExportGraphSignature"]


class InputKind(enum.Enum):
    USER_INPUT = 1
    PARAMETER = 2
    BUFFER = 3
    CONSTANT_TENSOR = 4
    CUSTOM_OBJ = 5
    TOKEN = 6


class OutputKind(enum.Enum):
    USER_OUTPUT = 1
    LOSS_OUTPUT = 2
    BUFFER_MUTATION = 3
    PARAMETER_MUTATION = 4
    GRADIENT_TO_PARAMETER = 5
    GRADIENT_TO_USER_INPUT = 6
    USER_INPUT_MUTATION = 7
    TOKEN = 8


@dataclasses.dataclass
class TensorArgument:
    name: str


@dataclasses.dataclass
class SymIntArgument:
    name: str


@dataclasses.dataclass
class ConstantArgument:
    name: str
    value: object


@dataclasses.dataclass
class InputSpec:
    kind: InputKind
    arg: object
    target: object = None
    persistent: object = None

    def __str__(self):
        target = "" if self.target is None else f" target='{self.target}'"
        persistent = "" if self.persistent is None else f" persistent={self.persistent}"
        return f"{self.arg.name}: {self.kind.name}{target}{persistent}"


@dataclasses.dataclass
class OutputSpec:
    kind: OutputKind
    arg: object
    target: object = None

    def __str__(self):
        target = "" if self.target is None else f" target='{self.target}'"
        return f"{self.arg.name}: {self.kind.name}{target}"


class ExportGraphSignature:
    """input_specs: one InputSpec per placeholder, in order (parameters, buffers, constants,
    user inputs); output_specs: one OutputSpec per output (mutations first, then the user's
    outputs, flattened)."""

    def __init__(self, input_specs, output_specs):
        self.input_specs = list(input_specs)
        self.output_specs = list(output_specs)

    def _inputs(self, kind):
        return tuple(s.target for s in self.input_specs if s.kind == kind)

    @property
    def parameters(self):
        return self._inputs(InputKind.PARAMETER)

    @property
    def buffers(self):
        return self._inputs(InputKind.BUFFER)

    @property
    def non_persistent_buffers(self):
        return tuple(s.target for s in self.input_specs
                     if s.kind == InputKind.BUFFER and s.persistent is False)

    @property
    def lifted_tensor_constants(self):
        return self._inputs(InputKind.CONSTANT_TENSOR)

    @property
    def user_inputs(self):
        return tuple(s.arg.name if not isinstance(s.arg, ConstantArgument) else s.arg.value
                     for s in self.input_specs if s.kind == InputKind.USER_INPUT)

    @property
    def user_outputs(self):
        return tuple(s.arg.name if not isinstance(s.arg, ConstantArgument) else s.arg.value
                     for s in self.output_specs if s.kind == OutputKind.USER_OUTPUT)

    @property
    def inputs_to_parameters(self):
        return {s.arg.name: s.target for s in self.input_specs
                if s.kind == InputKind.PARAMETER}

    @property
    def inputs_to_buffers(self):
        return {s.arg.name: s.target for s in self.input_specs if s.kind == InputKind.BUFFER}

    @property
    def inputs_to_lifted_tensor_constants(self):
        return {s.arg.name: s.target for s in self.input_specs
                if s.kind == InputKind.CONSTANT_TENSOR}

    @property
    def buffers_to_mutate(self):
        return {s.arg.name: s.target for s in self.output_specs
                if s.kind == OutputKind.BUFFER_MUTATION}

    @property
    def user_inputs_to_mutate(self):
        return {s.arg.name: s.target for s in self.output_specs
                if s.kind == OutputKind.USER_INPUT_MUTATION}

    def __str__(self):
        lines = ["# inputs"] + [str(s) for s in self.input_specs] + ["", "# outputs"] + \
            [str(s) for s in self.output_specs]
        return "\n" + "\n".join(lines) + "\n"

    def __repr__(self):
        return (f"ExportGraphSignature(input_specs={self.input_specs!r}, "
                f"output_specs={self.output_specs!r})")

    # --- serialization -------------------------------------------------------------------

    def to_json(self):
        def arg(a):
            if isinstance(a, TensorArgument):
                return {"tensor": a.name}
            if isinstance(a, SymIntArgument):
                return {"sym_int": a.name}
            return {"constant": a.name, "value": a.value}
        return {"inputs": [{"kind": s.kind.name, "arg": arg(s.arg), "target": s.target,
                            "persistent": s.persistent} for s in self.input_specs],
                "outputs": [{"kind": s.kind.name, "arg": arg(s.arg), "target": s.target}
                            for s in self.output_specs]}

    @staticmethod
    def from_json(d):
        def arg(a):
            if not isinstance(a, dict):
                raise ValueError("bad argument in signature")
            if "tensor" in a and isinstance(a["tensor"], str):
                return TensorArgument(a["tensor"])
            if "sym_int" in a and isinstance(a["sym_int"], str):
                return SymIntArgument(a["sym_int"])
            if "constant" in a and isinstance(a["constant"], str):
                v = a.get("value")
                if v is not None and not isinstance(v, (bool, int, float, str)):
                    raise ValueError("bad constant in signature")
                return ConstantArgument(a["constant"], v)
            raise ValueError("bad argument in signature")

        def target(t):
            if t is not None and not isinstance(t, str):
                raise ValueError("bad target in signature")
            return t
        if not isinstance(d, dict) or not isinstance(d.get("inputs"), list) or \
                not isinstance(d.get("outputs"), list):
            raise ValueError("bad graph signature")
        ins, outs = [], []
        for s in d["inputs"]:
            if not isinstance(s, dict) or s.get("kind") not in InputKind.__members__:
                raise ValueError("bad input spec")
            p = s.get("persistent")
            if p is not None and not isinstance(p, bool):
                raise ValueError("bad input spec")
            ins.append(InputSpec(InputKind[s["kind"]], arg(s.get("arg")), target(s.get("target")),
                                 p))
        for s in d["outputs"]:
            if not isinstance(s, dict) or s.get("kind") not in OutputKind.__members__:
                raise ValueError("bad output spec")
            outs.append(OutputSpec(OutputKind[s["kind"]], arg(s.get("arg")),
                                   target(s.get("target"))))
        return ExportGraphSignature(ins, outs)
