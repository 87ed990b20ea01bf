"""kiln.export.save / load: an ExportedProgram as a zip archive.

    kiln_export/program.json        the graph (nodes with op, target, args, kwargs, shapes),
                                    the signature, input / output trees, input checks and
                                    symbol ranges, format name and version
    kiln_export/weights.safetensors state_dict ("state/<name>"), constants ("const/<name>")
                                    and tensor example inputs ("example/<i>")
    kiln_export/code.py             the generated forward, for reading only

Loading never executes anything from the file: functions are named by dotted path and
resolved only inside kiln (`kiln.nn.functional.linear`, `kiln.ops.<ns>.<op>.<overload>`),
`operator` and `math`; method names and node names must be plain identifiers; weights are
parsed in Python. Anything malformed -- a foreign or corrupted file, a truncated archive, a
bad CRC, an unknown function -- raises ExportSerializationError (a RuntimeError)."""
import io
import json
import keyword
import math
import operator
import os
import zipfile

from .. import _C
from ..fx.graph import Graph
from ..fx.graph_module import GraphModule
from ..fx.node import Node, _get_qualified_name, _resolves_to
from . import _safetensors
from ._dims import Symbol, ValueRanges, int_oo
from ._errors import ExportSerializationError
from ._pytree import TreeSpec, leaf_paths, tree_flatten, tree_unflatten
from ._signature import ExportGraphSignature, InputKind
from ._trace import SymMeta, TensorMeta, make_placeholder

__all__ = ["save", "load"]

FORMAT = "kiln.export"
VERSION = 1
_PREFIX = "kiln_export/"
_ALLOWED_OPS = frozenset(("placeholder", "call_function", "call_method", "output"))
_MAX_DEPTH = 32


# --- writing -------------------------------------------------------------------------------------

def _target_path(fn):
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__name__", None)
    if module in ("_operator", "operator") and getattr(operator, name or "", None) is fn:
        return f"operator.{name}"
    if module == "math" and getattr(math, name or "", None) is fn:
        return f"math.{name}"
    if fn is getattr:
        return "builtins.getattr"
    try:
        path = _get_qualified_name(fn)
    except (RuntimeError, AttributeError):
        path = None
    if path and path.startswith("kiln.") and _resolves_to(path, fn):
        return path
    raise ExportSerializationError(
        f"kiln.export.save: cannot name the function {fn!r} of the graph (only kiln's "
        "functions and operators, the operator and math modules can be saved)")


def _enc(a, depth=0):
    if depth > _MAX_DEPTH:
        raise ExportSerializationError("kiln.export.save: argument nested too deeply")
    if isinstance(a, Node):
        return {"node": a.name}
    if a is None or isinstance(a, (bool, str)):
        return a
    if isinstance(a, int):
        return a
    if isinstance(a, float):
        return a if math.isfinite(a) else {"float": repr(a)}
    if isinstance(a, complex):
        return {"complex": [_enc(a.real), _enc(a.imag)]}
    if isinstance(a, tuple):
        return {"tuple": [_enc(e, depth + 1) for e in a]}
    if isinstance(a, list):
        return [_enc(e, depth + 1) for e in a]
    if isinstance(a, dict):
        return {"dict": [[_enc(k, depth + 1), _enc(v, depth + 1)] for k, v in a.items()]}
    if isinstance(a, slice):
        return {"slice": [_enc(a.start, depth + 1), _enc(a.stop, depth + 1),
                          _enc(a.step, depth + 1)]}
    if a is ...:
        return {"ellipsis": True}
    if isinstance(a, _C.dtype):
        return {"dtype": str(a).split(".")[-1]}
    if isinstance(a, _C.device):
        return {"device": str(a)}
    import kiln
    for name in ("contiguous_format", "channels_last", "preserve_format", "strided",
                 "sparse_coo"):
        if getattr(kiln, name, None) is a:
            return {"kiln": name}
    raise ExportSerializationError(
        f"kiln.export.save: cannot save an argument of type {type(a).__name__} ({a!r:.60})")


