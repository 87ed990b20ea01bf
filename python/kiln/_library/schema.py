"""Operator schemas (torch's FunctionSchema) for kiln.library: parsing the schema strings
torch writes ("foo.out(Tensor x, int[2] k=1, *, Tensor(a!) out) -> Tensor(a!)"), printing them
back, and binding a call's arguments to them (defaults filled, types checked with torch's
messages)."""
import numbers
import operator

from .. import _C

NO_DEFAULT = object()

# Base types of the schema language. SymInt / SymFloat / SymBool are int / float / bool here
# (kiln has no symbolic shapes); Dimname is accepted as a str.
_BASE_TYPES = ("Tensor", "int", "SymInt", "float", "SymFloat", "bool", "SymBool", "str",
               "Scalar", "ScalarType", "Device", "Layout", "MemoryFormat", "Generator",
               "complex", "Any", "Stream", "Storage", "Dimname")

# ScalarType defaults as torch writes them (names, and the enum codes torch prints).
_DTYPE_NAMES = {
    "uint8": "uint8", "int8": "int8", "int16": "int16", "short": "int16", "int32": "int32",
    "int": "int32", "int64": "int64", "long": "int64", "float16": "float16", "half": "float16",
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
    "complex64": "complex64", "cfloat": "complex64", "complex128": "complex128",
    "cdouble": "complex128", "bool": "bool", "bfloat16": "bfloat16", "Byte": "uint8",
    "Char": "int8", "Short": "int16", "Int": "int32", "Long": "int64", "Half": "float16",
    "Float": "float32", "Double": "float64", "ComplexFloat": "complex64",
    "ComplexDouble": "complex128", "Bool": "bool", "BFloat16": "bfloat16",
}
_DTYPE_CODES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
                6: "float32", 7: "float64", 9: "complex64", 10: "complex128", 11: "bool",
                15: "bfloat16"}


class SchemaParseError(RuntimeError):
    """A schema string that does not parse (torch raises RuntimeError too)."""


# --- types ----------------------------------------------------------------------------------

class BaseType:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, BaseType) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    @property
    def kind(self):
        return {"SymInt": "int", "SymFloat": "float", "SymBool": "bool",
                "Dimname": "str"}.get(self.name, self.name)


class OptionalType:
    __slots__ = ("elem",)

    def __init__(self, elem):
        self.elem = elem

    def __str__(self):
        return f"{self.elem}?"

    def __eq__(self, other):
        return isinstance(other, OptionalType) and other.elem == self.elem

    def __hash__(self):
        return hash(("?", self.elem))


class ListType:
    __slots__ = ("elem", "size")

    def __init__(self, elem, size=None):
        self.elem, self.size = elem, size

    def __str__(self):
        return f"{self.elem}[{'' if self.size is None else self.size}]"

    def __eq__(self, other):
        return isinstance(other, ListType) and other.elem == self.elem and other.size == self.size

    def __hash__(self):
        return hash(("[]", self.elem, self.size))


def strip_optional(t):
    return t.elem if isinstance(t, OptionalType) else t


def is_tensor_type(t):
    """Tensor or Tensor?"""
    t = strip_optional(t)
    return isinstance(t, BaseType) and t.name == "Tensor"


def is_tensor_list_type(t):
    """Tensor[], Tensor?[], Tensor[]?"""
    t = strip_optional(t)
    return isinstance(t, ListType) and is_tensor_type(t.elem)


def python_type_str(t):
    """The type as torch's error messages name it ('Optional[List[int]]')."""
    if isinstance(t, OptionalType):
        return f"Optional[{python_type_str(t.elem)}]"
    if isinstance(t, ListType):
        return f"List[{python_type_str(t.elem)}]"
    return {"SymInt": "int", "SymFloat": "float", "SymBool": "bool", "Scalar": "number",
            "ScalarType": "int", "MemoryFormat": "int", "Layout": "int"}.get(t.name, t.name)


# --- arguments and schemas ------------------------------------------------------------------

