"""dynamic_axes: symbolic input dims. kiln captures static shapes, and the translations bake
them into int64 initializers (Reshape / Expand targets, Slice ends, ConstantOfShape shapes,
...). So the model is captured and translated again with the dynamic dims at other sizes:
the ONNX graphs must then be the same but for int64 initializers, and each one that changes
must be an integer linear function of the symbols, a + sum_j c_j * d_j, fitted on one
capture per symbol and checked on one more with every symbol changed at once. Those
initializers become nodes computing a + sum c_j d_j from the inputs' Shape at run time.
Anything else that changes (a float constant, an attribute, a node) depends on the sizes in
a way the graph cannot follow, and is refused naming it."""
import kiln

from .._compile import _flatten
from .capture import split_args

# the alternative sizes: base + _FIT for the fit, base + _CHECK for the check
_FIT, _CHECK = 3, 7


def _refuse(why):
    return NotImplementedError(
        f"kiln.onnx.export: dynamic_axes: {why}. Export with static shapes (one model per "
        "input size) instead.")


def _symbols(dynamic_axes, in_names, out_names):
    """({symbol: [(input index, dim)]}, {output index: {dim: symbol}})."""
    inputs, outputs = {}, {}
    for name, axes in dynamic_axes.items():
        if not isinstance(axes, dict):
            axes = {d: f"{name}_dynamic_axes_{k + 1}" for k, d in enumerate(axes)}
        if name in in_names:
            for dim, sym in axes.items():
                inputs.setdefault(sym, []).append((in_names.index(name), int(dim)))
        elif name in out_names:
            outputs[out_names.index(name)] = {int(d): s for d, s in axes.items()}
        else:
            raise ValueError(f"kiln.onnx.export: dynamic_axes names {name!r}, which is no "
                             f"input ({in_names}) or output ({out_names})")
    return inputs, outputs


def _resized(t, dim, size):
    """t with `dim` at `size`, its values repeated cyclically (so ids stay valid ids)."""
    index = kiln.arange(size) % t.shape[dim]
    return t.index_select(dim, index)


def _replace(obj, mapping):
    if isinstance(obj, kiln.Tensor):
        return mapping.get(id(obj), obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_replace(x, mapping) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_replace(x, mapping) for x in obj)
    if isinstance(obj, dict):
        return {k: _replace(v, mapping) for k, v in obj.items()}
    return obj


def _alt_args(args, inputs, symbols, sizes):
    """args with each symbol's dims at sizes[symbol]."""
    tensors = list(inputs)
    for sym, places in symbols.items():
        for i, dim in places:
            tensors[i] = _resized(tensors[i], dim, sizes[sym])
    return _replace(args, {id(t): new for t, new in zip(inputs, tensors) if new is not t})


def _structure(b):
    """What must not change between captures: the nodes with their attributes, and the
    initializers' names."""
    nodes = []
    for op_type, ins, outs, name, attrs in b.nodes:
        enc = {k: (v.encoded() if hasattr(v, "encoded") else v) for k, v in attrs.items()}
        nodes.append((op_type, tuple(ins), tuple(outs), name, tuple(sorted(enc.items()))))
    return nodes, [name for name, _ in b.initializers]