def _enc_meta(v):
    if isinstance(v, TensorMeta):
        return {"shape": [s if isinstance(s, int) else str(s) for s in v.shape],
                "dtype": str(v.dtype).split(".")[-1], "device": str(v.device)}
    if isinstance(v, SymMeta):
        hint = v.hint if isinstance(v.hint, (bool, int, float)) and \
            (not isinstance(v.hint, float) or math.isfinite(v.hint)) else None
        return {"sym": str(v.expr), "hint": hint}
    if isinstance(v, list):
        return [_enc_meta(e) for e in v]
    return None


def _program_json(ep):
    nodes = []
    for n in ep.graph.nodes:
        if n.op not in _ALLOWED_OPS:
            raise ExportSerializationError(f"kiln.export.save: cannot save a {n.op} node")
        if n.op == "call_function":
            target = {"fn": _target_path(n.target)}
        else:
            target = n.target
        nodes.append({"name": n.name, "op": n.op, "target": target,
                      "args": _enc(tuple(n.args))["tuple"], "kwargs": _enc(dict(n.kwargs)),
                      "val": _enc_meta(n.meta.get("val"))})
    info = ep._info
    checks = []
    for c in info.input_checks:
        c = dict(c)
        if c["kind"] == "constant":
            c["value"] = _enc(c["value"])
        checks.append(c)
    ex_leaves, ex_spec = tree_flatten(ep.example_inputs)
    example = []
    for i, leaf in enumerate(ex_leaves):
        example.append({"tensor": f"example/{i}"} if isinstance(leaf, _C.Tensor)
                       else {"value": _enc(leaf)})
    return {
        "format": FORMAT, "version": VERSION,
        "graph": {"nodes": nodes},
        "signature": ep.graph_signature.to_json(),
        "in_spec": info.in_spec.to_json(), "out_spec": info.out_spec.to_json(),
        "input_checks": checks,
        "symbols": info.symbol_info,
        "range_constraints": [[str(k), v.lower, None if v.upper is int_oo else v.upper]
                              for k, v in ep.range_constraints.items()],
        "forward_signature": info.forward_signature,
        "n_args": info.n_args, "kwarg_names": info.kwarg_names,
        "example_inputs": {"spec": ex_spec.to_json(), "leaves": example},
    }, ex_leaves


def save(ep, f, *, extra_files=None, opset_version=None):
    """Writes ep to f (a path or a binary file object) as a zip archive (see the module
    docstring); kiln.export.load reads it back."""
    from ._program import ExportedProgram
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"kiln.export.save expects an ExportedProgram, got {type(ep).__name__}")
    prog, ex_leaves = _program_json(ep)
    tensors = {f"state/{k}": v for k, v in ep.state_dict.items()}
    tensors.update({f"const/{k}": v for k, v in ep.constants.items()})
    tensors.update({f"example/{i}": leaf for i, leaf in enumerate(ex_leaves)
                    if isinstance(leaf, _C.Tensor)})
    weights = _safetensors.dumps(tensors, {"format": FORMAT})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr(_PREFIX + "version", str(VERSION))
        z.writestr(_PREFIX + "program.json", json.dumps(prog, allow_nan=False))
        z.writestr(_PREFIX + "weights.safetensors", weights)
        z.writestr(_PREFIX + "code.py", ep.graph_module.code)
        for name, content in (extra_files or {}).items():
            z.writestr(_PREFIX + "extra/" + str(name), content)
    data = buf.getvalue()
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)


# --- reading -------------------------------------------------------------------------------------

class _Bad(ValueError):
    pass


def _check(cond, what):
    if not cond:
        raise _Bad(what)


def _ident(name, what):
    _check(isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)
           and not name.startswith("__"), f"bad {what} {name!r:.60}")
    return name