class AliasInfo:
    """An alias annotation: Tensor(a), Tensor(a!), Tensor(a -> *)."""
    __slots__ = ("before_set", "is_write", "after_set")

    def __init__(self, before_set, is_write, after_set=None):
        self.before_set = tuple(before_set)
        self.is_write = is_write
        self.after_set = tuple(after_set) if after_set is not None else self.before_set

    def __str__(self):
        s = "|".join(self.before_set)
        if self.is_write:
            s += "!"
        if self.after_set != self.before_set:
            s += " -> " + "|".join(self.after_set)
        return s


class Argument:
    __slots__ = ("name", "type", "default", "kwarg_only", "alias_info")

    def __init__(self, name, type_, default=NO_DEFAULT, kwarg_only=False, alias_info=None):
        self.name, self.type, self.default = name, type_, default
        self.kwarg_only, self.alias_info = kwarg_only, alias_info

    @property
    def has_default(self):
        return self.default is not NO_DEFAULT

    @property
    def default_value(self):
        """torch's Argument.default_value: None when there is none."""
        return None if self.default is NO_DEFAULT else self.default

    @property
    def is_write(self):
        return self.alias_info is not None and self.alias_info.is_write

    def type_str(self):
        return _type_with_alias(self.type, self.alias_info)

    def __str__(self):
        s = self.type_str()
        if self.name:
            s += " " + self.name
        if self.has_default:
            s += "=" + _default_str(self.default, self.type)
        return s

    def __repr__(self):
        return f"Argument({self})"


def _type_with_alias(t, alias):
    """The alias annotation goes right after the base Tensor: Tensor(a!)[], Tensor(a)?."""
    if alias is None:
        return str(t)
    if isinstance(t, BaseType):
        return f"{t}({alias})"
    if isinstance(t, OptionalType):
        return _type_with_alias(t.elem, alias) + "?"
    size = "" if t.size is None else t.size
    return _type_with_alias(t.elem, alias) + f"[{size}]"


def _default_str(v, t):
    if v is None:
        return "None"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        elem = t.elem if isinstance(strip_optional(t), ListType) else t
        return "[" + ", ".join(_default_str(x, strip_optional(elem)) for x in v) + "]"
    if isinstance(v, _C.dtype):
        return str(v).split(".")[-1]
    if isinstance(v, _C.device):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


class FunctionSchema:
    """A parsed operator schema. name is "ns::op" once the op is defined in a namespace (the
    op name alone before that), overload_name "" for the default overload."""

    def __init__(self, name, overload_name, arguments, returns, tuple_return=False):
        self.name = name
        self.overload_name = overload_name
        self.arguments = list(arguments)
        self.returns = list(returns)
        # "-> ((Tensor))": the op returns a tuple even when it holds one value
        self.tuple_return = bool(tuple_return)

    @property
    def is_mutable(self):
        return any(a.is_write for a in self.arguments)

    def mutated_args(self):
        return [a for a in self.arguments if a.is_write]

    def is_view_op(self):
        """Some return aliases an input without writing it (Tensor(a) in and out)."""
        return any(r.alias_info is not None and not r.alias_info.is_write for r in self.returns)

    def has_kwarg_only_tensors(self):
        return any(a.kwarg_only and (is_tensor_type(a.type) or is_tensor_list_type(a.type))
                   for a in self.arguments)

    def has_tensor_arg(self):
        return any(is_tensor_type(a.type) or is_tensor_list_type(a.type)
                   for a in self.arguments)

    def with_name(self, name, overload_name=None):
        return FunctionSchema(name, self.overload_name if overload_name is None
                              else overload_name, self.arguments, self.returns,
                              self.tuple_return)

    def arguments_str(self):
        parts, star = [], False
        for a in self.arguments:
            if a.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(str(a))
        return "(" + ", ".join(parts) + ")"

    def returns_str(self):
        if self.tuple_return:
            return "((" + ", ".join(str(r) for r in self.returns) + "))"
        if len(self.returns) == 1 and not self.returns[0].name:
            return str(self.returns[0])
        return "(" + ", ".join(str(r) for r in self.returns) + ")"

    def __str__(self):
        name = self.name + (f".{self.overload_name}" if self.overload_name else "")
        return f"{name}{self.arguments_str()} -> {self.returns_str()}"

    def __repr__(self):
        return str(self)

    def __eq__(self, other):
        return isinstance(other, FunctionSchema) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))