def _fit(name, base, alts, checks, symbols, base_sizes, check_sizes):
    """(a, {symbol: c}) as int lists with value = a + sum c * d, or a refusal."""
    a = list(base)
    coeffs = {}
    for sym, values in alts.items():
        step = _FIT
        diffs = [v - w for v, w in zip(values, base)]
        if any(d % step for d in diffs):
            raise _refuse(f"the shape constant {name} changes by a fraction of the size of "
                          f"'{sym}'")
        coeffs[sym] = [d // step for d in diffs]
    for sym, c in coeffs.items():
        a = [x - k * base_sizes[sym] for x, k in zip(a, c)]
    predicted = list(a)
    for sym, c in coeffs.items():
        predicted = [x + k * check_sizes[sym] for x, k in zip(predicted, c)]
    if predicted != list(checks):
        raise _refuse(f"the shape constant {name} is not a linear function of the dynamic "
                      f"dims {list(symbols)} (a product of two, or a pooled / strided size)")
    return a, {s: c for s, c in coeffs.items() if any(c)}


def _dim_values(b, symbols, in_names):
    """symbol -> ONNX name of its size as int64 [1], read from the first input holding it."""
    values = {}
    for sym, places in symbols.items():
        i, dim = places[0]
        shape = b.add("Shape", [in_names[i]])
        values[sym] = b.add("Gather", [shape, b.ints([dim], "dim")], axis=0)
    return values


def make_dynamic(b, g, args, in_names, out_names, dynamic_axes, translate_at):
    """Rewrites b's size-dependent initializers as computed values; returns the graph's
    input and output shapes with symbols (str) for the dynamic dims."""
    symbols, out_symbols = _symbols(dynamic_axes, in_names, out_names)
    inputs = []
    pos, kw = split_args(args)
    _flatten((pos, kw), inputs)
    base_sizes = {}
    for sym, places in symbols.items():
        sizes = {g.shape(g.inputs[i])[d] for i, d in places}
        if len(sizes) != 1:
            raise ValueError(f"kiln.onnx.export: dynamic_axes symbol {sym!r} names dims of "
                             f"different sizes {sorted(sizes)}")
        base_sizes[sym] = sizes.pop()

    def translated(sizes):
        try:
            return translate_at(_alt_args(args, inputs, symbols, sizes))
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001  the model does not run at that size
            raise _refuse(f"the model failed at sizes {sizes}: {type(e).__name__}: {e}") from e

    runs = {}
    for sym in symbols:
        sizes = dict(base_sizes, **{sym: base_sizes[sym] + _FIT})
        runs[sym] = translated(sizes)
    check_sizes = {s: v + _CHECK for s, v in base_sizes.items()}
    check_g, check_b = translated(check_sizes)

    base_nodes, base_inits = _structure(b)
    for other in list(runs.values()) + [(check_g, check_b)]:
        nodes, inits = _structure(other[1])
        if nodes != base_nodes or inits != base_inits:
            diff = next((f"{x[0]} node {x[3]}" for x, y in zip(base_nodes, nodes) if x != y),
                        "the number of nodes or initializers")
            raise _refuse(f"the exported graph changes with the sizes ({diff}: an attribute "
                          "or the structure depends on them)")

    init_of = lambda bb: dict(bb.initializers)  # noqa: E731
    alt_inits = {sym: init_of(run[1]) for sym, run in runs.items()}
    check_inits = init_of(check_b)
    replaced = {}
    for name, t in b.initializers:
        others = [alt_inits[s][name] for s in symbols] + [check_inits[name]]
        if all(o.shape == t.shape and kiln.equal(o, t) for o in others):
            continue
        if t.dtype != kiln.int64 or any(o.shape != t.shape for o in others):
            raise _refuse(f"the constant {name} ({t.dtype}, shape {list(t.shape)}) depends "
                          "on the sizes")
        flat = lambda x: x.reshape(-1).tolist()  # noqa: E731
        replaced[name] = (list(t.shape), _fit(
            name, flat(t), {s: flat(alt_inits[s][name]) for s in symbols},
            flat(check_inits[name]), symbols, base_sizes, check_sizes))

    if replaced:
        start = len(b.nodes)
        b.initializers = [(n, t) for n, t in b.initializers if n not in replaced]
        dims = _dim_values(b, symbols, in_names)
        for name, (shape, (a, coeffs)) in replaced.items():
            value = b.ints(a, "offset")
            for sym, c in coeffs.items():
                value = b.add("Add", [value, b.add("Mul", [b.ints(c, "coeff"), dims[sym]])])
            b.add("Reshape", [value, b.ints(shape, "shape")], [name])
        # the computed constants go first: they read only the graph inputs
        b.nodes = b.nodes[start:] + b.nodes[:start]

    input_shapes = [list(g.shape(v)) for v in g.inputs]
    for sym, places in symbols.items():
        for i, d in places:
            input_shapes[i][d] = sym
    # an output dim that changed is named by dynamic_axes, else after the symbol it equals in
    # every capture, else output_dim_k
    all_runs = [(runs[s][0], dict(base_sizes, **{s: base_sizes[s] + _FIT})) for s in symbols]
    all_runs.append((check_g, check_sizes))
    output_shapes = []
    for k, vid in enumerate(g.outputs):
        shape = list(g.shape(vid))
        for d in range(len(shape)):
            sizes = [rg.shape(rg.outputs[k])[d] for rg, _ in all_runs]
            if all(size == shape[d] for size in sizes):
                continue
            same = [s for s in symbols if shape[d] == base_sizes[s]
                    and all(size == sz[s] for size, (_, sz) in zip(sizes, all_runs))]
            shape[d] = (out_symbols.get(k, {}).get(d) or (same[0] if same else None)
                        or f"{out_names[k]}_dim_{d}")
        output_shapes.append(shape)
    return input_shapes, output_shapes
