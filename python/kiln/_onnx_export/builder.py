"""The ONNX graph under construction: names for kiln's values, nodes, initializers, and
helpers the op translations share (constants of a given dtype, casts)."""
import kiln

from . import messages as M
from .dtypes import elem_type, raw_bytes


class GraphBuilder:
    def __init__(self, captured, constant_names, needed):
        self.g = captured
        # value id -> kiln tensor of every value known at export time: parameters, buffers,
        # literals, fresh tensors and (with constant folding) what was computed from them
        self.known = dict(captured.constants)
        self.constant_names = constant_names  # value id -> module parameter / buffer name
        self.needed = needed  # value ids some output depends on
        self.names = {}  # value id -> ONNX value name
        self.nodes = []
        # (name, kiln tensor on the CPU), encoded at the end: dynamic_axes compares them
        # between captures and replaces the shape-dependent ones with computed values
        self.initializers = []
        self._taken = set()
        self._cast_cache = {}

    # ---- names -------------------------------------------------------------------------
    def unique(self, hint):
        name, k = hint, 1
        while name in self._taken:
            k += 1
            name = f"{hint}_{k}"
        self._taken.add(name)
        return name

    def name(self, vid):
        """The ONNX name of a value; a known tensor becomes an initializer on first use."""
        if vid not in self.names:
            if vid not in self.known:
                raise RuntimeError(f"kiln.onnx.export: value %{vid} is read before it is "
                                   "computed (internal error)")
            hint = self.constant_names.get(vid) or (
                f"literal_{vid}" if self.g.is_literal(vid) else f"const_{vid}")
            self.names[vid] = self.initializer(self.known[vid], hint)
        return self.names[vid]

    def bind(self, vid, name):
        self.names[vid] = name

    def result_name(self, node, k=0):
        """A readable name for a node's k-th result, or '' when nothing reads it (ONNX's
        way of leaving an optional output out)."""
        vid = node.results[k]
        if vid not in self.needed:
            return ""
        return self.unique(f"{node.op.replace('.', '_')}_{vid}")

    # ---- graph contents ----------------------------------------------------------------
    def initializer(self, t, hint):
        name = self.unique(hint)
        self.initializers.append((name, t.detach().cpu().contiguous()))
        return name

    def encoded_initializers(self):
        return [M.tensor(name, elem_type(t.dtype), list(t.shape), raw_bytes(t))
                for name, t in self.initializers]

    def add(self, op_type, inputs, outputs=None, **attrs):
        """Appends a node. outputs: None (one fresh name), a count, or the names ('' for an
        optional output left out). Returns the output name, or the list of them when there
        are several."""
        if outputs is None or isinstance(outputs, int):
            outs = [self.unique(op_type.lower()) for _ in range(outputs or 1)]
        else:
            outs = list(outputs)
            while outs and outs[-1] == "":  # trailing optional outputs nobody reads
                outs.pop()
            if not outs:
                outs = [self.unique(op_type.lower())]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        # kept as plain data until encoded, so outputs can still be renamed (see rename)
        self.nodes.append((op_type, list(inputs), outs, self.unique(f"n_{op_type}"), attrs))
        if isinstance(outputs, int) and outputs > 1:
            return outs
        return outs[0] if len(outs) == 1 else outs

    def rename_output(self, name, new):
        """Makes the node computing `name` write `new` instead, when a node computes it (not
        an input or initializer) and it was not renamed already; returns whether it did."""
        for k, (op_type, inputs, outs, node_name, attrs) in enumerate(self.nodes):
            if name in outs:
                outs = [new if o == name else o for o in outs]
                self.nodes[k] = (op_type, inputs, outs, node_name, attrs)
                for j, (t, ins, o, nn, a) in enumerate(self.nodes):
                    if name in ins:
                        self.nodes[j] = (t, [new if i == name else i for i in ins], o, nn, a)
                self.names = {v: (new if nm == name else nm) for v, nm in self.names.items()}
                return True
        return False

    def encoded_nodes(self):
        return [M.node(*node) for node in self.nodes]

    def const(self, value, dtype, hint="c"):
        """An initializer holding `value` (a number or nested list) as `dtype`."""
        return self.initializer(kiln.tensor(value, dtype=dtype), hint)

    def ints(self, values, hint="shape"):
        return self.const(list(values), kiln.int64, hint)

    # ---- dtypes ------------------------------------------------------------------------
    def dtype(self, vid):
        return self.g.dtype(vid)

    def shape(self, vid):
        return self.g.shape(vid)

    def value_as(self, vid, dtype):
        """A value's name converted to `dtype`: known tensors are converted now (a literal
        2.0 used by an int64 op becomes an int64 initializer), others through Cast."""
        if self.dtype(vid) == dtype:
            return self.name(vid)
        key = (vid, dtype)
        if key not in self._cast_cache:
            if vid in self.known and vid not in self.names:
                hint = self.constant_names.get(vid) or f"const_{vid}"
                self._cast_cache[key] = self.initializer(self.known[vid].to(dtype), hint)
            else:
                self._cast_cache[key] = self.add("Cast", [self.name(vid)], to=elem_type(dtype))
        return self._cast_cache[key]

    def cast(self, name, from_dtype, to_dtype):
        if from_dtype == to_dtype:
            return name
        return self.add("Cast", [name], to=elem_type(to_dtype))