# --- parser ---------------------------------------------------------------------------------

class _Lexer:
    PUNCT = ("->", "::", "(", ")", "[", "]", ",", "?", "!", "*", "=", ".", "|")

    def __init__(self, text):
        self.text = text
        self.tokens = []
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c.isspace():
                i += 1
                continue
            start = i
            if c.isalpha() or c == "_":
                while i < n and (text[i].isalnum() or text[i] == "_"):
                    i += 1
                self.tokens.append(("ident", text[start:i], start))
                continue
            if c.isdigit() or (c == "-" and i + 1 < n and (text[i + 1].isdigit() or
                                                            text[i + 1] == ".")):
                i += 1
                while i < n and (text[i].isalnum() or text[i] in ".+-_"):
                    if text[i] in "+-" and text[i - 1] not in "eE":
                        break
                    i += 1
                self.tokens.append(("number", text[start:i], start))
                continue
            if c in "'\"":
                i += 1
                buf = []
                while i < n and text[i] != c:
                    if text[i] == "\\" and i + 1 < n:
                        i += 1
                    buf.append(text[i])
                    i += 1
                if i >= n:
                    self._fail(start, "unterminated string literal")
                i += 1
                self.tokens.append(("string", "".join(buf), start))
                continue
            for p in self.PUNCT:
                if text.startswith(p, i):
                    self.tokens.append((p, p, i))
                    i += len(p)
                    break
            else:
                self._fail(i, f"unexpected character {c!r}")
        self.tokens.append(("eof", "", n))
        self.pos = 0

    def _fail(self, at, what):
        raise SchemaParseError(f"{what} here:\n{self.text}\n{' ' * at}^ <--- HERE")

    def peek(self, k=0):
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def next(self):
        tok = self.tokens[self.pos]
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return tok

    def accept(self, kind):
        if self.peek()[0] == kind:
            return self.next()
        return None

    def expect(self, kind, what=None):
        tok = self.peek()
        if tok[0] != kind:
            shown = "end of the schema" if tok[0] == "eof" else repr(tok[1])
            self._fail(tok[2], f"expected {what or repr(kind)} but found {shown}")
        return self.next()


def parse_schema(text, *, allow_nameless=False):
    """A FunctionSchema from torch's schema syntax. With allow_nameless, "(Tensor x) -> Tensor"
    (the form custom_op(schema=) and library.define take) parses with an empty name."""
    if not isinstance(text, str):
        raise TypeError(f"expected a schema string, got {type(text).__name__}")
    lx = _Lexer(text)
    name, overload = "", ""
    if not (allow_nameless and lx.peek()[0] == "("):
        name = lx.expect("ident", "an operator name")[1]
        if lx.accept("::"):
            name = name + "::" + lx.expect("ident", "an operator name")[1]
        if lx.accept("."):
            overload = lx.expect("ident", "an overload name")[1]
    lx.expect("(", "'('")
    arguments = _parse_arguments(lx)
    lx.expect("->", "'->'")
    returns, wrapped = _parse_returns(lx)
    tok = lx.peek()
    if tok[0] != "eof":
        lx._fail(tok[2], f"expected the end of the schema but found {tok[1]!r}")
    seen_default = False
    for a in arguments:
        if a.kwarg_only:
            continue
        if a.has_default:
            seen_default = True
        elif seen_default:
            raise SchemaParseError(f"Non-default positional argument follows default argument. "
                                   f"Parameter {a.name} in {text}")
    return FunctionSchema(name, overload, arguments, returns, wrapped)


