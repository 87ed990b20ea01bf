"""Jacobian-vector products without forward-mode AD: the double-backward trick (decision 0082).

kiln differentiates in reverse mode only. The vjp u -> J^T u of a function is linear in the
cotangent u, so differentiating it once more, with respect to u and along a tangent t, gives
J t:  g(u) = J^T u (one reverse pass, building its graph), then J t = d<g(u), t>/du (a second
reverse pass, over g's graph). `Linearization` does the first pass once and pushes any number
of tangents through the second; kiln.func.jvp / jacfwd / linearize, jacobian(strategy=
"forward-mode") and kiln.autograd.forward_ad are built on it.

What this costs, and needs, compared with true forward mode:
- one forward plus two reverse passes (~2-3x a forward) for the first tangent; one reverse pass
  per further tangent; the graph of the function stays alive as long as the Linearization.
- every op's backward must itself be differentiable (kiln's built-in ops are: their backward
  formulas are written in ops). A backward that leaves kiln's graph -- a custom
  kiln.autograd.Function marked @once_differentiable, or one computing in numpy -- would cut
  the link to u and silently drop its contribution; `push` checks the result against the
  first pass (<J t, u> must equal <t, J^T u>) and raises, naming the op, when they disagree.
"""
from .. import _C
from ..autograd import enable_grad, no_grad, grad as _autograd_grad

__all__ = ["Linearization", "has_derivative"]

# Relative tolerance of the <J t, u> == <t, J^T u> check, by dtype. The two sides are computed
# along different routes (two reverse passes against one), so they differ by rounding; a missing
# double backward changes them by a fraction of the whole, far above these.
_CHECK_RTOL = {"float64": 1e-7, "float32": 1e-2}
_CHECK_RTOL_LOW_PRECISION = 0.2  # float16 / bfloat16

# Node names of kiln's graph that are not "<op>Backward" of a registered op.
_BUILTIN_NODES = {"AccumulateGrad", "CopySlices"}


def has_derivative(t):
    """Whether t can carry a tangent: a floating-point tensor in the graph of the inputs."""
    return isinstance(t, _C.Tensor) and t.is_floating_point() and t.requires_grad


def _probe_like(out):
    """The cotangent u at which the first pass is taken. Any value gives the same J t (g is
    linear in u); a varied, non-zero one (no RNG: the user's random stream is left alone) is what
    makes the consistency check see a contribution that lost its link to u -- with u = 0 every
    such contribution would be 0 too, and a constant u is orthogonal to some Jacobians' columns
    (softmax: J^T 1 = 0)."""
    ramp = _C.arange(out.numel(), dtype=_C.float64, device=out.device) * 0.6180339887498949
    return (ramp - ramp.floor() + 0.5).to(out.dtype).reshape(tuple(out.shape))