def _resolve(path):
    _check(isinstance(path, str) and len(path) < 300, "bad function path")
    parts = path.split(".")
    for p in parts:
        _check(p.isidentifier() and not (p.startswith("__") and p.endswith("__")),
               f"bad function path {path!r:.80}")
    head = parts[0]
    if head in ("operator", "math"):
        _check(len(parts) == 2, f"bad function path {path!r:.80}")
        obj = getattr(operator if head == "operator" else math, parts[1], None)
        _check(callable(obj) and not parts[1].startswith("_"), f"unknown function {path!r:.80}")
        return obj
    if head == "builtins":
        _check(parts[1:] == ["getattr"], f"function {path!r:.80} is not allowed")
        return getattr
    _check(head == "kiln" and len(parts) >= 2, f"function {path!r:.80} is not allowed "
                                                "(only kiln's functions are)")
    import kiln
    cur = kiln
    for i, p in enumerate(parts[1:]):
        try:
            cur = getattr(cur, p)
        except Exception:  # noqa: BLE001 - a missing custom op raises its own errors
            if parts[1] == "ops" and len(parts) >= 4:
                raise ExportSerializationError(
                    f"kiln.export.load: the program calls the custom operator "
                    f"{parts[2]}::{parts[3]}, which is not registered in this process: import "
                    "the library that defines it (kiln.library.custom_op) before loading") \
                    from None
            raise _Bad(f"unknown function {path!r:.80}") from None
    module = getattr(cur, "__module__", None) or ""
    _check(callable(cur) and (module == "kiln" or module.startswith("kiln.")),
           f"{path!r:.80} is not a kiln function")
    return cur


def _dec(a, nodes, depth=0):
    _check(depth <= _MAX_DEPTH, "argument nested too deeply")
    if a is None or isinstance(a, (bool, int, float, str)):
        if isinstance(a, float):
            _check(math.isfinite(a), "bad float")
        return a
    if isinstance(a, list):
        return [_dec(e, nodes, depth + 1) for e in a]
    _check(isinstance(a, dict) and len(a) == 1, f"bad argument {a!r:.60}")
    (k, v), = a.items()
    if k == "node":
        _check(isinstance(v, str) and v in nodes, f"argument refers to an unknown node {v!r:.40}")
        return nodes[v]
    if k == "tuple":
        _check(isinstance(v, list), "bad tuple")
        return tuple(_dec(e, nodes, depth + 1) for e in v)
    if k == "dict":
        _check(isinstance(v, list) and all(isinstance(e, list) and len(e) == 2 for e in v),
               "bad dict")
        out = {}
        for kk, vv in v:
            key = _dec(kk, nodes, depth + 1)
            _check(isinstance(key, (str, int)) and not isinstance(key, bool), "bad dict key")
            out[key] = _dec(vv, nodes, depth + 1)
        return out
    if k == "slice":
        _check(isinstance(v, list) and len(v) == 3, "bad slice")
        return slice(*(_dec(e, nodes, depth + 1) for e in v))
    if k == "ellipsis":
        return ...
    if k == "float":
        _check(v in ("inf", "-inf", "nan"), "bad float")
        return float(v)
    if k == "complex":
        _check(isinstance(v, list) and len(v) == 2, "bad complex")
        re_, im = (_dec(e, nodes, depth + 1) for e in v)
        _check(isinstance(re_, (int, float)) and isinstance(im, (int, float)), "bad complex")
        return complex(re_, im)
    import kiln
    if k == "dtype":
        d = getattr(kiln, v, None) if isinstance(v, str) and v.isidentifier() else None
        _check(isinstance(d, _C.dtype), f"unknown dtype {v!r:.40}")
        return d
    if k == "device":
        _check(isinstance(v, str) and len(v) < 40, "bad device")
        return kiln.device(v)
    if k == "kiln":
        _check(v in ("contiguous_format", "channels_last", "preserve_format", "strided",
                     "sparse_coo") and hasattr(kiln, v), f"unknown constant {v!r:.40}")
        return getattr(kiln, v)
    raise _Bad(f"bad argument kind {k!r:.40}")


def _dec_meta(v):
    import kiln
    if v is None:
        return None
    if isinstance(v, list):
        return [_dec_meta(e) for e in v]
    _check(isinstance(v, dict), "bad node metadata")
    if "sym" in v:
        _check(isinstance(v["sym"], str), "bad node metadata")
        return SymMeta(v["sym"], v.get("hint"))
    shape, dtype = v.get("shape"), v.get("dtype")
    _check(isinstance(shape, list) and all(isinstance(s, (int, str)) for s in shape),
           "bad node metadata")
    d = getattr(kiln, dtype, None) if isinstance(dtype, str) and dtype.isidentifier() else None
    _check(isinstance(d, _C.dtype), "bad dtype in node metadata")
    dev = v.get("device", "cpu")
    _check(isinstance(dev, str) and len(dev) < 40, "bad device in node metadata")
    return TensorMeta(shape, d, kiln.device(dev))