def _parse_arguments(lx):
    args = []
    kwarg_only = False
    if lx.accept(")"):
        return args
    while True:
        if lx.accept("*"):
            kwarg_only = True
        else:
            type_, alias = _parse_type(lx)
            tok = lx.expect("ident", "an argument name")
            default = NO_DEFAULT
            if lx.accept("="):
                default = _parse_default(lx, type_)
            args.append(Argument(tok[1], type_, default, kwarg_only, alias))
        if lx.accept(")"):
            return args
        lx.expect(",", "',' or ')'")
        if lx.peek()[0] == ")":
            tok = lx.peek()
            lx._fail(tok[2], "expected an argument but found ')'")


def _parse_returns(lx):
    """(returns, wrapped): wrapped for "((Tensor, ...))", one return that is a tuple (what
    infer_schema writes for a tuple[Tensor] annotation): the op returns a tuple even of one."""
    if lx.accept("("):
        rets = []
        if lx.accept(")"):
            return rets, False
        if lx.peek()[0] == "(":
            inner, _ = _parse_returns(lx)
            lx.expect(")", "')' (a tuple return must be the only return)")
            return inner, True
        while True:
            rets.append(_parse_return(lx))
            if lx.accept(")"):
                return rets, False
            lx.expect(",", "',' or ')'")
    return [_parse_return(lx)], False


def _parse_return(lx):
    type_, alias = _parse_type(lx)
    name = ""
    if lx.peek()[0] == "ident":
        name = lx.next()[1]
    return Argument(name, type_, NO_DEFAULT, False, alias)


def _parse_type(lx):
    tok = lx.peek()
    if tok[0] != "ident" or tok[1] not in _BASE_TYPES:
        shown = "end of the schema" if tok[0] == "eof" else repr(tok[1])
        lx._fail(tok[2], f"unknown type specifier {shown}. Common valid schema types include "
                 "Tensor, SymInt, int, float, bool, Scalar, str, ScalarType, Device")
    lx.next()
    t = BaseType(tok[1])
    alias = None
    if lx.peek()[0] == "(" and tok[1] == "Tensor":
        lx.next()
        before = [lx.expect("ident", "an alias set name")[1]]
        while lx.accept("|"):
            before.append(lx.expect("ident", "an alias set name")[1])
        is_write = bool(lx.accept("!"))
        after = None
        if lx.accept("->"):
            if lx.accept("*"):
                after = ["*"]
            else:
                after = [lx.expect("ident", "an alias set name")[1]]
                while lx.accept("|"):
                    after.append(lx.expect("ident", "an alias set name")[1])
        lx.expect(")", "')'")
        alias = AliasInfo(before, is_write, after)
    while True:
        if lx.accept("?"):
            t = OptionalType(t)
        elif lx.accept("["):
            size = None
            if lx.peek()[0] == "number":
                size = int(lx.next()[1])
            lx.expect("]", "']'")
            t = ListType(t, size)
        else:
            return t, alias


def _parse_default(lx, t):
    base = strip_optional(t)
    if lx.peek()[0] == "[":
        lx.next()
        elem = base.elem if isinstance(base, ListType) else base
        values = []
        if not lx.accept("]"):
            while True:
                values.append(_parse_scalar_default(lx, elem))
                if lx.accept("]"):
                    break
                lx.expect(",", "',' or ']'")
        return values
    v = _parse_scalar_default(lx, base.elem if isinstance(base, ListType) else base)
    if isinstance(base, ListType) and v is not None:
        if base.size is None:
            tok = lx.tokens[lx.pos - 1]
            lx._fail(tok[2], "a list default needs [...] (or a fixed size such as int[2])")
        return [v] * base.size  # int[2] k=1 means [1, 1], as torch
    return v


