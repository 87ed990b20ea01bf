"""Constant folding: a node whose inputs are all known at export time (parameters, buffers,
literals, fresh tensors) runs now with kiln's eager ops and its result becomes an
initializer, as torch.onnx.export's do_constant_folding. An eval-mode BatchNorm, which kiln
records as arithmetic on its running statistics, folds to one scale and one shift."""
import kiln


def _slice(t, n):
    index = [slice(None)] * t.dim()
    index[n.attr("dim")] = slice(n.attr("start"), n.attr("end"), n.attr("step"))
    return t[tuple(index)]


_FOLD = {
    "add": lambda x, n: kiln.add(x[0], x[1], alpha=n.attr("alpha")),
    "sub": lambda x, n: kiln.sub(x[0], x[1], alpha=n.attr("alpha")),
    "mul": lambda x, n: kiln.mul(x[0], x[1]),
    "div": lambda x, n: kiln.div(x[0], x[1]) if not n.attr("rounding_mode") else None,
    "pow": lambda x, n: kiln.pow(x[0], x[1]),
    "neg": lambda x, n: kiln.neg(x[0]),
    "rsqrt": lambda x, n: kiln.rsqrt(x[0]),
    "sqrt": lambda x, n: kiln.sqrt(x[0]),
    "reciprocal": lambda x, n: kiln.reciprocal(x[0]),
    "exp": lambda x, n: kiln.exp(x[0]),
    "log": lambda x, n: kiln.log(x[0]),
    "abs": lambda x, n: kiln.abs(x[0]),
    "view": lambda x, n: x[0].reshape(n.attr("size")),
    "reshape": lambda x, n: x[0].reshape(n.attr("shape")),
    "permute": lambda x, n: x[0].permute(n.attr("dims")),
    "unsqueeze": lambda x, n: x[0].unsqueeze(n.attr("dim")),
    "_to_copy": lambda x, n: x[0].to(n.attr("dtype")),
    "select": lambda x, n: x[0].select(n.attr("dim"), n.attr("index")),
    "slice": lambda x, n: _slice(x[0], n),
    "tril": lambda x, n: kiln.tril(x[0], n.attr("diagonal")),
    "triu": lambda x, n: kiln.triu(x[0], n.attr("diagonal")),
    "cat": lambda x, n: kiln.cat(list(x), n.attr("dim")),
}

# Folding must not blow a small constant up into a large initializer (expand of a scalar).
_MAX_GROWTH = 1024


def try_fold(b, n):
    """Computes n's result when all its inputs are known; returns whether it did."""
    fn = _FOLD.get(n.op)
    if fn is None or n.outs or len(n.results) != 1:
        return False
    if any(v >= 0 and v not in b.known for v in n.inputs):
        return False
    out = n.results[0]
    shape = b.shape(out)
    numel = 1
    for s in shape:
        numel *= s
    if numel > _MAX_GROWTH and numel > max(b.known[v].numel() for v in n.inputs if v >= 0):
        return False
    try:
        with kiln.no_grad():
            t = fn([b.known[v] if v >= 0 else None for v in n.inputs], n)
    except Exception:  # noqa: BLE001  the ONNX translation still covers the node
        return False
    if t is None or list(t.shape) != shape:
        return False
    b.known[out] = t.to(b.dtype(out)).detach().contiguous()
    # keep the parameter's name readable: "0.weight" permuted is "0.weight_permute"
    named = [b.constant_names[v] for v in n.inputs if v in b.constant_names]
    if named:
        b.constant_names[out] = f"{named[0]}_{n.op.lstrip('_')}"
    return True