def _graph_from_json(g):
    _check(isinstance(g, dict) and isinstance(g.get("nodes"), list), "bad graph")
    graph = Graph()
    nodes = {}
    seen_output = False
    for nd in g["nodes"]:
        _check(isinstance(nd, dict), "bad node")
        op = nd.get("op")
        _check(op in _ALLOWED_OPS, f"bad node op {op!r:.40}")
        _check(not seen_output, "nodes after the output")
        name = _ident(nd.get("name"), "node name")
        _check(name not in nodes, f"duplicate node name {name}")
        args = _dec({"tuple": nd.get("args")}, nodes)
        kwargs = _dec(nd.get("kwargs"), nodes)
        _check(isinstance(kwargs, dict) and all(isinstance(k, str) and k.isidentifier()
                                                for k in kwargs), "bad kwargs")
        target = nd.get("target")
        if op == "call_function":
            _check(isinstance(target, dict) and set(target) == {"fn"}, "bad call target")
            fn = _resolve(target["fn"])
            if fn is getattr:
                _check(len(args) == 2 and isinstance(args[1], str) and
                       args[1].isidentifier() and not args[1].startswith("_"),
                       "bad getattr")
            node = graph.create_node(op, fn, args, kwargs, name=name)
        elif op == "call_method":
            _ident(target, "method name")
            _check(not target.startswith("_"), f"method {target!r:.40} is not allowed")
            _check(len(args) >= 1, "call_method without self")
            node = graph.create_node(op, target, args, kwargs, name=name)
        elif op == "placeholder":
            _check(target == name and not args and not kwargs, "bad placeholder")
            node = make_placeholder(graph, name)
            _check(node.name == name, f"bad placeholder name {name!r:.40}")
        else:
            _check(len(args) == 1 and isinstance(args[0], tuple) and not kwargs, "bad output")
            node = graph.create_node(op, "output", args)
            seen_output = True
        node.meta["val"] = _dec_meta(nd.get("val"))
        nodes[name] = node
    _check(seen_output, "graph has no output")
    graph.lint()
    return graph, nodes


def _read_bytes(f):
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return fh.read()
    if isinstance(f, (bytes, bytearray, memoryview)):
        return bytes(f)
    return f.read()


def load(f, *, extra_files=None, expected_opset_version=None):
    """The ExportedProgram that kiln.export.save wrote to f (a path, a binary file object or
    bytes). Raises ExportSerializationError for anything that is not such an archive."""
    try:
        data = _read_bytes(f)
    except OSError:
        raise
    src = f if isinstance(f, (str, os.PathLike)) else "the data"
    try:
        return _load(data, extra_files)
    except ExportSerializationError:
        raise
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - any malformed content becomes one clear error
        raise ExportSerializationError(
            f"kiln.export.load: {src} is not a valid kiln exported program "
            f"({type(e).__name__}: {e})") from e