def _parse_scalar_default(lx, t):
    tok = lx.next()
    kind, text = tok[0], tok[1]
    name = strip_optional(t).name if isinstance(strip_optional(t), BaseType) else ""
    if kind == "number":
        try:
            v = int(text)
        except ValueError:
            try:
                v = float(text)
            except ValueError:
                lx._fail(tok[2], f"invalid numeric default value {text!r}")
        if name == "ScalarType" and isinstance(v, int):
            if v not in _DTYPE_CODES:
                lx._fail(tok[2], f"unknown ScalarType code {v}")
            return getattr(_C, _DTYPE_CODES[v])
        if name in ("float", "SymFloat"):
            return float(v)
        if name == "complex":
            return complex(v)
        return v
    if kind == "string":
        if name == "Device":
            return _C.device(text)
        return text
    if kind == "ident":
        if text == "None":
            return None
        if text in ("True", "False"):
            return text == "True"
        if text in ("inf", "nan"):
            return float(text)
        if name == "ScalarType":
            if text not in _DTYPE_NAMES:
                lx._fail(tok[2], f"unknown ScalarType {text!r}")
            return getattr(_C, _DTYPE_NAMES[text])
        if name == "Device":
            return _C.device(text)
        if name == "MemoryFormat":
            import kiln
            return getattr(kiln, text, text)
        if name == "Layout":
            import kiln
            return getattr(kiln, text, text)
        return text  # enum-like defaults (reduction="Mean" written bare)
    lx._fail(tok[2], f"expected a default value but found {text or kind!r}")


# --- binding a call to a schema -------------------------------------------------------------

def _type_error(qualname, schema, arg, index, value, cause=None):
    msg = (f"{qualname}() Expected a value of type '{python_type_str(arg.type)}' for argument "
           f"'{arg.name}' but instead found type '{type(value).__name__}'.\nPosition: {index}\n"
           f"Value: {value!r}\nDeclaration: {schema}")
    if cause:
        msg += f"\n{cause}"
    return RuntimeError(msg)


class _Mismatch(Exception):
    pass


def convert(t, v):
    """v converted to schema type t (ints as int, a kiln.device from a str, ...); raises
    _Mismatch when v is not a t."""
    if isinstance(t, OptionalType):
        return None if v is None else convert(t.elem, v)
    if isinstance(t, ListType):
        if isinstance(v, (list, tuple)):
            if t.size is not None and len(v) != t.size and not is_tensor_type(t.elem):
                raise _Mismatch(f"expected a list of {t.size} elements, got {len(v)}")
            return [convert(t.elem, x) for x in v]
        if t.size is not None and strip_optional(t.elem).kind in ("int", "float", "bool") \
                and not isinstance(v, _C.Tensor):
            return [convert(t.elem, v)] * t.size  # int[2] given 3 -> [3, 3], as torch
        raise _Mismatch("not a list")
    k = t.kind
    if k == "Tensor":
        if isinstance(v, _C.Tensor):
            return v
        raise _Mismatch(f"Unable to cast {v!r} to Tensor")
    if k == "int":
        if isinstance(v, float) or isinstance(v, complex):
            raise _Mismatch("a float is not an int")
        if isinstance(v, _C.Tensor):
            if v.dim() == 0 and not v.is_floating_point() and not v.is_complex():
                return int(v.item())
            raise _Mismatch("only 0-d integer tensors convert to int")
        try:
            return operator.index(v)
        except TypeError:
            raise _Mismatch("not an int") from None
    if k == "float":
        if isinstance(v, _C.Tensor):
            if v.dim() == 0 and not v.is_complex():
                return float(v.item())
            raise _Mismatch("only 0-d real tensors convert to float")
        if isinstance(v, numbers.Real):
            return float(v)
        raise _Mismatch("not a float")
    if k == "bool":
        if isinstance(v, bool):
            return v
        if type(v).__name__ == "bool_":  # numpy.bool_
            return bool(v)
        if isinstance(v, _C.Tensor) and v.dim() == 0 and v.dtype == _C.bool:
            return bool(v.item())
        raise _Mismatch("not a bool")
    if k == "str":
        if isinstance(v, str):
            return v
        raise _Mismatch("not a str")
    if k == "Scalar":
        if isinstance(v, _C.Tensor):
            if v.dim() == 0:
                return v.item()
            raise _Mismatch("only 0-d tensors are Scalars")
        if isinstance(v, numbers.Number):
            return v
        raise _Mismatch("not a number")
    if k == "complex":
        if isinstance(v, numbers.Number):
            return complex(v)
        raise _Mismatch("not a number")
    if k == "ScalarType":
        if isinstance(v, _C.dtype):
            return v
        raise _Mismatch("not a kiln.dtype")
    if k == "Device":
        if isinstance(v, _C.device):
            return v
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            try:
                return _C.device(v)
            except Exception as e:
                raise _Mismatch(str(e)) from None
        raise _Mismatch("not a device")
    if k == "Generator":
        if isinstance(v, _C.Generator):
            return v
        raise _Mismatch("not a kiln.Generator")
    return v  # Layout, MemoryFormat, Stream, Storage, Any


