"""repr of sparse tensors in torch's format, kiln. in place of torch.:

    tensor(indices=tensor([[0, 1],
                           [2, 0]]),
           values=tensor([3., 4.]),
           size=(2, 3), nnz=2, layout=kiln.sparse_coo)

The index and value tensors are printed by kiln's own dense repr, re-indented under their
names."""
import kiln

_LINEWIDTH = 80
_INDENT = len("tensor(")


def _body(t, name):
    """`name=tensor(<t's elements>` continued at the right column (no closing parenthesis)."""
    t = t.detach()
    prefix = f"{name}=tensor("
    if t.numel() == 0:
        return f"{prefix}[], size={tuple(t.shape)}"
    r = repr(t)
    # kiln's repr: "tensor(" + elements + optional suffixes (dtype=, device=, ...) + ")".
    # Index and value tensors have at least one dimension, so the elements end with "]".
    elements = r[_INDENT:r.rindex("]") + 1]
    # kiln indents continuation lines for a repr starting at column 0; these elements start
    # _INDENT + len(name=) columns further right.
    return prefix + elements.replace("\n", "\n" + " " * (_INDENT + len(name) + 1))


def _default_dtypes():
    default = kiln.get_default_dtype()
    complex_default = kiln.complex128 if default == kiln.float64 else kiln.complex64
    return (default, complex_default, kiln.int64, kiln.bool)


def _join_suffixes(text, suffixes, force_newline):
    # torch's rule: a suffix goes on the current line while it fits in the line width.
    parts = [text]
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if force_newline or last_line + len(suffix) + 2 > _LINEWIDTH:
            parts.append(",\n" + " " * _INDENT + suffix)
            last_line = _INDENT + len(suffix)
            force_newline = False
        else:
            parts.append(", " + suffix)
            last_line += len(suffix) + 2
    return "".join(parts) + ")"


def sparse_repr(s):
    if s.layout is kiln.sparse_coo:
        fields = [("indices", s._indices()), ("values", s._values())]
    else:
        fields = [("crow_indices", s.crow_indices()), ("col_indices", s.col_indices()),
                  ("values", s.values())]
    sep = "),\n" + " " * _INDENT
    text = "tensor(" + sep.join(_body(t, name) for name, t in fields) + ")"
    suffixes = []
    if s.device.type != "cpu":
        suffixes.append(f"device='{s.device}'")
    suffixes += [f"size={tuple(s.shape)}", f"nnz={s._nnz()}"]
    if s.dtype not in _default_dtypes():
        suffixes.append(f"dtype={s.dtype}")
    suffixes.append(f"layout={s.layout}")
    if s.grad_fn is not None:
        suffixes.append(f"grad_fn=<{s.grad_fn.name()}>")
    elif s.requires_grad:
        suffixes.append("requires_grad=True")
    return _join_suffixes(text, suffixes, force_newline=s.layout is kiln.sparse_coo)
