"""FlopCounterMode, as torch.utils.flop_counter.FlopCounterMode: counts the FLOPs of the matrix
products and convolutions run inside the context, forward and backward, in total and per
module.

    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    with FlopCounterMode(model, display=False) as counter:
        model(x).sum().backward()
    counter.get_total_flops()      # an int, equal to torch's for the same model and shapes
    counter.get_flop_counts()      # {"Global": {"addmm": ..., "mm": ...}, "Sequential": ...}

How: the context runs kiln's C++ profiler (trace mode with shapes), which sees every
top-level op call, backward ones included, and applies kiln._flop_formulas (torch's formulas)
to each when the context ends. The counts are keyed by kiln op names ("addmm",
"convolution", "convolution_weight_grad", ...) where torch's are aten op objects.

Modules are followed through the global module hooks (every module that runs gets its own
counts, named as torch's ModuleTracker names them); `mods` is accepted with torch's warning that
it is not needed.

Differences from torch:
  - kiln runs one profiler at a time: entering a FlopCounterMode while a
    kiln.profiler.profile or another FlopCounterMode records raises RuntimeError
    (profile(with_flops=True) counts the same FLOPs per op inside a profile).
  - ops run by other threads while the context is active are counted too (in "Global"; in a
    module if they ran while it was running)."""
import warnings
from collections import defaultdict

from .. import _C, _flop_formulas
from ._module_spans import ModuleSpans

__all__ = ["FlopCounterMode", "register_flop_formula"]

_SUFFIXES = ["", "K", "M", "B", "T"]


def get_suffix_str(number):
    # the unit that shows the number with 1-3 digits before the point (1.01B shows as 1001M)
    return _SUFFIXES[max(0, min(len(_SUFFIXES) - 1, (len(str(number)) - 2) // 3))]


def convert_num_with_suffix(number, suffix):
    return f"{number / 1000 ** _SUFFIXES.index(suffix):.3f}" + suffix


def convert_to_percent_str(num, denom):
    return "0%" if denom == 0 else f"{num / denom:.2%}"


def register_flop_formula(targets, get_raw=False):
    """Registers formula(*input_shapes, out_shape=...) -> int for kiln op names (a name or a
    list of names), for every FlopCounterMode (and profile(with_flops=True))."""
    names = [targets] if isinstance(targets, str) else list(targets)

    def register(formula):
        for name in names:
            if name in _flop_formulas.FORMULAS:
                raise RuntimeError(f"duplicate registrations for {name}")
            _flop_formulas.FORMULAS[name] = _shape_formula(formula)
        return formula
    return register


def _shape_formula(user_formula):
    """A user formula (torch's calling convention: the input shapes as arguments, out_shape=
    the output's shape, or a tuple of them for several outputs) as a kiln formula."""
    def formula(inputs, outputs):
        out = outputs[0] if len(outputs) == 1 else tuple(outputs)
        return user_formula(*inputs, out_shape=out)
    return formula


class FlopCounterMode:
    """Counts FLOPs inside the context. mods: ignored (every module gets its own counts), with
    torch's warning; depth: the module depth get_table() shows by default; display:
    print the table when the context ends; custom_mapping: {kiln op name: formula(*input
    shapes, out_shape=...)} added to or replacing the built-in formulas."""

    def __init__(self, mods=None, depth=2, display=True, custom_mapping=None):
        if mods is not None:
            warnings.warn("mods argument is not needed anymore, you can stop passing it",
                          stacklevel=2)
        self.mods = []  # every module is followed (global module hooks), as torch
        self.depth = depth
        self.display = display
        self.flop_counts = defaultdict(lambda: defaultdict(int))
        self.formulas = dict(_flop_formulas.FORMULAS)
        for name, f in (custom_mapping or {}).items():
            self.formulas[name] = _shape_formula(f)
        self._spans = None
        self._active = False

    # --- recording ----------------------------------------------------------------------

    def __enter__(self):
        if _C._profiler_enabled():
            raise RuntimeError(
                "FlopCounterMode: the kiln profiler is already recording (a "
                "kiln.profiler.profile or another FlopCounterMode is active); kiln runs one "
                "profiler at a time: end the other one first, or use "
                "kiln.profiler.profile(with_flops=True) to count FLOPs inside a profile")
        self.flop_counts.clear()
        self._spans = ModuleSpans(self.mods).__enter__()
        try:
            _C._profiler_start(trace=True, record_shapes=True)
        except BaseException:
            self._spans.__exit__()
            raise
        self._active = True
        return self

    def __exit__(self, *exc):
        if not self._active:
            return False
        try:
            self._count()  # the spans' open backward passes close at this time
        finally:
            self._active = False
            _C._profiler_stop()
            self._spans.__exit__()
        if self.display:
            print(self.get_table(self.depth))
        return False

    def _count(self):
        """Recounts flop_counts from the events recorded so far."""
        events = _C._profiler_events()
        spans = self._spans.spans()
        self.flop_counts.clear()
        for name, device, start, dur, thread, seq, in_shapes, dtypes, out_shapes in events:
            formula = self.formulas.get(name)
            if formula is None or not out_shapes:
                continue
            flops = int(formula([tuple(s) for s in in_shapes], [tuple(s) for s in out_shapes]))
            parents = {"Global"}
            parents.update(m for m, s, e in spans if s <= start <= e)
            for m in parents:
                self.flop_counts[m][name] += flops

    def _refresh(self):
        if self._active:  # counts asked for inside the context
            self._count()

    # --- results ------------------------------------------------------------------------

    def get_total_flops(self):
        self._refresh()
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self):
        """{module name: {op name: FLOPs}}, with "Global" for everything."""
        self._refresh()
        self.flop_counts["Global"]  # noqa: B018  (always present, as torch's after counting)
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth=None):
        """A text table: each module down to `depth` (Global first unless a module holds all
        FLOPs), its FLOPs and share of the total, and its ops' FLOPs below it."""
        if depth is None:
            depth = self.depth if self.depth is not None else 999999
        counts = self.get_flop_counts()
        total = sum(counts["Global"].values())
        suffix = get_suffix_str(total)

        def rows_of(mod, indent):
            pad = " " * indent
            rows = [[pad + mod, convert_num_with_suffix(sum(counts[mod].values()), suffix),
                     convert_to_percent_str(sum(counts[mod].values()), total)]]
            for op, flops in counts[mod].items():
                rows.append([pad + " - " + str(op), convert_num_with_suffix(flops, suffix),
                             convert_to_percent_str(flops, total)])
            return rows

        rows, global_subsumed = [], False
        for mod in sorted(counts):
            if mod == "Global" or mod.count(".") + 1 > depth:
                continue
            global_subsumed |= sum(counts[mod].values()) >= total
            rows += rows_of(mod, mod.count("."))
        if not global_subsumed:
            rows = rows_of("Global", 0) + [[" " + r[0]] + r[1:] for r in rows]
        if not rows:
            rows = [["Global", "0", "0%"]]
        header = ["Module", "FLOP", "% Total"]
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(3)]

        def line(r):
            return "  ".join([r[0].ljust(widths[0]), r[1].rjust(widths[1]),
                              r[2].rjust(widths[2])])
        return "\n".join([line(header), "  ".join("-" * w for w in widths)]
                         + [line(r) for r in rows])
