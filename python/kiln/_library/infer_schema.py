"""infer_schema: an operator schema from a function's type annotations (torch.library's
infer_schema, with kiln's Tensor / dtype / device). Errors are torch's ValueErrors."""
import collections.abc
import inspect
import numbers
import typing
from types import GenericAlias

from .. import _C

_Tensor = _C.Tensor
Number = typing.Union[int, float, bool]  # torch.types.Number


def _derived(base, schema_type, list_base, optional_base_list, optional_list_base):
    result = [(base, schema_type), (typing.Optional[base], f"{schema_type}?")]

    def seqs(t):
        return (typing.Sequence[t], typing.List[t], GenericAlias(collections.abc.Sequence, (t,)),
                GenericAlias(list, (t,)))

    if list_base:
        result.extend((s, f"{schema_type}[]") for s in seqs(base))
    if optional_base_list:
        result.extend((s, f"{schema_type}?[]") for s in seqs(typing.Optional[base]))
    if optional_list_base:
        result.extend((typing.Optional[s], f"{schema_type}[]?") for s in seqs(base))
    return result


def _supported_param_types():
    rows = [
        # (python type, schema type, type[], type?[], type[]?)
        (_Tensor, "Tensor", True, True, False),
        (int, "SymInt", True, False, True),
        (float, "float", True, False, True),
        (bool, "bool", True, False, True),
        (str, "str", False, False, False),
        (Number, "Scalar", True, False, False),
        (numbers.Number, "Scalar", True, False, False),
        (_C.dtype, "ScalarType", False, False, False),
        (_C.device, "Device", False, False, False),
    ]
    result = {}
    for row in rows:
        for t, s in _derived(*row):
            result.setdefault(t, s)
    return result


SUPPORTED_PARAM_TYPES = _supported_param_types()

SUPPORTED_RETURN_TYPES = {
    _Tensor: "Tensor",
    typing.List[_Tensor]: "Tensor[]",
    list[_Tensor]: "Tensor[]",
    int: "SymInt",
    float: "float",
    bool: "bool",
    Number: "Scalar",
}


def _param_names():
    return [getattr(t, "__name__", None) or str(t) for t in SUPPORTED_PARAM_TYPES]


def infer_schema(prototype_function, /, *, mutates_args, op_name=None, tags=()):
    """The schema string of prototype_function from its annotations, e.g.
    "(Tensor x, SymInt n) -> Tensor" (with op_name: "name(Tensor x, SymInt n) -> Tensor").
    mutates_args: the names of the arguments it mutates, or "unknown" (every Tensor)."""
    sig = inspect.signature(prototype_function)
    pf_globals = getattr(prototype_function, "__globals__", {})
    if type(mutates_args) is not str:
        mutates_args = tuple(mutates_args)

    def error_fn(what):
        raise ValueError(f"infer_schema(func): {what} Got func with signature {sig})")

    def convert_type_string(annotation):
        try:
            return eval(annotation, pf_globals)
        except Exception as e:
            error_fn(f"Unsupported type annotation {annotation}. It is not a type. "
                     f"({type(e).__name__}: {e})")

    def unstringify(t):
        if isinstance(t, str):
            return convert_type_string(t)
        origin = typing.get_origin(t)
        if origin is not None:
            args = typing.get_args(t)
            new = tuple(unstringify(a) for a in args)
            if new != args:
                if origin is typing.Union:
                    return typing.Union[new]
                return GenericAlias(origin, new)
        return t

    params = []
    seen = set()
    saw_kwarg_only = False
    for idx, (name, param) in enumerate(sig.parameters.items()):
        if param.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              inspect.Parameter.KEYWORD_ONLY):
            error_fn("We do not support positional-only args, varargs, or varkwargs.")
        if param.kind == inspect.Parameter.KEYWORD_ONLY and not saw_kwarg_only:
            params.append("*")
            saw_kwarg_only = True
        if param.annotation is inspect.Parameter.empty:
            error_fn(f"Parameter {name} must have a type annotation.")
        annotation = unstringify(param.annotation)
        try:
            schema_type = SUPPORTED_PARAM_TYPES.get(annotation)
        except TypeError:  # an unhashable annotation
            schema_type = None
        if schema_type is None:
            if typing.get_origin(annotation) is tuple or annotation is tuple:
                error_fn(f"Parameter {name} has unsupported type {param.annotation}. We do not "
                         "support Tuple inputs in schema. As a workaround, please try to use "
                         f"List instead. The valid types are: {_param_names()}.")
            error_fn(f"Parameter {name} has unsupported type {param.annotation}. "
                     f"The valid types are: {_param_names()}.")
        if type(mutates_args) is str:
            if mutates_args != "unknown":
                raise ValueError("mutates_args must either be a sequence of the names of the "
                                 "arguments that are mutated or the string 'unknown'. ")
            if schema_type.startswith("Tensor"):
                schema_type = f"Tensor(a{idx}!){schema_type[len('Tensor'):]}"
        elif name in mutates_args:
            if not schema_type.startswith("Tensor"):
                error_fn(f"Parameter {name} is in mutable_args but only Tensors or collections "
                         "of Tensors can be mutated")
            schema_type = f"Tensor(a{idx}!){schema_type[len('Tensor'):]}"
        seen.add(name)
        if param.default is inspect.Parameter.empty:
            params.append(f"{schema_type} {name}")
        else:
            d = param.default
            if d is None or isinstance(d, (int, float, bool)):
                default = str(d)
            elif isinstance(d, str):
                default = f'"{d}"'
            elif isinstance(d, _C.device):
                default = f'"{d}"'
            elif isinstance(d, _C.dtype):
                default = str(d).split(".")[-1]
            else:
                error_fn(f"Parameter {name} has an unsupported default value type {type(d)}. "
                         "Supported defaults: None, int, float, bool, str, kiln.device, "
                         "kiln.dtype.")
            params.append(f"{schema_type} {name}={default}")
    if type(mutates_args) is not str:
        not_seen = set(mutates_args) - seen
        if not_seen:
            error_fn(f"{not_seen} in mutates_args were not found in the custom op's signature. "
                     "mutates_args should contain the names of all args that the custom op "
                     "mutates, or just the string 'unknown' if you don't know.")
    ret = parse_return(unstringify(sig.return_annotation), error_fn)
    if op_name is not None:
        return f"{op_name}({', '.join(params)}) -> {ret}"
    return f"({', '.join(params)}) -> {ret}"


def parse_return(annotation, error_fn):
    if annotation is None:
        return "()"
    if annotation is inspect.Parameter.empty:
        error_fn("No return type annotation was provided. Please add one.")
    def check(a):
        try:
            ok = a in SUPPORTED_RETURN_TYPES
        except TypeError:  # unhashable annotations
            ok = False
        if not ok:
            error_fn(f"Return has unsupported type {annotation}. The valid types are: "
                     f"{list(SUPPORTED_RETURN_TYPES.values())} (Tensor, list[Tensor], int, "
                     "float, bool, Number, or a tuple of them).")

    if typing.get_origin(annotation) is not tuple:
        check(annotation)
        return SUPPORTED_RETURN_TYPES[annotation]
    args = typing.get_args(annotation)
    for a in args:
        check(a)
    out = ", ".join(SUPPORTED_RETURN_TYPES[a] for a in args)
    if len(args) == 1:
        out = "(" + out + ")"
    return "(" + out + ")"