def bind(qualname, schema, args, kwargs):
    """(positional values, keyword-only values) of a call, defaults filled and each value
    checked against (and converted to) its schema type. Errors are torch's RuntimeErrors."""
    arguments = schema.arguments
    positional = [a for a in arguments if not a.kwarg_only]
    if len(args) > len(positional):
        raise RuntimeError(f"{qualname}() expected at most {len(positional)} argument(s) but "
                           f"received {len(args)} argument(s). Declaration: {schema}")
    if kwargs:
        names = {a.name for a in arguments}
        for key in kwargs:
            if key not in names:
                raise RuntimeError(f"Unknown keyword argument '{key}' for operator '{qualname}'."
                                   f" Schema: {schema}")
    pos_values = []
    kw_values = {}
    for i, a in enumerate(arguments):
        if not a.kwarg_only and i < len(args):
            if kwargs and a.name in kwargs:
                raise RuntimeError(f"{qualname}() got multiple values for argument '{a.name}'. "
                                   f"Declaration: {schema}")
            v = args[i]
        elif kwargs and a.name in kwargs:
            v = kwargs[a.name]
        elif a.has_default:
            v = a.default
            if isinstance(v, list):
                v = list(v)  # never hand out the schema's own list
        else:
            raise RuntimeError(f"{qualname}() is missing value for argument '{a.name}'. "
                               f"Declaration: {schema}")
        try:
            v = convert(a.type, v)
        except _Mismatch as e:
            raise _type_error(qualname, schema, a, i, v, e.args[0] if e.args else None) from None
        if a.kwarg_only:
            kw_values[a.name] = v
        else:
            pos_values.append(v)
    return pos_values, kw_values


def check_returns(qualname, schema, result):
    """The kernel's result in the form the schema promises: None for (), one value for a
    single return, a tuple otherwise (a list given for a tuple is accepted)."""
    rets = schema.returns
    if not rets:
        if result is not None:
            raise RuntimeError(f"{qualname}: the schema returns nothing ({schema}) but the "
                               f"implementation returned a {type(result).__name__}; return None")
        return None
    if len(rets) == 1 and not schema.tuple_return:
        _check_return(qualname, schema, rets[0], result, 0)
        return result
    if not isinstance(result, (tuple, list)) or len(result) != len(rets):
        got = (f"{len(result)} values" if isinstance(result, (tuple, list))
               else f"a {type(result).__name__}")
        raise RuntimeError(f"{qualname}: the schema returns {len(rets)} values ({schema}) but "
                           f"the implementation returned {got}")
    for i, (r, v) in enumerate(zip(rets, result)):
        _check_return(qualname, schema, r, v, i)
    return tuple(result)


def _check_return(qualname, schema, ret, value, index):
    try:
        convert(ret.type, value)
    except _Mismatch:
        where = "" if len(schema.returns) == 1 else f" (output {index})"
        raise RuntimeError(f"{qualname}: the schema declares the return type "
                           f"'{python_type_str(ret.type)}'{where} ({schema}) but the "
                           f"implementation returned a {type(value).__name__}") from None