class Linearization:
    """The first reverse pass of the double-backward trick, for outputs (flat list of tensors)
    computed from inputs (flat list of graph roots: tensors that require grad). push(tangents)
    then gives J t per output, as many times as wanted."""

    def __init__(self, outputs, inputs, api):
        self.outputs, self.inputs, self.api = list(outputs), list(inputs), api
        # Outputs that can have a non-zero tangent; the rest (integer outputs, outputs not in
        # any graph) get zeros.
        self._live = [k for k, o in enumerate(self.outputs) if has_derivative(o)]
        with enable_grad():
            self._probes = [_probe_like(self.outputs[k]).requires_grad_(True)
                            for k in self._live]
            if self._live:
                self._vjps = _autograd_grad([self.outputs[k] for k in self._live], self.inputs,
                                            self._probes, retain_graph=True, create_graph=True,
                                            allow_unused=True)
            else:
                self._vjps = (None,) * len(self.inputs)

    def push(self, tangents, create_graph=True):
        """J t for tangents (one per input, shaped and typed as it; None for a zero tangent):
        a list with one tensor per output (zeros, in the output's dtype, where the output does
        not depend on the inputs; self.reached[k] says whether output k does: torch's "has a
        tangent", used by strict mode). With create_graph the results stay differentiable with
        respect to the inputs' history and the tangents."""
        pairs = [(g, t.to(g.dtype) if t.dtype != g.dtype else t)
                 for g, t in zip(self._vjps, tangents)
                 if t is not None and g is not None and g.requires_grad]
        got = (None,) * len(self._live)
        if pairs:
            with enable_grad():
                got = _autograd_grad([g for g, _ in pairs], self._probes, [t for _, t in pairs],
                                     retain_graph=True, create_graph=create_graph,
                                     allow_unused=True)
        self.reached = [False] * len(self.outputs)
        result = [_C.zeros_like(o) if isinstance(o, _C.Tensor) else o for o in self.outputs]
        for k, jt in zip(self._live, got):
            if jt is not None:
                result[k], self.reached[k] = jt, True
        self._check(tangents, result)
        return result

    def jacobian(self, create_graph=True):
        """blocks[k][j] = d output_k / d input_j, of shape output_k.shape + input_j.shape (in
        the output's dtype), column by column: one push per element of each input, with the
        standard basis as tangent."""
        blocks = [[] for _ in self.outputs]
        for j, inp in enumerate(self.inputs):
            columns = [[] for _ in self.outputs]
            for e in range(inp.numel()):
                basis = _C.zeros_like(inp, memory_format=_C.contiguous_format)
                basis.view(-1)[e] = 1
                tangents = [None] * len(self.inputs)
                tangents[j] = basis
                for k, jt in enumerate(self.push(tangents, create_graph)):
                    columns[k].append(jt.reshape(-1))
            for k, out in enumerate(self.outputs):
                shape = tuple(out.shape) + tuple(inp.shape)
                blocks[k].append(_C.stack(columns[k], -1).reshape(shape) if columns[k]
                                 else out.new_zeros(shape))  # an empty input: no columns
        return blocks

    def _check(self, tangents, result):
        """<J t, u> (from the second pass) must equal <t, J^T u> (from the first): a part of
        the graph whose backward is not differentiable shows up as a difference."""
        if not self._live:
            return
        with no_grad():
            lhs, lhs_scale = _dot([result[k] for k in self._live], self._probes)
            pairs = [(t, g) for t, g in zip(tangents, self._vjps)
                     if t is not None and g is not None]
            rhs, rhs_scale = _dot([t for t, _ in pairs], [g for _, g in pairs])
        rtol = max(_CHECK_RTOL.get(str(self.outputs[k].dtype).split(".")[-1],
                                   _CHECK_RTOL_LOW_PRECISION) for k in self._live)
        if abs(lhs - rhs) > rtol * (lhs_scale + rhs_scale):
            raise RuntimeError(self._not_twice_differentiable_message(lhs, rhs))

    def _not_twice_differentiable_message(self, lhs, rhs):
        suspects, all_ops = _ops_in_graph([self.outputs[k] for k in self._live])
        if suspects:
            where = (", ".join(suspects) + " (not one of kiln's ops: the backward of a custom "
                     "kiln.autograd.Function?) is not differentiable")
        else:
            where = ("the backward of one of the ops in its graph is not differentiable ("
                     + ", ".join(all_ops) + ")")
        return (f"{self.api}: kiln computes Jacobian-vector products with two reverse passes "
                "(the double-backward trick), so every op's backward must be differentiable "
                f"once more; {where}. The second pass lost part of the derivative (<J t, u> = "
                f"{lhs:.6g} but <t, J^T u> = {rhs:.6g}). Give the Function a backward written in "
                "kiln ops (not @once_differentiable), or use the reverse-mode APIs "
                "(kiln.func.vjp / jacrev).")


def _dot(xs, ys):
    """(sum of <x, y> in float64, sum of |x * y|: the scale rounding errors are relative to)."""
    total, scale = 0.0, 0.0
    for x, y in zip(xs, ys):
        prod = x.detach().to(_C.float64) * y.detach().to(_C.float64)
        total += float(prod.sum())
        scale += float(prod.abs().sum())
    return total, scale


def _ops_in_graph(tensors):
    """(names of graph nodes that are not kiln's own ops, names of all nodes), in graph order
    from the outputs."""
    registered = set(_C._registered_ops())
    seen, order, stack = set(), [], [t.grad_fn for t in tensors if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        order.append(node.name())
        stack.extend(nxt for nxt, _ in node.next_functions)
    names = list(dict.fromkeys(order))
    suspects = [n for n in names if n not in _BUILTIN_NODES
                and not (n.endswith("Backward") and n[:-len("Backward")] in registered)]
    return suspects, names