def _load(data, extra_files):
    from ._program import ExportedProgram, _ExportInfo
    import kiln
    if not data.startswith(b"PK"):
        raise _Bad("not a zip archive")
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        bad = z.testzip()
        _check(bad is None, f"bad CRC for {bad!r:.60}")
        names = set(z.namelist())
        for need in ("program.json", "weights.safetensors"):
            _check(_PREFIX + need in names, f"archive has no {_PREFIX + need}")
        prog = json.loads(z.read(_PREFIX + "program.json").decode("utf-8"))
        weights = _safetensors.loads(z.read(_PREFIX + "weights.safetensors"))
        if extra_files is not None:
            for name in list(extra_files):
                key = _PREFIX + "extra/" + str(name)
                extra_files[name] = z.read(key).decode("utf-8") if key in names else ""
    _check(isinstance(prog, dict) and prog.get("format") == FORMAT, "not a kiln.export program")
    _check(prog.get("version") == VERSION,
           f"unsupported kiln.export format version {prog.get('version')!r:.20}")

    graph, nodes = _graph_from_json(prog.get("graph"))
    sig = ExportGraphSignature.from_json(prog.get("signature"))
    placeholders = [n.name for n in graph.nodes if n.op == "placeholder"]
    _check([s.arg.name for s in sig.input_specs] == placeholders,
           "signature does not match the graph's inputs")
    outs = graph.output_node.args[0]
    _check(len(outs) == len(sig.output_specs), "signature does not match the graph's outputs")
    for spec, v in zip(sig.output_specs, outs):
        _check(not isinstance(v, Node) or spec.arg.name == v.name,
               "signature does not match the graph's outputs")

    state_dict, constants = {}, {}
    for s in sig.input_specs:
        if s.kind == InputKind.USER_INPUT:
            continue
        _check(isinstance(s.target, str), "input spec without target")
        if s.kind == InputKind.PARAMETER:
            t = weights.get(f"state/{s.target}")
            _check(t is not None, f"no weights for {s.target}")
            state_dict[s.target] = kiln.nn.Parameter(t)
        elif s.kind == InputKind.BUFFER and s.persistent is not False:
            t = weights.get(f"state/{s.target}")
            _check(t is not None, f"no weights for {s.target}")
            state_dict[s.target] = t
        else:
            t = weights.get(f"const/{s.target}")
            _check(t is not None, f"no weights for {s.target}")
            constants[s.target] = t

    in_spec = TreeSpec.from_json(prog.get("in_spec"))
    out_spec = TreeSpec.from_json(prog.get("out_spec"))
    _check(in_spec.type == "tuple" and len(in_spec.children) == 2, "bad input tree")
    n_user = sum(1 for s in sig.input_specs if s.kind == InputKind.USER_INPUT)
    _check(in_spec.num_leaves == n_user, "input tree does not match the user inputs")
    checks = prog.get("input_checks")
    _check(isinstance(checks, list) and len(checks) == n_user, "bad input checks")
    symbols = prog.get("symbols")
    _check(isinstance(symbols, dict), "bad symbols")
    for k, v in symbols.items():
        _check(isinstance(v, dict) and isinstance(v.get("min"), int) and
               (v.get("max") is None or isinstance(v.get("max"), int)), "bad symbol")
    dec_checks = []
    for c in checks:
        _check(isinstance(c, dict) and c.get("kind") in ("tensor", "constant") and
               isinstance(c.get("name"), str), "bad input check")
        c = dict(c)
        if c["kind"] == "constant":
            c["value"] = _dec(c.get("value"), {})
        else:
            _check(isinstance(c.get("shape"), list) and all(
                (isinstance(s, int) and not isinstance(s, bool) and s >= 0) or
                (isinstance(s, str) and s in symbols) for s in c["shape"]), "bad input check")
        dec_checks.append(c)
    rc = {}
    for item in prog.get("range_constraints", []):
        _check(isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and
               isinstance(item[1], int) and (item[2] is None or isinstance(item[2], int)),
               "bad range constraint")
        rc[Symbol(item[0])] = ValueRanges(item[1], int_oo if item[2] is None else item[2])
    fsig = prog.get("forward_signature")
    _check(isinstance(fsig, list) and all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and p[0].isidentifier()
        and p[1] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL",
                     "KEYWORD_ONLY", "VAR_KEYWORD") for p in fsig), "bad forward signature")
    n_args, kwarg_names = prog.get("n_args"), prog.get("kwarg_names")
    _check(isinstance(n_args, int) and isinstance(kwarg_names, list) and
           all(isinstance(k, str) for k in kwarg_names), "bad call structure")
    ex = prog.get("example_inputs") or {}
    ex_spec = TreeSpec.from_json(ex.get("spec", {"type": "tuple", "children": [
        {"type": "tuple"}, {"type": "dict", "keys": []}]}))
    ex_leaves = []
    for leaf in ex.get("leaves", []):
        _check(isinstance(leaf, dict), "bad example input")
        if "tensor" in leaf:
            t = weights.get(leaf["tensor"]) if isinstance(leaf["tensor"], str) else None
            _check(t is not None, "missing example input")
            ex_leaves.append(t)
        else:
            ex_leaves.append(_dec(leaf.get("value"), {}))
    example_inputs = tree_unflatten(ex_leaves, ex_spec)
    leaf_paths(in_spec)  # validates the structure once more

    gm = GraphModule({}, graph, class_name="GraphModule")
    info = _ExportInfo(in_spec, out_spec, dec_checks, symbols, fsig, n_args, kwarg_names)
    return ExportedProgram(gm, sig, state_dict, constants, rc, example_inputs, info)
